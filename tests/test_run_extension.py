"""A reference run given more steps (`zerolock train --resume DIR --steps N`) goes on from its newest
checkpoint and equals a run trained that long from the start, bit for bit: the final trainable tensors, the
recorded losses, the eval curve (its old last step evaluated as one of the evals) and the final eval. What
would not equal it is refused in one line naming --steps."""
import subprocess
import sys

import pytest

from benchmarks import depth
from tests.test_reference_resume import assert_same_weights, interrupted, recorded
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.run_config import DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig, replace
from zerolock_core.rundir.run_dir import RunDir, check_resumable
from zerolock_core.train.reference_trainer import train_reference

LONG = 8


def cfg_of(out, *, steps: int, method: str = "zerolock", runtime: str = "reference", ckpt_every: int = 2,
           alpha_ramp: str = "") -> RunConfig:
    return RunConfig(model=ModelConfig(model="tiny"), data=DataConfig(seq_len=32, eval_size=8),
                     objective=ObjectiveConfig(alpha_ramp=alpha_ramp),
                     train=TrainConfig(runtime=runtime, method=method, stages=2, batch=4, microbatches=2, steps=steps,
                                       lr=1e-2, threads=1, eval_every=2, ckpt_every=ckpt_every),
                     out=str(out))


@pytest.fixture(scope="module")
def trained_long(tmp_path_factory):
    made: dict[str, str] = {}

    def run(method: str) -> str:
        if method not in made:
            out = tmp_path_factory.mktemp(f"long-{method}")
            assert train_reference(cfg_of(out, steps=LONG, method=method), progress=False).state == "finished"
            made[method] = str(out)
        return made[method]

    return run


# (method, the first run's steps, where it ended, the step the longer run goes on from)
CASES = [
    ("zerolock", 4, "finished", 4),  # its last step an eval step: evaluated again as one of the evals
    ("bp", 5, "finished", 4),  # its last step past the newest checkpoint: step 5 is trained again
    ("zerolock", 6, "stopped", 3),  # stopped before its end: goes on and past it
]


@pytest.mark.parametrize("method, steps, ended, goes_on_from", CASES)
def test_a_run_given_more_steps_equals_one_trained_that_long_bitwise(tmp_path, trained_long, method, steps, ended,
                                                                     goes_on_from):
    first = cfg_of(tmp_path, steps=steps, method=method)
    if ended == "stopped":
        interrupted(first, how="stop", after=goes_on_from)
    else:
        assert train_reference(first, progress=False).state == "finished"
    longer = train_reference(cfg_of(tmp_path, steps=LONG, method=method), progress=False, resume=True)
    assert (longer.state, longer.steps_done, longer.resumed_from_step) == ("finished", LONG, goes_on_from)
    assert RunDir(tmp_path).saved_config().train.steps == LONG  # a later --resume continues the longer run
    assert recorded(tmp_path) == recorded(trained_long(method))
    assert_same_weights(tmp_path, trained_long(method))


def test_the_cli_trains_a_finished_run_on_with_resume_and_steps(tmp_path, trained_long):
    assert train_reference(cfg_of(tmp_path, steps=4), progress=False).state == "finished"
    done = subprocess.run([sys.executable, "-m", "zerolock_core", "train", "--resume", str(tmp_path), "--steps",
                           str(LONG), "--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert RunDir(tmp_path).read_metrics().resumed_from_step == 4
    assert recorded(tmp_path) == recorded(trained_long("zerolock"))
    assert_same_weights(tmp_path, trained_long("zerolock"))


def test_the_study_trains_a_shorter_finished_run_of_its_plan_on_instead_of_again(tmp_path, trained_long, capsys):
    """`depth._train` (the depth and frontier studies') given a longer horizon than its finished run."""
    out = tmp_path / "run"
    assert train_reference(cfg_of(out, steps=4), progress=False).state == "finished"
    short = depth.cached_analysis(cfg_of(out, steps=4))  # a report of the shorter horizon kept its analysis
    planned = cfg_of(out, steps=LONG, ckpt_every=0)  # as the study plans it: `_train` sets the checkpoints
    assert not depth._finished_with(planned)
    depth._train(planned, tmp_path / "run.log")
    assert f"training run on to step {LONG} from step 4" in capsys.readouterr().out
    assert depth._finished_with(planned)
    assert recorded(out) == recorded(trained_long("zerolock"))
    # the longer run's analysis reads its own final weights, not the kept one of step 4
    longer = depth.cached_analysis(planned)
    assert (short["steps_done"], longer["steps_done"]) == (4, LONG)
    assert longer == {**depth.analyse(planned), "steps_done": LONG}


def _saved_run(out, cfg: RunConfig) -> RunDir:
    """A run directory holding `cfg`'s config only (nothing trained: what the refusals read is the config and
    the checkpoints)."""
    rd = RunDir(out)
    rd.path.mkdir(parents=True)
    rd.write_config(cfg)
    return rd


# (the run there, the steps asked for, what the one-line refusal says)
REFUSALS = [
    ({"runtime": "pipeline", "method": "zerolock"}, LONG, "only a reference run (--runtime reference) can be trained "
                                                          "past its 4 steps; this one ran in the pipeline runtime"),
    ({"alpha_ramp": "linear:0.5->1"}, LONG, "the run's α ramp (--alpha-ramp linear:0.5->1) spans its 4 steps"),
    ({"ckpt_every": 0}, LONG, "the run kept no checkpoint to go on from (it ran with --ckpt-every 0); train it "
                              "again with --steps 8"),
    ({}, 2, "the run there trains 4 steps; a run can be trained on to more steps, never cut to fewer"),
]


@pytest.mark.parametrize("run, steps, says", REFUSALS)
def test_a_run_is_given_more_steps_only_where_it_would_equal_one_trained_that_long(tmp_path, run, steps, says):
    cfg = cfg_of(tmp_path / "run", steps=4, runtime=run.get("runtime", "reference"),
                 alpha_ramp=run.get("alpha_ramp", ""), ckpt_every=run.get("ckpt_every", 2))
    rd = _saved_run(tmp_path / "run", cfg)
    with pytest.raises(ConfigError) as refused:
        check_resumable(rd, replace(cfg, train={"steps": steps}))
    message = str(refused.value)
    assert says in message and f"--steps {steps}" in message and "\n" not in message
    assert rd.saved_config().train.steps == 4  # a refusal leaves the run as it was
