"""Recovering from failed stages, on the coordinator's side: observe, decide, act.

`handle(failed, states)` gathers what the coordinator knows of every stage (`recovery_policy.Observed`:
checkpoints on disk, flow positions, replay-buffer floors), asks the pure `decide` what to do, and
does it — a local recovery restarts only the failed stages of a ZeroLock run while the others keep
training, a global one rolls every stage back to their newest common checkpoint — or returns why the
run must end. The book (`RecoveryBook`) keeps the records that go into metrics.json.
"""
from __future__ import annotations

import time

from ..config.run_config import RunConfig
from ..rundir.run_dir import RunDir
from . import protocol
from .checkpoint import CheckpointStore
from .recovery_policy import Decision, Observed, StageView, decide
from .recovery_records import RecoveryBook
from .store_view import StoreView
from .supervisor import StageSupervisor


class Recovery:
    def __init__(self, cfg: RunConfig, store: StoreView, supervisor: StageSupervisor, book: RecoveryBook) -> None:
        self.cfg, self.store, self.sup, self.book = cfg, store, supervisor, book
        self.K = cfg.train.stages
        self.link_gens = [0] * max(0, self.K - 1)

    def handle(self, failed: list[StageView], states: list[str]) -> tuple[str, dict[str, str]] | None:
        """Recover from `failed`, or return (why the run must end, the stages' own errors)."""
        t_detect = time.monotonic_ns()
        self.sup.kill([v.stage for v in failed])  # a hung (SIGSTOP) stage can never come back and interfere
        errors = {str(f.stage): f.error for f in failed if f.error}
        if self.cfg.train.ckpt_every <= 0:
            v = failed[0]
            return (v.error.strip().splitlines()[0] if v.error else
                    f"stage {v.stage} {v.why}; the run has no checkpoints to recover from (--ckpt-every)"), errors
        decision = decide(self.observe(failed, states))
        if decision.action == "fail":
            return decision.reason, errors
        if decision.action == "local":
            self._local(decision, failed, t_detect)
        else:
            self._global(decision, failed, t_detect)
        return None

    def observe(self, failed: list[StageView], states: list[str]) -> Observed:
        by_stage = {v.stage: v for v in failed}
        views = []
        for s in range(self.K):
            base = by_stage.get(s) or StageView(stage=s, restarts=self.sup.restarts[s],
                                                starting=states[s] in protocol.STARTING_STATES,
                                                link_lost=states[s] == "link-lost")
            views.append(StageView(
                **{**base.__dict__,
                   "checkpoints": CheckpointStore(RunDir(self.cfg.out), stage=s).verified_steps(),
                   "consumed": self.store.get(protocol.flow_consumed(s), 0, int),
                   "buffer_floor": self.store.get(protocol.buffer_floor(s), 0, int)}))
        return Observed(method=self.cfg.train.method, microbatches=self.cfg.train.microbatches,
                        max_restarts=self.cfg.train.max_restarts, stages=tuple(views))

    def _local(self, d: Decision, failed: list[StageView], t_detect: int) -> None:
        m = self.cfg.train.microbatches
        self.sup.kill(d.restart)
        links = sorted({link for s in d.restart for link in (s - 1, s) if 0 <= link < self.K - 1})
        for s in d.restart:
            # the upstream prunes its replay buffer below our checkpoint cursor: never past what we replay
            self.store.set(protocol.checkpoint_cursor(s), str(d.restore_step[s] * m))
            # the steps the failed process took after its checkpoint are gone: the stage is back there
            self.store.set(protocol.stage_step(s), str(d.restore_step[s]))
        for link in links:
            self.link_gens[link] += 1
            self.store.set(protocol.link_generation(link), str(self.link_gens[link]))
        why = {v.stage: v.why for v in failed}
        for s in d.restart:
            self.sup.restarts[s] += 1
            gen = self.sup.gens[s] + 1
            self.book.open_local(s, gen=gen, reason=why.get(s, "a neighbour failed while it was starting"),
                                 t_detect=t_detect, store=self.store.raw, failed=s in why)
            warm = self.sup.spawn(self.sup.launch(s, generation=gen, replacement=True,
                                                  restore_step=d.restore_step[s]))
            self.book.set_warm(s, warm)

    def _global(self, d: Decision, failed: list[StageView], t_detect: int) -> None:
        frontier = max(self.store.get(protocol.stage_step(s), 0, int) for s in range(self.K))
        self.sup.kill_all()
        step = next(iter(d.restore_step.values()), 0)
        for s in range(self.K):
            for key in protocol.stage_keys_of_a_generation(s):
                self.store.delete(key)
            self.store.set(protocol.checkpoint_cursor(s), str(step * self.cfg.train.microbatches))
        self.sup.start_at(step)  # every stage is back at the step it restores (a stop now records that)
        for link in range(self.K - 1):
            self.link_gens[link] += 1
            self.store.set(protocol.link_generation(link), str(self.link_gens[link]))
        cause = next((v for v in failed if not v.link_lost), failed[0])
        for v in failed:
            self.sup.restarts[v.stage] += 1
        self.book.open_global(cause.stage, reason=f"{cause.why}: {d.reason}", t_detect=t_detect,
                              rollback_step=step, frontier_step=frontier, gen=self.sup.gens[cause.stage] + 1,
                              store=self.store.raw)
        warm = [self.sup.spawn(self.sup.launch(s, generation=self.sup.gens[s] + 1, restore_step=step))
                for s in range(self.K)]
        self.book.set_warm(cause.stage, next((w for w in warm if w), None))
