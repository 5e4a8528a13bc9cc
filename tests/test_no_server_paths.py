"""What a run and its export write for their readers — a dashboard's clients among them — names no place on
the server: records, configs, logs and the export's files hold paths relative to the run (or the export),
the run by its name and the base model by its preset's name (shown_path.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
from zerolock_core.export.peft_export import ExportTargets, export_run
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.rundir.shown_path import scrub, shown_path

TEXT = (".json", ".jsonl", ".toml", ".md", ".txt", ".csv", ".log")


def server_paths_in(folder: Path, run: Path) -> list[str]:
    """Every readable text file under `folder` (hidden ones left out: the lock) that names `run`'s
    absolute path, or the model preset's place in the package (but in the adapter's base model field)."""
    from zerolock_core.models.locations import TINY_DIR

    places = {os.path.abspath(run), os.path.realpath(run), str(TINY_DIR)}
    found = []
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.suffix in TEXT and not any(part.startswith(".") for part in p.relative_to(folder).parts):
            text = p.read_text(errors="replace")
            if p.name == "adapter_config.json":  # its base model is a path: what AutoPeftModel loads offline
                text = "\n".join(line for line in text.splitlines() if '"base_model_name_or_path"' not in line)
            found += [f"{p.relative_to(folder)}: {place}" for place in places if place in text]
    return found


def check_run_and_export(run: Path, tmp_path: Path) -> None:
    export_run(run, ExportTargets(peft=tmp_path / "adapter", merged=run / "exports" / "merged"))
    assert server_paths_in(run, run) == []
    assert server_paths_in(tmp_path / "adapter", run) == []
    record = json.loads((tmp_path / "adapter" / "zerolock_export.json").read_text())
    assert (record["run"], record["base_model"]) == (run.name, "tiny")
    assert RunDir(run).saved_config().out == str(run)  # read back, `out` is where the run is now


def test_a_reference_run_and_its_export_name_no_server_path(tmp_path):
    from zerolock_core.train.reference_trainer import train_reference

    run = tmp_path / "runs" / "ref"
    cfg = RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                    train=TrainConfig(runtime="reference", stages=2, batch=4, microbatches=2, steps=2, threads=1),
                    out=str(run))
    assert train_reference(cfg, progress=False).state == "finished"
    check_run_and_export(run, tmp_path)


@pytest.mark.slow
def test_a_pipeline_run_and_its_export_name_no_server_path(tmp_path):
    """Checkpoints, a recovery's record, stage reports, events, the trace and the final eval."""
    from zerolock_core.jobs.job import train

    run = tmp_path / "runs" / "pipe"
    cfg = RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                    train=TrainConfig(runtime="pipeline", stages=2, batch=4, microbatches=2, steps=3, threads=1,
                                      ckpt_every=1, failures=("1@2",)), out=str(run))
    assert train(cfg, progress=False).state == "finished"
    check_run_and_export(run, tmp_path)


@pytest.mark.parametrize("text, shown", [
    ("FileNotFoundError: [Errno 2] No such file: '{run}/final/chunk0.safetensors'",
     "FileNotFoundError: [Errno 2] No such file: 'final/chunk0.safetensors'"),
    ("resume with `zerolock train --resume {run}`", "resume with `zerolock train --resume r1`"),
    ("{run}0/final is another run's", "{run}0/final is another run's"),  # a sibling's path is not this run's
])
def test_a_records_strings_name_files_relative_to_the_run(tmp_path, text, shown):
    run = tmp_path / "r1"
    assert scrub(text.format(run=run), run) == shown.format(run=run)


def test_metrics_json_and_config_json_hold_no_server_path(tmp_path):
    rd = RunDir(tmp_path / "r1")
    rd.path.mkdir()
    cfg = RunConfig(train=TrainConfig(runtime="pipeline", stages=2, steps=3), out=str(rd.path))
    rd.write_config(cfg)
    rd.write_metrics(Metrics(config=cfg.to_dict(), state="failed", reason=f"stage 1 failed: {rd.path}/final: full",
                             errors={"1": f'Traceback:\n  File "{rd.final}/x", line 3\nOSError: full'},
                             recovery=[{"reason": f"see {rd.checkpoint_log}"}]))
    assert server_paths_in(rd.path, rd.path) == []
    m = rd.read_metrics()
    assert (m.reason, m.errors["1"], m.recovery[0]["reason"], m.config["out"]) == (
        "stage 1 failed: final: full", 'Traceback:\n  File "final/x", line 3\nOSError: full',
        "see checkpoint_log.jsonl", "r1")
    assert rd.saved_config() == cfg


@pytest.mark.parametrize("path, within, shown", [
    ("/srv/runs/x/exports/a", ("/srv/runs/x",), "exports/a"),
    ("/srv/runs/x", ("/srv/runs/x",), "."),
    ("/proc/zl-peft", ("/srv/runs/x",), "/proc/zl-peft"),  # outside the run: as the command line gave it
    ("out/adapter", (), "out/adapter"),
])
def test_a_path_is_shown_relative_to_the_folder_it_lies_in(path, within, shown):
    assert shown_path(path, within=within) == shown


def test_the_dashboard_says_a_kept_file_and_a_run_without_the_server_path(tmp_path):
    """A kept upload that fails Preview, a run's status and the Watch line name no place on the server."""
    from app.controller import EngineController
    from app.data_uploads import data_folder
    from app.tabs.run import preview_data

    controller = EngineController(tmp_path / "runs")
    folder = data_folder(controller.runs_root)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "one-class.csv").write_text("text,label\n" + "".join(f"row {i},a\n" for i in range(20)))
    said = preview_data(controller, "one-class.csv", "classification", "text", "label", "", "", "", 64)
    assert "⚠️" in said and str(tmp_path) not in said and "one-class.csv" in said
    assert controller.said(f"csv:{folder / 'x.csv'}: no rows") == "csv:data/x.csv: no rows"  # relative to the runs folder
