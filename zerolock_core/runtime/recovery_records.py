"""The coordinator's book of failures: which injections it expects, which recoveries are open, and
the closed records that go into metrics.json (`recovery`): mode, kind, the seconds of each phase
(`recovery_phases`: detect, restart, restore, relink, replay) and their total, micro-batches replayed,
bytes moved, and the instants that bound the phases (monotonic ns, the clock of the events) so that a
timeline draws the failure where it happened, with the same numbers."""
from __future__ import annotations

import time
from typing import Any, Callable

import torch.distributed as dist

from ..config.run_config import STRAGGLER, STRAGGLER_FACTOR, FailureSpec, RunConfig
from ..methods import recovers_locally
from .recovery_phases import INSTANTS, phases_from_instants
from ..rundir.run_dir import RunDir
from . import protocol

Getter = Callable[[str, Any, type], Any]


def mode_of(label: str) -> str:
    """"1@3:kill" -> kill; "api:stop:2" -> stop; "1@20:slow=3" -> slow."""
    return (label.split(":")[1] if label.startswith("api:") else label.rpartition(":")[2]).partition("=")[0]


class RecoveryBook:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.m, self.K = cfg.train.microbatches, cfg.train.stages
        self._expected: dict[int, list[str]] = {}
        for text in cfg.train.failures:
            f = FailureSpec.parse(text)
            self._expected.setdefault(f.stage, []).append(f.label)
        self._attributed: set[str] = set()
        self._fired: dict[tuple[int, str], int] = {}  # (stage, label) -> when it fired (monotonic ns)
        self._open: dict[int, dict[str, Any]] = {}
        self.closed: list[dict[str, Any]] = []

    def expect(self, stage: int, label: str) -> None:
        self._expected.setdefault(stage, []).append(label)

    def _fired_at(self, stage: int, label: str, read: Callable[[str], int | None]) -> int | None:
        """When `label` fired on `stage` (monotonic ns; None until it has): read from the store until it
        has fired, then remembered — an injection fires once, and the status asks at every tick."""
        key = (stage, label)
        if key not in self._fired:
            t = read(protocol.injected(stage, label))
            if t is None:
                return None
            self._fired[key] = t
        return self._fired[key]

    def fired_on(self, stage: int, store: dist.Store) -> tuple[str, int] | None:
        """The newest injection that hit `stage` and is not yet attributed to a recovery."""
        def read(key: str) -> int | None:
            t = protocol.get_int(store, key, -1)
            return t if t >= 0 else None

        best = None
        for label in self._expected.get(stage, []):
            if label in self._attributed or mode_of(label) == STRAGGLER:  # a straggler fails nothing
                continue
            t = self._fired_at(stage, label, read)
            if t is not None and (best is None or t > best[1]):
                best = (label, t)
        return best

    def _attribute(self, stage: int, store: dist.Store, t_detect: int) -> tuple[str, str | None, int]:
        fired = self.fired_on(stage, store)
        if fired is None:  # a real crash: when it happened is unknown, so detection counts as instant
            return "crash", None, t_detect
        self._attributed.add(fired[0])
        return mode_of(fired[0]), fired[0], fired[1]

    def open_local(self, stage: int, *, gen: int, reason: str, t_detect: int, store: dist.Store,
                   failed: bool = True) -> None:
        """A local recovery of `stage` starts (generation `gen`). A stage restarted only because a
        neighbour failed while it was still starting (`failed=False`) continues its own open
        recovery, if it has one, and opens none otherwise; a new failure of a stage whose recovery
        is open closes that one as interrupted."""
        if not failed or (stage in self._open and self.fired_on(stage, store) is None):
            if stage in self._open:  # the same recovery, widened: keep its mode and start time
                self._open[stage]["gen"] = gen
                self._open[stage]["reason"] += f"; restarted again ({reason})"
            return
        self._interrupt(stage, t_detect)
        mode, label, t_fail = self._attribute(stage, store, t_detect)
        resent0 = protocol.get_int(store, protocol.resent_bytes(stage - 1), 0) if stage > 0 else 0
        self._open[stage] = {"stage": stage, "mode": mode, "failure": label, "kind": "local", "reason": reason,
                             "gen": gen, "t_fail": t_fail, "t_detect": t_detect, "resent0": resent0}

    def open_global(self, stage: int, *, reason: str, t_detect: int, rollback_step: int, frontier_step: int,
                    gen: int, store: dist.Store) -> None:
        for s in list(self._open):  # recoveries under way end in the rollback
            self._interrupt(s, t_detect)
        mode, label, t_fail = self._attribute(stage, store, t_detect)
        self._open[stage] = {"stage": stage, "mode": mode, "failure": label, "kind": "global", "reason": reason,
                             "t_fail": t_fail, "t_detect": t_detect, "rollback_step": rollback_step,
                             "frontier_step": frontier_step, "gen": gen,
                             "fallback": recovers_locally(self.cfg.train.method)}

    def close_all_open(self, why: str) -> list[dict[str, Any]]:
        """Every record, the open ones closed as interrupted (`why`): the run ends during a recovery."""
        now = time.monotonic_ns()
        for stage in list(self._open):
            self._interrupt(stage, now, why=why)
        return list(self.closed)

    def _interrupt(self, stage: int, t_now: int, *, why: str = "interrupted by another failure") -> None:
        """Close an open recovery that something cut short: its times run until then."""
        r = self._open.pop(stage, None)
        if r is None:
            return
        # the restart was under way until now: the later phases were never reached
        phases = phases_from_instants({"t_fail_ns": r["t_fail"], "t_detect_ns": r["t_detect"], "t_restore_ns": t_now})
        self.closed.append({"stage": stage, "mode": r["mode"], "failure": r["failure"], "kind": r["kind"],
                            "reason": f"{r['reason']}; {why}", "gen": r.get("gen"), **phases,
                            "total_s": sum(phases.values()), "replayed_microbatches": 0,
                            "bytes_transferred": 0, "checkpoint_bytes_read": 0, "activation_bytes_resent": 0,
                            "interrupted": True, **_instants(r, end=t_now)})

    def set_warm(self, stage: int, warm: str | None) -> None:
        if stage in self._open:
            self._open[stage]["warm_standby"] = warm

    def open_stages(self) -> list[int]:
        return sorted(self._open)

    def open_records(self) -> list[dict[str, Any]]:
        """The recoveries under way, as far as they got: what the dashboard shows during an outage."""
        now = time.monotonic_ns()
        return [{"stage": s, "mode": r["mode"], "failure": r["failure"], "kind": r["kind"], "reason": r["reason"],
                 "detect_s": (r["t_detect"] - r["t_fail"]) / 1e9, "down_s": (now - r["t_fail"]) / 1e9,
                 **_instants(r, end=None)} for s, r in sorted(list(self._open.items()))]

    def downtime_s(self) -> float:
        """Seconds the pipeline spent in failures so far (failure to caught up; open ones until now),
        overlapping outages counted once: what an ETA must leave out."""
        now = time.monotonic_ns()
        spans = sorted([(r["t_fail_ns"], r["t_end_ns"]) for r in list(self.closed) if r.get("t_fail_ns") is not None]
                       + [(r["t_fail"], now) for r in list(self._open.values())])
        total, reach = 0, None
        for a, b in spans:
            if reach is None or a > reach:
                total += b - a
                reach = b
            elif b > reach:
                total += b - reach
                reach = b
        return total / 1e9

    def close_ready(self, get: Getter, *, gens: list[int]) -> None:
        m, K = self.m, self.K
        for s, r in list(self._open.items()):
            if r["kind"] == "local":
                restored = get(protocol.restored(s, r["gen"]), None, str)
                linked = get(protocol.linked(s, r["gen"]), None, int)
                caught = get(protocol.caught_up(s, r["gen"]), None, int)
                if restored is None or linked is None or caught is None:
                    continue
                t_restore, t_restored, step, ckpt_bytes = map(int, restored.split())
                frontier = get(protocol.replay_frontier(s, r["gen"]), step * m, int)
                resent = (get(protocol.resent_bytes(s - 1), 0, int) - r["resent0"]) if s > 0 else 0
                replayed = max(0, frontier - step * m)
            else:
                restores = [get(protocol.restored(k, gens[k]), None, str) for k in range(K)]
                links = [get(protocol.linked(k, gens[k]), None, int) for k in range(K)]
                steps = [get(protocol.stage_step(k), 0, int) for k in range(K)]
                if None in restores or None in links or min(steps) < min(r["frontier_step"], self.cfg.train.steps):
                    continue
                parsed = [tuple(map(int, x.split())) for x in restores]
                # restart and restore are the failed stage's own (its RESTORE bar); relink lasts until the
                # last stage is connected: the pipeline runs again only then
                t_restore, t_restored = parsed[s][0], parsed[s][1]
                ckpt_bytes = sum(x[3] for x in parsed)
                linked, caught = max(links), time.monotonic_ns()
                lost_steps = max(0, r["frontier_step"] - r["rollback_step"])
                replayed = lost_steps * m * K
                # the replay sends every hidden state and every gradient across every hop again
                resent = lost_steps * m * (K - 1) * 2 * get(protocol.HIDDEN_BYTES, 0, int)
            instants = _instants(r, restore=t_restore, restored=t_restored, linked=linked, end=max(caught, linked))
            phases = phases_from_instants(instants)
            rec = {"stage": s, "mode": r["mode"], "failure": r["failure"], "kind": r["kind"], "reason": r["reason"],
                   "gen": r.get("gen"), **phases, "total_s": sum(phases.values()),
                   "replayed_microbatches": replayed,
                   "bytes_transferred": resent + ckpt_bytes, "checkpoint_bytes_read": ckpt_bytes,
                   "activation_bytes_resent": resent, **instants}
            for key in ("rollback_step", "fallback", "warm_standby"):
                if key in r:
                    rec[key] = r[key]
            self.closed.append(rec)
            del self._open[s]

    def stragglers(self, get: Getter) -> list[dict[str, Any]]:
        """Every straggler that fired (metrics.json's `stragglers`): it fails nothing, so no recovery
        records it; `t_fail` is when its stage turned slow (monotonic ns, the events' clock)."""
        out = []
        for stage, labels in sorted(self._expected.items()):
            for label in labels:
                if mode_of(label) != STRAGGLER:
                    continue
                t = self._fired_at(stage, label, lambda key: get(key, None, int))
                if t is not None:
                    factor = STRAGGLER_FACTOR if label.startswith("api:") else FailureSpec.parse(label).factor
                    out.append({"stage": stage, "failure": label, "mode": STRAGGLER, "factor": factor, "t_fail": t})
        return out

    def not_injected(self, get: Getter, state: str) -> list[dict[str, str]]:
        """Every --fail spec that never fired, and why (none, in a run that reached its end)."""
        out = []
        for stage, labels in sorted(self._expected.items()):
            for label in labels:
                if label.startswith("api:") or self._fired_at(stage, label, lambda key: get(key, None, int)) \
                        is not None or RunDir(self.cfg.out).injected_marker(stage, label).exists():
                    continue
                out.append({"failure": label, "reason": f"the run ended ({state}) before stage {stage} reached "
                                                        f"the point where it fires"})
        return out


def _instants(r: dict[str, Any], *, restore: int | None = None, restored: int | None = None,
              linked: int | None = None, end: int | None) -> dict[str, Any]:
    values = (r["t_fail"], r["t_detect"], restore, restored, linked, end)
    return {**dict(zip(INSTANTS, values)), "open": end is None}
