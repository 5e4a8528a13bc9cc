"""Preflight: everything checked before a run directory, a file or a process exists, in the words of
whoever asked. The CLI (`zerolock train`) and the dashboard's Run form call the same code.

A refusal about one field is a `field_words.FieldError` (a `ConfigError`), rendered with the CLI's flags
(`--microbatches`) or the Run form's labels ("micro-batches m"). `config.validate` checks the config by
itself; `preflight(cfg)` adds what needs a look outside it: the model (its path, its shape from its
config or GGUF header, never its weights: model_shape.py), K and `--boundaries` against its layers, every
field's limit from the model or the machine (a setting's `most`: `--seq-len` by the positions, `--threads`
by the cores), the memory the run needs at least against what the machine has (memory_need.py), the
dataset spec and its rows.
"""
from __future__ import annotations

from ..config.run_config import RunConfig
from ..config.field_words import FieldError, require
from ..config.run_fields import RUN_FIELDS
from ..config.setting import LIMITS
from ..telemetry.tensorboard_log import tensorboard_missing
from .memory_need import available_memory, gib, local_processes, memory_need
from .model_shape import ModelShape, gguf_layers, model_layers, model_shape
from .threads import available_cores

__all__ = ["check_dataset", "encode_check", "gguf_layers", "model_layers", "preflight"]

ENCODED_HEAD_ROWS = 20  # rows encoded by the tokenizer up front (every row is read and checked)


# ---- what needs a look outside the config ---------------------------------------------------------
def preflight(cfg: RunConfig) -> None:
    """What `RunConfig` cannot check by itself, before anything is created, in well under a second:
    the model exists and has at least K layers, `--boundaries` fit them, every field keeps the model's
    and the machine's limits, the run fits the machine's memory, the dataset is known and its rows are
    well-formed. Raises ConfigError (a FieldError where one field is to blame)."""
    shape = model_shape(cfg.model.model)
    chunk_layers = None
    if shape.layers is not None:
        layers, k = shape.layers, cfg.train.stages
        require(k <= layers, "stages",
                lambda w: f"{w.value('stages', k)} must be between 1 and the model's {layers} layers")
        from ..method.chunks import check_readout_fits, planned_bounds

        # their rules and their messages (they name --boundaries, --readout)
        bounds = planned_bounds(layers, k, boundaries=cfg.model.boundaries, speeds=cfg.train.speeds,
                                readout=cfg.model.readout, method=cfg.train.method)
        check_readout_fits(cfg.model.readout, bounds)
        chunk_layers = [end - first for first, end in bounds]
    check_limits(cfg, {"positions": shape.positions, "hidden": shape.hidden, "cores": available_cores()})
    if chunk_layers is not None and shape.sized and cfg.train.device == "cpu":
        check_memory(cfg, shape, chunk_layers, available_memory())
    check_batch_fits(cfg, check_dataset(cfg))
    if cfg.train.tensorboard:  # refused here, not found missing when the run's record is written
        missing = tensorboard_missing()
        require(missing is None, "tensorboard", lambda w: f"{w.name('tensorboard')}: {missing}")


def check_limits(cfg: RunConfig, limits: dict[str, int | None]) -> None:
    """Every field whose setting names a limit (`most`) at most that limit's figure (None: unknown, the
    check is skipped)."""
    for key, f in RUN_FIELDS.items():
        n = limits.get(f.setting.most) if f.setting.most else None
        value = getattr(getattr(cfg, f.section), key)
        if n is not None and value > n:
            said = LIMITS[f.setting.most].said.format(n=n)
            require(False, key, lambda w, key=key, value=value, said=said: f"{w.value(key, value)} is more than {said}")


def check_memory(cfg: RunConfig, shape: ModelShape, chunk_layers: list[int], available: int | None) -> None:
    """The memory the run needs at least (memory_need.py) within what the machine has available."""
    from ..config.readout_spec import ReadoutSpec

    if available is None:
        return
    t, d, m = cfg.train, cfg.data, cfg.model
    need = memory_need(shape, chunk_layers, processes=local_processes(t.stages, t.runtime),
                       micro_batch=t.batch // t.microbatches, seq_len=d.seq_len, lora_rank=m.lora_rank,
                       lora_targets=tuple(m.lora_targets),
                       readout_inner=m.readout_adapter_hidden if ReadoutSpec.parse(m.readout).kind == "mlp" else 0)
    if need.total <= available:
        return
    many = f"{need.processes} stage processes" if need.processes > 1 else "one process"
    require(False, "batch", lambda w: (
        f"{w.value('batch', t.batch)} / {w.value('microbatches', t.microbatches)} × {w.value('seq_len', d.seq_len)} "
        f"× hidden {shape.hidden} needs at least {gib(need.total)} in {many} ({gib(need.weights + need.trained)} "
        f"of weights, {gib(need.activations)} of activations), more than the {gib(available)} this machine has "
        f"available: lower {w.name('batch')} or {w.name('seq_len')}, or raise {w.name('microbatches')}"))


def check_dataset(cfg: RunConfig) -> int | None:
    """A known `--dataset`; a file of your own is read whole and every row checked (data/user_task.py), and
    its task encoded once by the model's tokenizer (label words with distinct first tokens, rows that fit
    `--seq-len`): a bad row is refused here, by its file and row, not by a stage process later. Returns
    the train rows (None where only the run reads them: ag_news)."""
    from ..data.registry import ACCEPTED_SPECS, BUILT_IN, BUILT_IN_TRAIN_ROWS
    from ..data.sources import parse_source

    spec = cfg.data.dataset
    if spec in BUILT_IN:
        return BUILT_IN_TRAIN_ROWS.get(spec)
    try:
        source = parse_source(spec)
    except ValueError as err:
        raise FieldError("dataset", lambda w, err=err: f"{w.name('dataset')}: {err}") from None
    require(source is not None, "dataset",
            lambda w: f"{w.value('dataset', repr(spec))} is not one of {', '.join(ACCEPTED_SPECS)}")
    try:  # the reader's message names the file: the flag's name is enough before it
        task = load_data_task(cfg)
        encode_check(cfg, task)
    except ValueError as err:
        raise FieldError("dataset", lambda w, err=err: f"{w.name('dataset')}: {err}") from None
    return len(task.train)


def check_batch_fits(cfg: RunConfig, rows: int | None) -> None:
    """A step's batch drawn from the train rows (None: unknown until the data is read, by the run)."""
    b = cfg.train.batch
    require(rows is None or b <= rows, "batch", lambda w: f"{w.value('batch', b)} is more than the {rows} train "
                                                         f"rows of {w.value('dataset', cfg.data.dataset)}")


def load_data_task(cfg: RunConfig):
    from ..data.registry import load_data
    from .run_setup import DATA_SEED

    return load_data(cfg.data, seed=DATA_SEED)


def encode_check(cfg: RunConfig, task) -> None:
    """The task's first rows encoded by the run's tokenizer, as the run will (a too-short `--seq-len`, label
    words whose first tokens are alike are refused: encoding checks every label word)."""
    from ..data.encoding import encode_split
    from ..models.loading import load_tokenizer

    tokenizer = load_tokenizer(cfg.model.model)
    encode_split(task.train[:ENCODED_HEAD_ROWS], tokenizer=tokenizer, cue=task.cue, label_words=task.label_words,
                 seq_len=cfg.data.seq_len, chat_template=cfg.data.chat_template)
