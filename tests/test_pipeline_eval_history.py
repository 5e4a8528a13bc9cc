"""`--eval-every` in the pipeline runtime: the stages save their weights every N steps while they train
(they never pause to evaluate) and the final eval scores those snapshots, then the final weights. The
history equals the reference trainer's, which evaluates between its steps, record for record — also when
a stage died and replayed the step of a snapshot — and an eval cut short goes on from the last snapshot
it scored."""
import pytest

from benchmarks.faults import case_config, run_with_deadline
from zerolock_core.config.run_config import replace
from zerolock_core.rundir.atomic_files import read_json, write_json_atomic
from zerolock_core.rundir.eval_progress import FINAL_WEIGHTS
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.runtime import final_eval
from zerolock_core.train.reference_trainer import train_reference

pytestmark = pytest.mark.slow

STEPS, EVERY = 6, 2


def config(out, *, runtime="pipeline", failures=()):
    cfg = case_config(out, method="zerolock", failures=failures, steps=STEPS)
    return replace(cfg, data={"eval_size": 8}, train={"eval_every": EVERY, "final_eval": True, "runtime": runtime})


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return train_reference(config(tmp_path_factory.mktemp("reference"), runtime="reference"), progress=False)


@pytest.mark.parametrize("failures", [(), ("1@2:post-step",), ("2@3:kill",)],
                         ids=["unfailed", "a-snapshot-step-replayed", "local-recovery"])
def test_a_pipeline_runs_eval_history_equals_the_reference_trainers(tmp_path, reference, failures):
    metrics, ended = run_with_deadline(config(tmp_path, failures=failures))
    assert ended and metrics.state == "finished", metrics and metrics.reason
    assert len(metrics.recovery) == len(failures)
    assert RunDir(tmp_path).snapshot_steps(3) == [2, 4]
    assert [h["step"] for h in reference.eval_history] == [2, 4, 6]
    assert metrics.eval_history == reference.eval_history
    assert metrics.eval_history[-1] == {"step": STEPS, **metrics.eval}


def test_an_eval_cut_short_scores_only_the_snapshots_it_has_not(tmp_path, monkeypatch):
    metrics, ended = run_with_deadline(config(tmp_path))
    assert ended and metrics.state == "finished", metrics and metrics.reason
    rd = RunDir(tmp_path)
    whole = read_json(rd.eval_history)
    assert [h["step"] for h in whole] == [2, 4]
    write_json_atomic(rd.eval_history, whole[:1])  # as if stopped while it scored step 4
    rd.eval.unlink()
    scored = []
    real = final_eval.evaluate_chunks
    monkeypatch.setattr(final_eval, "evaluate_chunks", lambda *a, **k: scored.append(1) or real(*a, **k))
    final_eval.evaluate_run(metrics.config, str(tmp_path))
    assert len(scored) == 2  # step 4, then the final weights
    assert read_json(rd.eval_history) == whole
    assert read_json(rd.eval) == metrics.eval
    assert read_json(rd.eval_progress)["what"] == FINAL_WEIGHTS
