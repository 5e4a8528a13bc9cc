"""Each run field is defined once (zerolock_core/config/run_fields.py): the CLI's flags, their mapping back to
the config, the words of the error messages and the dashboard form's defaults and labels all come
from that one definition."""
from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from app.form import RunForm, config_for
from zerolock_core.cli import build_parser, config_from_args
from zerolock_core.config.run_config import RunConfig, TrainConfig, replace
from zerolock_core.config.field_words import CLI, FILE, FORM, ConfigError, render
from zerolock_core.config.run_fields import FIELDS, RUN_FIELDS
from zerolock_core.config.setting import value_text


def train_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices["train"]


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(["train", *argv])


@pytest.mark.parametrize("key", RUN_FIELDS)
def test_every_field_is_a_train_flag_whose_default_is_the_fields(key):
    f = RUN_FIELDS[key]
    action = next(a for a in train_parser()._actions if a.dest == key)
    assert action.option_strings == [f.setting.flag] and action.help == f.setting.help_text
    assert action.default == (list(f.default) if f.setting.repeat else f.default)


def test_no_flags_make_the_configs_defaults():
    assert config_from_args(parse([]), out="x") == RunConfig(out="x")


# flags -> (section, field, value) in the config they make
FLAGS = [
    (["--alpha", "0.5,1"], "objective", "alpha", (0.5, 1.0)),
    (["--lora-targets", "q_proj,v_proj,o_proj"], "model", "lora_targets", ("q_proj", "v_proj", "o_proj")),
    (["--lora-targets", "q_proj, v_proj,"], "model", "lora_targets", ("q_proj", "v_proj")),
    (["--stages", "3", "--boundaries", "3,6"], "model", "boundaries", (3, 6)),
    (["--runtime", "pipeline", "--ckpt-every", "2", "--fail", "1@3", "--fail", "0@5:stop"],
     "train", "failures", ("1@3", "0@5:stop")),
    (["--memory-budget", "64MiB"], "train", "memory_budget_bytes", 64 * 2**20),
    (["--no-final-eval"], "train", "final_eval", False),
    (["--readout", "affine"], "model", "readout", "affine"),
    (["--readout", "top-lora:2"], "model", "readout", "top-lora:2"),
    (["--method", "terminal"], "train", "method", "terminal"),
    (["--runtime", "pipeline", "--link", "wifi"], "link", "profile", "wifi"),
    (["--runtime", "pipeline", "--link", "custom", "--link-bandwidth-mbps", "50", "--link-latency-ms", "30"],
     "link", "bandwidth_mbps", 50.0),
    (["--heartbeat-timeout", "2.5"], "train", "heartbeat_timeout_s", 2.5),
    (["--alpha-ramp", "linear:0.5->1"], "objective", "alpha_ramp", "linear:0.5->1"),
    (["--seq-len", "32", "--eval-size", "8"], "data", "eval_size", 8),
]


@pytest.mark.parametrize("argv, section, key, value", FLAGS, ids=[" ".join(a) for a, *_ in FLAGS])
def test_a_flag_lands_in_its_field(argv, section, key, value):
    assert getattr(getattr(config_from_args(parse(argv), out=None), section), key) == value


def test_over_a_base_config_only_the_flags_given_count():
    """A flag given with argparse's default value still counts; one not given keeps the base's value."""
    base = RunConfig(train=TrainConfig(stages=3, lr=1e-3, seed=7))
    cfg = config_from_args(parse(["--stages", str(TrainConfig.stages), "--steps", "9"]), out="x", base=base)
    assert cfg == replace(base, train={"stages": TrainConfig.stages, "steps": 9}, out="x")
    assert config_from_args(parse([]), out="x", base=base) == replace(base, out="x")


@pytest.mark.parametrize("flags, train", [([], {}), (["--steps", "9"], {"steps": 9})])
def test_resume_gives_the_saved_config_with_the_flags_given(flags, train, tmp_path):
    """Not the flags' defaults: the run then refuses a config that differs from its own, naming the fields."""
    from zerolock_core.cli import _resume_config

    saved = RunConfig(train=TrainConfig(runtime="pipeline", stages=3, lr=1e-3, ckpt_every=2), out=str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps(saved.to_dict()))
    assert _resume_config(parse(["--resume", str(tmp_path), *flags])) == replace(saved, train=train)


def test_the_help_shows_each_default_as_the_flag_takes_it():
    text = " ".join(train_parser().format_help().split())
    for key in ("stages", "lr", "seq_len", "eval_size", "alpha", "lora_targets", "threads"):
        f = RUN_FIELDS[key]
        assert f"{f.setting.flag}" in text and f"(default: {value_text(f.default)})" in text, key


# key -> its words: the CLI's, the Run form's, a config file's
WORDS = [
    ("microbatches", "--microbatches", "micro-batches m", "train.microbatches"),
    ("profile", "--link", "link between stages", "link.profile"),
    ("memory_budget_bytes", "--memory-budget", "memory budget", "train.memory_budget_bytes"),
    ("alpha", "--alpha", "α", "objective.alpha"),
    ("fail_stage", "--fail STAGE", "failure stage", "--fail STAGE"),  # the form's own field
]


@pytest.mark.parametrize("key, cli, form, file", WORDS, ids=[w[0] for w in WORDS])
def test_a_field_is_named_in_the_words_of_each_audience(key, cli, form, file):
    assert (CLI.name(key), FORM.name(key), FILE.name(key)) == (cli, form, file)


# a field's own bounds and choices (run_fields.py) -> the CLI's message and the form's
BOUNDS = [
    ({"model": {"lora_alpha": 0.0}}, "--lora-alpha must be positive and finite (got 0.0)",
     "lora alpha must be positive and finite (got 0.0)"),
    ({"train": {"weight_decay": -1.0}}, "--weight-decay must be >= 0 and finite (got -1.0)",
     "weight decay must be >= 0 and finite"),
    ({"train": {"keep_checkpoints": 1}}, "--keep-checkpoints must be at least 2 (got 1)", "keep checkpoints must"),
    ({"data": {"eval_size": -1}}, "--eval-size must be >= 0 (got -1)", "eval examples must be >= 0 (got -1)"),
    ({"train": {"runtime": "pipeline"}, "link": {"profile": "wifi", "bandwidth_mbps": 0.0}},
     "--link-bandwidth-mbps 0.0 is outside [0.001, 1,000,000]", "link bandwidth (Mbps) = 0.0 is outside [0.001"),
    ({"objective": {"consistency": "sideways"}}, "--consistency 'sideways' is not one of reverse, forward",
     "consistency direction 'sideways' is not one of reverse, forward"),
    ({"objective": {"alpha": (0.5, 0.0)}, "train": {"stages": 2}}, "--alpha 0.0 is outside (0, 1]",
     "α = 0.0 is outside (0, 1]"),
]


@pytest.mark.parametrize("changes, cli, form", BOUNDS, ids=[c for _, c, _ in BOUNDS])
def test_a_value_outside_its_fields_bounds_is_refused_in_the_words_of_who_asked(changes, cli, form):
    with pytest.raises(ConfigError) as caught:
        replace(RunConfig(), **changes)
    assert render(caught.value, CLI) == cli and render(caught.value, FORM).startswith(form)


# ---- the dashboard's Run form -----------------------------------------------------------------------
FORM_ALIASES = {"link": "profile"}  # the form's name of a config field, where it differs
FORM_ONLY = {"methods", "fail_stage", "fail_step", "fail_mode", "data"}  # data: DataFields, checked below


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(RunForm) if f.name not in FORM_ONLY])
def test_every_form_default_is_the_config_default_of_its_field(name):
    """The CLI and the dashboard share defaults by construction."""
    from app.form import recompute_of

    field = RUN_FIELDS[FORM_ALIASES.get(name, name)]
    default = getattr(RunForm(), name)
    if name == "recompute":  # the form offers named layouts: its default names the config's
        assert recompute_of(RunForm()) == field.default
        return
    assert (value_text(field.default) if name == "alpha" else field.default) == default


def test_the_forms_data_fields_default_to_the_configs():
    from app.data_preview import RESPONSE_KIND, DataFields

    for kind in (DataFields.kind, RESPONSE_KIND):
        for key, value in DataFields(kind=kind).config_fields().items():
            assert RUN_FIELDS[key].default == value, key


@pytest.mark.parametrize("method", ["zerolock", "bp"])
def test_the_default_form_starts_the_configs_default_run(method):
    """What the form sets beyond its fields: the runtime of the method, and checkpoints for the pipeline."""
    cfg = config_for(RunForm(), method, out="x")
    pipeline = method != "bp"
    train = {"runtime": "pipeline" if pipeline else "reference", "method": method, "ckpt_every": 2 if pipeline else 0}
    assert cfg == replace(RunConfig(), train=train, out="x")

