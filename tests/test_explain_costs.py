"""Explain's editable costs (app/schedule_costs.py) and the textbook bubble beside the simulated one
(app/bubble_formula.py)."""
from __future__ import annotations

import pytest

from app.explain import explain
from app.schedule_costs import DEFAULT_COST, LinkCost, StageCost, cost_rows, parse_cost_table, parse_link

ROW = [0, 10, 20, 10, 20]  # stage, F, B, W, L (ms)


@pytest.mark.parametrize("cell, value, words", [
    (1, "abc", "stage 0's F = 'abc' is not a number of milliseconds"),
    (2, "", "stage 0's B = '' is not a number of milliseconds"),
    (4, None, "stage 0's L = None is not a number of milliseconds"),
    (1, float("nan"), "stage 0's F = nan is not a number"),
    (1, 0, "stage 0: F = 0 ms is out of bounds: choose 0.1 … 1000 ms"),
    (2, -5, "stage 0: B = -5 ms is out of bounds"),
    (4, 5000, "stage 0: L = 5000 ms is out of bounds: choose 0.1 … 1000 ms"),
    (3, -1, "stage 0: W = -1 ms is out of bounds: choose 0 … 1000 ms"),
    (3, 30, "stage 0: W = 30 ms exceeds B = 20 ms: W is the weights' part of the backward"),
])
def test_a_cost_out_of_bounds_is_refused_naming_the_stage_and_the_cell(cell, value, words):
    row = list(ROW)
    row[cell] = value
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse_cost_table([row], 1)


@pytest.mark.parametrize("latency, send, words", [
    ("x", 0, "the link's latency = 'x' is not a number"),
    (-1, 0, "the link's latency = -1 ms is out of bounds: choose 0 … 1000 ms"),
    (0, 1e4, "the link's send = 10000 ms is out of bounds"),
])
def test_a_link_cost_out_of_bounds_is_refused(latency, send, words):
    with pytest.raises(ValueError, match=words):
        parse_link(latency, send)


def test_costs_in_bounds_are_taken_as_typed_and_the_table_follows_k():
    assert parse_cost_table([[0, "12.5", 30, 0, 25]], 1) == (StageCost(F=12.5, B=30, W=0, L=25),)
    assert parse_link("2", 0.5) == LinkCost(latency_ms=2, send_ms=0.5)
    # K grows: the new stages copy the last row; K shrinks: the extra rows go
    assert cost_rows([[0, 1, 2, 1, 2]], 3) == [[0, 1, 2, 1, 2], [1, 1, 2, 1, 2], [2, 1, 2, 1, 2]]
    assert cost_rows([[0, 1, 2, 1, 2], [1, 3, 4, 1, 4]], 1) == [[0, 1, 2, 1, 2]]
    assert cost_rows(None, 2) == [[0, *DEFAULT_COST.row()], [1, *DEFAULT_COST.row()]]


def test_the_costs_reach_the_simulator():
    slow = (StageCost(), StageCost(F=30, B=60, W=30, L=60))
    base = explain(stages=2, microbatches=4, bp_method="gpipe")
    slower = explain(stages=2, microbatches=4, bp_method="gpipe", stage_costs=slow)
    linked = explain(stages=2, microbatches=4, bp_method="gpipe", link=LinkCost(latency_ms=5, send_ms=2))
    gpipe = base.played[0].sim
    assert gpipe.record_of("0F0").end_s == pytest.approx(0.010)
    assert slower.played[0].sim.record_of("1F0").end_s - slower.played[0].sim.record_of("1F0").start_s \
        == pytest.approx(0.030)
    assert slower.makespan_ms["gpipe"] > base.makespan_ms["gpipe"]
    # the first hidden state arrives latency + send time after its SF: stage 1 starts 7 ms later
    assert linked.played[0].sim.record_of("1F0").start_s == pytest.approx(0.010 + 0.007)


def test_a_chunk_of_a_placed_schedule_costs_its_devices_row_over_v():
    e = explain(stages=2, microbatches=4, bp_method="interleaved-1f1b", chunks=2,
                stage_costs=(StageCost(F=10, B=20, W=10, L=20), StageCost(F=40, B=80, W=10, L=80)))
    sim = e.played[0].sim
    assert sim.record_of("0F0").end_s - sim.record_of("0F0").start_s == pytest.approx(0.005)  # device 0
    assert sim.record_of("3F0").end_s - sim.record_of("3F0").start_s == pytest.approx(0.020)  # chunk 3: device 1


# every schedule with a formula, equal stages and an ideal link: the formula is the simulation
@pytest.mark.parametrize("bp, k, m", [("gpipe", 3, 4), ("gpipe", 4, 9), ("1f1b", 3, 4), ("1f1b", 4, 8), ("zb-h1", 3, 6),
                                      ("zb-h1", 4, 4), ("interleaved-1f1b", 3, 6), ("interleaved-1f1b", 2, 8)])
def test_with_equal_stages_and_an_ideal_link_the_textbook_bubble_is_the_simulated_one(bp, k, m):
    e = explain(stages=k, microbatches=m, bp_method=bp)
    for method in (bp, "zerolock"):
        assert e.textbook[method].value == pytest.approx(e.bubble[method])
    assert "They agree" in e.text and e.textbook[bp].formula in e.text


@pytest.mark.parametrize("costs, link, words", [
    ((StageCost(), StageCost(F=30, B=60, W=30, L=60), StageCost()), None, "the slowest (stage 1) paces the pipeline"),
    (None, LinkCost(latency_ms=5, send_ms=1), "every hand-off crosses a link (5 ms latency, 1 ms per message)"),
])
def test_when_the_simulation_departs_from_the_formula_the_page_says_why(costs, link, words):
    e = explain(stages=3, microbatches=4, bp_method="1f1b", stage_costs=costs, link=link)
    assert e.bubble["1f1b"] > e.textbook["1f1b"].value + 0.01
    assert "more than the formula" in e.text and words in e.text


def test_dualpipe_v_has_no_formula_and_says_so():
    e = explain(stages=2, microbatches=4, bp_method="dualpipe-v")
    assert e.textbook["dualpipe-v"] is None and "No textbook formula is given here for DualPipe-V" in e.text


def test_interleaved_1f1b_is_said_to_be_simulated_only():
    e = explain(stages=3, microbatches=6, bp_method="interleaved-1f1b", chunks=3)
    assert "Simulated only" in e.text and "simulated only, 3 devices × 3 chunks" in e.played[0].label
    assert e.peaks["interleaved-1f1b"][0] > explain(stages=3, microbatches=6, bp_method="1f1b").peaks["1f1b"][0]
    with pytest.raises(ValueError, match="choose v among 2, 3, 4"):
        explain(stages=3, microbatches=6, bp_method="interleaved-1f1b", chunks=5)
