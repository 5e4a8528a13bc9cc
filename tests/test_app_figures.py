"""The dashboard's figure builders on small recorded event tables (no Gradio, no engine run)."""
from __future__ import annotations

import plotly.graph_objects as go

from zerolock_core.rundir.metrics import Metrics
from zerolock_core.runtime.recovery_phases import INSTANTS, phases_from_instants
import numpy as np
import pytest

from zerolock_core.rundir.run_dir import RunDir
from app.figures.compare import Series, compare_memory_figure, compare_summary_figure, compare_timeline_figure
from app.explain import explain
from app.figures import KIND_COLOURS, METHOD_COLOURS, memory_figure, simulated_events, timeline_figure
from zerolock_core.telemetry.activity import bubble_fraction, live_throughput, stage_stats
from app.figures.memory import memory_grid
from zerolock_core.viz.palette import kind_label
from app.figures.training import activity_figure, training_figure
from app.figures.timeline import X_TITLE, lane_bars
from zerolock_core.schedule import Costs, LinkProfile, build_schedule

MS = 1_000_000  # ns


def ev(stage: int, kind: str, mb: int | None, t0_ms: float, t1_ms: float, act: int = 0, inflight: int = 0,
       step: int = 0, gen: int = 0, sent: int = 0, recv: int = 0) -> dict:
    return {"stage": stage, "kind": kind, "mb": mb, "t0": int(t0_ms * MS), "t1": int(t1_ms * MS),
            "act_bytes": act, "inflight": inflight, "sent": sent, "recv": recv, "step": step, "gen": gen}


# Two-stage ZeroLock, one window of two micro-batches, written by hand (times in ms from 1000).
ZEROLOCK_2X2 = [
    ev(0, "F", 0, 1000, 1010, act=2 * 2**20, inflight=1),
    ev(0, "SF", 0, 1010, 1011, act=2 * 2**20, inflight=1),
    ev(1, "RF", 0, 1000, 1011),
    ev(0, "L", 0, 1011, 1030),
    ev(1, "F", 0, 1011, 1021, act=3 * 2**20, inflight=1),
    ev(0, "F", 1, 1030, 1040, act=2 * 2**20, inflight=1),
    ev(1, "L", 0, 1021, 1040),
    ev(0, "SF", 1, 1040, 1041, act=2 * 2**20, inflight=1),
    ev(1, "RF", 1, 1040, 1041),
    ev(0, "L", 1, 1041, 1060),
    ev(1, "F", 1, 1041, 1051, act=3 * 2**20, inflight=1),
    ev(0, "STEP", None, 1060, 1062, step=1),
    ev(1, "L", 1, 1051, 1070),
    ev(1, "STEP", None, 1070, 1072, step=1),
]


CURVES = [{"chunk": f"chunk{k}", "step": [1, 2, 3], "loss": [3.0 - k, 2.5 - k, 2.0 - k]} for k in range(2)]
FINAL_METRICS = Metrics(config={}, state="finished", curves=CURVES,
                        eval={"per_chunk": [{"chunk": 0, "label_accuracy": 0.3}, {"chunk": 1, "label_accuracy": 0.5}]})


def bar_traces(fig) -> dict[str, object]:
    return {t.legendgroup: t for t in fig.data}


def test_live_figures_are_valid_plotly():
    """The live builders skip plotly's validation for speed; validating them here catches typos."""
    stats = stage_stats(ZEROLOCK_2X2, stages=2)
    many = [ev(i % 2, "F", i, i, i + 0.5) for i in range(60)]
    for fig in (timeline_figure(ZEROLOCK_2X2, stages=2, title="t"), timeline_figure([], stages=2),
                timeline_figure(many, stages=2, webgl_threshold=10), memory_figure(ZEROLOCK_2X2, stages=2, title="m"),
                memory_figure(ZEROLOCK_2X2, stages=2, measure="inflight"), activity_figure(stats, bubble=0.1),
                training_figure(None, live_curves=CURVES), training_figure(FINAL_METRICS, title="t")):
        go.Figure(fig.to_dict())  # raises ValueError on an unknown property or a bad value


@pytest.mark.parametrize("kind, stage_counts", [
    ("F", {0: 2, 1: 2}), ("L", {0: 2, 1: 2}), ("SF", {0: 2}), ("RF", {1: 2}), ("STEP", {0: 1, 1: 1}),
])
def test_timeline_bars_per_stage_per_kind(kind, stage_counts):
    fig = timeline_figure(ZEROLOCK_2X2, stages=2, title="t")
    trace = bar_traces(fig)[kind]
    assert trace.type == "bar" and trace.orientation == "h"
    assert {s: list(trace.y).count(s) for s in set(trace.y)} == stage_counts
    assert trace.marker.color == KIND_COLOURS[kind]
    assert trace.name == kind_label(kind)


def test_timeline_bases_and_durations_are_seconds_from_the_first_event():
    fig = timeline_figure(ZEROLOCK_2X2, stages=2)
    f = bar_traces(fig)["F"]
    got = sorted(zip(f.y, f.base, f.x))
    assert got == [(0, 0.0, 0.01), (0, 0.03, 0.01), (1, 0.011, 0.01), (1, 0.041, 0.01)]
    assert fig.layout.uirevision == "timeline"
    assert fig.layout.xaxis.title.text == X_TITLE == "seconds since the run started (start-up included)"


def test_timeline_lanes_stage0_on_top_and_all_stages_labelled():
    fig = timeline_figure(ZEROLOCK_2X2[:1], stages=3)  # stages without events still get a lane
    assert list(fig.layout.yaxis.tickvals) == [0, 1, 2]
    assert list(fig.layout.yaxis.ticktext) == ["stage 0", "stage 1", "stage 2"]
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # reversed: stage 0 at the top


def test_timeline_legend_order_is_stable():
    assert [lane.kind for lane in lane_bars(ZEROLOCK_2X2, stages=2, origin_ns=0)] == ["F", "L", "SF", "RF", "STEP"]


def test_timeline_window_keeps_recent_events_on_the_same_origin():
    fig = timeline_figure(ZEROLOCK_2X2, stages=2, window_s=0.015)  # last 15 ms: events ending >= 1057 ms
    drawn = sorted((t.legendgroup, b) for t in fig.data if t.type == "bar" for b in t.base)
    assert drawn == [("L", 0.041), ("L", 0.051), ("STEP", 0.06), ("STEP", 0.07)]


def test_timeline_switches_to_webgl_segments_past_the_threshold():
    many = [ev(i % 2, "F", i, i, i + 0.5) for i in range(50)]
    small = timeline_figure(many, stages=2, webgl_threshold=50)
    big = timeline_figure(many, stages=2, webgl_threshold=49)
    assert {t.type for t in small.data} == {"bar"}
    assert {t.type for t in big.data} == {"scattergl"}
    seg = big.data[0]
    assert len(seg.x) == 3 * 50 and seg.x[2] is None  # start, end, gap per bar
    assert seg.line.color == KIND_COLOURS["F"]


def test_timeline_rejects_events_outside_the_stages():
    with pytest.raises(ValueError, match="stage 1 in a 1-stage"):
        timeline_figure(ZEROLOCK_2X2, stages=1)


def test_memory_traces_share_one_time_grid():
    grid = memory_grid(ZEROLOCK_2X2, stages=2)
    assert grid.t_ms[0] == 0.0 and grid.t_ms == sorted(set(grid.t_ms))
    assert all(len(v) == len(grid.t_ms) for v in grid.values)
    at = dict(zip(grid.t_ms, zip(*grid.values)))
    assert at[10.0] == (2.0, 0.0)  # after stage 0's F: 2 MiB on stage 0, nothing yet on stage 1
    assert at[21.0] == (2.0, 3.0)  # stage 1's F holds 3 MiB while stage 0's L still runs
    assert at[30.0] == (0.0, 3.0)  # stage 0's L freed its micro-batch
    assert grid.peaks == [2.0, 3.0] and grid.unit == "MiB"
    fig = memory_figure(ZEROLOCK_2X2, stages=2)
    detail = [t for t in fig.data if t.type == "scatter" and t.legendgroup == "detail"]
    assert len(detail) == 2 and list(detail[0].x) == list(detail[1].x)  # one grid (in seconds) for every row
    assert list(detail[1].y)[list(detail[1].x).index(0.021)] == 3.0
    peaks = next(t for t in fig.data if t.type == "bar")
    assert list(peaks.x) == [2.0, 3.0] and list(peaks.y) == [0, 1]


def test_memory_peaks_from_metrics_and_inflight_measure():
    fig = memory_figure(ZEROLOCK_2X2, stages=2, peak_bytes=[5 * 2**20, 6 * 2**20])
    assert list(next(t for t in fig.data if t.type == "bar").x) == [5.0, 6.0]
    grid = memory_grid(ZEROLOCK_2X2, stages=2, measure="inflight")
    assert grid.peaks == [1, 1] and grid.unit == "micro-batches"
    with pytest.raises(ValueError, match="measure must be one of"):
        memory_grid(ZEROLOCK_2X2, stages=2, measure="rss")


def test_memory_window_starts_from_the_values_held_when_it_opens():
    grid = memory_grid(ZEROLOCK_2X2, stages=2, window_s=0.030)  # from 1042 ms on
    assert grid.t_ms[0] == 42.0
    # when it opens, stage 0 holds micro-batch 1 (F at 1030-1040, L not until 1060); stage 1 nothing
    assert [v[0] for v in grid.values] == [2.0, 0.0]
    assert grid.peaks == [2.0, 3.0]  # peaks are over the whole run


def test_memory_thinning_keeps_peaks():
    spiky = [ev(0, "F", i, i, i + 0.5, act=(2**20 if i == 333 else 0)) for i in range(1000)]
    grid = memory_grid(spiky, stages=1, max_points=100)
    assert len(grid.t_ms) <= 100 and max(grid.values[0]) == 1.0


def test_live_stats_active_fraction_and_throughput():
    stats = stage_stats(ZEROLOCK_2X2, stages=2)
    assert [s.steps for s in stats] == [1, 1]
    assert stats[0].busy_s == pytest.approx((10 + 19 + 10 + 19 + 2) / 1e3)
    assert stats[0].span_s == pytest.approx(0.062)
    assert stats[1].peak_act_bytes == 3 * 2**20
    assert 0 < bubble_fraction(stats, 0.072) < 1
    assert live_throughput(stats, elapsed_s=0.072, batch=8) == pytest.approx(8 / 0.072)


@pytest.mark.parametrize("method", ["zerolock", "gpipe", "1f1b", "pipedream", "zb-h1"])
def test_simulated_events_look_like_runtime_events(method):
    sched = build_schedule(method, stages=3, microbatches=4)
    events = simulated_events(sched, Costs(forward=0.01, local=0.02, backward=0.02, hidden_bytes=100),
                              LinkProfile.profile("ideal"))
    assert len(events) == sum(len(row) for row in sched.actions)
    assert set(events[0]) == set(ZEROLOCK_2X2[0])
    assert all(e["t1"] >= e["t0"] for e in events)
    assert sum(e["sent"] for e in events) == 100 * 4 * 2  # SF of micro-batches 0..3 on stages 0 and 1
    assert [e["step"] for e in events if e["kind"] == "STEP"] == [1, 1, 1]
    timeline_figure(events, stages=3)  # the same builders draw them


@pytest.mark.parametrize("k, m", [(2, 2), (3, 4), (4, 8)])
def test_fig1_bp_holds_m_microbatches_zerolock_one(k, m):
    e = explain(stages=k, microbatches=m, bp_method="gpipe")
    assert e.peaks["gpipe"][0] == m
    assert e.peaks["zerolock"] == (1,) * k
    assert e.makespan_ms["zerolock"] < e.makespan_ms["gpipe"]
    peak_bars = [t for t in e.memory.data if t.type == "bar"]
    assert [list(t.x) for t in peak_bars] == [[float(m)] * k, [1.0] * k]
    lanes = [t for t in e.timeline.data if t.type == "bar"]
    assert {t.legendgroup for t in lanes} >= {"F", "B", "RB", "L"}
    assert f"{m}" in e.text and "update locking" in e.text


def test_fig1_with_1f1b_holds_k_minus_s():
    e = explain(stages=4, microbatches=8, bp_method="1f1b")
    assert e.peaks["1f1b"] == (4, 3, 2, 1)
    with pytest.raises(ValueError, match="1f1b needs microbatches >= stages"):
        explain(stages=4, microbatches=2, bp_method="1f1b")


def test_fig1_with_zb_h1_holds_k_everywhere_and_is_quicker_than_1f1b():
    zb, one_f = (explain(stages=4, microbatches=8, bp_method=m) for m in ("zb-h1", "1f1b"))
    assert zb.peaks["zb-h1"] == (4, 4, 4, 4)
    assert zb.makespan_ms["zb-h1"] < one_f.makespan_ms["1f1b"]
    assert "W" in {t.legendgroup for t in zb.timeline.data if t.type == "bar"}
    assert "ZB-H1" in zb.text and "W = 10 ms" in zb.text
    with pytest.raises(ValueError, match="zb-h1 needs microbatches >= stages"):
        explain(stages=4, microbatches=2, bp_method="zb-h1")


@pytest.mark.parametrize("k, m", [(2, 4), (3, 6), (4, 9)])
def test_fig1_with_dualpipe_v_draws_devices_with_two_chunks_each_holding_k_and_a_half(k, m):
    e = explain(stages=k, microbatches=m, bp_method="dualpipe-v")
    assert e.peaks["dualpipe-v"] == (k + 0.5,) * k and e.peaks["zerolock"] == (1,) * k
    # its lanes are devices; a bar names its chunk: the V's two legs on device 0 are chunks 0 and 2k - 1
    assert list(e.timeline.layout.yaxis.ticktext) == [f"device {d}" for d in range(k)]
    forwards = next(t for t in e.timeline.data if t.type == "bar" and t.legendgroup == "F" and t.yaxis == "y")
    custom = np.asarray(forwards.customdata)  # device, micro-batch, ms, bytes, chunk
    on_device_0 = {(int(c), int(i)) for d, i, _, _, c in custom if d == 0}
    assert on_device_0 == {(c, i) for c in (0, 2 * k - 1) for i in range(m)}
    assert "chunk %{customdata[4]}" in forwards.hovertemplate
    if forwards.text:  # labelled where few enough bars are in view: the action's own string
        assert {t for t, (d, *_) in zip(forwards.text, custom) if t and d == 0} <= {f"{c}F{i}" for c, i in on_device_0}
    assert f"into {2 * k} chunks" in e.text and "device 0 … " in e.text
    with pytest.raises(ValueError, match="dualpipe-v needs microbatches >= 2 x devices"):
        explain(stages=k, microbatches=2 * k - 1, bp_method="dualpipe-v")


def test_compare_figures_share_axes_and_colour_by_method():
    run = dict(events=ZEROLOCK_2X2, stages=2)
    metrics = Metrics.from_json({"throughput_samples_per_s": 10.0, "eval": {"label_accuracy": 0.5},
                                 "bubble_fraction": 0.2,
                                 "per_stage": [{"peak_activation_bytes": 2**20, "peak_inflight_microbatches": 1}] * 2})
    series = [Series(label="ZeroLock K=2", method="zerolock", metrics=metrics, **run),
              Series(label="BP reference", method="bp", events=[], stages=2,
                     metrics=Metrics.from_json({"samples_per_s": 12.0, "eval": {"label_accuracy": 0.6}}))]
    tl = compare_timeline_figure([series[0], series[0], series[1]])
    assert tl.layout.xaxis.matches == "x2"  # both drawn runs share one time axis
    assert any("Not shown: BP reference" in a.text for a in tl.layout.annotations)
    assert len([t for t in tl.data if t.type == "bar"]) == 10  # only the runs with telemetry are drawn
    mem = compare_memory_figure(series)
    assert [list(t.x) for t in mem.data if t.type == "bar"] == [[1.0, 1.0]]  # measured peaks from metrics
    summary = compare_summary_figure(series)
    tput = summary.data[0]
    assert list(tput.y) == [10.0, 12.0] and list(tput.x) == ["ZeroLock", "BP reference"]
    assert summary.data[2].text[1] == "n/a"  # a reference run has no bubble


def test_watch_view_of_a_recorded_run(tmp_path):
    """What the Watch tab draws for a run read back from disk (no engine attached)."""
    from app.controller import Tracked
    from app.watch_view import status_markdown, watch_view

    cfg = {"train": {"runtime": "pipeline", "stages": 2, "batch": 8, "microbatches": 2, "steps": 1}}
    t = Tracked(name="r", rd=RunDir(tmp_path), cfg=cfg, method="zerolock", batch="", events=list(ZEROLOCK_2X2),
                state="interrupted")
    v = watch_view(t, window_s=20.0)
    md = status_markdown(t, t.status())
    assert "ZeroLock · K=2 · b=8 · m=2" in md and "interrupted" in md
    assert "samples/s" in md  # live throughput from the events: 1 step x 8 samples / 72 ms
    assert {tr.legendgroup for tr in v.timeline.data if tr.type == "bar"} == {"F", "L", "SF", "RF", "STEP"}
    assert [row[2] for row in v.table] == [1, 1]  # steps per stage
    assert v.training is not None and not v.training.data  # a placeholder until metrics exist


def with_loss(e: dict, loss: float) -> dict:
    return {**e, "loss": loss}


@pytest.mark.parametrize("events, method, m, expected", [
    # ZeroLock: every stage's L carries its micro-batch's local loss; a step's curve point is their mean
    ([with_loss(ev(0, "L", 0, 0, 1), 2.0), with_loss(ev(0, "L", 1, 1, 2), 4.0),
      with_loss(ev(1, "L", 0, 1, 2), 1.0), ev(0, "F", 2, 2, 3)],
     "zerolock", 2, [("chunk0", [1], [3.0]), ("chunk1", [1], [1.0])]),
    # a step still going shows what it has so far; steps are 1-based like metrics.json's
    ([with_loss(ev(0, "L", 0, 0, 1), 2.0), with_loss(ev(0, "L", 1, 1, 2), 4.0), with_loss(ev(0, "L", 2, 2, 3), 5.0)],
     "zerolock", 2, [("chunk0", [1, 2], [3.0, 5.0])]),
    # a replayed micro-batch (after a restore) counts once, with its latest loss
    ([with_loss(ev(1, "L", 0, 0, 1), 9.0), with_loss(ev(1, "L", 0, 5, 6), 3.0)],
     "zerolock", 1, [("chunk1", [1], [3.0])]),
    # backprop: only the last stage's B has a loss, the one global loss
    ([ev(0, "B", 0, 0, 1), with_loss(ev(1, "B", 0, 0, 1), 1.5), with_loss(ev(1, "B", 1, 1, 2), 2.5)],
     "gpipe", 2, [("global", [1], [2.0])]),
    ([ev(0, "F", 0, 0, 1)], "zerolock", 2, []),
])
def test_live_loss_curves_from_events(events, method, m, expected):
    from app.figures.live_loss import live_loss_curves

    curves = live_loss_curves(events, microbatches=m, method=method)
    assert [(c["chunk"], c["step"], c["loss"]) for c in curves] == expected


def test_live_loss_curves_reject_bad_microbatches():
    from app.figures.live_loss import live_loss_curves

    with pytest.raises(ValueError, match="microbatches"):
        live_loss_curves([], microbatches=0, method="zerolock")


def test_watch_view_draws_loss_curves_live_before_metrics(tmp_path):
    from app.controller import Tracked
    from app.watch_view import watch_view

    cfg = {"train": {"runtime": "pipeline", "stages": 2, "batch": 8, "microbatches": 2, "steps": 1}}
    events = [with_loss(e, 1.0 + e["stage"]) if e["kind"] == "L" else e for e in ZEROLOCK_2X2]
    t = Tracked(name="r", rd=RunDir(tmp_path), cfg=cfg, method="zerolock", batch="", events=events, state="running")
    fig = watch_view(t, window_s=20.0).training
    assert [(tr.name, list(tr.y)) for tr in fig.data] == [("chunk 0 local loss", [1.0]), ("chunk 1 local loss", [2.0])]
    assert "when the run ends" in fig.layout.annotations[-1].text
    go.Figure(fig.to_dict())


# --- the failure story: a two-stage ZeroLock run whose stage 1 is killed in step 2 -------------------
# Times in ms; the run starts at 1000 ms (stage 0's process spawned). Stage 1 dies at 3090 ms, is
# detected at 3240 ms, its new process starts (STARTUP gen 1) until 5240 ms, restores its checkpoint
# (3.4 ms), replays micro-batches 2 and 3 and finishes step 2.
T_FAIL, T_DETECT, T_RESTORED, T_END = 3090, 3240, 5243.4, 5266.0
HIDDEN = 4096


def _failure_run() -> list[dict]:
    e = [ev(0, "STARTUP", None, 1000, 3000), ev(1, "STARTUP", None, 1100, 3000)]
    for s0, step in ((3000, 0), (3062, 1)):  # stage 0: two steps of two micro-batches
        mb = 2 * step
        e += [ev(0, "F", mb, s0, s0 + 10, act=2 * 2**20, inflight=1, step=step),
              ev(0, "SF", mb, s0 + 10, s0 + 11, act=2 * 2**20, inflight=1, step=step, sent=HIDDEN),
              ev(0, "L", mb, s0 + 11, s0 + 30, step=step),
              ev(0, "F", mb + 1, s0 + 30, s0 + 40, act=2 * 2**20, inflight=1, step=step),
              ev(0, "SF", mb + 1, s0 + 40, s0 + 41, act=2 * 2**20, inflight=1, step=step, sent=HIDDEN),
              ev(0, "L", mb + 1, s0 + 41, s0 + 60, step=step),
              ev(0, "STEP", None, s0 + 60, s0 + 62, step=step + 1)]
    e += [ev(1, "RF", 0, 3000, 3011, recv=HIDDEN), ev(1, "F", 0, 3011, 3021, act=3 * 2**20, inflight=1),
          ev(1, "L", 0, 3021, 3040), ev(1, "RF", 1, 3040, 3041, recv=HIDDEN),
          ev(1, "F", 1, 3041, 3051, act=3 * 2**20, inflight=1), ev(1, "L", 1, 3051, 3070),
          ev(1, "STEP", None, 3070, 3072, step=1),
          ev(1, "RF", 2, 3072, 3073, step=1, recv=HIDDEN), ev(1, "F", 2, 3073, 3083, act=3 * 2**20, inflight=1, step=1),
          # killed at 3090 during L2; the new process (gen 1):
          ev(1, "STARTUP", None, T_DETECT, 5240, gen=1),
          ev(1, "RESTORE", None, 5240, T_RESTORED, step=1, gen=1),
          ev(1, "REPLAY", 2, T_RESTORED, 5254.6, act=3 * 2**20, inflight=1, step=1, gen=1),
          ev(1, "L", 2, 5254.6, 5260, step=1, gen=1),
          ev(1, "REPLAY", 3, 5260, T_END, act=3 * 2**20, inflight=1, step=1, gen=1),
          ev(1, "L", 3, T_END, 5285, step=1, gen=1),
          ev(1, "STEP", None, 5285, 5287, step=2, gen=1)]
    return e


FAILURE_RUN = _failure_run()
ORIGIN_MS = 1000


T_RESTORE = 5240  # the RESTORE event's start; it connects at once (relinked = restored)


def recovery(kind: str = "local", *, open_: bool = False, stage: int = 1) -> dict:
    """The engine's record of this failure (the phases from its instants, as the coordinator writes them)."""
    instants = {"t_fail_ns": int(T_FAIL * MS), "t_detect_ns": int(T_DETECT * MS)}
    if not open_:
        instants.update(t_restore_ns=int(T_RESTORE * MS), t_restored_ns=int(T_RESTORED * MS),
                        t_linked_ns=int(T_RESTORED * MS), t_end_ns=int(T_END * MS))
    phases = phases_from_instants(instants)
    return {"stage": stage, "kind": kind, "mode": "kill", "gen": 1, **phases, "total_s": sum(phases.values()),
            **{k: instants.get(k) for k in INSTANTS}, "open": open_}


def secs(t_ms: float) -> float:
    return round((t_ms - ORIGIN_MS) / 1e3, 6)


def view_span(fig) -> float:
    """Seconds the plot area shows: the x range when set, else the drawn bars' extent."""
    if fig.layout.xaxis.range is not None:
        lo, hi = fig.layout.xaxis.range
        return hi - lo
    bars = [t for t in fig.data if t.type == "bar"]
    return max(b + x for t in bars for b, x in zip(t.base, t.x)) - min(b for t in bars for b in t.base)


def bar_px(fig, kind: str) -> list[float]:
    """Drawn width in pixels of every bar of `kind`, at the figure's width (plotly's default 700)."""
    from app.figures.timeline import DEFAULT_WIDTH_PX, PLOT_MARGIN_PX

    plot = (fig.layout.width or DEFAULT_WIDTH_PX) - PLOT_MARGIN_PX
    return [x * plot / view_span(fig) for x in bar_traces(fig)[kind].x]


@pytest.mark.parametrize("kind, lanes, label", [
    ("local", [1], "detect 150 ms · restart 2.00 s"),  # ZeroLock: only the failed stage restarts
    ("global", [0, 1], "global rollback · detect 150 ms · restart 2.00 s"),  # GPipe / 1F1B: every stage rolls back
])
def test_failure_kill_marker_and_restart_band(kind, lanes, label):
    fig = timeline_figure(FAILURE_RUN, stages=2, recoveries=[recovery(kind)])
    go.Figure(fig.to_dict())  # valid plotly (shape labels included)
    kill = next(t for t in fig.data if t.name == "failure")
    assert kill.marker.symbol == "x" and list(kill.x) == [secs(T_FAIL)] and list(kill.y) == [1]
    assert list(kill.text) == ["kill"] and "detect 150 ms" in kill.hovertext[0]
    bands = [sh for sh in fig.layout.shapes if sh.name == "failure-band"]
    assert sorted(int(b.y0 + 0.5) for b in bands) == lanes
    assert all((b.x0, b.x1) == (secs(T_FAIL), secs(T_RESTORE)) for b in bands)  # up to the RESTORE bar
    notes = [a for a in fig.layout.annotations if a.name == "failure-band-label"]  # over the restart's bars
    assert sorted(int(a.y - 0.5) for a in notes) == lanes and all(a.x == secs(T_FAIL) for a in notes)
    assert all(a.text == label for a in notes)
    detected = [sh for sh in fig.layout.shapes if sh.name == "failure-detected"]
    assert [d.x0 for d in detected] == [secs(T_DETECT)]


def test_an_open_failure_band_runs_to_the_figure_end():
    fig = timeline_figure(FAILURE_RUN[:-7], stages=2, recoveries=[recovery(open_=True)])  # still restarting
    band = next(sh for sh in fig.layout.shapes if sh.name == "failure-band")
    last_end = max(e["t1"] for e in FAILURE_RUN[:-7]) / MS
    assert band.x1 == secs(last_end)
    assert "so far" in next(a.text for a in fig.layout.annotations if a.name == "failure-band-label")
    now = timeline_figure(FAILURE_RUN[:-7], stages=2, recoveries=[recovery(open_=True)], now_ns=int(6000 * MS))
    assert next(sh for sh in now.layout.shapes if sh.name == "failure-band").x1 == secs(6000)


@pytest.mark.parametrize("slow_from_ms, x_range, shaded", [
    (T_FAIL, None, (secs(T_FAIL), None)),  # from where it turned slow to the figure's end
    (T_FAIL, (0.0, secs(T_FAIL) + 0.5), (secs(T_FAIL), secs(T_FAIL) + 0.5)),  # cut at the view's right edge
    (ORIGIN_MS - 500, None, (None, None)),  # slow before the first event: shaded from the view's left edge
    (1e9, None, ()),  # after everything drawn: nothing
])
def test_a_straggler_shades_its_lane_from_where_it_turned_slow_and_names_its_factor(slow_from_ms, x_range, shaded):
    straggler = {"stage": 1, "failure": "1@3:slow=3", "mode": "slow", "factor": 3.0, "t_fail": int(slow_from_ms * MS)}
    fig = timeline_figure(FAILURE_RUN, stages=2, stragglers=[straggler], x_range=x_range)
    go.Figure(fig.to_dict())
    bands = [sh for sh in fig.layout.shapes if sh.name == "straggler-band"]
    notes = [a for a in fig.layout.annotations if a.name == "straggler-label"]
    if not shaded:
        assert bands == [] and notes == []
        return
    (band,), (note,) = bands, notes
    last_end = secs(max(e["t1"] for e in FAILURE_RUN) / MS)
    first = secs(min(e["t0"] for e in FAILURE_RUN) / MS)
    assert (band.y0, band.y1) == (0.5, 1.5) and band.line.dash == "dash"
    assert band.x0 == (shaded[0] if shaded[0] is not None else first)
    assert band.x1 == (shaded[1] if shaded[1] is not None else last_end)
    assert note.text == "straggler: 3× slower from here" and note.x == band.x0
    assert not any(t.name == "failure" for t in fig.data)  # nothing failed


@pytest.mark.parametrize("x_range", [None, (1.5, 4.5), (0.0, 60.0)])
@pytest.mark.parametrize("kind, true_ms", [("RESTORE", 3.4), ("REPLAY", 11.2)])
def test_restore_and_replay_bars_are_visible_and_labelled(x_range, kind, true_ms):
    from app.figures.timeline import MIN_RECOVERY_PX

    fig = timeline_figure(FAILURE_RUN, stages=2, recoveries=[recovery()], x_range=x_range)
    assert min(bar_px(fig, kind)) >= MIN_RECOVERY_PX - 1e-6  # ≥ 6 px at the default width
    trace = bar_traces(fig)[kind]
    assert trace.customdata[0][2] == true_ms  # the tooltip keeps the true duration (ms)
    assert trace.showlegend  # drawn visibly, so in the legend
    labels = [a.text for a in fig.layout.annotations if a.text.startswith(kind)]
    # the record's restore phase is the RESTORE bar; the replay phase runs from relinked to caught up
    assert labels == (["RESTORE · 3.4 ms"] if kind == "RESTORE" else ["REPLAY ×2 · replay 23 ms"])


def test_timeline_axis_is_seconds_since_the_run_started_startup_included():
    fig = timeline_figure(FAILURE_RUN, stages=2, recoveries=[recovery()])
    assert fig.layout.xaxis.title.text == X_TITLE
    f = bar_traces(fig)["F"]
    assert min(f.base) == secs(3000)  # stage 0's first forward, 2 s after its process was spawned
    startup = bar_traces(fig)["STARTUP"]
    assert sorted(zip(startup.y, startup.base)) == [(0, 0.0), (1, 0.1), (1, secs(T_DETECT))]
    assert startup.marker.pattern.shape == "/"
    words = sorted(a.text for a in fig.layout.annotations if a.text in ("start-up", "restart"))
    assert words == ["restart", "start-up", "start-up"]
    assert fig.layout.xaxis.rangeslider.visible and fig.layout.uirevision == "timeline"


@pytest.mark.parametrize("kind, row, template", [
    # numbers per bar (stage, micro-batch, true duration in ms, bytes), worded by the trace's template
    ("F", [0, 0, 10.0, 0], "stage %{customdata[0]} · F%{customdata[1]}<br>start %{base:.3f} s · "
                           "duration %{customdata[2]:,.2f} ms<extra></extra>"),
    ("SF", [0, 0, 1.0, HIDDEN], "stage %{customdata[0]} · SF%{customdata[1]}<br>start %{base:.3f} s · "
                                "duration %{customdata[2]:,.2f} ms<br>%{customdata[3]:,.0f} bytes sent<extra></extra>"),
    ("RF", [1, 0, 11.0, HIDDEN], "%{customdata[3]:,.0f} bytes received"),
    ("STEP", [0, -1, 2.0, 0], "stage %{customdata[0]} · STEP<br>"),  # no micro-batch
    # start-ups: words (a few bars), with their phases when recorded
    ("STARTUP", ["stage 0 · start-up", "2,000 ms (2.00 s)", ""], "%{customdata[0]}<br>start %{base:.3f} s · "
                                                                 "duration %{customdata[1]}<extra></extra>"),
])
def test_tooltip_shows_stage_action_start_duration_bytes(kind, row, template):
    fig = timeline_figure(FAILURE_RUN, stages=2)
    trace = bar_traces(fig)[kind]
    assert list(trace.customdata[0]) == row
    assert template in trace.hovertemplate
    assert "→" not in trace.hovertemplate and "%{y}" not in trace.hovertemplate  # was "stage stage 0 · F298
    # 35417.98 → 35440.84 ms (35440.84 ms)": the y tick text doubled "stage", the bracket showed the end


def test_startup_phases_in_the_tooltip():
    phased = [{**e, "phases": {"importing": [e["t0"], e["t0"] + 500 * MS], "loading": [e["t0"] + 500 * MS, e["t1"]]}}
              if e["kind"] == "STARTUP" else e for e in FAILURE_RUN]
    trace = bar_traces(timeline_figure(phased, stages=2))["STARTUP"]
    assert trace.customdata[0][2] == "importing 0.5 s · loading 1.5 s" and "%{customdata[2]}" in trace.hovertemplate


def test_step_boundaries_and_microbatch_labels():
    fig = timeline_figure(FAILURE_RUN, stages=2)
    steps = next(t for t in fig.data if t.legendgroup == "step-boundary")
    ends = sorted({x for x in steps.x if x is not None})
    assert ends == sorted({secs(e["t1"] / MS) for e in FAILURE_RUN if e["kind"] == "STEP"})
    def step_labels(f):
        return [a.text for a in f.layout.annotations if a.yref == "paper" and a.xref == "x"]

    assert step_labels(fig) == ["step 1"]  # step 2 ends 9 px later at the default width: its label is left out
    assert set(bar_traces(fig)["F"].text) == {""}  # 10 ms bars in a 4.3 s view: 1.4 px, no room for "F0"
    zoom = timeline_figure(FAILURE_RUN, stages=2, x_range=(1.99, 2.13))
    assert step_labels(zoom) == ["step 1", "2"]
    assert list(bar_traces(zoom)["F"].text)[:2] == ["F0", "F1"] and bar_traces(zoom)["L"].text[0] == "L0"
    assert bar_traces(zoom)["SF"].text is None and bar_traces(zoom)["STARTUP"].text is None  # sends: no labels
    few = timeline_figure(FAILURE_RUN, stages=2, label_max_bars=10, x_range=(1.99, 2.13))
    assert bar_traces(few)["F"].text is None  # too many bars: no labels


def test_legend_lists_only_kinds_drawn_visibly():
    fig = timeline_figure(FAILURE_RUN, stages=2, recoveries=[recovery()])
    legend = {t.legendgroup for t in fig.data if t.showlegend}
    assert {"F", "L", "STARTUP", "RESTORE", "REPLAY", "failure", "step-boundary"} <= legend
    assert not legend & {"SF", "STEP", "SB", "RB", "B"}  # 1-2 ms bars in a 4.3 s view; B, SB, RB: none at all
    assert "RF" in legend  # its first wait (11 ms) is 1.6 px wide
    zoomed = timeline_figure(FAILURE_RUN, stages=2, x_range=(2.0, 2.1))  # 100 ms: the sends are 6 px wide
    assert {"SF", "RF", "STEP"} <= {t.legendgroup for t in zoomed.data if t.showlegend}
    outage = timeline_figure(FAILURE_RUN, stages=2, x_range=(2.3, 4.0))  # nothing but the restart in view
    assert {t.legendgroup for t in outage.data if t.showlegend and t.type == "bar"} == {"STARTUP"}


def test_explain_legend_leaves_out_zero_cost_actions():
    e = explain(stages=3, microbatches=4, bp_method="gpipe")
    legend = {t.legendgroup for t in e.timeline.data if t.showlegend}
    assert {"F", "B", "L", "RB"} <= legend and not legend & {"SF", "SB", "STEP"}  # ideal link, free sends/steps


@pytest.mark.parametrize("recs, before, after, expected", [
    ([], 5, 5, None),
    ([{**recovery(), "t_fail_ns": None}], 5, 5, None),  # an older record without instants
    ([recovery()], 1.0, 2.0, (secs(T_FAIL) - 1.0, secs(T_END) + 2.0)),
    ([recovery(open_=True)], 1.0, 2.0, (secs(T_FAIL) - 1.0, secs(T_DETECT) + 2.0)),
    ([recovery()], 5.0, 0.0, (0.0, secs(T_END))),  # never before the run's start
    ([{**recovery(), "t_fail_ns": int(1500 * MS), "t_end_ns": int(1600 * MS)}, recovery()], 0.5, 0.5,
     (secs(T_FAIL) - 0.5, secs(T_END) + 0.5)),  # the most recent failure
])
def test_failure_window(recs, before, after, expected):
    from app.figures.timeline import failure_window

    got = failure_window(FAILURE_RUN, recs, before_s=before, after_s=after)
    assert got == (pytest.approx(expected) if expected else None)
    if got:  # pinned on it, the marker and the REPLAY are in view
        fig = timeline_figure(FAILURE_RUN, stages=2, recoveries=recs, x_range=got)
        kill = next(t for t in fig.data if t.name == "failure")
        assert got[0] <= kill.x[-1] <= got[1]


def test_step_aggregate_view_shows_the_outage_as_unrecorded_time():
    from app.figures.step_view import step_aggregate_figure, step_totals

    totals = step_totals(FAILURE_RUN, stages=2)
    assert sorted(totals[0]) == [1, 2] and sorted(totals[1]) == [1, 2]
    assert totals[1][2]["idle"] > 2.0  # the ~2.2 s outage inside stage 1's step 2
    assert totals[0][1]["F"] == pytest.approx(0.020)
    fig = step_aggregate_figure(FAILURE_RUN, stages=2, recoveries=[recovery()])
    go.Figure(fig.to_dict())
    assert fig.layout.yaxis.domain[0] > fig.layout.yaxis2.domain[1]  # stage 0's row above stage 1's
    idle = [t for t in fig.data if t.legendgroup == "idle"]
    assert [t.yaxis for t in idle] == ["y2"]  # stage 0 never stopped: no unrecorded time
    kill = next(t for t in fig.data if t.name == "failure")
    assert (kill.yaxis, list(kill.x)) == ("y2", [2])
    # the 2.2 s outage would flatten the 72 ms step: stage 1's axis is clipped and the bar labelled
    assert fig.layout.yaxis.range is None and fig.layout.yaxis2.range[1] == pytest.approx(2.5 * 0.072)  # step 1: 72 ms
    assert [a.text for a in fig.layout.annotations] == ["↑ 2.2 s"]
    legend = {t.legendgroup for t in fig.data if t.showlegend}
    assert {"F", "L", "SF", "idle", "failure", "RESTORE", "REPLAY"} <= legend  # visible in the clipped row
    assert "STARTUP" not in legend  # start-ups are not part of any step


@pytest.mark.parametrize("unit, title, stage1_peak", [("MiB", "MiB", 3.0), ("microbatches", "micro-batches", 1.0),
                                                      (None, "MiB", 3.0)])
def test_memory_small_multiples_and_unit_toggle(unit, title, stage1_peak):
    from app.figures.memory import step_peaks

    fig = memory_figure(FAILURE_RUN, stages=2, unit=unit)
    go.Figure(fig.to_dict())
    rows = [fig.layout.yaxis, fig.layout.yaxis2]
    assert rows[0].domain[0] > rows[1].domain[1]  # one row per stage, stage 0 on top, not overlapping
    assert [r.title.text for r in rows] == [f"stage 0<br>{title}", f"stage 1<br>{title}"]
    assert rows[0].range == rows[1].range  # one value scale
    assert fig.layout.xaxis2.matches == "x" and fig.layout.xaxis2.title.text == X_TITLE  # shared time axis
    env = [t for t in fig.data if t.type == "scatter" and t.line.shape == "hv" and t.fill == "tozeroy"]
    assert [t.yaxis for t in env] == ["y", "y2"] and max(y for y in env[1].y if y is not None) == stage1_peak
    peaks = next(t for t in fig.data if t.type == "bar")
    assert list(peaks.y) == [0, 1] and peaks.x[1] == stage1_peak  # the peak bars stay
    per_step = step_peaks(FAILURE_RUN, stages=2, measure="inflight" if unit == "microbatches" else "act_bytes")
    assert [p.step for p in per_step[1]] == [1, 2, 2]  # step 2 again after the restart (a new process)


def test_memory_detail_only_when_few_actions_are_in_view():
    many = FAILURE_RUN + [ev(0, "F", 100 + i, 6000 + i, 6000.5 + i, step=3) for i in range(700)]
    assert any(t.legendgroup == "detail" for t in memory_figure(FAILURE_RUN, stages=2).data)
    assert not any(t.legendgroup == "detail" for t in memory_figure(many, stages=2).data)
    zoom = memory_figure(many, stages=2, x_range=(1.9, 2.3))
    assert any(t.legendgroup == "detail" for t in zoom.data) and list(zoom.layout.xaxis.range) == [1.9, 2.3]


def test_memory_measured_peaks_per_unit():
    mib = memory_figure(FAILURE_RUN, stages=2, unit="MiB", peak_bytes=[5 * 2**20, 6 * 2**20],
                        peak_inflight=[2, 2])
    mb = memory_figure(FAILURE_RUN, stages=2, unit="microbatches", peak_bytes=[5 * 2**20, 6 * 2**20],
                       peak_inflight=[2, 2])
    assert list(next(t for t in mib.data if t.type == "bar").x) == [5.0, 6.0]
    assert list(next(t for t in mb.data if t.type == "bar").x) == [2.0, 2.0]
    with pytest.raises(ValueError, match="unit must be one of"):
        memory_figure(FAILURE_RUN, stages=2, unit="GiB")


def test_compare_chance_line_loss_overlay_and_predicted_timeline():
    from app.figures.chance import chance_level
    from app.figures.compare import LOCAL_LOSS_TITLE, TASK_LOSS_TITLE, compare_loss_figure

    cfg = {"data": {"dataset": "topics"}, "link": {"profile": "none"},
           "train": {"method": "zerolock", "stages": 2, "microbatches": 2, "steps": 2, "inflight_depth": 2}}
    # ZeroLock's local losses add a KL term: its last chunk's `loss` (2.2) is below BP's, its task CE (2.9) is not
    curves = [{"chunk": "chunk0", "step": [1, 2], "loss": [3.0, 2.5], "task": [3.1, 2.8]},
              {"chunk": "chunk1", "step": [1, 2], "loss": [2.6, 2.2], "task": [3.2, 2.9]}]
    metrics = Metrics(config=cfg, state="finished", eval={"label_accuracy": 0.3}, curves=curves)
    bp = Metrics(config={}, state="finished", eval={"label_accuracy": 0.31},
                 curves=[{"chunk": "global", "step": [1, 2], "loss": [3.1, 2.4]}])
    series = [Series(label="ZeroLock K=2", method="zerolock", events=FAILURE_RUN, stages=2, metrics=metrics),
              Series(label="BP", method="bp", events=[], stages=2, metrics=bp)]
    assert chance_level(metrics) == (0.25, "chance 1/4")
    assert chance_level(Metrics(config={}, state="finished", eval={"majority_rate": 0.297})) == \
        (0.297, "majority class")
    summary = compare_summary_figure(series)
    go.Figure(summary.to_dict())
    line = next(sh for sh in summary.layout.shapes if sh.type == "line")
    assert (line.y0, line.y1) == (0.25, 0.25) and line.name == "chance"
    assert "eval label accuracy (- - chance 1/4: 0.25)" in [a.text for a in summary.layout.annotations]
    losses = [t for t in summary.data if t.type == "scatter"]
    assert [t.name for t in losses] == ["ZeroLock", "ZeroLock chunk 0 (local)", "BP reference"]
    # one axis holds only the task loss of every method (comparable); the local objective has its own panel
    task = [t for t in losses if t.xaxis == "x"]
    assert [(t.name, list(t.y)) for t in task] == [("ZeroLock", [3.2, 2.9]), ("BP reference", [3.1, 2.4])]
    assert [t.name for t in losses if t.xaxis != "x"] == ["ZeroLock chunk 0 (local)"]
    assert task[0].line.color == METHOD_COLOURS["zerolock"] and task[1].line.color == METHOD_COLOURS["bp"]
    assert task[0].line.dash != task[1].line.dash and task[0].marker.symbol != task[1].marker.symbol
    titles = [a.text for a in summary.layout.annotations]
    assert TASK_LOSS_TITLE in titles and LOCAL_LOSS_TITLE in titles
    loss = compare_loss_figure(series)
    assert [t.name for t in loss.data] == [t.name for t in losses] and loss.layout.xaxis.dtick == 1
    alone = compare_summary_figure(series[1:])  # no local method: no local panel
    assert LOCAL_LOSS_TITLE not in [a.text for a in alone.layout.annotations]
    tl = compare_timeline_figure(series, initial_steps=None)
    titles = [a.text for a in tl.layout.annotations]
    assert "ZeroLock: predicted by the simulator (the run's mean action times): 2 steps in 0.13 s<br>" \
           "F+L per micro-batch 30 / 22 ms" in titles  # what each stage's actions cost, on the figure
    predicted_f = [t for t in tl.data if t.type == "bar" and t.legendgroup == "F" and t.yaxis == "y2"]
    assert predicted_f and len(predicted_f[0].x) == 2 * 2 * 2  # 2 stages x 2 micro-batches x 2 steps
    assert predicted_f[0].x[0] == pytest.approx(0.011)  # the run's mean forward (10 ms) + its send (1 ms)


@pytest.mark.parametrize("kind, rows", [("local", ["y2"]), ("global", ["y", "y2"])])
def test_memory_rows_show_the_outage(kind, rows):
    fig = memory_figure(FAILURE_RUN, stages=2, recoveries=[recovery(kind)])
    go.Figure(fig.to_dict())
    assert list(fig.layout.xaxis.range) == [0.0, secs(5287)]  # from the run's start, like the timeline
    bands = [sh for sh in fig.layout.shapes if sh.name == "failure-band"]
    assert [b.yref for b in bands] == [f"{r} domain" for r in rows]
    assert all((b.x0, b.x1) == (secs(T_FAIL), secs(T_RESTORE)) for b in bands)  # the timeline's band
    detail = next(t for t in fig.data if t.legendgroup == "detail" and t.yaxis == "y2")
    at = dict(zip(detail.x, detail.y))
    assert at[secs(T_FAIL)] == 0.0  # the killed process's activations are gone
    env = next(t for t in fig.data if t.fill == "tozeroy" and t.yaxis == "y2")
    points = list(zip(env.x, env.y))
    i = points.index((secs(3083), 0.0))  # the envelope drops to 0 where the killed process's step ended,
    assert points[i - 1] == (secs(3083), 3.0) and points[i + 1] == (secs(5240), 3.0)  # until the restore


def test_kill_label_sits_on_a_white_background_left_of_the_marker():
    fig = timeline_figure(FAILURE_RUN, stages=2, recoveries=[recovery()])
    label = next(a for a in fig.layout.annotations if a.name == "failure-label")
    assert (label.text, label.x, label.y, label.xanchor) == ("kill", secs(T_FAIL), 1, "right")
    assert next(t for t in fig.data if t.name == "failure").mode == "markers"


def test_failures_outside_the_drawn_events_are_left_out():
    """A recent window after an old failure: no band or marker that would stretch the autorange."""
    late = [e for e in FAILURE_RUN if e["t0"] >= 5240 * MS]
    fig = timeline_figure(late, stages=2, origin_ns=ORIGIN_MS * MS, recoveries=[recovery()])
    assert not [sh for sh in fig.layout.shapes if sh.name == "failure-band"] or \
        all(sh.x0 >= secs(5240) for sh in fig.layout.shapes if sh.name == "failure-band")
    assert not any(t.name == "failure" for t in fig.data)
    pinned = timeline_figure(late, stages=2, origin_ns=ORIGIN_MS * MS, recoveries=[recovery()], x_range=(2.0, 4.5))
    assert any(t.name == "failure" for t in pinned.data)  # inside the range asked for


@pytest.mark.parametrize("metrics, level", [
    (Metrics(config={"data": {"dataset": "topics"}}, state="finished", curves=CURVES,
             eval={"per_chunk": [{"chunk": 0, "label_accuracy": 0.3}]}), 0.25),  # 1 / the 4 label words
    (Metrics(config={}, state="finished", curves=CURVES, eval={"majority_rate": 0.297, "per_chunk": []}), 0.297),
    (Metrics(config={}, state="finished", curves=CURVES, eval={"per_chunk": []}), None),  # unknown: no line
])
def test_the_watch_accuracy_panel_draws_the_chance_line_across_it(metrics, level):
    fig = training_figure(metrics)
    go.Figure(fig.to_dict())
    lines = [t for t in fig.data if t.xaxis == "x3"]
    assert [list(t.y) for t in lines] == ([[level, level]] if level is not None else [])
    if level is not None:
        assert lines[0].yaxis == "y2" and fig.layout.xaxis3.overlaying == "x2"  # over the accuracy panel
