"""Discrete-event simulator: deadlock detection, timing model, metrics (modelled time only)."""

from __future__ import annotations

import math

import pytest

from zerolock_core.schedule import (
    LINK_PROFILES,
    METHODS,
    Costs,
    Deadlock,
    LinkProfile,
    Schedule,
    build_schedule,
    inflight_peak,
    schedulable,
    simulate,
    textbook_bubble,
)

IDEAL = LinkProfile()
SLOW_TO_FAST = ("constrained", "mobile", "wifi", "local", "ideal")


def _grid(method, ks=range(1, 9), ms=range(1, 17), windows=(1, 2)):
    for k in ks:
        for m in ms:
            if not schedulable(method, stages=k, microbatches=m):
                continue
            for w in windows:
                yield k, m, w


# --- no deadlock for any built schedule -----------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("limit", [None, 2])
def test_built_schedules_never_deadlock(method, limit):
    costs = Costs(forward=1.0, local=1.5, backward=2.0, step=0.5, hidden_bytes=64, grad_bytes=64)
    link = LinkProfile(bandwidth_bytes_per_s=32.0, latency_s=0.5)
    for k, m, w in _grid(method):
        sched = build_schedule(method, stages=k, microbatches=m, windows=w)
        result = simulate(sched, costs=costs, link=link, inflight_limit=limit)
        assert len(result.records) == sum(len(row) for row in sched.actions)
        assert result.inflight_peak == tuple(inflight_peak(sched, s) for s in range(k)), (k, m, w)
        assert all(series[-1][1] == 0 for series in result.inflight)  # every activation released
        assert sum(result.bytes_sent) == sum(result.bytes_received)
        assert result.makespan_s == max(r.end_s for r in result.records)


# --- deadlocks in broken schedules ----------------------------------------------------------

BROKEN = [
    pytest.param(
        [["0F0", "0SF0", "0RB0", "0B0"],
         ["1RF0", "1F0", "1RB0", "1SF0", "1B0", "1SB0"],  # waits on RB before sending what stage 2 needs
         ["2RF0", "2F0", "2B0", "2SB0"]],
        None, {0: "0RB0", 1: "1RB0", 2: "2RF0"}, id="recv-before-send",
    ),
    pytest.param(
        [["0F0", "0SF0", "0L0"], ["1RF0", "1F0", "1RF1", "1F1"]],
        None, {1: "1RF1"}, id="receive-without-send",
    ),
    pytest.param(
        [["0RB0", "0F0", "0SF0"], ["1RF0", "1F0", "1B0", "1SB0"]],
        None, {0: "0RB0", 1: "1RF0"}, id="both-receive-first",
    ),
    pytest.param(
        [["0F0", "0SF0", "0F1", "0SF1", "0F2", "0SF2"], ["1RF0", "1RF1", "1RF2", "1F0", "1F1", "1F2"]],
        2, {0: "0SF2", 1: "1RF2"}, id="inbound-buffer-full",
    ),
]


@pytest.mark.parametrize("rows, limit, stuck", BROKEN)
def test_deadlock_names_stuck_stages(rows, limit, stuck):
    sched = Schedule.from_strings(rows)
    with pytest.raises(Deadlock) as info:
        simulate(sched, costs=Costs(), link=IDEAL, inflight_limit=limit)
    assert isinstance(info.value, ValueError)
    assert {s: str(a) for s, a in info.value.stuck.items()} == stuck
    for s, action in stuck.items():
        assert f"stage {s} waits at {action}" in str(info.value)
    if limit is not None:
        assert "buffer full" in info.value.reasons[0]


def test_buffer_deadlock_disappears_with_a_bigger_buffer():
    sched = Schedule.from_strings(BROKEN[3].values[0])
    for limit in (None, 3, 4):
        simulate(sched, costs=Costs(), link=IDEAL, inflight_limit=limit)


@pytest.mark.parametrize("limit", [0, -1, 1.5, True])
def test_bad_inflight_limit(limit):
    with pytest.raises(ValueError, match="inflight_limit"):
        simulate(build_schedule("gpipe", stages=2, microbatches=2), costs=Costs(), link=IDEAL, inflight_limit=limit)


# --- exact makespans with an infinite link --------------------------------------------------

@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("m", [1, 2, 5, 8, 16])
@pytest.mark.parametrize("t_f, t_b", [(1.0, 1.0), (1.0, 2.0), (2.0, 1.0)])
@pytest.mark.parametrize("windows", [1, 3])
def test_makespan_formulas(k, m, t_f, t_b, windows):
    costs = Costs(forward=t_f, backward=t_b, local=t_b)
    expected = {
        "gpipe": windows * (m + k - 1) * (t_f + t_b),
        "1f1b": windows * (m + k - 1) * (t_f + t_b),
        "pipedream": (m * windows + k - 1) * (t_f + t_b),  # no flush: one fill for all windows
        "zerolock": (k - 1) * t_f + m * windows * (t_f + t_b),  # early forwarding: fill costs tF per stage
    }
    for method, makespan in expected.items():
        if method == "1f1b" and m < k:
            continue
        result = simulate(build_schedule(method, stages=k, microbatches=m, windows=windows), costs=costs, link=IDEAL)
        assert result.makespan_s == makespan, method


@pytest.mark.parametrize("k, m", [(1, 1), (2, 2), (4, 8), (8, 8), (8, 16)])
def test_bubble_matches_textbook(k, m):
    gpipe = simulate(build_schedule("gpipe", stages=k, microbatches=m), costs=Costs(), link=IDEAL)
    assert gpipe.bubble_fraction == pytest.approx(textbook_bubble("gpipe", k, m))
    one_f = simulate(build_schedule("1f1b", stages=k, microbatches=m), costs=Costs(backward=2.0), link=IDEAL)
    assert one_f.bubble_fraction / (1 - one_f.bubble_fraction) == pytest.approx(textbook_bubble("1f1b", k, m))


@pytest.mark.parametrize(
    "method, k, m, expected",
    [("gpipe", 4, 4, 3 / 7), ("gpipe", 1, 9, 0.0), ("1f1b", 4, 4, 3 / 4), ("1f1b", 2, 8, 1 / 8)],
)
def test_textbook_bubble_values(method, k, m, expected):
    assert textbook_bubble(method, k, m) == pytest.approx(expected)


@pytest.mark.parametrize("args", [("zerolock", 2, 2), ("gpipe", 0, 2), ("1f1b", 2, 0)])
def test_textbook_bubble_rejects_bad_input(args):
    with pytest.raises(ValueError):
        textbook_bubble(*args)


@pytest.mark.parametrize("k, m", [(2, 2), (2, 8), (3, 3), (4, 4), (4, 16), (8, 8), (8, 16)])
def test_throughput_order_with_equal_costs(k, m):
    costs = Costs(forward=1.0, local=2.0, backward=2.0)
    thr = {
        method: simulate(build_schedule(method, stages=k, microbatches=m), costs=costs, link=IDEAL)
        .throughput_microbatches_per_s
        for method in ("zerolock", "1f1b", "gpipe")
    }
    assert thr["zerolock"] > thr["1f1b"] >= thr["gpipe"]


# --- link model ------------------------------------------------------------------------------

@pytest.mark.parametrize("k, m", [(2, 4), (2, 16), (4, 4), (4, 8), (8, 8), (8, 16)])
def test_slower_link_hurts_bp_methods_more(k, m):
    costs = Costs(forward=0.05, local=0.05, backward=0.05, hidden_bytes=1_000_000, grad_bytes=1_000_000)
    relative = {}
    for method in METHODS:
        if not schedulable(method, stages=k, microbatches=m):
            continue
        thr = [
            simulate(build_schedule(method, stages=k, microbatches=m, windows=2), costs=costs,
                     link=LinkProfile.profile(name)).throughput_microbatches_per_s
            for name in SLOW_TO_FAST
        ]
        assert thr == sorted(thr), method  # slower link -> lower or equal throughput
        relative[method] = [t / thr[-1] for t in thr]
    for method in relative:
        if method != "zerolock":
            assert all(z >= b for z, b in zip(relative["zerolock"], relative[method])), method


@pytest.mark.parametrize(
    "nbytes, bandwidth, latency, arrival",
    [(3000, 1000.0, 0.25, 1 + 0.25 + 3.0), (0, 1000.0, 0.5, 1.5), (512, math.inf, 0.125, 1.125),
     (1024, 256.0, 0.0, 5.0), (0, math.inf, 0.0, 1.0)],
)
def test_single_transfer_arrives_after_latency_plus_bytes_over_bandwidth(nbytes, bandwidth, latency, arrival):
    sched = build_schedule("zerolock", stages=2, microbatches=1)
    link = LinkProfile(bandwidth_bytes_per_s=bandwidth, latency_s=latency)
    assert link.transfer_s(nbytes) == arrival - 1
    result = simulate(sched, costs=Costs(forward=1.0, hidden_bytes=nbytes), link=link)
    send, recv = result.record_of("0SF0"), result.record_of("1RF0")
    assert (send.start_s, send.end_s) == (1.0, 1.0)  # asynchronous for the sender
    assert (recv.start_s, recv.end_s) == (0.0, arrival)
    assert result.busy_s == (2.0, 2.0)  # waiting is idle, not busy


def test_transfers_on_one_hop_are_serialised():
    sched = build_schedule("zerolock", stages=2, microbatches=2)
    link = LinkProfile(bandwidth_bytes_per_s=1000.0, latency_s=0.25)
    result = simulate(sched, costs=Costs(forward=1.0, local=0.0, hidden_bytes=3000), link=link)
    assert result.record_of("0SF1").start_s == 2.0
    assert result.record_of("1RF0").end_s == 1 + 3 + 0.25
    assert result.record_of("1RF1").end_s == 1 + 3 + 3 + 0.25  # waits for the hop, not just 2 + 3.25


def test_gradients_use_their_own_direction():
    sched = build_schedule("gpipe", stages=2, microbatches=1)
    link = LinkProfile(bandwidth_bytes_per_s=1.0, latency_s=0.0)
    result = simulate(sched, costs=Costs(forward=1.0, backward=1.0, hidden_bytes=2, grad_bytes=3), link=link)
    assert result.record_of("1RF0").end_s == 3.0
    assert result.record_of("0RB0").end_s == 3 + 1 + 1 + 3
    assert result.makespan_s == 9.0


@pytest.mark.parametrize(
    "method, sent, received",
    [("gpipe", (30, 51, 21), (21, 51, 30)), ("zerolock", (30, 30, 0), (0, 30, 30)),
     ("1f1b", (30, 51, 21), (21, 51, 30)), ("pipedream", (30, 51, 21), (21, 51, 30))],
)
def test_bytes_per_stage(method, sent, received):
    sched = build_schedule(method, stages=3, microbatches=3)
    result = simulate(sched, costs=Costs(hidden_bytes=10, grad_bytes=7), link=IDEAL)
    assert (result.bytes_sent, result.bytes_received) == (sent, received)


@pytest.mark.parametrize("limit, sf2_end", [(None, 3.0), (1, 6.0), (2, 3.0)])
def test_inflight_limit_blocks_the_sender(limit, sf2_end):
    sched = build_schedule("zerolock", stages=2, microbatches=3)
    costs = Costs(forward=1.0, local=0.0, per_stage={1: {"F": 5.0}})
    result = simulate(sched, costs=costs, link=IDEAL, inflight_limit=limit)
    assert result.record_of("0SF2").start_s == 3.0
    assert result.record_of("0SF2").end_s == sf2_end
    assert result.busy_s[0] == 3.0


@pytest.mark.parametrize(
    "name, megabits, latency",
    [("local", 1000, 0.0), ("wifi", 300, 0.005), ("mobile", 100, 0.015), ("constrained", 50, 0.030)],
)
def test_link_profiles(name, megabits, latency):
    link = LinkProfile.profile(name)
    assert link == LINK_PROFILES[name]
    assert link.bandwidth_bytes_per_s == megabits * 1e6 / 8
    assert link.latency_s == latency


@pytest.mark.parametrize(
    "make",
    [lambda: LinkProfile.profile("lan"), lambda: LinkProfile(bandwidth_bytes_per_s=0), lambda: LinkProfile(latency_s=-1.0),
     lambda: Costs(forward=-1.0), lambda: Costs(hidden_bytes=-1), lambda: Costs(backward=math.inf),
     lambda: Costs(per_stage=3)],
)
def test_bad_costs_and_links(make):
    with pytest.raises(ValueError):
        make()


# --- costs and metrics -----------------------------------------------------------------------

def test_per_stage_costs_mapping_and_callable_agree():
    sched = build_schedule("zerolock", stages=3, microbatches=4)
    table = {0: {"F": 1.0, "L": 1.0}, 1: {"F": 2.0, "L": 3.0}, 2: {"F": 1.0, "L": 0.5}}
    by_map = simulate(sched, costs=Costs(per_stage=table), link=IDEAL)
    by_fn = simulate(sched, costs=Costs(per_stage=lambda s, kind: table[s].get(kind, 0.0)), link=IDEAL)
    assert by_map == by_fn
    assert by_map.busy_s == (8.0, 20.0, 6.0)
    assert by_map.makespan_s == 1 + 4 * 5  # stage 1 is the bottleneck; stage 2 ends first
    assert by_map.active_fraction[1] == pytest.approx(20 / 21)
    assert by_map.idle_s == (13.0, 1.0, 15.0)


def test_bad_per_stage_cost_is_reported():
    sched = build_schedule("gpipe", stages=2, microbatches=1)
    with pytest.raises(ValueError, match="cost of F on stage 0"):
        simulate(sched, costs=Costs(per_stage=lambda s, kind: -1.0), link=IDEAL)


def test_replay_and_checkpoint_are_compute_actions():
    sched = Schedule.from_strings([["0F0", "0REPLAY0", "0B0", "0STEP", "0CKPT"]])
    result = simulate(sched, costs=Costs(replay=2.5, step=0.25, ckpt=0.125), link=IDEAL)
    assert result.makespan_s == 1 + 2.5 + 1 + 0.25 + 0.125
    assert result.busy_s == (result.makespan_s,) and result.bubble_fraction == 0.0
    assert result.inflight == (((0.0, 0), (0.0, 1), (4.5, 0)),)


def test_metrics_of_single_stage():
    result = simulate(build_schedule("gpipe", stages=1, microbatches=4, windows=2), costs=Costs(), link=IDEAL)
    assert result.makespan_s == 16.0
    assert result.throughput_microbatches_per_s == 0.5
    assert result.bubble_fraction == 0.0 and result.active_fraction == (1.0,)
    assert result.inflight_peak == (4,)


def test_simulation_is_deterministic():
    sched = build_schedule("pipedream", stages=4, microbatches=4, windows=3)
    link = LinkProfile.profile("wifi")
    costs = Costs(forward=0.01, backward=0.02, hidden_bytes=100_000, grad_bytes=100_000)
    assert simulate(sched, costs=costs, link=link, inflight_limit=2) == simulate(
        sched, costs=costs, link=link, inflight_limit=2
    )


# --- uneven stages -----------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["zerolock", "1f1b", "gpipe", "zb-h1"])
def test_a_half_speed_middle_stage_doubles_its_busy_time_and_bounds_the_step(method):
    sched = build_schedule(method, stages=3, microbatches=6)
    costs = dict(forward=1.0, local=1.0, backward=2.0, weight_grad=0.5 if method == "zb-h1" else 0.0, step=0.25)
    even = simulate(sched, costs=Costs(**costs), link=IDEAL)
    slow = simulate(sched, costs=Costs(**costs, speeds=(1.0, 0.5, 1.0)), link=IDEAL)
    assert slow.busy_s == (even.busy_s[0], 2 * even.busy_s[1], even.busy_s[2])
    assert slow.makespan_s >= slow.busy_s[1] and slow.makespan_s > even.makespan_s
    assert max(slow.busy_s) == slow.busy_s[1]  # the slow stage is the bottleneck


@pytest.mark.parametrize("speeds", [(1.0, 0.0), (1.0, 1.5), (True,)])
def test_a_speed_outside_zero_one_is_refused(speeds):
    with pytest.raises(ValueError, match="must be in \\(0, 1\\]"):
        Costs(speeds=speeds)


def test_a_stage_without_a_speed_is_refused():
    with pytest.raises(ValueError, match="stage 2 has no speed"):
        simulate(build_schedule("gpipe", stages=3, microbatches=3), costs=Costs(speeds=(1.0, 0.5)), link=IDEAL)
