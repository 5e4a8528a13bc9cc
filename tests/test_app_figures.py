"""The dashboard's figure builders on small recorded event tables (no Gradio, no engine run)."""
from __future__ import annotations

import plotly.graph_objects as go
import pytest

from app.compare_figures import Series, compare_memory_figure, compare_summary_figure, compare_timeline_figure
from app.explain import explain
from app.figures import KIND_COLOURS, memory_figure, simulated_events, timeline_figure
from app.live_stats import bubble_fraction, live_throughput, stage_stats
from app.memory import memory_grid
from app.palette import kind_label
from app.run_figures import activity_figure
from app.timeline import lane_bars
from zerolock_core.schedule import Costs, Kind, Link, build_schedule

MS = 1_000_000  # ns


def ev(stage: int, kind: str, mb: int | None, t0_ms: float, t1_ms: float, act: int = 0, inflight: int = 0,
       step: int = 0) -> dict:
    return {"stage": stage, "kind": kind, "mb": mb, "t0": int(t0_ms * MS), "t1": int(t1_ms * MS),
            "act_bytes": act, "inflight": inflight, "sent": 0, "recv": 0, "step": step, "gen": 0}


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


def bar_traces(fig) -> dict[str, object]:
    return {t.legendgroup: t for t in fig.data}


def test_live_figures_are_valid_plotly():
    """The live builders skip plotly's validation for speed; validating them here catches typos."""
    stats = stage_stats(ZEROLOCK_2X2, stages=2)
    many = [ev(i % 2, "F", i, i, i + 0.5) for i in range(60)]
    for fig in (timeline_figure(ZEROLOCK_2X2, stages=2, title="t"), timeline_figure([], stages=2),
                timeline_figure(many, stages=2, webgl_threshold=10), memory_figure(ZEROLOCK_2X2, stages=2, title="m"),
                memory_figure(ZEROLOCK_2X2, stages=2, measure="inflight"), activity_figure(stats, bubble=0.1)):
        go.Figure(fig.to_dict())  # raises ValueError on an unknown property or a bad value


def test_kind_colours_cover_every_schedule_kind_and_differ():
    assert {k.value for k in Kind} <= set(KIND_COLOURS)
    assert len(set(KIND_COLOURS.values())) == len(KIND_COLOURS)


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


def test_timeline_bases_and_durations_are_ms_from_the_first_event():
    fig = timeline_figure(ZEROLOCK_2X2, stages=2)
    f = bar_traces(fig)["F"]
    got = sorted(zip(f.y, f.base, f.x))
    assert got == [(0, 0.0, 10.0), (0, 30.0, 10.0), (1, 11.0, 10.0), (1, 41.0, 10.0)]
    assert fig.layout.uirevision == "timeline"


def test_timeline_lanes_stage0_on_top_and_all_stages_labelled():
    fig = timeline_figure(ZEROLOCK_2X2[:1], stages=3)  # stages without events still get a lane
    assert list(fig.layout.yaxis.tickvals) == [0, 1, 2]
    assert list(fig.layout.yaxis.ticktext) == ["stage 0", "stage 1", "stage 2"]
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # reversed: stage 0 at the top


def test_timeline_legend_order_is_stable():
    assert [lane.kind for lane in lane_bars(ZEROLOCK_2X2, stages=2, origin_ns=0)] == ["F", "L", "SF", "RF", "STEP"]


def test_timeline_window_keeps_recent_events_on_the_same_origin():
    fig = timeline_figure(ZEROLOCK_2X2, stages=2, window_s=0.015)  # last 15 ms: events ending >= 1057 ms
    drawn = sorted((t.legendgroup, b) for t in fig.data for b in t.base)
    assert drawn == [("L", 41.0), ("L", 51.0), ("STEP", 60.0), ("STEP", 70.0)]


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
    lines = [t for t in fig.data if t.type == "scatter"]
    assert len(lines) == 2 and list(lines[0].x) == list(lines[1].x)
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


@pytest.mark.parametrize("method", ["zerolock", "gpipe", "1f1b", "pipedream"])
def test_simulated_events_look_like_runtime_events(method):
    sched = build_schedule(method, stages=3, microbatches=4)
    events = simulated_events(sched, Costs(forward=0.01, local=0.02, backward=0.02, hidden_bytes=100),
                              Link.profile("ideal"))
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


def test_compare_figures_share_axes_and_colour_by_method():
    run = dict(events=ZEROLOCK_2X2, stages=2)
    metrics = {"throughput_samples_per_s": 10.0, "eval": {"label_accuracy": 0.5}, "bubble_fraction": 0.2,
               "per_stage": [{"peak_activation_bytes": 2**20, "peak_inflight_microbatches": 1}] * 2}
    series = [Series(label="ZeroLock K=2", method="zerolock", metrics=metrics, **run),
              Series(label="BP reference", method="bp", events=[], stages=2,
                     metrics={"samples_per_s": 12.0, "eval": {"label_accuracy": 0.6}})]
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
    from app.watch_view import watch_view

    cfg = {"train": {"runtime": "pipeline", "stages": 2, "batch": 8, "microbatches": 2, "steps": 1}}
    t = Tracked(name="r", dir=tmp_path, cfg=cfg, method="zerolock", batch="", events=list(ZEROLOCK_2X2),
                state="interrupted")
    v = watch_view(t, window_s=20.0)
    assert "ZeroLock · K=2 · b=8 · m=2" in v.status_md and "interrupted" in v.status_md
    assert "samples/s" in v.status_md  # live throughput from the events: 1 step x 8 samples / 72 ms
    assert {tr.legendgroup for tr in v.timeline.data} == {"F", "L", "SF", "RF", "STEP"}
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
    from app.live_loss import live_loss_curves

    curves = live_loss_curves(events, microbatches=m, method=method)
    assert [(c["chunk"], c["step"], c["loss"]) for c in curves] == expected


def test_live_loss_curves_reject_bad_microbatches():
    from app.live_loss import live_loss_curves

    with pytest.raises(ValueError, match="microbatches"):
        live_loss_curves([], microbatches=0, method="zerolock")


def test_watch_view_draws_loss_curves_live_before_metrics(tmp_path):
    from app.controller import Tracked
    from app.watch_view import watch_view

    cfg = {"train": {"runtime": "pipeline", "stages": 2, "batch": 8, "microbatches": 2, "steps": 1}}
    events = [with_loss(e, 1.0 + e["stage"]) if e["kind"] == "L" else e for e in ZEROLOCK_2X2]
    t = Tracked(name="r", dir=tmp_path, cfg=cfg, method="zerolock", batch="", events=events, state="running")
    fig = watch_view(t, window_s=20.0).training
    assert [(tr.name, list(tr.y)) for tr in fig.data] == [("chunk 0 local loss", [1.0]), ("chunk 1 local loss", [2.0])]
    assert "when the run ends" in fig.layout.annotations[-1].text
    go.Figure(fig.to_dict())
