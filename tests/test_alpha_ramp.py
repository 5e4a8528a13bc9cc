"""α ramps: their values by step, their validation, and a run that uses one."""
import pytest

from zerolock_core.config.alpha_ramp import AlphaRamp
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.run_config import ObjectiveConfig, RunConfig, TrainConfig


@pytest.mark.parametrize("text,steps,expected", [
    ("linear:0.5->1", 5, [0.5, 0.625, 0.75, 0.875, 1.0]),
    ("linear:1->0.5", 3, [1.0, 0.75, 0.5]),
    ("cosine:0.5->1", 3, [0.5, 0.75, 1.0]),
    ("linear:0.2->0.2", 4, [0.2, 0.2, 0.2, 0.2]),
    ("linear:0.5->1", 1, [1.0]),
])
def test_ramp_values_by_step(text, steps, expected):
    ramp = AlphaRamp.parse(text)
    assert [ramp.at(t, steps) for t in range(steps)] == pytest.approx(expected)


@pytest.mark.parametrize("text,message", [
    ("linear:0.5", "SHAPE:START->END"),
    ("step:0.5->1", "SHAPE:START->END"),
    ("linear:0->1", "outside"),
    ("linear:0.5->1.5", "outside"),
    ("linear:a->1", "SHAPE:START->END"),
])
def test_bad_ramps_are_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig(objective=ObjectiveConfig(alpha_ramp=text))


def test_a_ramp_with_per_stage_alphas_or_for_bp_is_refused():
    with pytest.raises(ConfigError, match="no per-stage --alpha"):
        RunConfig(objective=ObjectiveConfig(alpha=(1.0, 0.5, 0.5), alpha_ramp="linear:0.5->1"),
                  train=TrainConfig(stages=3))
    with pytest.raises(ConfigError, match="belongs to ZeroLock"):
        RunConfig(objective=ObjectiveConfig(alpha_ramp="linear:0.5->1"), train=TrainConfig(runtime="reference", method="bp"))


def test_the_worker_uses_the_ramped_alpha_of_its_step():
    from zerolock_core.config.alpha_ramp import alpha_by_step

    cfg = RunConfig(objective=ObjectiveConfig(alpha_ramp="linear:0.5->1"), train=TrainConfig(steps=3))
    at = alpha_by_step(cfg, 1)
    assert [at(t) for t in range(3)] == pytest.approx([0.5, 0.75, 1.0])
    assert alpha_by_step(RunConfig(), 0) is None


@pytest.mark.parametrize("objective", [{"alpha_schedule": "linear:0.5->1"}, {"alpha_ramp": "linear:0.5->1"}])
def test_a_run_directorys_config_with_the_old_name_of_the_ramp_still_reads(objective):
    """config.json files written before the rename hold "alpha_schedule"."""
    assert RunConfig.from_dict({"objective": objective}).objective.alpha_ramp == "linear:0.5->1"
