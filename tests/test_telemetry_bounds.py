"""Telemetry that stays bounded on a long run: the trace keeps its last steps action by action and
one slice per earlier step (recovery actions always whole); metrics.json keeps a summary of the loss
curves (every step is in curves.jsonl)."""
import json

import pytest

from zerolock_core.loss_curves import read_curves, summarise, write_curves
from zerolock_core.telemetry.trace import chrome_trace

KINDS = ("F", "SF", "L")


def long_run(steps: int, stages: int = 2):
    """Three actions per step and stage, 1 ms each; a RESTORE on stage 1 at step 3."""
    events, t = [], 0
    for step in range(steps):
        for s in range(stages):
            for kind in KINDS:
                events.append({"stage": s, "kind": kind, "mb": step, "t0": t, "t1": t + 1_000_000, "step": step,
                               "act_bytes": 10, "gen": 0})
                t += 1_000_000
    events.append({"stage": 1, "kind": "RESTORE", "mb": None, "t0": t, "t1": t + 5, "step": 3, "gen": 1})
    return events


@pytest.mark.parametrize("steps,detail", [(10, 200), (1000, 200), (1000, 50)])
def test_the_trace_keeps_the_last_steps_whole_and_one_slice_per_earlier_step(steps, detail):
    trace = chrome_trace(long_run(steps), stages=2, detail_steps=detail)["traceEvents"]
    whole = [e for e in trace if e.get("ph") == "X" and e["cat"] in KINDS]
    slices = [e for e in trace if e.get("ph") == "X" and e["cat"] == "step"]
    kept = min(steps, detail)
    assert len(whole) == 2 * kept * len(KINDS)
    assert len(slices) == 2 * (steps - kept)
    assert all(e["args"] == {f"{k} ms": 1.0 for k in sorted(KINDS)} for e in slices)
    assert [e["name"] for e in trace if e.get("cat") == "RESTORE"] == ["RESTORE"]  # always kept whole
    if steps > detail:
        assert len(json.dumps(trace)) < len(json.dumps(chrome_trace(long_run(steps), stages=2,
                                                                    detail_steps=steps)["traceEvents"])) / 2


def curves_of(steps: int):
    return [{"chunk": f"chunk{k}", "step": list(range(1, steps + 1)), "loss": [float(i) for i in range(steps)],
             "task": [float(i) for i in range(steps)], "consistency": [None] * steps} for k in range(2)]


@pytest.mark.parametrize("steps,points", [(10, 10), (400, 400), (1000, 334), (20_000, 400)])
def test_metrics_keeps_a_bounded_summary_of_the_loss_curves(steps, points):
    summary, note = summarise(curves_of(steps))
    assert all(len(c["step"]) == points for c in summary)
    assert (note == "") == (points == steps)
    assert summary[0]["step"][-1] == steps  # each point sits at the last step it covers
    per = -(-steps // 400)
    assert summary[0]["loss"][0] == pytest.approx(sum(range(min(per, steps))) / min(per, steps))


def test_curves_jsonl_holds_every_step_and_reads_back(tmp_path):
    curves = curves_of(50)
    write_curves(tmp_path / "curves.jsonl", curves)
    assert read_curves(tmp_path / "curves.jsonl") == curves
    assert not list(tmp_path.glob(".*tmp*"))
