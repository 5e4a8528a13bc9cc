"""A run never deletes what it should not: --out, --overwrite and --resume are checked before anything is touched."""
import json

import pytest

from zerolock_core.cli import main
from zerolock_core.config import ConfigError, DataConfig, RunConfig, TrainConfig, replace
from zerolock_core.runtime import run_dir
from zerolock_core.runtime.run import Run


def cfg_for(out, **train):
    return RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                     train=TrainConfig(runtime="pipeline", stages=2, batch=4, microbatches=2, steps=4, threads=1,
                                       ckpt_every=2, **train), out=str(out))


def a_previous_run(d):
    (d / "checkpoints" / "stage0" / "step00000002").mkdir(parents=True)
    (d / "final").mkdir()
    (d / "final" / "my-notes.txt").write_text("keep me")
    (d / "config.json").write_text(json.dumps(cfg_for(d).to_dict()))
    return d


def test_a_directory_holding_a_run_is_refused_without_overwrite_and_left_untouched(tmp_path):
    d = a_previous_run(tmp_path / "run")
    with pytest.raises(ConfigError, match="already holds a run.*--resume.*--overwrite"):
        Run(cfg_for(d)).start()
    assert (d / "final" / "my-notes.txt").read_text() == "keep me"
    assert (d / "checkpoints" / "stage0" / "step00000002").is_dir()


def test_a_mistyped_model_deletes_nothing_even_with_overwrite(tmp_path):
    d = a_previous_run(tmp_path / "run")
    bad = replace(cfg_for(d), model={"model": str(tmp_path / "no-such-model")})
    with pytest.raises(ConfigError, match="no such directory"):
        Run(bad, overwrite=True).start()
    assert (d / "final" / "my-notes.txt").exists() and (d / "checkpoints").is_dir()


def test_overwrite_removes_the_previous_run(tmp_path):
    d = a_previous_run(tmp_path / "run")
    run_dir.prepare_fresh(d, cfg_for(d), overwrite=True)
    assert not run_dir.holds_a_run(d)


def test_an_empty_or_unrelated_directory_is_used_as_is(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    run_dir.prepare_fresh(tmp_path, cfg_for(tmp_path), overwrite=False)
    assert (tmp_path / "notes.txt").exists()


def test_out_naming_a_file_is_a_clear_error(tmp_path, capsys):
    f = tmp_path / "a-file"
    f.write_text("x")
    rc = main(["train", "--runtime", "pipeline", "--stages", "2", "--steps", "2", "--out", str(f), "--quiet"])
    assert rc == 2 and "exists and is not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("case,message", [
    ("no run", "no run to resume there"),
    ("finished", "that run finished"),
    ("other config", "different config.*steps: 4 there, 6 here"),
    ("no checkpoints", "has no checkpoints"),
])
def test_resume_refuses_with_a_clear_message(tmp_path, case, message):
    d = tmp_path / "run"
    d.mkdir()
    cfg = cfg_for(d)
    if case != "no run":
        (d / "config.json").write_text(json.dumps(cfg.to_dict()))
    if case == "finished":
        (d / "metrics.json").write_text(json.dumps({"state": "finished", "steps_done": 4}))
    if case == "other config":
        cfg = replace(cfg, train={"steps": 6})
    if case == "no checkpoints":
        cfg = replace(cfg, train={"ckpt_every": 0})
        (d / "config.json").write_text(json.dumps(cfg.to_dict()))
    with pytest.raises(ConfigError, match=message):
        run_dir.check_resumable(d, cfg)
