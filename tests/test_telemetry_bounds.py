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


# ---- old segments compacted: the events grow with the run's summary, not its actions -------------
def pipeline_events(steps: int, *, stages: int = 3, m: int = 4, gen: int = 0, t: int = 10**15):
    """What a K-stage ZeroLock run appends: per micro-batch RF, F, SF, L, then STEP (every 2nd step a CKPT),
    with the step counted as the executor counts it; a RESTORE at step 0 of a generation > 0."""
    events = []
    for s in range(stages):
        clock = t + s * 1000
        if gen:
            events.append({"stage": s, "kind": "RESTORE", "mb": None, "t0": clock, "t1": clock + 5000, "step": 0,
                           "gen": gen, "recv": 77})
            clock += 5000
        for step in range(steps):
            for i in range(m):
                mb = step * m + i
                for kind, dur in (("RF", 300), ("F", 900), ("SF", 200), ("L", 700)):
                    e = {"stage": s, "kind": kind, "mb": mb, "t0": clock, "t1": clock + dur, "act_bytes": 1000 * (i + 1),
                         "inflight": i + 1, "sent": 4096 if kind == "SF" else 0, "recv": 4096 if kind == "RF" else 0,
                         "step": step, "gen": gen, "loss": 2.0 + mb / 1000 if kind == "L" else None, "paced_ns": 0,
                         "cpu_ns": dur}
                    events.append(e)
                    clock += dur + 50
            events.append({"stage": s, "kind": "STEP", "mb": None, "t0": clock, "t1": clock + 400, "step": step + 1,
                           "gen": gen, "act_bytes": 0, "inflight": 0})
            clock += 450
            if (step + 1) % 2 == 0:
                events.append({"stage": s, "kind": "CKPT", "mb": None, "t0": clock, "t1": clock + 800,
                               "step": step + 1, "gen": gen})
                clock += 850
    return events


def written(tmp_path, events):
    from zerolock_core.rundir.run_dir import RunDir
    from zerolock_core.telemetry.events import Event, EventWriter

    rd = RunDir(tmp_path)
    writers = {}
    for e in sorted(events, key=lambda e: e["t1"]):
        w = writers.setdefault(e["stage"], EventWriter(rd.event_file))
        w.write(Event(**{k: v for k, v in e.items()}))
    for w in writers.values():
        w.close()
    return rd


def events_bytes(rd) -> int:
    return sum(p.stat().st_size for p in rd.event_files())


def test_compacted_segments_give_every_total_the_views_and_the_record_read(tmp_path):
    from app.figures.live_loss import live_loss_curves
    from app.figures.step_view import step_totals
    from zerolock_core.telemetry.activity import stage_stats
    from zerolock_core.telemetry.compaction import RAW_STEPS
    from zerolock_core.telemetry.events import SEGMENT_STEPS, compact_old_segments, read_events

    steps = 2 * SEGMENT_STEPS + RAW_STEPS
    rd = written(tmp_path, pipeline_events(steps) + pipeline_events(5, gen=1, t=2 * 10**15))
    before, _ = read_events(rd.event_files())
    saved = compact_old_segments(rd.event_files(), below_step=steps - RAW_STEPS)
    after, _ = read_events(rd.event_files())
    assert saved > 0 and len(after) < len(before) * 0.6  # two segments of three compacted
    assert stage_stats(after, stages=3) == stage_stats(before, stages=3)  # busy, span, peaks, bytes, actions
    flat = [{(s, n, k): v for s, per in step_totals(x, stages=3).items() for n, kinds in per.items()
             for k, v in kinds.items()} for x in (before, after)]
    assert flat[1] == pytest.approx(flat[0], abs=1e-12)  # the whole-run view: seconds per step, kind, idle
    lossy = dict(microbatches=4, method="zerolock")
    curves = [[(c["chunk"], n, x) for c in live_loss_curves(x, **lossy) for n, x in zip(c["step"], c["loss"])]
              for x in (before, after)]
    assert [c[:2] for c in curves[1]] == [c[:2] for c in curves[0]]  # the live loss curve: every step
    assert [c[2] for c in curves[1]] == pytest.approx([c[2] for c in curves[0]], rel=1e-6)
    kept = [e for e in after if e["kind"] == "RESTORE"]  # recovery actions stay whole
    assert kept == [e for e in before if e["kind"] == "RESTORE"] and len(kept) == 3
    trace_before, trace_after = (chrome_trace(x, stages=3)["traceEvents"] for x in (before, after))
    slices = [[(e["tid"], e["name"], e["ts"], e["dur"]) for e in t if e.get("cat") == "step"]
              for t in (trace_before, trace_after)]
    assert slices[0] == slices[1] and slices[0]
    assert compact_old_segments(rd.event_files(), below_step=steps - RAW_STEPS) == 0  # once is enough


@pytest.mark.parametrize("stages", [2, 3])
def test_the_events_grow_with_the_runs_summary_not_its_actions(tmp_path, stages):
    """Two runs, one twice as long: once the old segments are compacted, each further step costs a
    fraction of what its actions would (the last RAW_STEPS stay whole, whatever the length)."""
    from zerolock_core.telemetry.compaction import RAW_STEPS, compactable_below
    from zerolock_core.telemetry.events import compact_old_segments

    size = {}
    for steps in (400, 800):
        rd = written(tmp_path / f"s{steps}", pipeline_events(steps, stages=stages))
        raw = events_bytes(rd)
        compact_old_segments(rd.event_files(), below_step=compactable_below([steps] * stages, resumable=steps))
        size[steps] = (raw, events_bytes(rd))
    raw_per_step = (size[800][0] - size[400][0]) / 400
    compacted_per_step = (size[800][1] - size[400][1]) / 400
    assert compacted_per_step < raw_per_step / 4
    assert compacted_per_step < 400 * stages  # about one short row per stage and step
    assert size[400][1] < size[400][0] / 2


def test_a_reader_that_read_a_segment_as_actions_does_not_read_it_again_once_compacted(tmp_path):
    from zerolock_core.telemetry.events import SEGMENT_STEPS, compact_old_segments, read_events

    rd = written(tmp_path, pipeline_events(SEGMENT_STEPS + 2, stages=2))
    live, cursor = read_events(rd.event_files())
    compact_old_segments(rd.event_files(), below_step=SEGMENT_STEPS)
    new, cursor = read_events(rd.event_files(), cursor=cursor)
    assert new == []  # nothing twice, nothing cut in the middle of a line
    fresh, _ = read_events(rd.event_files())  # a reader that comes later gets the rows' events
    assert len(fresh) < len(live) and {e["kind"] for e in fresh} == {e["kind"] for e in live}
    assert read_events(rd.event_files(), cursor={p.name: 10 for p in rd.event_files()})[0] is not None


@pytest.mark.parametrize("stage_steps, resumable, below", [
    ([500, 480], 470, 380),  # the slowest stage, less the window the views read action by action
    ([500, 480], 300, 300),  # a rollback or a resume may go back to the newest common checkpoint
    ([500, 480], None, 380),  # no checkpoints: nothing goes back
    ([50, 60], 40, 0),
])
def test_only_what_no_process_writes_again_is_compacted(stage_steps, resumable, below):
    from zerolock_core.telemetry.compaction import compactable_below

    assert compactable_below(stage_steps, resumable=resumable) == below
