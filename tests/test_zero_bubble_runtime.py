"""zb-h1 on the multi-process pipeline (gloo, CPU): its split backward (B now, W later) trains exactly what
one whole backward trains."""
import pytest
import torch

from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.config.run_config import DataConfig, ObjectiveConfig, RunConfig, TrainConfig
from zerolock_core.jobs.job import train
from zerolock_core.train.reference_trainer import train_reference
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.telemetry.events import read_events

pytestmark = pytest.mark.slow

SEQ, BATCH, M, STEPS = 32, 4, 4, 2


def cfg_for(out, *, runtime: str, method: str, stages: int) -> RunConfig:
    return RunConfig(data=DataConfig(seq_len=SEQ, eval_size=16), objective=ObjectiveConfig(alpha=(0.5,)),
                     train=TrainConfig(runtime=runtime, method=method, stages=stages, batch=BATCH, microbatches=M,
                                       steps=STEPS, threads=1),
                     out=str(out))


@pytest.fixture(scope="module", params=[2, 3], ids=lambda k: f"K={k}")
def runs(request, tmp_path_factory):
    k = request.param
    root = tmp_path_factory.mktemp(f"zb-k{k}")
    metrics = {"bp": train_reference(cfg_for(root / "bp", runtime="reference", method="bp", stages=k), progress=False)}
    for method in ("1f1b", "zb-h1"):
        metrics[method] = train(cfg_for(root / method, runtime="pipeline", method=method, stages=k), progress=False)
    return k, root, metrics


def assert_bitwise_equal_weights(a_dir, b_dir) -> None:
    a, b = load_final_weights(a_dir), load_final_weights(b_dir)
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].keys() == b[k].keys()
        for name in a[k]:
            assert torch.equal(a[k][name], b[k][name]), (k, name)


def test_zb_h1_ends_bitwise_equal_to_1f1b(runs):
    """The same operations in the same order per parameter: B and W are the halves of one backward."""
    _, root, m = runs
    assert_bitwise_equal_weights(root / "zb-h1", root / "1f1b")
    assert m["zb-h1"].curves == m["1f1b"].curves


def test_zb_h1_equals_the_bp_reference_bitwise(runs):
    """Bitwise, not just within test_pipeline_runtime.py's gpipe / 1f1b tolerance: every adapter's gradient
    is summed over the micro-batches in the same order as the reference's."""
    _, root, m = runs
    assert_bitwise_equal_weights(root / "zb-h1", root / "bp")
    assert m["zb-h1"].curves[0]["loss"] == pytest.approx(m["bp"].curves[0]["loss"], rel=1e-5)


def test_every_stage_runs_each_w_after_its_b_and_holds_k_micro_batches(runs):
    k, root, m = runs
    events, _ = read_events(RunDir(root / "zb-h1").event_files())
    for s in range(k):
        order = [(e["kind"], e["mb"]) for e in events if e["stage"] == s and e["kind"] in ("B", "W")]
        assert sorted(mb for kind, mb in order if kind == "W") == list(range(M * STEPS))
        assert all(order.index(("B", mb)) < order.index(("W", mb)) for kind, mb in order if kind == "W")
    # a micro-batch awaiting W still holds its graph: K on every stage (1F1B: K - s)
    assert [s["peak_inflight_microbatches"] for s in m["zb-h1"].per_stage] == [k] * k
    assert [s["peak_inflight_microbatches"] for s in m["1f1b"].per_stage] == list(range(k, 0, -1))
