"""Every bad flag is rejected before any work starts, with one clear line naming it."""
import dataclasses
import json

import pytest

from zerolock_core.cli import main
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.run_config import RunConfig, TrainConfig, replace


BAD_FLAGS = [
    (["--batch", "8", "--microbatches", "3"], "--batch 8 is not divisible by --microbatches 3"),
    (["--alpha", "0"], r"--alpha 0.0 is outside \(0, 1\]"),
    (["--alpha", "1.5"], r"--alpha 1.5 is outside \(0, 1\]"),
    (["--stages", "3", "--alpha", "0.5,0.5"], "--alpha has 2 values"),
    (["--runtime", "reference", "--method", "gpipe"], "--method 'gpipe' is not available with --runtime reference"),
    (["--method", "nope"], "--method 'nope'"),
    (["--stages", "0"], "--stages must be at least 1"),
    (["--stages", "9"], "--stages 9 must be between 1 and the model's 8 layers"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--lr", "-1"], "--lr must be positive"),
    (["--seq-len", "4"], "--seq-len must be at least 8"),
    (["--lora-rank", "0"], "--lora-rank must be at least 1"),
    (["--dataset", "nope"], "nope"),
    (["--dataset", "csv:/no/such/file.csv"], "--dataset: /no/such/file.csv: no such file"),
    (["--model", "/no/such/dir"], "--model /no/such/dir: no such directory"),
    (["--readout-adapter", "affine"], "--readout-adapter is now --readout: --readout affine"),
    (["--readout", "top"], "--readout: 'top' is not one of head | affine | mlp | top:N | top-lora:N"),
    (["--readout", "lens"], "--readout: 'lens' is not one of"),
    (["--runtime", "reference", "--readout", "top-lora:2", "--method", "bp"], "--method bp trains only the last chunk"),
    (["--readout", "top:1", "--method", "terminal"], "--method terminal trains only the last chunk"),
    (["--readout", "top:3", "--stages", "3"], "--readout top:3 reads through 3 top layers but the last chunk holds 2"),
    (["--runtime", "reference", "--readout", "top:last", "--method", "bp"], "--method bp trains only the last chunk"),
    (["--alpha-ramp", "linear:0.5->1", "--method", "terminal"], "--alpha-ramp belongs to ZeroLock"),
    (["--runtime", "pipeline", "--method", "1f1b", "--stages", "4", "--microbatches", "2", "--batch", "4"],
     "1f1b needs --microbatches >= --stages"),
    (["--warm-standby", "sometimes"], "--warm-standby"),
    (["--runtime", "reference", "--stage-speed", "0.5"], "--stage-speed slows the stages of --runtime pipeline"),
    (["--runtime", "pipeline", "--stages", "3", "--stage-speed", "1,0.5"], "--stage-speed has 2 values"),
    (["--runtime", "pipeline", "--stage-speed", "1,1.5"], r"--stage-speed .*outside \[0.001, 1\]"),
    (["--runtime", "pipeline", "--fail", "1@2:slow=0.5"], "a straggler's factor must be a finite number > 1"),
]


@pytest.mark.parametrize("flags,message", BAD_FLAGS)
def test_bad_flags_are_one_clear_line(flags, message, capsys, tmp_path):
    code = main(["train", "--quiet", "--out", str(tmp_path / "run"), *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("zerolock: error: ")
    assert len(err.strip().splitlines()) == 1, err
    import re
    assert re.search(message, err), err
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_config_round_trips_through_json():
    cfg = RunConfig(train=TrainConfig(runtime="reference", stages=2, method="bp", batch=4, microbatches=2))
    again = RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg


def test_boundaries_auto_round_trips_through_json():
    from zerolock_core.config.arg_types import boundaries_arg

    cfg = RunConfig(train=TrainConfig(runtime="pipeline", stages=3, stage_speed=(1.0, 0.4, 1.0)),
                    model=dataclasses.replace(RunConfig().model, boundaries=boundaries_arg("auto")))
    assert RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_replace_validates():
    cfg = RunConfig()
    assert replace(cfg, train={"steps": 3}).train.steps == 3
    with pytest.raises(ConfigError):
        replace(cfg, train={"batch": 7})


def test_unknown_field_in_config_file_is_named():
    with pytest.raises(ConfigError, match="unknown TrainConfig field"):
        RunConfig.from_dict({"train": {"stepz": 3}})


@pytest.mark.parametrize("mode, cores, stages, wanted", [
    ("auto", 2, 2, False), ("auto", 2, 3, False), ("auto", 8, 3, True), ("on", 2, 3, True), ("off", 8, 2, False)])
def test_warm_standby_auto_wants_a_core_the_stages_do_not_use(monkeypatch, mode, cores, stages, wanted):
    import os

    from zerolock_core.jobs.pipeline_job import Run

    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    cfg = RunConfig(train=TrainConfig(runtime="pipeline", method="zerolock", stages=stages, batch=4, microbatches=2,
                                      ckpt_every=1, warm_standby=mode), out="unused")
    assert Run(cfg).wants_standby is wanted


def test_bad_warm_standby_is_a_config_error():
    with pytest.raises(ConfigError, match="--warm-standby 'maybe' is not one of auto, on, off"):
        RunConfig(train=TrainConfig(warm_standby="maybe"))


def test_zerolock_help_imports_neither_torch_nor_any_benchmark():
    """`zerolock --help` (and building the parser) stays light: torch, gradio and the benchmark
    modules are imported only by the command that runs."""
    import subprocess
    import sys

    code = ("import sys; from zerolock_core.cli import build_parser; build_parser().format_help(); "
            "heavy = [m for m in ('torch', 'gradio', 'transformers') if m in sys.modules]; "
            "heavy += [m for m in sys.modules if m.startswith('benchmarks.')]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("argv", [["train", "--help"], ["bench", "efficiency", "--help"], ["bench", "memory", "--help"]])
def test_a_help_page_imports_neither_torch_nor_plotly(argv):
    """`zerolock train --help` and a benchmark's --help print in a second: torch, plotly and gradio
    are imported by the command that runs, not by its help."""
    import subprocess
    import sys

    code = (f"import sys; from zerolock_core.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "print([m for m in ('torch', 'plotly', 'gradio', 'transformers') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-500:]
