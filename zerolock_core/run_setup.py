"""A run's set-up: the tokenizer, the model chunks and the encoded data, built from a `RunConfig` the
same way in every process (the reference trainer, each stage, the evaluation, the benchmarks)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .chunks import Chunk, build_chunks
from .config import ConfigError, RunConfig
from .loading import Keep, load_causal_lm, load_tokenizer

DATA_SEED = 0  # the dataset is the same for every training seed; --seed varies init and order


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
        from .data import microbatches

        t = self.cfg.train
        return microbatches(self.train, seed=t.seed, step=step, batch=t.batch, microbatches=t.microbatches)


def build_run_setup(cfg: RunConfig, *, stage: int | None = None) -> RunSetup:
    """With `stage`, `chunks` holds only that chunk and only its weights were read from disk:
    its layers, the norm + head, and the embedding on stage 0."""
    from . import data
    from .chunks import chunk_bounds, top_layer_indices
    from .readout_spec import ReadoutSpec
    from .run_fields import every_chunk_trains

    task = data.load_data(cfg.data, seed=DATA_SEED)
    tokenizer = load_tokenizer(cfg.model.model)
    keep = None
    if stage is not None:
        from transformers import AutoConfig

        from .loading import resolve_model

        layers = AutoConfig.from_pretrained(resolve_model(cfg.model.model)).num_hidden_layers
        bounds = chunk_bounds(layers, cfg.train.stages, cfg.model.boundaries)
        first, end = bounds[stage]
        readout = ReadoutSpec.of_model(cfg.model.readout, bounds).of_chunk(
            stage, cfg.train.stages, every_chunk_trains=every_chunk_trains(cfg.train.method))
        keep = Keep(first=first, end=end, embedding=stage == 0, also=tuple(top_layer_indices(layers, readout)))
    model = load_causal_lm(cfg.model.model, keep=keep)
    chunks = build_chunks(model, cfg.model, stages=cfg.train.stages, seed=cfg.train.seed, only=stage,
                          method=cfg.train.method)
    enc = dict(tokenizer=tokenizer, cue=task.cue, label_words=task.label_words, seq_len=cfg.data.seq_len,
               chat_template=cfg.data.chat_template)
    train = data.encode_split(task.train, **enc)
    eval_ = data.encode_split(task.eval, **enc)
    if train.input_ids.shape[0] < cfg.train.batch:
        raise ConfigError(f"--batch {cfg.train.batch} is larger than the training set ({train.input_ids.shape[0]})")
    try:  # none for a response task: label accuracy does not apply
        firsts = data.label_first_tokens(tokenizer, task.label_words) if task.label_words else []
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return RunSetup(cfg=cfg, tokenizer=tokenizer, chunks=chunks, task=task, train=train, eval=eval_,
                     label_first_tokens=torch.tensor(firsts, dtype=torch.long))
