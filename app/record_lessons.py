"""Record the lessons' example runs: `python -m app.record_lessons [--out DIR] [--missing]`.

Each lesson's live form values (app/lessons.py) run here exactly as the Run button would run them, one
method after another; what the figures need is kept (config, record, events, start-ups, loss curves),
the weights and checkpoints are not, so the recordings stay small enough to ship with the app
(`RECORDINGS`). `--missing` records only the runs not there yet (a new step's), leaving the others —
and every number the lessons quote from them — as they are. A README and index.json beside them say
when, on which machine and under what load each run was made.
"""
from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
import tempfile
from pathlib import Path

from zerolock_core.rundir.atomic_files import write_json_atomic
from zerolock_core.telemetry.machine import load_average, machine_line
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.jobs.pipeline_job import Run

from .form import RunForm, configs_for
from .lessons import LESSONS, RECORDINGS, recording_name

KEPT = ("config.json", "metrics.json", "lifecycle.jsonl", "curves.jsonl")  # and the events folder
RUN_TIMEOUT_S = 600.0


def forms() -> list[RunForm]:
    """Every distinct live form of the lessons, in lesson order."""
    out: list[RunForm] = []
    for item in LESSONS:
        for form in item.live:
            if form not in out:
                out.append(form)
    return out


def wanted() -> list[str]:
    """Every recording the lessons draw or run, in lesson order."""
    return [recording_name(form, m) for form in forms() for m in form.methods]


def keep(src: RunDir, dest: Path) -> int:
    """Copy what the figures read from `src` into `dest` (replaced whole; the records name the recording,
    not the temporary folder it ran in); returns the bytes kept."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in KEPT:
        if (src.path / name).exists():
            shutil.copy2(src.path / name, dest / name)
    for name, config_of in (("config.json", lambda d: d), ("metrics.json", lambda d: d["config"])):
        record = json.loads((dest / name).read_text())
        config_of(record)["out"] = dest.name
        write_json_atomic(dest / name, record)
    for f in src.event_files():
        target = dest / f.relative_to(src.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    return sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())


def record(out: Path, *, missing: bool = False) -> list[str]:
    """Make the recordings (`missing`: only those not in `out` yet); the names made."""
    made = []
    with tempfile.TemporaryDirectory(prefix="zerolock-lessons-") as tmp:
        for form in forms():
            configs = configs_for(form, out_for=lambda m: str(Path(tmp) / recording_name(form, m)))
            for method, cfg in zip(form.methods, configs):
                if missing and RunDir(out / recording_name(form, method)).metrics.is_file():
                    continue
                run = Run(cfg).start()
                metrics = run.wait(timeout=RUN_TIMEOUT_S)
                if not run.done:  # never leave its stage processes behind
                    run.stop(timeout=60.0)
                    raise RuntimeError(f"the {method} run of {recording_name(form, method)} did not end within "
                                       f"{RUN_TIMEOUT_S:g} s")
                if metrics is None or metrics.state != "finished":
                    raise RuntimeError(f"the {method} run of {recording_name(form, method)} did not finish: "
                                       f"{metrics.reason if metrics else 'no record'}")
                name = recording_name(form, method)
                size = keep(RunDir(cfg.out), out / name)
                made.append(name)
                print(f"recorded {name} ({size / 1024:.0f} KiB)", flush=True)
    return made


def _loads(loads: list[float]) -> str:
    return " / ".join(f"{x:g}" for x in loads)


def provenance(out: Path) -> dict[str, dict]:
    """index.json's runs: name -> {made, machine, python, load_average: [before, after] or load: words}."""
    index = out / "index.json"
    return json.loads(index.read_text())["runs"] if index.is_file() else {}


def readme(out: Path, runs: dict[str, dict]) -> str:
    rows = []
    for name, p in runs.items():
        steps = RunDir(out / name).read_metrics().steps_done
        size = sum(f.stat().st_size for f in (out / name).rglob("*") if f.is_file())
        load = p.get("load") or " → ".join(_loads(x) for x in p["load_average"])
        rows.append(f"| `{name}` | {steps} | {size / 1024:.0f} KiB | {p['made']} | {p['machine']}, Python "
                    f"{p['python']} | {load} |")
    return ("# The lessons' recorded example runs\n\n"
            "Made by `python -m app.record_lessons` from the lessons' own form values (`app/lessons.py`). "
            "Config, record, events, start-ups and loss curves only (no weights, no checkpoints): the Lessons "
            "tab draws them at once, offline; every lesson's *Run it live* makes the same run again. The load "
            "average (1/5/15 min) before and after each recording session: a load well above the core count "
            "means other work shared the cores, and the timelines' seconds are slower than a quiet machine's.\n\n"
            "| run | steps | size | made | machine | load before → after |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m app.record_lessons", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=RECORDINGS)
    p.add_argument("--missing", action="store_true", help="record only the runs not in --out yet")
    a = p.parse_args(argv)
    load_before = load_average()
    made = record(a.out, missing=a.missing)
    load_after = load_average()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    this = dict(made=when, machine=machine_line(), python=sys.version.split()[0],
                load_average=[load_before, load_after])
    known = provenance(a.out) if a.missing else {}
    runs = {name: this if name in made else known[name] for name in wanted() if name in made or name in known}
    (a.out / "README.md").write_text(readme(a.out, runs))
    write_json_atomic(a.out / "index.json", {"runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
