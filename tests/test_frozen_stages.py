"""--frozen-stages N: the first N stages of a BP schedule run forward only. Their schedule has no backward,
the first stage that trains sends no gradient, the simulator and the runtime agree on what each stage holds,
the frozen chunks keep their initial weights, and the pipeline equals the BP reference given the same
option (the operations the reference performs, one process)."""
from __future__ import annotations

import pytest
import torch

from zerolock_core.cli import build_parser, config_from_args
from zerolock_core.config.run_config import DataConfig, LinkConfig, ModelConfig, RunConfig, TrainConfig, replace
from zerolock_core.jobs.job import train
from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.runtime.link_emulation import link_for
from zerolock_core.schedule import Costs, Kind, build_schedule, iter_stage_actions, simulate
from zerolock_core.train.reference_trainer import train_reference
from zerolock_core.train.run_setup import build_run_setup

BACKWARD = {Kind.RB, Kind.B, Kind.SB, Kind.W}


@pytest.mark.parametrize("method", ["gpipe", "1f1b", "pipedream"])
@pytest.mark.parametrize("frozen", [1, 2])
def test_frozen_stages_run_no_backward_and_the_first_trained_stage_sends_no_gradient(method, frozen):
    K, m = 4, 4
    sched = build_schedule(method, stages=K, microbatches=m, windows=2, frozen_stages=frozen)
    plain = build_schedule(method, stages=K, microbatches=m, windows=2)
    for s in range(K):
        kinds = [a.kind for a in sched.for_stage(s)]
        dropped = BACKWARD if s < frozen else {Kind.SB} if s == frozen else set()
        assert not dropped & set(kinds), (s, kinds)
        assert kinds == [a.kind for a in plain.for_stage(s) if a.kind not in dropped]  # the same order otherwise
        assert list(iter_stage_actions(method, stage=s, stages=K, microbatches=m, windows=2,
                                       frozen_stages=frozen)) == list(sched.for_stage(s))
    sched.steps()  # runs to the end: raises Deadlock otherwise


@pytest.mark.parametrize("method,frozen,held", [
    ("1f1b", 0, (3, 2, 1)), ("1f1b", 1, (1, 2, 1)), ("1f1b", 2, (1, 1, 1)),
    ("gpipe", 1, (1, 4, 4)), ("pipedream", 1, (1, 2, 1)),
])
def test_the_simulator_holds_a_frozen_stage_output_only_while_it_is_computed(method, frozen, held):
    result = simulate(build_schedule(method, stages=3, microbatches=4, windows=2, frozen_stages=frozen),
                      costs=Costs(), link=link_for(LinkConfig()))
    assert result.inflight_peak == held


@pytest.mark.parametrize("method,frozen,why", [
    ("zb-h1", 1, "one of"), ("zerolock", 1, "one of"), ("1f1b", 3, "stage left to train"),
    ("dualpipe-v", 1, "one of"),
])
def test_build_schedule_refuses_what_it_cannot_cut(method, frozen, why):
    with pytest.raises(ValueError, match=why):
        build_schedule(method, stages=3, microbatches=6, frozen_stages=frozen)


def cli_config(*flags: str, out: str) -> RunConfig:
    return config_from_args(build_parser().parse_args(["train", *flags, "--out", out]), out=out)


@pytest.mark.parametrize("flags,words", [
    (["--method", "zerolock", "--frozen-stages", "1"], "belongs to gpipe, 1f1b, pipedream, bp"),
    (["--runtime", "pipeline", "--method", "terminal", "--frozen-stages", "1"], "already trains its last chunk alone"),
    (["--runtime", "pipeline", "--method", "zb-h1", "--frozen-stages", "1"], "not --method zb-h1"),
    (["--runtime", "pipeline", "--method", "1f1b", "--stages", "3", "--frozen-stages", "3"], "leaves no stage"),
    (["--runtime", "reference", "--method", "bp", "--stages", "2", "--frozen-stages", "5"], "leaves no stage"),
])
def test_a_frozen_stages_refusal_is_one_line_naming_the_flag(tmp_path, flags, words):
    with pytest.raises(ValueError) as err:
        cli_config(*flags, out=str(tmp_path / "run"))
    text = str(err.value)
    assert "--frozen-stages" in text and words in text and "\n" not in text, text
    assert list(tmp_path.iterdir()) == []


def cfg_for(out, *, runtime: str, method: str, frozen: int) -> RunConfig:
    return RunConfig(model=ModelConfig(boundaries=(3, 6)), data=DataConfig(seq_len=32, eval_size=16),
                     train=TrainConfig(runtime=runtime, method=method, stages=3, batch=4, microbatches=4, steps=3,
                                       threads=1, frozen_stages=frozen, final_eval=runtime == "reference"),
                     out=str(out))


@pytest.mark.slow
@pytest.mark.parametrize("frozen", [1, 2])
def test_a_frozen_prefix_1f1b_pipeline_equals_the_bp_reference_and_keeps_its_initial_weights(tmp_path, frozen):
    ref_cfg = cfg_for(tmp_path / "ref", runtime="reference", method="bp", frozen=frozen)
    train_reference(ref_cfg, progress=False)
    got = train(cfg_for(tmp_path / "pipe", runtime="pipeline", method="1f1b", frozen=frozen), progress=False)
    assert got.state == "finished", got.reason
    ref, pipe = load_final_weights(tmp_path / "ref"), load_final_weights(tmp_path / "pipe")
    initial = [c.trainable_state() for c in build_run_setup(replace(ref_cfg, out=None)).chunks]
    for k in range(3):
        assert ref[k].keys() == pipe[k].keys() == initial[k].keys()
        for name in ref[k]:
            assert torch.equal(ref[k][name], pipe[k][name]), (k, name)
            # the frozen chunks did not move; every trained one did
            assert torch.equal(pipe[k][name], initial[k][name]) == (k < frozen), (k, name)
    # what each stage held: the frozen ones one output at a time and no graph; the rest 1F1B's count
    assert [s["peak_inflight_microbatches"] for s in got.per_stage] == [1] * frozen + [3 - frozen - s
                                                                                        for s in range(3 - frozen)]
    assert [s["peak_activation_bytes"] == 0 for s in got.per_stage] == [True] * frozen + [False] * (3 - frozen)


@pytest.mark.slow
def test_a_frozen_prefix_pipedream_trains_its_suffix_and_leaves_stage_0_as_it_was(tmp_path):
    cfg = cfg_for(tmp_path / "pd", runtime="pipeline", method="pipedream", frozen=1)
    got = train(cfg, progress=False)
    assert got.state == "finished", got.reason
    weights = load_final_weights(tmp_path / "pd")
    initial = [c.trainable_state() for c in build_run_setup(replace(cfg, out=None)).chunks]
    for k in range(3):
        moved = any(not torch.equal(weights[k][n], initial[k][n]) for n in weights[k])
        assert moved == (k > 0), k
