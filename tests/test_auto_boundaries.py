"""`--boundaries auto` measured once per run (layer_costs.py, auto_boundaries.py): the measurement itself,
the boundaries it resolves to (a relation on what was recorded — a timing is never asserted), and a run
whose every stage builds those chunks and ends bitwise equal to the reference trained on them."""
import json

import pytest
import torch

from benchmarks.faults import bitwise_equal, case_config, run_with_deadline
from zerolock_core.train import auto_boundaries
from zerolock_core.method.balance import AUTO, ChunkCosts
from zerolock_core.method.chunks import planned_bounds, weighed_readout_layers
from zerolock_core.config.run_config import replace
from zerolock_core.train.layer_costs import measure_chunk_costs
from zerolock_core.train.reference_trainer import train_reference
from zerolock_core.rundir.run_dir import RunDir

TINY_LAYERS = 8


def auto_config(out, *, speeds=(1.0, 0.5), method="zerolock", readout="head"):
    cfg = case_config(out, method=method, stages=len(speeds), steps=4, ckpt_every=0)
    return replace(cfg, train={"stage_speed": speeds}, model={"boundaries": AUTO, "readout": readout})


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    threads = torch.get_num_threads()
    m = measure_chunk_costs(auto_config(tmp_path_factory.mktemp("measure")), repeats=2)
    return m, threads


def test_every_piece_of_a_chunk_is_measured_positive(measured):
    m, _ = measured
    c = m.costs
    assert len(c.layers) == len(m.each_layer_s) == TINY_LAYERS
    assert all(x > 0 for x in (*c.layers, *m.each_layer_s, c.embedding, c.head, c.upstream_head))
    assert (m.rows, m.seq_len, m.repeats, m.threads) == (1, 32, 2, 1)  # batch 4 / 4 micro-batches; one stage's threads


def test_layers_of_one_shape_share_one_cost_the_median_of_theirs(measured):
    m, _ = measured
    assert len(set(m.costs.layers)) == 1  # tiny's layers are all alike
    assert min(m.each_layer_s) <= m.costs.layers[0] <= max(m.each_layer_s)


def test_measuring_gives_this_process_its_threads_back(measured):
    _, before = measured
    assert torch.get_num_threads() == before


def test_boundaries_that_are_not_auto_are_left_as_they_are(tmp_path):
    cfg = replace(auto_config(tmp_path), model={"boundaries": (3,)})
    assert auto_boundaries.resolve_auto_boundaries(cfg) == (cfg, None)


@pytest.mark.parametrize("made_with", [(6,), AUTO])  # AUTO: a run made before auto measured (the estimate)
def test_a_resumed_run_keeps_its_boundaries_without_measuring(tmp_path, monkeypatch, made_with):
    def no_measuring(*_, **__):
        raise AssertionError("a resumed run measured")
    monkeypatch.setattr("zerolock_core.train.layer_costs.measure_chunk_costs", no_measuring)
    cfg = auto_config(tmp_path)
    made = replace(cfg, model={"boundaries": made_with})
    resolved, record = auto_boundaries.resolve_auto_boundaries(cfg, made_with=made)
    assert resolved.model.boundaries == made_with and record is None


@pytest.mark.parametrize("speeds,method,readout", [
    ((1.0, 0.5), "zerolock", "head"),
    ((1.0, 0.4, 1.0), "1f1b", "head"),
    ((1.0, 1.0, 1.0), "zerolock", "top-lora:2"),
])
def test_auto_resolves_to_the_balance_of_the_costs_it_recorded(tmp_path, speeds, method, readout):
    cfg = auto_config(tmp_path, speeds=speeds, method=method, readout=readout)
    resolved, record = auto_boundaries.resolve_auto_boundaries(cfg)
    m = record["measured"]
    costs = ChunkCosts(layers=tuple(m["layer_s"]), embedding=m["embedding_s"], head=m["head_s"],
                       upstream_head=m["upstream_head_s"])
    bounds = planned_bounds(TINY_LAYERS, len(speeds), boundaries=AUTO, speeds=speeds, readout=readout,
                            method=method, costs=costs)
    assert resolved.model.boundaries == tuple(first for first, _ in bounds[1:]) == tuple(record["boundaries"])
    assert record["layers"] == [list(b) for b in bounds]
    assert len(record["stage_s"]) == len(speeds) and all(s > 0 for s in record["stage_s"])
    # the slowest stage is the least it can be: no other split of these costs finishes sooner
    keep = weighed_readout_layers(readout, method)  # the last chunk holds the top layers a readout copies
    fastest = min(max(auto_boundaries._stage_seconds(costs, split, cfg)) for split in _splits(len(speeds))
                  if split[-1][1] - split[-1][0] >= keep)
    assert max(record["stage_s"]) <= fastest * (1 + 1e-9)


def _splits(stages):
    from itertools import combinations
    return [list(zip((0, *cuts), (*cuts, TINY_LAYERS))) for cuts in combinations(range(1, TINY_LAYERS), stages - 1)]


@pytest.mark.slow
def test_an_auto_run_builds_the_measured_chunks_on_every_stage_and_equals_the_reference(tmp_path):
    cfg = auto_config(tmp_path / "pipeline")
    metrics, ended = run_with_deadline(cfg)
    assert ended and metrics.state == "finished", metrics
    rd = RunDir(tmp_path / "pipeline")
    saved, balance = rd.saved_config(), rd.read_balance()
    assert saved.model.boundaries == tuple(balance["boundaries"])  # config.json holds them: a rerun builds these
    assert metrics.layers == balance["layers"]
    assert json.loads(rd.config_json.read_text())["model"]["boundaries"] == balance["boundaries"]
    reference = replace(saved, train={"runtime": "reference", "stage_speed": ()}, out=str(tmp_path / "reference"))
    train_reference(reference, progress=False)
    assert RunDir(tmp_path / "reference").read_balance() is None  # named boundaries: nothing measured
    assert bitwise_equal(tmp_path / "pipeline", tmp_path / "reference")


def test_the_pipelines_faults_and_link_do_not_stop_the_measurement(tmp_path):
    cfg = replace(auto_config(tmp_path), train={"failures": ("1@2",), "ckpt_every": 2, "warm_standby": "on"},
                  link={"profile": "wifi"})
    resolved, record = auto_boundaries.resolve_auto_boundaries(cfg)
    assert len(resolved.model.boundaries) == 1 and record["measured"]["rows"] == 1
