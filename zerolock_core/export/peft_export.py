"""`zerolock export`: a run's fine-tuned model in files anyone can load — the LoRA adapter in PEFT's own
layout with the run's tokenizer (`AutoPeftModelForCausalLM.from_pretrained(OUT)`), or the model with it merged in
(`AutoModelForCausalLM.from_pretrained(OUT)`). peft writes both formats itself (`save_pretrained`).

Each output is written into a temporary directory beside it and renamed into place at the end: a refusal
or a crash leaves nothing half-written under its name. An output that cannot be written (a read-only or
missing place, /proc) is refused in one line before the model is loaded.

What an export says about where it came from (zerolock_export.json, the model card) names the run by its
directory's name and the base model by what the run was given — a preset's name, a hub id, a local
model's folder name —, never by a path of the machine that wrote it (shown_path.py). One field is the
exception: adapter_config.json's `base_model_name_or_path` is what `AutoPeftModelForCausalLM.from_pretrained`
loads the base from, offline, so it names the base model's directory on this machine (the preset's own
folder, reused; nothing is copied) or the hub id of a model that came from the hub (`loadable_base`).

Without targets an export goes inside its run, under exports/ (`default_targets`), where the Runs tab does
not take it for a run (runs_root.is_export).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..rundir.artifacts import final_weight_steps
from ..rundir.atomic_files import write_json_atomic
from ..rundir.runs_root import EXPORT_RECORD
from ..rundir.shown_path import shown_path
from .trained_model import ADAPTER, TrainedModel, check_trained_run, load_trained_model

MODEL_CARD = "README.md"  # where PEFT's save_pretrained writes the adapter's model card
DEFAULT_NAMES = {"peft": "peft", "merged": "merged"}  # ExportTargets' field -> its folder under RUN/exports/


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


def default_targets(run: str | Path) -> ExportTargets:
    """Both exports inside the run, under exports/ (made here: the run is checked first)."""
    rd, _ = check_trained_run(run)
    try:
        return ExportTargets(**{field: rd.export(name) for field, name in DEFAULT_NAMES.items()})
    except OSError as err:  # a run folder that cannot be written (read-only)
        raise ValueError(f"{rd.name}: cannot write its exports/ ({err.strerror or err}); name other places "
                         f"with --peft OUT and --merged OUT") from None


@dataclass(kw_only=True, frozen=True)
class ExportResult:
    written: list[Path]
    note: str  # what the model leaves out ("" when nothing)


def export_run(run: str | Path, targets: ExportTargets) -> ExportResult:
    """Write the run's adapter and/or merged model; every refusal comes before anything is written."""
    rd, _ = check_trained_run(run)
    outs = [Path(p) for p in (targets.peft, targets.merged) if p is not None]
    for out in outs:
        check_output_free(out, run=rd.path)
        check_writable(out, run=rd.path)
    model = load_trained_model(run)
    written = []
    if targets.peft is not None:  # first: merging below folds the adapter into the base for good
        with fresh_directory(Path(targets.peft), run=rd.path) as tmp:
            _named(model.peft_model.get_base_model(), model.cfg.model.model)  # the card's `base_model` and tags
            model.peft_model.peft_config[ADAPTER].base_model_name_or_path = loadable_base(model.cfg.model.model)
            # the chunks never train the embeddings; "auto" would look the base model up on the hub to check
            model.peft_model.save_pretrained(str(tmp), save_embedding_layers=False)
            # beside the adapter, AutoPeftModel finds it here instead of asking the hub for one
            model.tokenizer.save_pretrained(str(tmp))
            _record(tmp, model)
            with open(tmp / MODEL_CARD, "a") as card:
                card.write(f"\n\n## ZeroLock\n\n{_provenance(model)}\n\n{model.note or 'Nothing was left out.'}\n"
                           f"\n{_how_to_load(Path(targets.peft).name, model.cfg.model.model)}\n")
        written.append(Path(targets.peft))
    if targets.merged is not None:
        with fresh_directory(Path(targets.merged), run=rd.path) as tmp:
            merged = _named(model.peft_model.merge_and_unload(), model.cfg.model.model)
            merged.save_pretrained(str(tmp))
            model.tokenizer.save_pretrained(str(tmp))
            _record(tmp, model)
        written.append(Path(targets.merged))
    return ExportResult(written=written, note=model.note)


def check_output_free(out: Path, *, run: Path | None = None) -> None:
    shown = shown_path(out, within=(run,))
    if out.exists() and not out.is_dir():
        raise ValueError(f"{shown} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise ValueError(f"{shown} exists and is not empty: choose a new directory (nothing is overwritten)")


def check_writable(out: Path, *, run: Path | None = None) -> None:
    """A directory can be made at `out`: tried in its nearest existing folder (a directory made there and
    removed at once), so a place nothing can be written to is refused before the model is loaded."""
    folder = Path(os.path.abspath(out)).parent
    while not folder.exists():
        folder = folder.parent
    shown = shown_path(out, within=(run,))
    if not folder.is_dir():
        raise ValueError(f"{shown}: cannot write there ({shown_path(folder, within=(run,))} "
                         f"is not a directory)")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=f".{out.name}.probe-", dir=folder))
    except OSError as err:
        raise ValueError(f"{shown}: cannot write there ({err.strerror or err}); choose a directory you can "
                         f"write") from None


def _named(base, model: str):
    """`base` (a transformers model) named by `public_model_name`: what PEFT's model card and a saved
    config say it came from (they read its path as loaded otherwise: the preset's place on this machine)."""
    base.config._name_or_path = base.name_or_path = public_model_name(model)
    return base


def public_model_name(model: str) -> str:
    """The base model as an export names it: a preset's name or a hub id as given, a local model (a
    directory, a .gguf file) by its last part only."""
    from ..models.presets import PRESETS

    path = Path(model).expanduser()
    if model in PRESETS or not (path.is_absolute() or path.exists() or path.suffix == ".gguf"):
        return model
    return path.name


def loadable_base(model: str) -> str:
    """adapter_config.json's `base_model_name_or_path`: the run's base model as `from_pretrained` loads it
    offline — its directory on this machine (a preset's own folder, a GGUF's converted copy in the cache, a
    local model's), or the hub id of a hub model (from the cache with HF_HUB_OFFLINE=1)."""
    from ..models.loading import resolve_model

    source = resolve_model(model)
    return str(Path(source).resolve()) if Path(source).exists() else source


def _how_to_load(folder: str, model: str) -> str:
    """The model card's two lines (run beside the folder), and what to change on another machine."""
    return (f"Load it in two lines, from the folder that holds `{folder}/` (the base model is read from the "
            f"place `adapter_config.json` names, offline):\n\n```python\nfrom peft import AutoPeftModelForCausalLM\n"
            f"model = AutoPeftModelForCausalLM.from_pretrained(\"{folder}\", dtype=\"float32\")\n```\n\n"
            f"`dtype=\"float32\"` gives the run's own numbers (ZeroLock trains in float32; a preset may be stored "
            f"in bfloat16). On another machine, set `base_model_name_or_path` in `adapter_config.json` to your copy "
            f"of `{public_model_name(model)}`, or load it and then `PeftModel.from_pretrained(base, \"{folder}\")`. The run's tokenizer is "
            f"in the folder too: `AutoTokenizer.from_pretrained(\"{folder}\")`.")


@contextmanager
def fresh_directory(out: Path, *, run: Path | None = None) -> Iterator[Path]:
    """A temporary directory that becomes `out` when the block ends without an error (and is gone if not).
    A write that fails (a full disk) is said in one line naming `out`."""
    check_output_free(out, run=run)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)  # one of an earlier export by a process of this pid, killed
    try:
        tmp.mkdir(parents=True)
        yield tmp
        check_output_free(out, run=run)  # again: someone may have written there meanwhile
        if out.exists():
            out.rmdir()  # empty: checked
        os.rename(tmp, out)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ValueError(f"{shown_path(out, within=(run,))}: could not write the export "
                         f"({err.strerror or err}); nothing was left there") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _provenance(model: TrainedModel) -> str:
    t = model.cfg.train
    steps = sorted(set(final_weight_steps(model.run.path, t.stages)))
    return (f"Fine-tuned with ZeroLock's `{t.method}` (K = {t.stages} stages, {'/'.join(map(str, steps)) or '?'} "
            f"steps) from the base model `{public_model_name(model.cfg.model.model)}`, run `{model.run.name}`.")


def _record(folder: Path, model: TrainedModel) -> None:
    """Which run and base model (by name: see the module's docstring), and what was left out."""
    write_json_atomic(folder / EXPORT_RECORD, {"run": model.run.name,
                                               "base_model": public_model_name(model.cfg.model.model),
                                               "method": model.cfg.train.method, "stages": model.cfg.train.stages,
                                               "about": _provenance(model), "note": model.note})
