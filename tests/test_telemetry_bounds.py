"""Telemetry that stays bounded on a long run: the trace keeps its last steps action by action and
one slice per earlier step (recovery actions always whole); metrics.json keeps a summary of the loss
curves (every step is in curves.jsonl)."""
import json

import pytest

from zerolock_core.rundir.loss_curves import read_curves, summarise, write_curves
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


def test_events_go_to_one_file_per_segment_of_steps_and_a_cursor_pages_through_them(tmp_path):
    from zerolock_core.rundir.run_dir import RunDir
    from zerolock_core.telemetry.events import SEGMENT_STEPS, Event, EventWriter, read_events

    rd = RunDir(tmp_path)
    writers = [EventWriter(rd.event_file) for _ in range(2)]  # two stages append to the same files
    steps = [0, 1, SEGMENT_STEPS - 1, SEGMENT_STEPS, 2 * SEGMENT_STEPS + 3, SEGMENT_STEPS + 1]  # the last: a replay
    for i, step in enumerate(steps):
        for s, w in enumerate(writers):
            w.write(Event(stage=s, kind="F", mb=i, t0=i, t1=i + 1, step=step))
    assert [p.name for p in rd.event_files()] == ["000000.jsonl", "000001.jsonl", "000002.jsonl"]
    events, cursor = read_events(rd.event_files())
    assert sorted((e["stage"], e["step"]) for e in events) == sorted((s, st) for st in steps for s in range(2))
    assert read_events(rd.event_files(), cursor=cursor) == ([], cursor)  # nothing new, nothing re-read
    with open(rd.event_file(1), "a") as f:  # a line still being written is left for the next call
        f.write('{"stage": 0, "kind": "F"')
    assert read_events(rd.event_files(), cursor=cursor)[0] == []
    with open(rd.event_file(1), "a") as f:
        f.write(', "mb": 9, "t0": 9, "t1": 10, "step": 300}\n')
    new, _ = read_events(rd.event_files(), cursor=cursor)
    assert [e["mb"] for e in new] == [9]
    for w in writers:
        w.close()


def test_a_run_of_an_earlier_version_is_read_from_its_one_events_jsonl(tmp_path):
    from zerolock_core.rundir.run_dir import RunDir
    from zerolock_core.telemetry.events import read_events

    (tmp_path / "events.jsonl").write_text('{"stage": 0, "kind": "F", "mb": 0, "t0": 0, "t1": 1}\n')
    assert RunDir(tmp_path).holds_a_run()
    assert [e["kind"] for e in read_events(RunDir(tmp_path).event_files())[0]] == ["F"]
