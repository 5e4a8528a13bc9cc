"""Recovery decisions as a table: observed state -> local replay / global rollback / fail (no processes)."""
import pytest

from zerolock_core.runtime.recovery_policy import Observed, StageView, common_step, decide

M = 4  # micro-batches per step


def obs(method="zerolock", *, failed=(), stages=3, ckpts=(2, 4), consumed=None, floors=None, starting=(),
        restarts=None, error=None, link_lost=(), not_running=(), max_restarts=3):
    views = []
    for s in range(stages):
        views.append(StageView(stage=s, failed=s in failed, why="exited with code -9" if s in failed else "",
                               error=(error or "") if s in failed else "", reached_running=s not in not_running,
                               starting=s in starting, link_lost=s in link_lost,
                               restarts=(restarts or {}).get(s, 0), checkpoints=tuple(ckpts),
                               consumed=(consumed or {}).get(s, 5 * M), buffer_floor=(floors or {}).get(s, 2 * M)))
    return Observed(method=method, microbatches=M, max_restarts=max_restarts, stages=tuple(views))


CASES = [
    # name, observed, action, restart, restore steps
    ("last stage: newest checkpoint", obs(failed={2}), "local", (2,), {2: 4}),
    ("middle stage, downstream has consumed past it", obs(failed={1}), "local", (1,), {1: 4}),
    ("middle stage, downstream behind its newest checkpoint: an older one",
     obs(failed={1}, consumed={2: 3 * M}), "local", (1,), {1: 2}),
    ("first stage (no upstream buffer needed)", obs(failed={0}), "local", (0,), {0: 4}),
    ("upstream buffer pruned past the restore point: global",
     obs(failed={2}, floors={1: 5 * M}), "global", (0, 1, 2), {0: 4, 1: 4, 2: 4}),
    ("upstream and downstream together: the upstream's replacement regenerates",
     obs(failed={0, 1}, floors={0: 99 * M}), "local", (0, 1), {0: 4, 1: 4}),
    ("two failed, the downstream one behind: the upstream restores no newer than it",
     obs(failed={0, 1}, ckpts=(2, 4), consumed={2: 2 * M}), "local", (0, 1), {0: 2, 1: 2}),
    ("a failure next to a replacement still starting: restart that one too",
     obs(failed={0}, starting={1}), "local", (0, 1), {0: 4, 1: 4}),
    ("no checkpoint yet: from scratch", obs(failed={1}, ckpts=(), floors={0: 0}), "local", (1,), {1: 0}),
    ("1f1b: global from the common step", obs("1f1b", failed={1}), "global", (0, 1, 2), {0: 4, 1: 4, 2: 4}),
    ("gpipe: global", obs("gpipe", failed={2}), "global", (0, 1, 2), {0: 4, 1: 4, 2: 4}),
    ("a survivor gave up on its link: global", obs(failed={1}, link_lost={2}), "global", (0, 1, 2),
     {0: 4, 1: 4, 2: 4}),
    ("a stage's own error is never retried", obs(failed={1}, error="ValueError: bad"), "fail", (), {}),
    ("a crash before training started is not retried", obs(failed={1}, not_running={1}), "fail", (), {}),
    ("a replacement crashing while starting is retried", obs(failed={1}, not_running={1}, restarts={1: 1}),
     "local", (1,), {1: 4}),
    ("the restart limit ends a crash loop", obs(failed={1}, restarts={1: 3}), "fail", (), {}),
    ("pipedream is refused", obs("pipedream", failed={1}), "fail", (), {}),
]


@pytest.mark.parametrize("name,observed,action,restart,restore", CASES, ids=[c[0] for c in CASES])
def test_decision_table(name, observed, action, restart, restore):
    d = decide(observed)
    assert (d.action, d.restart, d.restore_step) == (action, restart, restore), d.reason
    assert d.reason


def test_the_refusal_reasons_name_the_stage_and_the_cause():
    assert "stage 1 failed: ValueError: bad" in decide(obs(failed={1}, error="ValueError: bad\ntrace")).reason
    assert "--max-restarts is 3" in decide(obs(failed={1}, restarts={1: 3})).reason
    assert "replay buffer starts at micro-batch 20" in decide(obs(failed={2}, floors={1: 5 * M})).reason
    assert "PipeDream" in decide(obs("pipedream", failed={0})).reason


@pytest.mark.parametrize("checkpoints,step", [
    ([(2, 4), (2, 4), (2, 4)], 4),
    ([(2, 4, 6), (2, 4), (4, 6)], 4),  # the newest common one, not the minimum of the newest
    ([(4,), (2,)], 0),
    ([(), (2,)], 0),
    ([], 0),
])
def test_common_step_is_the_newest_step_every_stage_has(checkpoints, step):
    assert common_step(checkpoints) == step
