"""A reference run stopped (or crashed) mid-way and resumed from its checkpoint equals the unstopped run bit
for bit: the final trainable tensors, the recorded losses, the eval curve and the final eval."""
import time

import pytest
import torch

from benchmarks import depth
from zerolock_core.cli import summary
from zerolock_core.config.run_config import DataConfig, ModelConfig, RunConfig, TrainConfig, replace
from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.rundir.loss_curves import read_curves
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.train.reference_trainer import train_reference

STEPS, EVAL_EVERY, CKPT_EVERY = 6, 2, 2


class Crash(RuntimeError):
    """A test's stand-in for a run killed between two steps (no stop, no record)."""


def cfg_of(out, *, method: str, readout: str, ckpt_every: int = CKPT_EVERY) -> RunConfig:
    return RunConfig(model=ModelConfig(model="tiny", readout=readout), data=DataConfig(seq_len=32, eval_size=8),
                     train=TrainConfig(runtime="reference", method=method, stages=2, batch=4, microbatches=2, steps=STEPS, lr=1e-2,
                                       threads=1, eval_every=EVAL_EVERY, ckpt_every=ckpt_every),
                     out=str(out))


def interrupted(cfg: RunConfig, *, how: str, after: int):
    """Train `cfg` until step `after`, then stop it (a stop request between two steps) or crash it."""
    seen: list[int] = []

    def on_step(n: int, _) -> None:
        seen.append(n)
        if how == "crash" and n == after:
            raise Crash(f"killed after step {n}")

    if how == "crash":
        with pytest.raises(Crash):
            train_reference(cfg, progress=False, on_step=on_step)
        return None
    return train_reference(cfg, progress=False, on_step=on_step, should_stop=lambda: bool(seen) and seen[-1] >= after)


def recorded(out) -> dict:
    """Everything a run records that must not depend on where it was stopped."""
    m = RunDir(out).read_metrics()
    return {"state": m.state, "steps_done": m.steps_done, "final_steps": m.final_steps, "curves": m.curves,
            "full_curves": read_curves(RunDir(out).curves), "eval_history": m.eval_history, "eval": m.eval}


def assert_same_weights(a, b) -> None:
    wa, wb = load_final_weights(a), load_final_weights(b)
    assert sorted(wa) == sorted(wb)
    for k in wa:
        assert sorted(wa[k]) == sorted(wb[k])
        for name in wa[k]:
            assert torch.equal(wa[k][name], wb[k][name]), f"chunk {k} {name}"


@pytest.fixture(scope="module")
def unstopped(tmp_path_factory):
    made: dict[tuple[str, str], str] = {}

    def run(method: str, readout: str) -> str:
        if (method, readout) not in made:
            out = tmp_path_factory.mktemp(f"unstopped-{method}-{readout.replace(':', '')}")
            assert train_reference(cfg_of(out, method=method, readout=readout), progress=False).state == "finished"
            made[method, readout] = str(out)
        return made[method, readout]

    return run


# (method, readout, how the first session ends, after which step, where the resumed session starts)
CASES = [
    ("bp", "head", "stop", 3, 3),  # a stop checkpoints its own step
    ("zerolock", "head", "stop", 4, 4),  # on a checkpoint step (and an eval step)
    ("zerolock", "head", "crash", 3, 2),  # a crash loses what came after the newest checkpoint
    ("zerolock", "sample-lora:2", "stop", 1, 1),
]


@pytest.mark.parametrize("method, readout, how, after, resumed_from", CASES)
def test_a_resumed_reference_run_equals_the_unstopped_one_bitwise(tmp_path, unstopped, method, readout, how,
                                                                    after, resumed_from):
    cfg = cfg_of(tmp_path, method=method, readout=readout)
    first = interrupted(cfg, how=how, after=after)
    if first is not None:
        assert (first.state, first.steps_done, first.resumable_from_step) == ("stopped", after, after)
    resumed = train_reference(cfg, progress=False, resume=True)
    assert (resumed.state, resumed.resumed_from_step) == ("finished", resumed_from)
    reference = unstopped(method, readout)
    assert recorded(tmp_path) == recorded(reference)
    assert_same_weights(tmp_path, reference)


def test_the_depth_study_resumes_a_stopped_run_of_its_config_through_the_cli(tmp_path, unstopped, capsys):
    """`_train` finds the stopped run and continues it with `zerolock train --resume DIR` (the CLI, its job
    and the job's child process), which ends as the unstopped run does."""
    plain = cfg_of(tmp_path / "run", method="zerolock", readout="head", ckpt_every=0)  # as the study plans it
    interrupted(depth.with_checkpoints(plain), how="stop", after=3)
    assert not depth._finished_with(plain)
    depth._train(plain, tmp_path / "run.log")
    assert "resuming run at step 3" in capsys.readouterr().out
    assert depth._finished_with(plain) and RunDir(plain.out).read_metrics().resumed_from_step == 3
    assert recorded(plain.out) == recorded(unstopped("zerolock", "head"))
    assert_same_weights(plain.out, unstopped("zerolock", "head"))


# (the finished run's config, the study's config, counts as finished): ckpt_every is left out
SAME_RUN = [
    ({"ckpt_every": 0}, {"ckpt_every": 0}, True),  # a run made before the study checkpointed
    ({"ckpt_every": 2}, {"ckpt_every": 0}, True),  # one made since
    ({"ckpt_every": 2, "steps": 4}, {"ckpt_every": 0}, False),
]


@pytest.mark.parametrize("finished, planned, same", SAME_RUN)
def test_the_study_counts_a_finished_run_whatever_its_checkpoint_interval(tmp_path, finished, planned, same):
    base = cfg_of(tmp_path, method="bp", readout="head")
    assert depth._same_run(replace(base, train=finished), replace(base, train=planned)) is same


# (--ckpt-every, what a stopped run's summary says about resuming it)
STOPPED_SAYS = [
    (CKPT_EVERY, "continue with `zerolock train --resume"),
    (0, "a reference run without a checkpoint cannot be resumed"),
]


@pytest.mark.parametrize("ckpt_every, says", STOPPED_SAYS)
def test_a_stopped_reference_run_says_whether_it_can_be_resumed(tmp_path, ckpt_every, says):
    cfg = cfg_of(tmp_path, method="bp", readout="head", ckpt_every=ckpt_every)
    stopped = interrupted(cfg, how="stop", after=1)
    assert stopped.resumable_from_step == (1 if ckpt_every else None)
    assert says in summary(RunDir(tmp_path).read_metrics(), str(tmp_path))


@pytest.mark.parametrize("ckpt_every,resumed", [(CKPT_EVERY, True), (0, False)])
def test_the_dashboard_resumes_a_stopped_reference_run_only_if_it_has_checkpoints(tmp_path, ckpt_every, resumed):
    from app.controller import EngineController

    root = tmp_path / "runs"
    cfg = cfg_of(root / "bp-stopped", method="bp", readout="head", ckpt_every=ckpt_every)
    interrupted(cfg, how="stop", after=2)
    controller = EngineController(root)
    try:
        if not resumed:
            with pytest.raises(ValueError, match="no checkpoints"):
                controller.resume("bp-stopped")
            return
        controller.resume("bp-stopped")
        deadline = time.monotonic() + 300.0
        while controller.busy and time.monotonic() < deadline:
            time.sleep(0.2)
        m = RunDir(cfg.out).read_metrics()
        assert m.state == "finished" and m.steps_done == STEPS and m.resumed_from_step == 2
    finally:
        controller.close()
