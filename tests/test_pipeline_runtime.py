"""The multi-process pipeline (gloo, CPU) against the single-process references."""
import json
import time
from pathlib import Path

import pytest
import torch

from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.telemetry.events import read_events
from zerolock_core.config.run_config import DataConfig, ObjectiveConfig, RunConfig, TrainConfig
from zerolock_core.train.reference_trainer import train_reference
from zerolock_core.jobs.job import train
from zerolock_core.jobs.pipeline_job import Run

pytestmark = pytest.mark.slow

SEQ, BATCH, M, STEPS = 32, 4, 4, 2


def cfg_for(out, *, runtime, method, stages=3, steps=STEPS, consistency="reverse"):
    return RunConfig(data=DataConfig(seq_len=SEQ, eval_size=16),
                     objective=ObjectiveConfig(alpha=(0.5,), consistency=consistency),
                     train=TrainConfig(runtime=runtime, method=method, stages=stages, batch=BATCH,
                                       microbatches=M, steps=steps, threads=1),
                     out=str(out))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    out = {}
    out["ref-zerolock"] = train_reference(cfg_for(root / "ref-zerolock", runtime="reference", method="zerolock"),
                                          progress=False)
    out["ref-bp"] = train_reference(cfg_for(root / "ref-bp", runtime="reference", method="bp"), progress=False)
    for method in ("zerolock", "gpipe", "1f1b", "pipedream"):
        out[method] = train(cfg_for(root / method, runtime="pipeline", method=method), progress=False)
    return root, out


def weights(root, name):
    return load_final_weights(root / name)


def test_pipeline_zerolock_equals_reference_bitwise(runs):
    root, _ = runs
    ref, got = weights(root, "ref-zerolock"), weights(root, "zerolock")
    assert sorted(ref) == sorted(got) == [0, 1, 2]
    for k in ref:
        assert ref[k].keys() == got[k].keys()
        for name in ref[k]:
            assert torch.equal(ref[k][name], got[k][name]), (k, name)


@pytest.mark.parametrize("method", ["gpipe", "1f1b"])
def test_bp_pipelines_match_the_bp_reference(runs, method):
    root, m = runs
    ref, got = weights(root, "ref-bp"), weights(root, method)
    for k in ref:
        for name in ref[k]:
            torch.testing.assert_close(got[k][name], ref[k][name], rtol=1e-5, atol=1e-7)
    ref_curve = m["ref-bp"].curves[0]["loss"]
    got_curve = m[method].curves[0]["loss"]
    assert got_curve == pytest.approx(ref_curve, rel=1e-5)


@pytest.mark.parametrize("method,expected", [
    ("gpipe", [M, M, M]),
    ("1f1b", [3, 2, 1]),
    ("zerolock", [1, 1, 1]),
    ("pipedream", [3, 2, 1]),
])
def test_peak_inflight_microbatches(runs, method, expected):
    _, m = runs
    assert [s["peak_inflight_microbatches"] for s in m[method].per_stage] == expected


def test_zerolock_holds_the_least_activation_memory(runs):
    _, m = runs
    peak = {meth: max(s["peak_activation_bytes"] for s in m[meth].per_stage)
            for meth in ("zerolock", "gpipe", "1f1b")}
    assert peak["zerolock"] < peak["1f1b"] < peak["gpipe"]


def test_only_hidden_states_cross_boundaries_in_zerolock(runs):
    _, m = runs
    hidden = 128  # the tiny preset's hidden size
    per_mb = (BATCH // M) * SEQ * hidden * 4
    n = STEPS * M
    stages = m["zerolock"].per_stage
    assert [s["bytes_sent"] for s in stages] == [per_mb * n, per_mb * n, 0]
    assert [s["bytes_received"] for s in stages] == [0, per_mb * n, per_mb * n]
    bp = m["gpipe"].per_stage  # hidden states forward and gradients back
    assert [s["bytes_sent"] for s in bp] == [per_mb * n, 2 * per_mb * n, per_mb * n]


def test_pipedream_stashes_weight_versions(runs):
    _, m = runs
    versions = [s["stashed_weight_versions"] for s in m["pipedream"].per_stage]
    assert versions[0] >= 2 and versions[-1] == 1


def test_metrics_events_and_trace(runs):
    root, m = runs
    for method in ("zerolock", "gpipe", "1f1b", "pipedream"):
        d = root / method
        metrics = json.loads((d / "metrics.json").read_text())
        assert metrics["state"] == "finished" and metrics["steps_done"] == STEPS
        assert metrics["eval"]["per_chunk"] and metrics["throughput_samples_per_s"] > 0
        assert 0 <= metrics["bubble_fraction"] < 1
        events, _ = read_events(RunDir(d).event_files())
        assert {e["stage"] for e in events} == {0, 1, 2}
        assert all(e["t1"] >= e["t0"] for e in events)
        trace = json.loads((d / "trace.json").read_text())
        assert any(e.get("ph") == "X" and e["tid"] == 2 for e in trace["traceEvents"])


@pytest.mark.parametrize("method, kind, stages_with_loss", [
    ("zerolock", "L", {0, 1, 2}), ("gpipe", "B", {2}), ("1f1b", "B", {2}), ("pipedream", "B", {2})])
def test_loss_events_carry_the_reported_losses(runs, method, kind, stages_with_loss):
    """The live loss curves (dashboard) come from these: each equals the curve in metrics.json."""
    from app.figures.live_loss import live_loss_curves

    root, _ = runs
    events, _ = read_events(RunDir(root / method).event_files())
    assert {e["stage"] for e in events if e["loss"] is not None} == stages_with_loss
    assert all(e["kind"] == kind for e in events if e["loss"] is not None)
    assert sum(e["loss"] is not None for e in events) == len(stages_with_loss) * M * STEPS
    curves = json.loads((root / method / "metrics.json").read_text())["curves"]
    live = live_loss_curves(events, microbatches=M, method=method)
    assert [(c["chunk"], c["step"]) for c in live] == [(c["chunk"], c["step"]) for c in curves]
    for a, b in zip(live, curves):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-12)


@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("method", ["zerolock", "gpipe", "1f1b", "pipedream"])
def test_every_method_finishes(tmp_path, method, stages):
    m = train(cfg_for(tmp_path, runtime="pipeline", method=method, stages=stages, steps=1),
                       progress=False)
    assert m.state == "finished" and len(m.per_stage) == stages


def test_stop_mid_run_ends_every_process_with_valid_metrics(tmp_path):
    run = Run(cfg_for(tmp_path, runtime="pipeline", method="zerolock", steps=10_000)).start()
    while run.status().steps_done < 1:
        assert not run.done, run.metrics
        time.sleep(0.1)
    metrics = run.stop()
    assert run.state == "stopped"
    assert all(not p.is_alive() for p in run._sup.procs)
    on_disk = json.loads((Path(tmp_path) / "metrics.json").read_text())
    assert on_disk["state"] == "stopped"
    assert 1 <= on_disk["steps_done"] < 10_000
    assert json.loads(json.dumps(metrics.to_json())) == on_disk
    assert run.status().steps_done == on_disk["steps_done"]  # the final count, not the store's default


def test_a_stop_after_the_last_step_ends_stopped_and_resume_only_evaluates(tmp_path):
    """A stop that arrives once every step is trained (before or during the final eval) skips the eval
    and says so; `--resume` then runs just the eval and ends the run finished, its training record kept."""
    run = Run(cfg_for(tmp_path, runtime="pipeline", method="zerolock", steps=STEPS)).start()
    while run.status().steps_done < STEPS and run.state != "finishing":
        assert not run.done, run.metrics
        time.sleep(0.02)
    run.stop()
    assert run.state == "stopped" and run.metrics.training_complete and run.metrics.eval is None
    assert "--resume" in run.metrics.eval_skipped
    status = run.status()
    assert status.steps_done == STEPS and status.stage_steps == [STEPS] * 3
    trained = json.loads((tmp_path / "metrics.json").read_text())
    resumed = Run(cfg_for(tmp_path, runtime="pipeline", method="zerolock", steps=STEPS), resume=True).start()
    metrics = resumed.wait(timeout=300)
    assert metrics.state == "finished" and metrics.eval is not None and metrics.eval_skipped == ""
    assert metrics.per_stage == trained["per_stage"] and metrics.curves == trained["curves"]


@pytest.mark.parametrize("method,readout", [("zerolock", "mlp"), ("zerolock", "affine"), ("zerolock", "top:2"),
                                            ("zerolock", "top-lora:last"), ("zerolock", "sample-lora:2"),
                                            ("terminal", "head"), ("1f1b", "affine")])
def test_pipeline_equals_the_reference_bitwise_for_each_readout_and_terminal(tmp_path, method, readout):
    """A readout other than the head ships its rows at Ω with h (counted in bytes_sent; the last chunk
    ships nothing): the pipeline still performs exactly the reference's operations. terminal: only the last
    chunk trains, the others keep their initial weights and send the hidden state alone. 1f1b with an
    affine readout: BP given the readout's parameters on its last chunk (the fair control of a readout)."""
    from zerolock_core.config.run_config import replace
    from zerolock_core.train.run_setup import build_run_setup

    def config(name, runtime):
        reference_method = "bp" if runtime == "reference" and method == "1f1b" else method
        return replace(cfg_for(tmp_path / name, runtime=runtime, method=reference_method, stages=3),
                       model={"readout": readout, "boundaries": (3, 6)}, train={"final_eval": runtime == "reference"})

    ref_cfg = config("ref", "reference")
    train_reference(ref_cfg, progress=False)
    got = train(config("pipe", "pipeline"), progress=False)
    ref, pipe = weights(tmp_path, "ref"), weights(tmp_path, "pipe")
    for k in ref:
        assert ref[k].keys() == pipe[k].keys()
        for name in ref[k]:
            assert torch.equal(ref[k][name], pipe[k][name]), (k, name)
    start = {k: chunk.trainable_state() for k, chunk in enumerate(build_run_setup(ref_cfg).chunks)}
    trained = [k for k in ref if any(not torch.equal(ref[k][n], start[k][n]) for n in ref[k])]
    assert trained == ([2] if method == "terminal" else [0, 1, 2])
    if readout not in ("head", "mlp", "affine"):
        assert any(name.startswith("readout_top.") for name in ref[0]) == ("-lora:" in readout)
    if method == "1f1b":  # the readout on the last chunk only: the earlier ones read through the head
        assert [any(n.startswith("readout_adapter.") for n in ref[k]) for k in ref] == [False, False, True]
        return
    setup = build_run_setup(ref_cfg)
    rows = sum(int((mb["labels"] != -100).sum()) for step in range(STEPS) for mb in setup.microbatches(step))
    hidden = 128
    h_bytes = (BATCH // M) * SEQ * hidden * 4 * STEPS * M
    row_bytes = 0 if readout == "head" else rows * hidden * 4
    assert [s["bytes_sent"] for s in got.per_stage] == [h_bytes + row_bytes] * 2 + [0]
