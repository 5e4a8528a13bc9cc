"""The method registry (zerolock_core/methods.py): its entries as a table, every consumer walked through
it (the CLI's help and checks, the dashboard's form, Explain, the schedule builders, the fault policy,
the palette, the benchmarks), and a new entry reaching all of them with no other edit."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from zerolock_core import methods
from zerolock_core.methods import METHODS, PIPELINE, REFERENCE, RUNTIMES, Method, Recovery, method, names, names_for

ROOT = Path(__file__).resolve().parents[1]
G, L, N = Recovery.GLOBAL, Recovery.LOCAL, Recovery.NONE

# name: label, runtimes, schedule, splits backward, local, recovery, needs m >= K
TABLE = {
    "zerolock": ("ZeroLock", (REFERENCE, PIPELINE), "zerolock", False, True, L, False),
    "gpipe": ("GPipe", (PIPELINE,), "gpipe", False, False, G, False),
    "1f1b": ("1F1B", (PIPELINE,), "1f1b", False, False, G, True),
    "pipedream": ("PipeDream", (PIPELINE,), "pipedream", False, False, N, False),
    "zb-h1": ("ZB-H1", (PIPELINE,), "zb-h1", True, False, G, True),
    "dualpipe-v": ("DualPipe-V", (), "dualpipe-v", True, False, None, True),
    "bp": ("BP reference", (REFERENCE,), None, False, False, None, False),
    "terminal": ("terminal (last chunk only)", (REFERENCE, PIPELINE), "zerolock", False, True, L, False),
}


def test_the_registry_as_a_table():
    assert names() == tuple(TABLE)  # the canonical order: ZeroLock, the BP pipelines, the reference, the control
    for m in METHODS:
        assert (m.label, m.runtimes, m.schedule, m.splits_backward, m.local, m.recovery,
                m.needs_m_at_least_k) == TABLE[m.name], m.name


def test_the_derived_lists_and_rules():
    assert names_for(REFERENCE) == ("zerolock", "bp", "terminal")
    assert names_for(PIPELINE) == ("zerolock", "gpipe", "1f1b", "pipedream", "zb-h1", "terminal")
    assert methods.LOCAL_METHODS == ("zerolock", "terminal")
    assert methods.BASELINES == ("gpipe", "1f1b", "pipedream")
    assert [n for n in names() if methods.refusal(n)] == ["pipedream"]
    assert "PipeDream cannot be recovered" in methods.refusal("pipedream")
    assert methods.schedule_of("terminal") == "zerolock" and methods.schedule_of("gpipe") == "gpipe"
    assert [n for n in names() if methods.every_chunk_trains(n)] == ["zerolock"]
    assert not methods.chunk_trains("terminal", last=False) and methods.chunk_trains("terminal", last=True)
    assert all(methods.chunk_trains(n, last=False) for n in names() if n != "terminal")
    assert methods.label("unknown") == "unknown" and methods.refusal("unknown") == ""
    with pytest.raises(KeyError, match="unknown method 'nope'"):
        method("nope")


@pytest.mark.parametrize("bad, why", [
    (dict(recovery=Recovery.NONE), "refusal"),  # refused without words
    (dict(recovery=Recovery.GLOBAL, refusal="no"), "refusal"),  # words for a method that recovers
    (dict(runtimes=("cloud",), recovery=None), "runtimes"),
    (dict(recovery=None), "recovered"),  # the pipeline runs it: say how it is recovered
])
def test_an_inconsistent_entry_is_refused(bad, why):
    with pytest.raises(ValueError, match=why):
        Method(**{**dict(name="x", label="X", colour="#000000", runtimes=(PIPELINE,), schedule="gpipe",
                         recovery=Recovery.GLOBAL), **bad})


# --- every consumer reads the registry --------------------------------------------------------------------

def test_the_cli_offers_every_method_of_each_runtime(capsys):
    from zerolock_core.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for runtime in RUNTIMES:
        assert f"{runtime}: {' | '.join(names_for(runtime))}" in text
    from zerolock_core.config.run_fields import METHODS_BY_RUNTIME, RUN_FIELDS
    assert METHODS_BY_RUNTIME == {r: names_for(r) for r in RUNTIMES}
    assert RUN_FIELDS["runtime"].setting.choices == RUNTIMES


@pytest.mark.parametrize("entry", [m for m in METHODS if m.runtimes], ids=lambda m: m.name)
def test_the_config_takes_a_method_on_its_runtimes_only(entry):
    from zerolock_core.config.field_words import ConfigError
    from zerolock_core.config.run_config import RunConfig, TrainConfig

    for runtime in RUNTIMES:
        k = 2
        train = TrainConfig(runtime=runtime, method=entry.name, stages=k, batch=4, microbatches=2 * k)
        if runtime in entry.runtimes:
            RunConfig(train=train)
        else:
            with pytest.raises(ConfigError, match="is not available with"):
                RunConfig(train=train)


@pytest.mark.parametrize("name", names_for(PIPELINE))
def test_a_scheduled_failure_is_refused_exactly_for_a_method_that_cannot_be_recovered(name):
    from zerolock_core.config.field_words import ConfigError
    from zerolock_core.config.run_config import RunConfig, TrainConfig

    train = TrainConfig(runtime=PIPELINE, method=name, stages=2, batch=4, microbatches=2, steps=4,
                        ckpt_every=1, failures=("1@2",))
    if method(name).recovery is Recovery.NONE:
        with pytest.raises(ConfigError, match=method(name).refusal[:30]):
            RunConfig(train=train)
    else:
        RunConfig(train=train)


@pytest.mark.parametrize("name", names_for(PIPELINE))
def test_the_fault_policy_recovers_each_method_as_its_entry_says(name):
    from zerolock_core.runtime.recovery_policy import Observed, StageView, decide

    stages = tuple(StageView(stage=s, failed=s == 1, why="exited", checkpoints=(2,), consumed=99, buffer_floor=0)
                   for s in range(3))
    d = decide(Observed(method=name, microbatches=4, max_restarts=3, stages=stages))
    entry = method(name)
    assert d.action == {Recovery.LOCAL: "local", Recovery.GLOBAL: "global", Recovery.NONE: "fail"}[entry.recovery]
    if entry.recovery is Recovery.NONE:
        assert d.reason == entry.refusal


def test_the_dashboards_form_offers_the_methods_it_can_run(tmp_path):
    from app.form import METHOD_CHOICES, PIPELINE_METHODS, REFERENCE_METHODS, RunForm, config_for

    from zerolock_core.analysis.recommended import RECOMMENDED_AT_DEPTH, RECOMMENDED_MARK

    offered = [m for m in METHODS if m.runtimes and not m.control]
    marked = {m.name: m.label + (f" {RECOMMENDED_MARK}" if m.name == RECOMMENDED_AT_DEPTH.method else "")
              for m in offered}  # the registry's label, the recommended one marked
    assert list(METHOD_CHOICES) == sorted(((marked[m.name], m.name) for m in offered),
                                          key=lambda c: (PIPELINE not in method(c[1]).runtimes, names().index(c[1])))
    assert set(PIPELINE_METHODS + REFERENCE_METHODS) == {m.name for m in offered}
    for _, name in METHOD_CHOICES:
        cfg = config_for(RunForm(methods=(name,)), name, out=str(tmp_path / name))
        assert cfg.train.runtime in method(name).runtimes
        assert (cfg.train.ckpt_every == 0) == (cfg.train.runtime == REFERENCE or bool(methods.refusal(name)))


def test_explain_draws_every_flushing_backprop_pipeline():
    from app.explain import BP_METHODS, explain

    assert BP_METHODS == tuple(m.name for m in METHODS if m.schedule and not m.local and m.flushes)
    assert "pipedream" not in BP_METHODS and "dualpipe-v" in BP_METHODS
    for name in BP_METHODS:
        e = explain(stages=2, microbatches=4, bp_method=name)
        assert set(e.peaks) == {name, "zerolock"}


def test_every_method_with_a_schedule_builds_one():
    from zerolock_core.schedule import build_schedule
    from zerolock_core.schedule.builders import METHODS as SCHEDULES, PLACED_METHODS, iter_stage_actions, \
        min_microbatches

    assert set(SCHEDULES + PLACED_METHODS) == {m.schedule for m in METHODS if m.schedule}
    for m in METHODS:
        if m.schedule is None:
            continue
        k = 3
        assert min_microbatches(m.name, stages=k) == (m.chunks_per_device * k if m.needs_m_at_least_k else 1)
        sched = build_schedule(m.schedule, stages=k, microbatches=min_microbatches(m.name, stages=k))
        assert sched.splits_backward == m.splits_backward, m.name
        if m.chunks_per_device == 1:
            assert list(iter_stage_actions(methods.schedule_of(m.name), stage=0, stages=k, microbatches=k))


def test_the_palette_and_the_app_figures_read_labels_and_colours_from_the_registry():
    from app.figures.compare import SIMULATED_METHODS
    from zerolock_core.viz import palette

    assert palette.METHOD_LABELS == {m.name: m.label for m in METHODS}
    assert palette.METHOD_COLOURS == {m.name: m.colour for m in METHODS}
    assert [palette.method_label(n) for n in names()] == [m.label for m in METHODS]
    assert SIMULATED_METHODS == tuple(m.name for m in METHODS if m.schedule == m.name and m.chunks_per_device == 1)


def test_the_benchmarks_compare_the_baselines_then_the_other_pipeline_methods():
    from benchmarks.common.comparison import BASELINES
    from benchmarks.common.settings import METHODS as BENCH_METHODS

    assert BASELINES == methods.BASELINES
    assert BENCH_METHODS == ("gpipe", "1f1b", "pipedream", "zerolock", "zb-h1")  # the paper's order, then ZB-H1
    assert set(BENCH_METHODS) == {m.name for m in METHODS if PIPELINE in m.runtimes and not m.control}


# --- a new method is one entry ----------------------------------------------------------------------------

NEW_ENTRIES = '''
    Method(name="fake-1f1b", label="Fake 1F1B", colour="#4B0A2E", runtimes=(PIPELINE,), schedule="1f1b",
           recovery=Recovery.GLOBAL, needs_m_at_least_k=True),
    Method(name="fake-async", label="Fake async", colour="#2E3B0A", runtimes=(PIPELINE,), schedule="pipedream",
           recovery=Recovery.NONE, refusal="Fake async cannot be recovered", flushes=False),
'''
WALK = r'''
import contextlib, io, json, sys, types
from pathlib import Path
source = Path("zerolock_core/methods.py").read_text()
anchor = "\n)\n_BY_NAME"
assert source.count(anchor) == 1
module = types.ModuleType("zerolock_core.methods")
module.__file__ = "zerolock_core/methods.py"
sys.modules["zerolock_core.methods"] = module
exec(compile(source.replace(anchor, NEW + ")\n_BY_NAME"), "zerolock_core/methods.py", "exec"), module.__dict__)
import zerolock_core
zerolock_core.methods = module

from zerolock_core.cli import build_parser
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
    build_parser().parse_args(["train", "--help"])
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.run_config import RunConfig, TrainConfig
from zerolock_core.runtime.recovery_policy import Observed, StageView, decide
from zerolock_core.schedule import build_schedule
from zerolock_core.viz.palette import method_colour, method_label
from app.explain import BP_METHODS, explain
from app.form import METHOD_CHOICES, RunForm, config_for
from benchmarks.common.settings import METHODS as BENCH

def refused(**train):
    try:
        base = dict(runtime="pipeline", stages=2, batch=4, microbatches=2, steps=4)
        RunConfig(train=TrainConfig(**{**base, **train}))
    except ConfigError as err:
        return str(err)
    return ""

stages = tuple(StageView(stage=s, failed=s == 1, why="exited", checkpoints=(2,)) for s in range(2))
found = {
    "help": " ".join(out.getvalue().split()),
    "form": [list(c) for c in METHOD_CHOICES],
    "form_ckpt": {m: config_for(RunForm(methods=(m,)), m, out="/tmp/x").train.ckpt_every
                  for m in ("fake-1f1b", "fake-async")},
    "explain": list(BP_METHODS),
    "explained": sorted(explain(stages=2, microbatches=2, bp_method="fake-1f1b").peaks),
    "bench": list(BENCH),
    "policy": {m: decide(Observed(method=m, microbatches=2, max_restarts=3, stages=stages)).action
               for m in ("fake-1f1b", "fake-async")},
    "config": {m: refused(method=m, failures=("1@2",), ckpt_every=1) for m in ("fake-1f1b", "fake-async")},
    "m_below_k": refused(method="fake-1f1b", stages=3, batch=3, microbatches=1),
    "colour": method_colour("fake-1f1b"), "label": method_label("fake-async"),
    "schedule": len(build_schedule(module.schedule_of("fake-1f1b"), stages=2, microbatches=2).actions),
}
print(json.dumps(found))
'''


def test_a_new_method_is_one_entry_that_reaches_every_consumer():
    """methods.py with two entries more, imported before anything else: the CLI help, the config's checks,
    the form, Explain, the fault policy, the palette and the benchmarks offer them with no other edit."""
    code = f"NEW = {NEW_ENTRIES!r}\n{WALK}"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert "pipeline: zerolock | gpipe | 1f1b | pipedream | zb-h1 | terminal | fake-1f1b | fake-async" in found["help"]
    assert ["Fake 1F1B", "fake-1f1b"] in found["form"] and ["Fake async", "fake-async"] in found["form"]
    assert found["form_ckpt"] == {"fake-1f1b": 2, "fake-async": 0}
    assert "fake-1f1b" in found["explain"] and "fake-async" not in found["explain"]  # it does not flush
    assert found["explained"] == ["fake-1f1b", "zerolock"]
    assert found["bench"][-2:] == ["fake-1f1b", "fake-async"]
    assert found["policy"] == {"fake-1f1b": "global", "fake-async": "fail"}
    assert found["config"] == {"fake-1f1b": "", "fake-async": "Fake async cannot be recovered"}
    assert "needs --microbatches >= --stages" in found["m_below_k"]
    assert (found["colour"], found["label"]) == ("#4B0A2E", "Fake async")
    assert found["schedule"] > 0
