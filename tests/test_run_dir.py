"""A run directory: --out, --overwrite and --resume are checked before anything is touched; one writer at a
time (a live run's directory refuses a second run, --resume and --overwrite); no temporary file outlives
its writer; a full disk still ends with a readable metrics.json."""
import errno
import json
import os
import subprocess
import sys

import pytest

from zerolock_core.cli import main
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig, replace
from zerolock_core.rundir.atomic_files import write_json_atomic
from zerolock_core.rundir.metrics import Metrics
from zerolock_core.rundir.run_dir import RunDir, RunInUse, check_resumable
from zerolock_core.jobs.pipeline_job import Run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cfg_for(out, **train):
    return RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                     train=TrainConfig(runtime="pipeline", stages=2, batch=4, microbatches=2, steps=4, threads=1,
                                       ckpt_every=2, **train), out=str(out))


def a_previous_run(d):
    rd = RunDir(d)
    (rd.stage_checkpoints(0) / "step00000002").mkdir(parents=True)
    rd.final.mkdir()
    (rd.final / "my-notes.txt").write_text("keep me")
    rd.write_config(cfg_for(d))
    return d


def test_a_directory_holding_a_run_is_refused_without_overwrite_and_left_untouched(tmp_path):
    d = a_previous_run(tmp_path / "run")
    with pytest.raises(ConfigError, match="already holds a run.*--resume.*--overwrite"):
        Run(cfg_for(d)).start()
    assert (d / "final" / "my-notes.txt").read_text() == "keep me"
    assert (RunDir(d).stage_checkpoints(0) / "step00000002").is_dir()


def test_a_mistyped_model_deletes_nothing_even_with_overwrite(tmp_path):
    d = a_previous_run(tmp_path / "run")
    bad = replace(cfg_for(d), model={"model": str(tmp_path / "no-such-model")})
    with pytest.raises(ConfigError, match="no such directory"):
        Run(bad, overwrite=True).start()
    assert (d / "final" / "my-notes.txt").exists() and RunDir(d).checkpoints.is_dir()


def test_overwrite_removes_the_previous_run_and_writes_the_new_config(tmp_path):
    d = a_previous_run(tmp_path / "run")
    new = replace(cfg_for(d), train={"steps": 6})
    RunDir(d).prepare_fresh(new, overwrite=True).release()
    assert RunDir(d).found() == ["config.json", "config.toml"] and RunDir(d).saved_config() == new


def test_an_empty_or_unrelated_directory_is_used_as_is(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    RunDir(tmp_path).prepare_fresh(cfg_for(tmp_path), overwrite=False).release()
    assert (tmp_path / "notes.txt").exists()


def test_out_naming_a_file_is_a_clear_error(tmp_path, capsys):
    f = tmp_path / "a-file"
    f.write_text("x")
    rc = main(["train", "--runtime", "pipeline", "--stages", "2", "--steps", "2", "--out", str(f), "--quiet"])
    assert rc == 2 and "exists and is not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("case,message", [
    ("no run", "no run to resume there"),
    ("finished", "that run finished"),
    ("other config", "different config.*batch: 4 there, 8 here"),
    ("no checkpoints", "has no checkpoints"),
])
def test_resume_refuses_with_a_clear_message(tmp_path, case, message):
    d = tmp_path / "run"
    d.mkdir()
    cfg = cfg_for(d)
    if case != "no run":
        RunDir(d).write_config(cfg)
    if case == "finished":
        RunDir(d).write_metrics(Metrics(config=cfg.to_dict(), state="finished", steps_done=4))
    if case == "other config":  # (more steps alone train the run on: tests/test_run_extension.py)
        cfg = replace(cfg, train={"batch": 8})
    if case == "no checkpoints":
        cfg = replace(cfg, train={"ckpt_every": 0})
        RunDir(d).write_config(cfg)
    with pytest.raises(ConfigError, match=message):
        lock = RunDir(d).prepare_resume(cfg)
        lock.release()
    assert not RunDir(d).is_live()  # a refusal leaves the directory unlocked


# ---- one writer at a time ----------------------------------------------------------------------
@pytest.mark.parametrize("second", ["fresh", "overwrite", "resume"])
def test_a_live_run_directory_refuses_a_second_writer_and_says_who_holds_it(tmp_path, second):
    d = tmp_path / "run"
    cfg = cfg_for(d)
    held = RunDir(d).prepare_fresh(cfg, overwrite=False)  # the live run
    try:
        before = sorted(p.name for p in d.iterdir())
        with pytest.raises(RunInUse, match=f"{d} is in use: process {os.getpid()}"):
            if second == "resume":
                RunDir(d).prepare_resume(cfg)
            else:
                RunDir(d).prepare_fresh(cfg, overwrite=second == "overwrite")
        assert sorted(p.name for p in d.iterdir()) == before  # nothing touched
    finally:
        held.release()
    assert not RunDir(d).is_live()


def test_the_lock_goes_with_its_process_however_it_ends(tmp_path):
    d = tmp_path / "run"
    code = ("import os, sys; from zerolock_core.rundir.run_dir import RunDir; l = RunDir(sys.argv[1]).lock(); "
            "print('locked', flush=True); sys.stdin.read(); os._exit(9)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(d)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=REPO)
    try:
        assert proc.stdout.readline().strip() == "locked"
        assert RunDir(d).is_live()
        with pytest.raises(RunInUse):
            RunDir(d).lock()
    finally:
        proc.kill()
        proc.wait(30)
    assert not RunDir(d).is_live()
    RunDir(d).lock().release()


# ---- temporary files and a full disk --------------------------------------------------------------
def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        write_json_atomic(tmp_path / "metrics.json", {"state": "finished"})
    assert list(tmp_path.iterdir()) == []


def test_temporaries_of_dead_writers_are_swept_and_live_ones_kept(tmp_path):
    rd = RunDir(tmp_path)
    rd.stages.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    leftovers = [tmp_path / f".metrics.json.tmp-{dead}", rd.stages / f".stage2.json.tmp-{dead}"]
    mine = tmp_path / f".config.json.tmp-{os.getpid()}"
    for p in [*leftovers, mine]:
        p.write_text("{")
    assert sorted(rd.sweep_temporaries()) == sorted(leftovers)
    assert mine.exists() and not any(p.exists() for p in leftovers)


def test_a_full_disk_still_gets_a_small_metrics_json_from_the_reserve(tmp_path, monkeypatch):
    rd = RunDir(tmp_path)
    rd.keep_reserve()
    big = Metrics(config=cfg_for(tmp_path).to_dict(), state="failed", reason="stage 1 failed: No space left",
                  per_stage=[{"stage": 0, "x": "y" * 10_000}], curves=[{"chunk": "chunk0", "step": [1], "loss": [1.0]}])
    real_dump = json.dump

    def dump(obj, f, **kw):  # the disk is full while the reserve is held: only a small record fits after
        if rd.path.joinpath(".reserve").exists() or len(json.dumps(obj)) > 4000:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_dump(obj, f, **kw)
    monkeypatch.setattr(json, "dump", dump)
    rd.write_metrics(big)
    on_disk = rd.read_metrics()
    assert on_disk.state == "failed" and on_disk.reason == big.reason and on_disk.per_stage == []
    assert "disk is full" in on_disk.telemetry_note
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


# ---- old records ---------------------------------------------------------------------------------
@pytest.mark.parametrize("old,expected", [
    ({"config": {}, "eval": None, "samples_per_s": 40.0, "train": {"curves": [{"chunk": "global"}]}},
     dict(state="finished", throughput_samples_per_s=40.0, curves=[{"chunk": "global"}])),
    ({"config": {}, "state": "stopped", "stopped": True, "samples_per_s": 1.0, "throughput_samples_per_s": 2.0,
      "eval_skipped": None, "reason": None},
     dict(state="stopped", throughput_samples_per_s=2.0, eval_skipped="", reason="")),
])
def test_old_metrics_files_are_read_in_one_place(old, expected):
    m = Metrics.from_json(old)
    for key, value in expected.items():
        assert getattr(m, key) == value, key


def test_check_resumable_accepts_a_run_that_only_lacks_its_eval(tmp_path):
    cfg = replace(cfg_for(tmp_path), train={"ckpt_every": 0})
    RunDir(tmp_path).write_config(cfg)
    RunDir(tmp_path).write_metrics(Metrics(config=cfg.to_dict(), state="stopped", steps_done=4,
                                           final_steps=[4, 4]))
    check_resumable(RunDir(tmp_path), cfg)  # no checkpoints needed: only the eval is left
