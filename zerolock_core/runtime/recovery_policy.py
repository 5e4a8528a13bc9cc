"""What the coordinator does about failed stages: a pure function of what it observed.

`decide(observed)` returns one of
  local   ZeroLock: restart only the failed stages (and any neighbour still starting up), each from a
          checkpoint its neighbours can replay it from; the others keep training
  global  restart every stage from the newest step that all of them have a verified checkpoint of
  fail    end the run: a stage's own error, a crash before training started, a crash loop, a
          method that cannot be recovered
No processes, no store: the cases are tested as tables (tests/test_recovery_policy.py).

Local replay rule. A replacement of stage s restores step c_s and recomputes every micro-batch from
c_s·m on. Its inputs come from stage s−1: from the survivor's replay buffer, which must still hold
micro-batch c_s·m (floor ≤ c_s·m), or — when s−1 failed too — from s−1's own replacement, which
regenerates everything from c_{s−1}·m ≤ c_s·m. Its outputs must reach stage s+1 from where s+1
stands: the survivor has consumed d micro-batches, so c_s·m ≤ d (when s+1 failed too,
c_s ≤ c_{s+1}). Choosing c from the last stage to the first, each as new as allowed, gives the
smallest replay that is exactly the unfailed run.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..methods import recovers_locally, refusal


@dataclass(kw_only=True, frozen=True)
class StageView:
    stage: int
    failed: bool = False  # its process exited unexpectedly or stopped beating
    why: str = ""  # "exit code -9", "no heartbeat for 3 s", ...
    error: str = ""  # an error the stage recorded itself (a bug, a bad input): never retried
    reached_running: bool = True  # the failed process had started training
    starting: bool = False  # alive, but a replacement still loading / restoring / connecting
    link_lost: bool = False  # it gave up on a broken link (BP methods exit so)
    restarts: int = 0  # replacements it has had so far
    checkpoints: tuple[int, ...] = ()  # steps with a verified checkpoint on disk
    consumed: int = 0  # hidden states it has consumed (its inbound flow position)
    buffer_floor: int = 0  # the oldest micro-batch its replay buffer still holds


@dataclass(kw_only=True, frozen=True)
class Observed:
    method: str
    microbatches: int
    max_restarts: int
    stages: tuple[StageView, ...]

    @property
    def failed(self) -> list[StageView]:
        return [v for v in self.stages if v.failed]


@dataclass(kw_only=True, frozen=True)
class Decision:
    action: str  # "local" | "global" | "fail"
    reason: str
    restart: tuple[int, ...] = ()  # the stages to (re)start
    restore_step: dict[int, int] = field(default_factory=dict)  # stage -> checkpoint step (0: from scratch)

    def __post_init__(self) -> None:
        assert self.action in ("local", "global", "fail"), self.action


def common_step(checkpoints: list[tuple[int, ...]]) -> int:
    """The newest step every stage has a verified checkpoint of (0: start from scratch)."""
    common = set(checkpoints[0]) if checkpoints else set()
    for steps in checkpoints[1:]:
        common &= set(steps)
    return max(common, default=0)


def decide(obs: Observed) -> Decision:
    failed = obs.failed
    assert failed, "decide() is for a failure"
    # the cause first: a stage that gave up on a link is a consequence of another's failure
    cause = next((v for v in failed if not v.link_lost), failed[0])
    for v in failed:
        if v.error:
            return Decision(action="fail", reason=f"stage {v.stage} failed: {v.error.strip().splitlines()[0]}")
    for v in failed:
        if not v.reached_running and v.restarts == 0:
            return Decision(action="fail", reason=f"stage {v.stage} {v.why} before it started training "
                                                   "(a crash while starting up is not retried)")
        if v.restarts >= obs.max_restarts:
            return Decision(action="fail", reason=f"stage {v.stage} failed again ({v.why}) after "
                                                   f"{v.restarts} restart(s); --max-restarts is {obs.max_restarts}")
    if refused := refusal(obs.method):
        return Decision(action="fail", reason=refused)
    if recovers_locally(obs.method):
        local = _local(obs)
        if local.action == "local":
            return local
        why = local.reason
    else:
        why = f"{obs.method} has no local recovery (its stages are locked to each other's gradients)"
    step = common_step([v.checkpoints for v in obs.stages])
    return Decision(action="global", restart=tuple(range(len(obs.stages))),
                    restore_step={v.stage: step for v in obs.stages},
                    reason=f"stage {cause.stage} {cause.why}: {why}; every stage restarts from step {step}")


def _local(obs: Observed) -> Decision:
    views = {v.stage: v for v in obs.stages}
    K, m = len(obs.stages), obs.microbatches
    if any(v.link_lost for v in obs.stages):
        lost = next(v.stage for v in obs.stages if v.link_lost)
        return Decision(action="global", reason=f"stage {lost} gave up on a broken link")
    restart = {v.stage for v in obs.stages if v.failed}
    grown = True
    while grown:  # a neighbour still starting up was connecting to a process that is gone: restart it too
        grown = False
        for s in sorted(restart):
            for n in (s - 1, s + 1):
                if 0 <= n < K and n not in restart and views[n].starting:
                    restart.add(n)
                    grown = True
    restore: dict[int, int] = {}
    for s in sorted(restart, reverse=True):
        if s == K - 1:
            limit = None
        elif s + 1 in restart:
            limit = restore[s + 1] * m
        else:
            limit = views[s + 1].consumed
        allowed = [c for c in views[s].checkpoints if limit is None or c * m <= limit]
        restore[s] = max(allowed, default=0)
    for s in sorted(restart):
        if s > 0 and s - 1 not in restart and views[s - 1].buffer_floor > restore[s] * m:
            return Decision(action="global", reason=(
                f"stage {s - 1}'s replay buffer starts at micro-batch {views[s - 1].buffer_floor}, but stage "
                f"{s} restores step {restore[s]} and needs micro-batch {restore[s] * m}"))
    cause = obs.failed[0]
    return Decision(action="local", restart=tuple(sorted(restart)), restore_step=restore,
                    reason=f"stage {cause.stage} {cause.why}: local replay")
