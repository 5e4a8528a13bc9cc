"""One name for a run in every view (app/run_label.py): its method, its readout where a chunk reads through it,
K, its dataset (a file by its name) and its seed; the Runs table says each in a column of its own."""
from __future__ import annotations

import json

import pytest

from app.run_label import run_label
from app.runs_index import COLUMNS, runs_table
from zerolock_core.rundir.runs_root import RunsRoot


def config(*, method: str = "zerolock", readout: str = "head", dataset: str = "topics", seed: int | None = 0,
           runtime: str = "pipeline", stages: int = 3) -> dict:
    train = {"runtime": runtime, "method": method, "stages": stages, "batch": 8, "microbatches": 4}
    return {"model": {"readout": readout}, "data": {"dataset": dataset},
            "train": train if seed is None else {**train, "seed": seed}}


@pytest.mark.parametrize("fields, label", [
    (dict(), "ZeroLock · K=3 · topics · seed 0"),
    (dict(readout="top-lora:last"), "ZeroLock · top-lora:last · K=3 · topics · seed 0"),
    (dict(readout="sample-lora:2"), "ZeroLock · sample-lora:2 · K=3 · topics · seed 0"),
    (dict(method="1f1b", readout="top-lora:last"), "1F1B · K=3 · topics · seed 0"),  # BP's early chunks read none
    (dict(dataset="csv:/home/me/data/desks.csv"), "ZeroLock · K=3 · csv:desks.csv · seed 0"),
    (dict(dataset="csv:desks.csv", readout="top-lora:last", seed=3),
     "ZeroLock · top-lora:last · K=3 · csv:desks.csv · seed 3"),
    (dict(seed=1), "ZeroLock · K=3 · topics · seed 1"),
    (dict(seed=None), "ZeroLock · K=3 · topics"),  # an old config without a seed says none
    (dict(runtime="reference"), "ZeroLock (reference) · K=3 · topics · seed 0"),
    (dict(method="bp", runtime="reference"), "BP reference · K=3 · topics · seed 0"),  # one process by nature
    (dict(readout="nonsense"), "ZeroLock · nonsense · K=3 · topics · seed 0"),  # unknown: shown as written
])
def test_a_runs_label_says_method_readout_not_the_head_k_dataset_and_seed(fields, label):
    assert run_label(config(**fields), method=fields.get("method", "zerolock")) == label


def test_the_shape_adds_b_and_m_after_k():
    assert run_label(config(), method="zerolock", shape=True) == "ZeroLock · K=3 · b=8 · m=4 · topics · seed 0"


@pytest.mark.parametrize("fields, dataset, readout, seed", [
    (dict(), "topics", "head", 0),  # the column says the head too
    (dict(dataset="csv:/home/me/desks.csv", readout="top-lora:last", seed=2), "csv:desks.csv", "top-lora:last", 2),
])
def test_the_runs_table_has_a_dataset_readout_and_seed_column(tmp_path, fields, dataset, readout, seed):
    run = tmp_path / "r1"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(config(**fields)))
    row = dict(zip(COLUMNS, runs_table(RunsRoot(tmp_path))[0]))
    assert (row["dataset"], row["readout"], row["seed"], row["K·b·m"]) == (dataset, readout, seed, "3·8·4")
