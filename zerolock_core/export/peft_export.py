"""`zerolock export`: a run's fine-tuned model in files anyone can load — the LoRA adapter in PEFT's own
layout (`PeftModel.from_pretrained(base, OUT)`), or the model with it merged in
(`AutoModelForCausalLM.from_pretrained(OUT)`). peft writes both formats itself (`save_pretrained`).

Each output is written into a temporary directory beside it and renamed into place at the end: a refusal
or a crash leaves nothing half-written under its name.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..rundir.artifacts import final_weight_steps
from ..rundir.atomic_files import write_json_atomic
from .trained_model import TrainedModel, check_trained_run, load_trained_model

EXPORT_RECORD = "zerolock_export.json"  # beside the model's files: which run, and what was left out (`note`)
MODEL_CARD = "README.md"  # where PEFT's save_pretrained writes the adapter's model card


@dataclass(kw_only=True, frozen=True)
class ExportTargets:
    peft: Path | None = None  # the adapter directory to write
    merged: Path | None = None  # the merged model directory to write

    def __post_init__(self) -> None:
        if self.peft is None and self.merged is None:
            raise ValueError("say what to export: --peft OUT (the adapter), --merged OUT (the merged model), or both")
        if self.peft is not None and self.merged is not None and \
                Path(self.peft).resolve() == Path(self.merged).resolve():
            raise ValueError(f"{self.peft}: the adapter and the merged model need directories of their own")


@dataclass(kw_only=True, frozen=True)
class ExportResult:
    written: list[Path]
    note: str  # what the model leaves out ("" when nothing)


def export_run(run: str | Path, targets: ExportTargets) -> ExportResult:
    """Write the run's adapter and/or merged model; every refusal comes before anything is written."""
    check_trained_run(run)
    outs = [Path(p) for p in (targets.peft, targets.merged) if p is not None]
    for out in outs:
        check_output_free(out)
    model = load_trained_model(run)
    written = []
    if targets.peft is not None:  # first: merging below folds the adapter into the base for good
        with fresh_directory(Path(targets.peft)) as tmp:
            # the chunks never train the embeddings; "auto" would look the base model up on the hub to check
            model.peft_model.save_pretrained(str(tmp), save_embedding_layers=False)
            _record(tmp, model)
            with open(tmp / MODEL_CARD, "a") as card:
                card.write(f"\n\n## ZeroLock\n\n{_provenance(model)}\n\n{model.note or 'Nothing was left out.'}\n")
        written.append(Path(targets.peft))
    if targets.merged is not None:
        with fresh_directory(Path(targets.merged)) as tmp:
            model.peft_model.merge_and_unload().save_pretrained(str(tmp))
            model.tokenizer.save_pretrained(str(tmp))
            _record(tmp, model)
        written.append(Path(targets.merged))
    return ExportResult(written=written, note=model.note)


def check_output_free(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not empty: choose a new directory (nothing is overwritten)")


@contextmanager
def fresh_directory(out: Path) -> Iterator[Path]:
    """A temporary directory that becomes `out` when the block ends without an error (and is gone if not)."""
    check_output_free(out)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)  # one of an earlier export by a process of this pid, killed
    tmp.mkdir(parents=True)
    try:
        yield tmp
        check_output_free(out)  # again: someone may have written there meanwhile
        if out.exists():
            out.rmdir()  # empty: checked
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _provenance(model: TrainedModel) -> str:
    t = model.cfg.train
    steps = sorted(set(final_weight_steps(model.run.path, t.stages)))
    return (f"Fine-tuned with ZeroLock's `{t.method}` (K = {t.stages} stages, {'/'.join(map(str, steps)) or '?'} "
            f"steps) from the base model `{model.cfg.model.model}`, run `{model.run.name}`.")


def _record(folder: Path, model: TrainedModel) -> None:
    write_json_atomic(folder / EXPORT_RECORD, {"run": str(model.run.path), "base_model": model.cfg.model.model,
                                               "method": model.cfg.train.method, "stages": model.cfg.train.stages,
                                               "about": _provenance(model), "note": model.note})
