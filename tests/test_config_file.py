"""Run configs as TOML files (zerolock_core/config/config_file.py, `zerolock train --config`): a written config
reads back equal, a bad file is refused naming the file and the key, flags given beside a file
override it, and every file in configs/ is a valid run."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from zerolock_core.cli import main
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.run_config import (DataConfig, LinkConfig, ModelConfig, ObjectiveConfig, RunConfig,
                                  TrainConfig)
from zerolock_core.config.config_file import dumps, loads, read_config_toml, write_config_toml
from zerolock_core.train.preflight import preflight

REPO = Path(__file__).resolve().parents[1]
PIPE = dict(runtime="pipeline", ckpt_every=2)

CONFIGS = [
    RunConfig(),
    RunConfig(out="runs/somewhere"),  # out is not written: it reads back unset
    RunConfig(model=ModelConfig(lora_targets=("q_proj", "k_proj", "v_proj", "o_proj"), boundaries=(2, 5),
                                readout="affine", lora_alpha=8.0),
              objective=ObjectiveConfig(alpha=(1.0, 0.5, 0.25), consistency="forward"),
              train=TrainConfig(stages=3, lr=1e-4, weight_decay=0.01, eval_every=50, final_eval=False)),
    RunConfig(objective=ObjectiveConfig(alpha_ramp="cosine:0.5->1"), data=DataConfig(dataset="csv:data/ag news.csv")),
    RunConfig(train=TrainConfig(**PIPE, stages=3, microbatches=8, failures=("1@5:kill", "2@7:mid-ckpt"),
                                memory_budget_bytes=64 * 2**20, warm_standby="on", heartbeat_timeout_s=2.5),
              link=LinkConfig(profile="custom", bandwidth_mbps=50.0, latency_ms=30.0)),
    RunConfig(train=TrainConfig(**PIPE), link=LinkConfig(profile="wifi", latency_ms=0.0)),  # one None left
    RunConfig(model=ModelConfig(boundaries=()),  # --boundaries auto: written "auto"
              train=TrainConfig(runtime="pipeline", stages=3, stage_speed=(1.0, 0.4, 1.0), failures=("1@2:slow=3",))),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=range(len(CONFIGS)))
def test_a_written_config_reads_back_equal_without_its_out(cfg, tmp_path):
    path = write_config_toml(cfg, tmp_path / "config.toml", comment="a comment\non two lines")
    assert read_config_toml(path) == loads(dumps(cfg)) == dataclasses.replace(cfg, out=None)


def test_none_is_left_out_and_a_left_out_field_reads_as_its_default():
    text = dumps(RunConfig(link=LinkConfig(profile="none")))
    assert "boundaries" not in text and "bandwidth_mbps" not in text and "latency_ms" not in text
    assert loads("[train]\nsteps = 7\n") == RunConfig(train=TrainConfig(steps=7))
    assert loads("") == RunConfig()


# TOML text -> what the refusal says (after "FILE: ")
BAD_FILES = [
    ("[trian]\nsteps = 3\n", r"'trian' is not a table of a run config; the tables are \[model\], \[data\]"),
    ("steps = 3\n", r"'steps' is not a table of a run config"),
    ("[train]\nstepz = 3\n", r"\[train\] has no key 'stepz'; its keys are runtime, method, stages"),
    ("[train]\nstages = \"3\"\n", r"train.stages must be an integer \(got '3'\)"),
    ("[train]\nstages = 2.0\n", r"train.stages must be an integer \(got 2.0\)"),
    ("[train]\nstages = true\n", r"train.stages must be an integer \(got True\)"),
    ("[train]\nfinal_eval = 1\n", r"train.final_eval must be true or false \(got 1\)"),
    ("[train]\nlr = \"fast\"\n", r"train.lr must be a number \(got 'fast'\)"),
    ("[objective]\nalpha = 0.5\n", r"objective.alpha must be an array of numbers \(got 0.5\)"),
    ("[model]\nlora_targets = [\"q_proj\", 3]\n", r"model.lora_targets must be an array of strings"),
    ("[model]\nboundaries = [2.5]\n", r"model.boundaries must be an array of integers \(got \[2.5\]\)"),
    ("[model]\nboundaries = \"even\"\n", r"model.boundaries must be an array of integers or \"auto\" \(got 'even'\)"),
    ("out = \"runs/x\"\n", r"out names the run directory and is not part of a config file: give --out"),
    ("[train\n", r"not valid TOML"),
    # the config's own rules, in the file's words
    ("[train]\nstages = 0\n", r"train.stages must be at least 1 \(got 0\)$"),
    ("[train]\nruntime = \"cloud\"\n", r"train.runtime = 'cloud' is not one of reference, pipeline$"),
    ("[train]\nbatch = 6\n",
     r"train.batch = 6 is not divisible by train.microbatches = 4; try train.microbatches = 2, 3 or 6, "
     r"or train.batch = 8$"),
    ("[objective]\nalpha = [1.5]\n", r"objective.alpha = 1.5 is outside \(0, 1\]$"),
    ("[objective]\nalpha_ramp = \"step:1->2\"\n", r"objective.alpha_ramp = 'step:1->2' is not SHAPE:START->END"),
    ("[train]\nruntime = \"reference\"\nfailures = [\"1@3\"]\n", r"train.failures needs train.runtime = pipeline$"),
]


@pytest.mark.parametrize("text, message", BAD_FILES, ids=[t for t, _ in BAD_FILES])
def test_a_bad_file_is_refused_naming_the_file_and_the_key(text, message, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        read_config_toml(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert re.search(message, str(caught.value)), str(caught.value)


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"--config .*missing.toml: cannot read it"):
        read_config_toml(tmp_path / "missing.toml")


# ---- zerolock train --config ----------------------------------------------------------------------
class Started(Exception):
    """Raised by the trainers in place of training: carries the config the CLI would run."""


@pytest.fixture
def started(monkeypatch):
    from zerolock_core.jobs import job

    def start(cfg, **kwargs):
        raise Started(cfg)

    monkeypatch.setattr(job, "make_job", start)


def config_run_by(argv: list[str]) -> RunConfig:
    with pytest.raises(Started) as caught:
        main(["train", "--quiet", *argv])
    return caught.value.args[0]


FILED = RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                  objective=ObjectiveConfig(alpha=(1.0, 0.5, 0.5)),
                  train=TrainConfig(**PIPE, method="1f1b", stages=3, batch=4, steps=6, lr=1e-3, failures=("1@3",)))

# flags beside the file -> the fields they change
OVERRIDES = [
    ([], {}),
    (["--steps", "9", "--seed", "4"], {"train": {"steps": 9, "seed": 4}}),
    # a flag given with argparse's default still overrides the file (lr 1e-3 there, 2e-3 the default)
    (["--lr", str(TrainConfig.lr), "--stages", "3"], {"train": {"lr": TrainConfig.lr}}),
    (["--method", "zerolock", "--alpha", "0.5"], {"train": {"method": "zerolock"}, "objective": {"alpha": (0.5,)}}),
    (["--fail", "2@4:stop", "--no-final-eval"], {"train": {"failures": ("2@4:stop",), "final_eval": False}}),
    (["--link", "wifi", "--link-latency-ms", "3"], {"link": {"profile": "wifi", "latency_ms": 3.0}}),
]


@pytest.mark.parametrize("flags, changes", OVERRIDES, ids=[" ".join(f) or "no flags" for f, _ in OVERRIDES])
def test_config_runs_the_written_file_with_the_flags_given_beside_it(flags, changes, tmp_path, started):
    path = write_config_toml(FILED, tmp_path / "config.toml")
    out = str(tmp_path / "run")
    cfg = config_run_by(["--config", str(path), "--out", out, *flags])
    expected = dataclasses.replace(FILED, out=out,
                                   **{name: dataclasses.replace(getattr(FILED, name), **fields)
                                      for name, fields in changes.items()})
    assert cfg == expected


def test_a_run_directory_is_named_after_the_files_method(tmp_path, started, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_config_toml(FILED, tmp_path / "config.toml")
    assert Path(config_run_by(["--config", str(path)]).out).name.endswith("-1f1b-K3")


@pytest.mark.parametrize("text, flags, message", [
    ("[train]\nstepz = 3\n", [], r"\[train\] has no key 'stepz'"),
    ("[train]\nstages = 3\n", ["--alpha", "0.5,0.5"], r"--alpha has 2 values; give one, or one per stage \(3\)"),
    ("[train]\nsteps = 3\n", ["--resume", "{tmp}/run"], "--resume continues a run with its own config"),
])
def test_a_refused_config_is_one_line_and_creates_nothing(text, flags, message, tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    out = tmp_path / "run"
    code = main(["train", "--quiet", "--config", str(path), *(f.replace("{tmp}", str(tmp_path)) for f in flags)]
                + ([] if "--resume" in flags else ["--out", str(out)]))
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and re.search(message, err), err
    assert not out.exists()


# ---- configs/ --------------------------------------------------------------------------------------
CONFIG_FILES = sorted((REPO / "configs").glob("*.toml"))


def test_configs_holds_the_papers_experiments():
    assert {p.name for p in CONFIG_FILES} >= {"e1-quality.toml", "e1-memory.toml", "e2-recovery.toml"}


@pytest.mark.parametrize("path", CONFIG_FILES, ids=[p.name for p in CONFIG_FILES])
def test_every_file_in_configs_is_a_valid_run_that_says_what_it_reproduces(path):
    preflight(read_config_toml(path))  # the model and the dataset too
    assert path.read_text().startswith("# Paper ")


def test_every_run_writes_a_config_toml_that_reproduces_it(tmp_path, started):
    from zerolock_core.rundir.run_dir import RunDir

    run = RunDir(tmp_path / "run")
    run.prepare_fresh(dataclasses.replace(FILED, out=str(run.path)), overwrite=False).release()
    again = config_run_by(["--config", str(run.config_toml), "--out", str(tmp_path / "again")])
    assert again == dataclasses.replace(FILED, out=str(tmp_path / "again"))


@pytest.mark.parametrize("written,readout", [(True, "mlp"), (False, "head"), ("none", "head"), ("affine", "affine"),
                                             ("mlp", "mlp")])
def test_a_config_of_an_earlier_version_reads_its_readout_adapter_as_the_readout(written, readout):
    """config.json / config.toml written before --readout held readout_adapter (once a bool)."""
    assert RunConfig.from_dict({"model": {"readout_adapter": written}}).model.readout == readout
    if not isinstance(written, bool):
        assert loads(f'[model]\nreadout_adapter = "{written}"\n').model.readout == readout
