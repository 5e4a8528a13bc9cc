"""Uneven hardware on real processes (runtime/pace.py): a slowed stage's compute is stretched by its
factor in the recorded events, and nothing it computes changes — the weights equal the even run's bitwise."""
import time

import pytest

from benchmarks.faults import bitwise_equal, case_config, run_with_deadline
from zerolock_core.cli import summary
from zerolock_core.config.run_config import replace
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.telemetry.events import read_events
from zerolock_core.vocabulary import is_busy

pytestmark = pytest.mark.slow

STEPS = 4


def run(out, **train):
    cfg = replace(case_config(out, method="zerolock", stages=2, steps=STEPS, ckpt_every=0), train=train)
    metrics, ended = run_with_deadline(cfg)
    assert ended and metrics.state == "finished", metrics
    return metrics


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("uneven")
    return root, {name: run(root / name, **train) for name, train in (
        ("even", {}), ("speed", {"stage_speed": (1.0, 0.5)}), ("straggler", {"failures": ("1@2:slow=3",)}))}


def stretch(out, stage, *, from_step=0, below_step=STEPS + 1) -> float:
    """A stage's compute with the wait it added, over its compute — what pace.py stretches: each action's CPU
    time, or its wall time (less the wait) where that is less."""
    events = [e for e in read_events(RunDir(out).event_files())[0]
              if e["stage"] == stage and is_busy(e["kind"]) and from_step <= e["step"] < below_step]
    computed = sum(min(e["t1"] - e["t0"] - e["paced_ns"], e["cpu_ns"]) for e in events)
    return (computed + sum(e["paced_ns"] for e in events)) / computed


@pytest.mark.parametrize("name,stage,steps,factor", [
    ("even", 1, (0, STEPS + 1), 1.0),
    ("speed", 0, (0, STEPS + 1), 1.0),
    ("speed", 1, (0, STEPS + 1), 2.0),  # speed 0.5
    ("straggler", 1, (0, 2), 1.0),  # before step 2 (an action's step is the steps done when it ended)
    ("straggler", 1, (3, STEPS + 1), 3.0),
])
def test_a_slowed_stage_records_its_compute_stretched_by_its_factor(runs, name, stage, steps, factor):
    """Unslowed: not one nanosecond waited. Slowed: never less than the factor — how much later than asked
    a sleep wakes on a busy machine is the kernel's (test_pace_waits_exactly_the_factor has the exact wait)."""
    root, _ = runs
    got = stretch(root / name, stage, from_step=steps[0], below_step=steps[1])
    assert got == 1.0 if factor == 1.0 else got >= factor * (1 - 1e-6)


@pytest.mark.parametrize("speed,straggle,t0,t1,cpu_ns,cpu_time,waited", [
    (0.5, 1.0, 0, 1_000, 1_000, True, 1_000),     # half speed: as long again
    (1.0, 3.0, 0, 1_000, 800, True, 1_600),       # a straggler x3 on its 800 ns of CPU time
    (0.4, 1.0, 0, 1_000, 400, True, 600),         # the CPU time where less than the wall time
    (0.5, 1.0, 0, 1_000, 5_000, True, 1_000),     # several threads: the wall time
    (0.5, 1.0, 0, 1_000, 400, False, 1_000),      # a GPU stage: the wall time always
    (1.0, 1.0, 0, 1_000, 1_000, True, 0),         # even: no wait at all
])
def test_pace_waits_exactly_the_factor(monkeypatch, speed, straggle, t0, t1, cpu_ns, cpu_time, waited):
    from zerolock_core.runtime import pace as pace_module

    clock = [t1]  # a fake monotonic clock that a sleep advances exactly as asked
    monkeypatch.setattr(pace_module.time, "monotonic_ns", lambda: clock[0])
    monkeypatch.setattr(pace_module.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + round(s * 1e9)))
    pace = pace_module.Pace(speed=speed, cpu_time=cpu_time)
    pace.straggle = straggle
    assert pace.stretch(t0, t1, cpu_ns) == (t1 + waited, waited)


@pytest.mark.parametrize("name", ["speed", "straggler"])
def test_a_slowed_run_ends_bitwise_equal_to_the_even_run(runs, name):
    root, _ = runs
    assert bitwise_equal(root / "even", root / name)


def test_a_straggler_is_recorded_as_injected_and_needs_no_recovery(runs):
    root, metrics = runs
    m = metrics["straggler"]
    assert m.failures_not_injected == [] and m.recovery == [] and m.restarts in ([], [0, 0])
    assert RunDir(root / "straggler").injected_marker(1, "1@2:slow=3").exists()
    fired = [(s["stage"], s["failure"], s["mode"], s["factor"]) for s in m.stragglers]
    assert fired == [(1, "1@2:slow=3", "slow", 3.0)]
    assert "straggler 1@2:slow=3: stage 1 computed 3x slower" in summary(m, str(root / "straggler"))


def test_metrics_give_each_stage_its_busy_and_idle_seconds(runs):
    _, metrics = runs
    for s in metrics["speed"].per_stage:
        assert s["busy_s"] > 0 and s["idle_s"] >= 0 and s["span_s"] == pytest.approx(s["busy_s"] + s["idle_s"])


def test_a_straggler_from_the_dashboard_slows_its_stage_from_its_next_step(tmp_path):
    from benchmarks.faults import DEADLINE_S
    from zerolock_core.jobs.pipeline_job import Run

    run = Run(case_config(tmp_path, method="zerolock", stages=2, steps=12, ckpt_every=0)).start()
    while run.status().steps_done < 1:
        assert not run.done
        time.sleep(0.05)
    run.inject_failure(1, "slow")
    metrics = run.wait(timeout=DEADLINE_S)
    assert metrics.state == "finished" and metrics.recovery == []
    [fired] = metrics.stragglers
    assert (fired["stage"], fired["failure"], fired["factor"]) == (1, "api:slow:1", 3.0)
    after = [e for e in read_events(RunDir(tmp_path).event_files())[0]
             if e["stage"] == 1 and is_busy(e["kind"]) and e["t0"] > fired["t_fail"]]
    assert after and all(e["paced_ns"] > 0 for e in after)
