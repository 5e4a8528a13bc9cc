"""The committed result files (docs/results/*.json, what the results tables of docs/results-*.md and
the README's headline table are generated from) hold
what the schedules imply: relations between their numbers, not their printed text. A benchmark that
regressed, or a result file edited by hand into something impossible, fails here."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
METHODS = ("gpipe", "1f1b", "pipedream", "zerolock")


def load(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / f"{name}.json").read_text())


def expected_inflight(method: str, stages: int, microbatches: int) -> list[int]:
    """Micro-batches each stage holds at its peak: GPipe all m, 1F1B and PipeDream K - s, ZeroLock one."""
    if method == "gpipe":
        return [microbatches] * stages
    if method == "zerolock":
        return [1] * stages
    return [stages - s for s in range(stages)]


def memory_holds_what_each_schedule_keeps(r: dict) -> None:
    c = r["config"]
    for method in METHODS:
        assert r["results"][method]["peak_inflight"] == expected_inflight(method, c["stages"], c["microbatches"])
    activations = {m: [s["activation_bytes"] for s in r["results"][m]["per_stage"]] for m in METHODS}
    assert all(z < g for z, g in zip(activations["zerolock"], activations["gpipe"]))


def geometry_rows_hold_what_each_schedule_keeps(r: dict) -> None:
    for row in r["results"]:
        assert row["measured"]["peak_inflight"] == expected_inflight(row["method"], row["stages"],
                                                                     row["microbatches"])
    zerolock = {(x["batch"], x["microbatches"]): x["max_activation_bytes"] for x in r["results"]
                if x["method"] == "zerolock"}
    for row in r["results"]:
        assert zerolock[row["batch"], row["microbatches"]] <= row["max_activation_bytes"]


def envelope_orders_the_methods_as_their_memory(r: dict) -> None:
    largest = {m: r["results"][m]["largest_batch"] for m in METHODS}
    assert largest["gpipe"] <= largest["1f1b"] == largest["pipedream"] < largest["zerolock"]
    for m in METHODS:
        assert r["results"][m]["first_oom_batch"] > largest[m]


def simulator_predicts_in_flight_exactly_and_k2_within_tolerance(r: dict) -> None:
    for row in r["validation"]:
        assert row["measured_inflight"] == row["predicted_inflight"]
        assert row["measured_held_activation_bytes"] == row["predicted_held_activation_bytes"]
        if not row["oversubscribed"]:
            assert row["within_tolerance"] and abs(row["error"]) <= 0.10


def crosscheck_losses_agree_with_torchs_schedules(r: dict) -> None:
    for schedule, row in r["results"].items():
        assert row["losses_agree"] and row["max_rel_loss_diff"] < 1e-5, schedule
        assert len(row["ours_losses"]) == len(row["torch_losses"]) > 0


def readout_at_omega_is_cheaper_than_the_full_readout(r: dict) -> None:
    by = {(x["vocab"], x["variant"]): x for x in r["results"]}
    for vocab in {v for v, _ in by}:
        omega, full = by[vocab, "omega"], by[vocab, "full"]
        assert omega["time_s"] < full["time_s"] and omega["transient_peak_bytes"] < full["transient_peak_bytes"]


def efficiency_and_bubbles_are_fractions(r: dict) -> None:
    for method, row in r["results"].items():
        assert 0 < row["efficiency"] <= 1 and 0 <= row["bubble_fraction"] < 1, method
        assert row["samples_per_s"] <= row["bound_samples_per_s"] * 1.001, method


def balanced_boundaries_give_the_slow_stage_fewer_layers_and_more_throughput(r: dict) -> None:
    slow = r["config"]["speeds"].index(min(r["config"]["speeds"]))
    rows = {(row["method"], row["split"]): row for row in r["rows"]}
    for method in {m for m, _ in rows}:
        even, balanced = rows[method, "even"], rows[method, "balanced"]
        assert balanced["layers"][slow][1] - balanced["layers"][slow][0] < even["layers"][slow][1] - even["layers"][slow][0]
        if balanced.get("balance"):  # the run built the chunks its measurement chose
            assert [first for first, _ in balanced["layers"][1:]] == balanced["balance"]["boundaries"]
    assert all(g > 1 for key in ("balanced_over_even", "balanced_over_even_simulated") for g in r[key].values())


def measured_rows_are_finite_with_one_zerolock_microbatch_per_stage(r: dict) -> None:
    groups = r["results"].values()
    for group in groups:
        for row in group["rows"]:
            assert math.isfinite(row["measured"]["samples_per_s"]) and row["measured"]["samples_per_s"] > 0
            if row["method"] == "zerolock":
                assert row["measured"]["peak_inflight"] == [1] * row["stages"]


def every_thread_count_was_measured_alone_and_beside_a_pipeline(r: dict) -> None:
    counts = [str(n) for n in range(1, r["config"]["cores"] + 1)]
    for where in ("alone", "beside_a_pipeline"):
        assert list(r["results"][where]) == counts
        assert all(math.isfinite(v) and v > 0 for v in r["results"][where].values())
    assert r["settings"]["threads"] == 1, "the pipeline beside the trainers runs one thread a stage"


def watching_cost_is_what_the_rounds_measured(r: dict) -> None:
    polls = [f"{p:g}" for p in r["config"]["polls_s"]]
    unwatched = [x["unwatched"]["throughput"] for x in r["rounds"]]
    for poll in polls:
        watched = [x["watched"][poll] for x in r["rounds"]]
        expected = 1 - (sum(w["throughput"] for w in watched) / len(watched)) / (sum(unwatched) / len(unwatched))
        assert math.isclose(r["watching_cost"][poll], expected)
        assert all(w["first_event_s"] <= w["first_bar_s"] for w in watched), "a bar is drawn after its event"
    interleaved = [x["interleaved"] for x in r["rounds"] if "interleaved" in x]
    for i in interleaved:  # Watch shown vs hidden in one run
        assert math.isclose(i["cost"], 1 - i["steps_per_s_shown"] / i["steps_per_s_hidden"])
    if interleaved:
        assert math.isclose(r["watching_cost_interleaved"], sum(i["cost"] for i in interleaved) / len(interleaved))


CASES: list[tuple[str, Callable[[dict], None]]] = [
    ("dashboard", watching_cost_is_what_the_rounds_measured),
    ("threads", every_thread_count_was_measured_alone_and_beside_a_pipeline),
    ("memory", memory_holds_what_each_schedule_keeps),
    ("geometry", geometry_rows_hold_what_each_schedule_keeps),
    ("geometry-fixed-m", geometry_rows_hold_what_each_schedule_keeps),
    ("envelope", envelope_orders_the_methods_as_their_memory),
    ("simulator", simulator_predicts_in_flight_exactly_and_k2_within_tolerance),
    ("crosscheck", crosscheck_losses_agree_with_torchs_schedules),
    ("crosscheck-rerun1", crosscheck_losses_agree_with_torchs_schedules),
    ("crosscheck-rerun2", crosscheck_losses_agree_with_torchs_schedules),
    ("crosscheck-long", crosscheck_losses_agree_with_torchs_schedules),
    ("readout", readout_at_omega_is_cheaper_than_the_full_readout),
    ("efficiency", efficiency_and_bubbles_are_fractions),
    ("throughput", measured_rows_are_finite_with_one_zerolock_microbatch_per_stage),
    ("links", measured_rows_are_finite_with_one_zerolock_microbatch_per_stage),
    ("hetero", balanced_boundaries_give_the_slow_stage_fewer_layers_and_more_throughput),
    ("hetero-smollm2", balanced_boundaries_give_the_slow_stage_fewer_layers_and_more_throughput),
    ("hetero-wall-paced", balanced_boundaries_give_the_slow_stage_fewer_layers_and_more_throughput),
    ("hetero-smollm2-wall-paced", balanced_boundaries_give_the_slow_stage_fewer_layers_and_more_throughput),
]


@pytest.mark.parametrize("name,relation", CASES, ids=[f"{n}-{f.__name__}" for n, f in CASES])
def test_committed_result_file_holds_its_relation(name, relation):
    relation(load(name))


def test_every_committed_result_file_is_a_results_block():
    from benchmarks.readme import shown

    committed = {p.stem for p in RESULTS.glob("*.json")}
    assert committed - shown() == set(), "committed result files no results block shows"


def test_every_summary_block_summarises_committed_files_shown_in_full_too():
    from benchmarks.readme import SUMMARIES, shown

    blocks = shown()
    for name, (_, _, files) in SUMMARIES.items():
        assert name in blocks, f"summary {name} is in no results block"
        assert set(files) <= blocks, f"summary {name}: every file it summarises has its own block too"


@pytest.mark.parametrize("config,label", [
    ({"stages": 3, "seeds": [0]}, "bp"),
    ({"stages": 2, "seeds": [0]}, "K=2: bp"),
    ({"stages": 3, "seeds": [1]}, "seed 1: bp"),
    ({"stages": 3, "seeds": [0], "lora_targets": ["q_proj", "k_proj"]}, "LoRA on q, k: bp"),
    ({"stages": 3, "seeds": [0], "boundaries": "even split"}, "bp"),  # None and "even split" are the same split
    ({"stages": 2, "seeds": [0], "boundaries": [5]}, "K=2; boundaries 5: bp"),
])
def test_a_summary_row_is_labelled_by_what_its_file_changed(config, label):
    from benchmarks.quality_summary import row_label

    assert row_label(config, {"stages": 3, "seeds": [0], "boundaries": None}, "bp") == label


def test_the_smollm2_summary_row_of_a_file_holds_that_files_curve():
    from benchmarks.quality_summary import format_summary

    reports = [load("quality-smollm2"), load("quality-smollm2-seed1")]
    row = next(line for line in format_summary(reports).splitlines() if line.startswith("| seed 1: bp "))
    curve = reports[1]["results"]["bp"]["curves"][0]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == [f"{x:.2f}" for x in curve["label_accuracy"]]
    assert cells[4] == f"{curve['nll'][-1]:.2f}"
