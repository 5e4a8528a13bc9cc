"""A run's set-up: the tokenizer, the model chunks and the encoded data, built from a `RunConfig` the
same way in every process (the reference trainer, each stage, the evaluation, the benchmarks)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..method.chunks import Chunk, build_chunks
from ..config.field_words import ConfigError
from ..config.run_config import RunConfig
from ..models.loading import Keep, load_causal_lm, load_tokenizer

if TYPE_CHECKING:
    from ..rundir.encoded_data_cache import EncodedData

DATA_SEED = 0
# what a warm standby prepared for the run it stands by (`prepare`): the tokenizer and the encoded data
_PREPARED: dict[str, tuple[object, "EncodedData"]] = {}  # the dataset is the same for every training seed; --seed varies init and order


@dataclass(kw_only=True)
class RunSetup:
    cfg: RunConfig
    tokenizer: object
    chunks: list[Chunk]
    task: object  # data.TaskData
    train: object  # data.EncodedSplit
    eval: object
    label_first_tokens: torch.Tensor  # [num_labels]; empty for a response task

    def microbatches(self, step: int) -> list[dict[str, torch.Tensor]]:
        from ..data import microbatches

        t = self.cfg.train
        return microbatches(self.train, seed=t.seed, step=step, batch=t.batch, microbatches=t.microbatches)


def build_run_setup(cfg: RunConfig, *, stage: int | None = None) -> RunSetup:
    """With `stage`, `chunks` holds only that chunk and only its weights were read from disk:
    its layers, the norm + head, and the embedding on stage 0."""
    from .. import data
    from ..method.chunks import planned_bounds, readout_layer_indices
    from ..config.readout_spec import ReadoutSpec
    from ..methods import every_chunk_trains

    prepared = _PREPARED.get(_key(cfg))
    tokenizer = prepared[0] if prepared else load_tokenizer(cfg.model.model)
    keep = None
    if stage is not None:
        from transformers import AutoConfig

        from ..models.loading import resolve_model

        layers = AutoConfig.from_pretrained(resolve_model(cfg.model.model)).num_hidden_layers
        bounds = planned_bounds(layers, cfg.train.stages, boundaries=cfg.model.boundaries, speeds=cfg.train.speeds,
                                readout=cfg.model.readout, method=cfg.train.method)
        first, end = bounds[stage]
        readout = ReadoutSpec.of_model(cfg.model.readout, bounds).of_chunk(
            stage, cfg.train.stages, every_chunk_trains=every_chunk_trains(cfg.train.method))
        keep = Keep(first=first, end=end, embedding=stage == 0,
                    also=tuple(readout_layer_indices(layers, readout, bounds, stage)))
    model = load_causal_lm(cfg.model.model, keep=keep)
    chunks = build_chunks(model, cfg.model, stages=cfg.train.stages, seed=cfg.train.seed, only=stage,
                          method=cfg.train.method, speeds=cfg.train.speeds)
    encoded = prepared[1] if prepared else encoded_data(cfg, tokenizer)
    if encoded.train.input_ids.shape[0] < cfg.train.batch:
        raise ConfigError(f"--batch {cfg.train.batch} is larger than the training set "
                          f"({encoded.train.input_ids.shape[0]})")
    return RunSetup(cfg=cfg, tokenizer=tokenizer, chunks=chunks, task=encoded.task, train=encoded.train,
                    eval=encoded.eval, label_first_tokens=encoded.label_first_tokens)


def encoded_data(cfg: RunConfig, tokenizer) -> "EncodedData":
    """The run's task encoded by `tokenizer`: read from the run directory when a process of this run made it
    already (encoded_data_cache.py), else made, encoded and — for a pipeline run, whose replacements and final
    evaluation read it again — kept there."""
    from .. import data
    from ..rundir import encoded_data_cache as cache
    from ..rundir.run_dir import RunDir

    kept = cfg.train.runtime == "pipeline" and cfg.out and Path(cfg.out).is_dir()
    where = RunDir(cfg.out).encoded_data if kept else None
    key = _key(cfg)
    if where is not None and (found := cache.load(where, key)) is not None:
        return found
    task = data.load_data(cfg.data, seed=DATA_SEED)
    enc = dict(tokenizer=tokenizer, cue=task.cue, label_words=task.label_words, seq_len=cfg.data.seq_len,
               chat_template=cfg.data.chat_template)
    try:  # none for a response task: label accuracy does not apply
        firsts = data.label_first_tokens(tokenizer, task.label_words) if task.label_words else []
    except ValueError as err:
        raise ConfigError(str(err)) from None
    made = cache.EncodedData(task=task, train=data.encode_split(task.train, **enc),
                             eval=data.encode_split(task.eval, **enc),
                             label_first_tokens=torch.tensor(firsts, dtype=torch.long))
    if where is not None:
        try:
            cache.save(where, key, made)
        except OSError:  # a full disk: the run goes on, a replacement encodes again
            pass
    return made


def _key(cfg: RunConfig) -> str:
    from ..rundir.encoded_data_cache import cache_key

    return cache_key(dataclasses.asdict(cfg.data), model=cfg.model.model, data_seed=DATA_SEED)


def prepare(cfg_dict: dict) -> None:
    """Make ahead what every stage of this run starts with — its tokenizer and encoded data — so that the
    process that prepared it becomes a stage in a fraction of the time (a warm standby, runtime/standby.py)."""
    cfg = RunConfig.from_dict(cfg_dict)
    tokenizer = load_tokenizer(cfg.model.model)
    _PREPARED[_key(cfg)] = (tokenizer, encoded_data(cfg, tokenizer))
