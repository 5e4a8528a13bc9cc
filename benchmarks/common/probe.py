"""Per-action costs measured in this process, one stage after another, with the stages' thread count.

The runtime runs exactly these `StageWorker` calls (forward, local step, BP backward, optimizer
step); timing them here, one after another, gives each stage's costs for any K without stage
processes competing for the cores. That is what the simulator needs for K > cores (docs/results.md, the fairness rule);
the simulator benchmark checks these costs against a real run's events where K <= cores.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

from zerolock_core.config.run_config import replace
from zerolock_core.methods import LOCAL_METHODS, chunk_trains, splits_backward
from zerolock_core.schedule import Costs, Kind
from zerolock_core.method.split_backward import WeightGradient
from zerolock_core.train.stage_worker import StageWorker
from zerolock_core.train.run_setup import build_run_setup
from .settings import BenchSettings
from zerolock_core.schedule.dualpipe_v import DUALPIPE_V


def probed_stage_costs(method: str, per_stage: dict[int, dict[str, float]], *,
                       frozen_stages: int = 0) -> dict[int, dict[str, float]]:
    """The simulator's per-stage costs of `method` from probed seconds: ZeroLock's forward is the one without
    an input gradient (F_local); zb-h1's backward is the split one as the runtime runs it (B_input, then W;
    the simulator's B is a whole backward, of which W is the part run later). DualPipe-V (simulated only)
    runs most of its backwards whole (torch's FULL_BACKWARD: B then W at once, one backward's cost) and
    splits a few to fill its tail: whole B and the probed W, so a split one costs no more than a whole one
    (optimistic for those few, exact for the rest). Terminal's chunks before the last train nothing: their
    forward keeps no graph, their local step only measures the readout's loss, their optimizer step has no
    gradient to apply (the `_frozen` costs, timed with the worker the runtime builds for such a chunk); so do
    the first `frozen_stages` of a BP schedule (--frozen-stages), which run no backward at all."""
    last = max(per_stage, default=0)

    def one(c: dict[str, float], stage: int) -> dict[str, float]:
        if not chunk_trains(method, last=stage == last, index=stage, frozen_stages=frozen_stages):
            return {Kind.F: c["F_frozen"], Kind.L: c["L_frozen"], Kind.B: c["B"], Kind.STEP: c["STEP_frozen"]}
        out = {Kind.F: c["F_local"] if method in LOCAL_METHODS else c["F"], Kind.L: c["L"], Kind.B: c["B"],
               Kind.STEP: c["STEP"]}
        if splits_backward(method):
            out[Kind.B], out[Kind.W] = c["B_input"] + c["W"], c["W"]
        elif method == DUALPIPE_V:
            out[Kind.W] = min(c["W"], c["B"])
        return out

    return {s: one(c, s) for s, c in per_stage.items()}


# what `probe_costs` times per stage; the `_frozen` three are a chunk's that does not train (terminal's)
PROBED = ("F_local", "L", "F", "B", "B_input", "W", "STEP", "F_frozen", "L_frozen", "STEP_frozen")


@dataclass(kw_only=True, frozen=True)
class ProbedCosts:
    # stage -> median seconds of F, F_local, L, B (a whole BP backward), B_input and W (that backward split
    # as zb-h1 runs it: the input gradient, then the weights'), STEP, and F, L and STEP of the stage's chunk
    # when it does not train (F_frozen, L_frozen, STEP_frozen: terminal's chunks before the last)
    per_stage: dict[int, dict[str, float]]
    hidden_bytes: int  # one micro-batch's hidden state on the wire
    layers: list[list[int]]

    def without_recompute(self) -> "ProbedCosts":
        """The costs of the same chunks without --recompute: F and B as the same rounds timed them with it
        off (`F_plain`, `B_plain`), so that a schedule with and one without compare on one probe."""
        per_stage = {s: {**c, "F": c["F_plain"], "B": c["B_plain"]} if "B_plain" in c else c
                     for s, c in self.per_stage.items()}
        return ProbedCosts(per_stage=per_stage, hidden_bytes=self.hidden_bytes, layers=self.layers)

    def costs(self, method: str, *, frozen_stages: int = 0) -> Costs:
        return Costs(
            forward=0.0,
            local=0.0,
            backward=0.0,
            step=0.0,
            hidden_bytes=self.hidden_bytes,
            grad_bytes=0 if method in LOCAL_METHODS else self.hidden_bytes,
            per_stage=probed_stage_costs(method, self.per_stage, frozen_stages=frozen_stages),
        )


def merged_adjacent(p: ProbedCosts) -> ProbedCosts:
    """The costs of a K-way split from its 2K-way split's (DualPipe-V's probe): stage j runs chunks 2j and
    2j + 1, each action the sum of the two (the boundary between them then costs nothing)."""
    assert len(p.per_stage) % 2 == 0, "a 2K-way split"
    per_stage = {j: {k: p.per_stage[2 * j][k] + p.per_stage[2 * j + 1][k] for k in PROBED}
                 for j in range(len(p.per_stage) // 2)}
    layers = [[p.layers[2 * j][0], p.layers[2 * j + 1][1]] for j in range(len(p.layers) // 2)]
    return ProbedCosts(per_stage=per_stage, hidden_bytes=p.hidden_bytes, layers=layers)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device) -> float:
    """Seconds `fn()` takes, the device synchronised before and after."""
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


@contextlib.contextmanager
def pinned_threads(threads: int) -> Iterator[None]:
    """torch's thread count set to `threads` (a stage's) while timing in this process, then restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def split_input_backward(w: StageWorker, mb: dict[str, torch.Tensor], h: torch.Tensor, grad: torch.Tensor | None,
                         h_in: torch.Tensor) -> WeightGradient:
    """B of zb-h1 on one stage, as runtime/executor.py's `_split_B` runs it: the last stage from its loss
    (readout included), an inner one from `grad`, its output's gradient; stage 0 (token ids in) defers it all
    to W, as the runtime does."""
    if w.chunk.is_last:
        root, _ = w.bp_loss(mb, h)
        return w.input_backward(root, None, h_in)
    return w.input_backward(h, grad, h_in)


def in_process_config(settings: BenchSettings, *, method: str, stages: int, batch: int, microbatches: int):
    """The run config of code that computes in this process and writes no run directory (out=None)."""
    cfg = settings.pipeline(method=method, stages=stages, batch=batch, microbatches=microbatches, out=Path("unused"))
    return replace(cfg, out=None)


def frozen_worker(w: StageWorker) -> StageWorker:
    """The worker of `w`'s chunk as terminal's runtime builds it for a chunk before the last
    (`StageWorker.of_run`): it trains nothing and, having no upstream readout to agree with, computes no
    consistency term."""
    return StageWorker(chunk=w.chunk, alpha=w.alpha, consistency=w.consistency, microbatches=w.microbatches,
                       lr=0.0, weight_decay=0.0, trains=False, agrees_with_upstream=False)


def probe_round(w: StageWorker, frozen: StageWorker, mb: dict[str, torch.Tensor], h_in: torch.Tensor | None,
                device: torch.device) -> dict[str, float]:
    """Seconds of every `PROBED` action of one stage on one micro-batch (`h_in`: what it receives; None on
    stage 0, which reads the token ids); `frozen`: the same chunk's worker when it does not train."""
    first = h_in is None
    times: dict[str, float] = {}
    # ZeroLock: the received hidden state needs no gradient
    inp = mb["input_ids"] if first else h_in.detach()
    out: list[torch.Tensor] = []
    times["F_local"] = timed(lambda: out.append(w.forward(mb, inp)), device)
    times["L"] = timed(lambda: w.local_backward(mb, None if first else inp, out[0]), device)
    # BP: the received hidden state needs its gradient (to send upstream)
    inp = mb["input_ids"] if first else h_in.detach().requires_grad_(True)
    times["F"] = timed(lambda: out.__setitem__(0, w.forward(mb, inp)), device)
    h = out[0]
    g = None if w.chunk.is_last else torch.randn_like(h)
    times["B"] = timed(lambda: w.bp_loss_backward(mb, h) if g is None else w.bp_backward(h, g), device)
    # zb-h1: a fresh forward (untimed), its backward split as the runtime's executor splits it
    split_in = mb["input_ids"] if first else h_in.detach().requires_grad_(True)
    h = w.forward(mb, split_in)
    weight_grad: list[WeightGradient] = []
    times["B_input"] = timed(lambda: weight_grad.append(split_input_backward(w, mb, h, g, split_in)), device)
    times["W"] = timed(weight_grad[0], device)
    times["STEP"] = timed(w.optimizer_step, device)
    # terminal's chunk before the last: forward without a graph, its readout's loss measured, nothing stepped
    inp = mb["input_ids"] if first else h_in.detach()
    times["F_frozen"] = timed(lambda: out.__setitem__(0, frozen.forward(mb, inp)), device)
    times["L_frozen"] = timed(lambda: frozen.local_backward(mb, None if first else inp, out[0]), device)
    times["STEP_frozen"] = timed(frozen.optimizer_step, device)
    if w.chunk.recompute_layers:  # BP's F and B once more with --recompute off, in the same round
        recompute, w.chunk.recompute_layers = w.chunk.recompute_layers, 0
        try:
            inp = mb["input_ids"] if first else h_in.detach().requires_grad_(True)
            times["F_plain"] = timed(lambda: out.__setitem__(0, w.forward(mb, inp)), device)
            h = out[0]
            times["B_plain"] = timed(lambda: w.bp_loss_backward(mb, h) if g is None else w.bp_backward(h, g),
                                     device)
        finally:
            w.chunk.recompute_layers = recompute
    return times


def probe_costs(settings: BenchSettings, *, stages: int, batch: int, microbatches: int,
                repeats: int = 5) -> ProbedCosts:
    """Median seconds of F, L (ZeroLock), B (BP), B_input and W (zb-h1's split backward), STEP and the
    `_frozen` actions of a chunk that does not train for every stage of a K-way split. Round by round, every
    stage in each round: a burst of other work on a shared machine then slows one round of every stage, which
    the median drops, not every repeat of one stage (which would make that stage look slow to the simulator)."""
    cfg = in_process_config(settings, method="zerolock", stages=stages, batch=batch, microbatches=microbatches)
    with pinned_threads(settings.threads):
        setup = build_run_setup(cfg)
        device = torch.device(settings.device)
        mb = {k: v.to(device) for k, v in setup.microbatches(0)[0].items()}
        workers, received, x = [], [], None
        for chunk in setup.chunks:
            chunk.to(device)
            workers.append(StageWorker(chunk=chunk, alpha=settings.alpha, consistency=settings.consistency,
                                       microbatches=microbatches, lr=settings.lr, weight_decay=0.0))
            received.append(x)
            with torch.no_grad():
                x = chunk(mb["input_ids"] if x is None else x, mb["attention_mask"])
        frozen = [frozen_worker(w) for w in workers]
        times: dict[int, dict[str, list[float]]] = {s: {k: [] for k in PROBED} for s in range(stages)}
        for _ in range(repeats + 1):  # the first round warms up and is dropped
            for s, w in enumerate(workers):
                for kind, seconds in probe_round(w, frozen[s], mb, received[s], device).items():
                    times[s].setdefault(kind, []).append(seconds)
        per_stage = {s: {k: statistics.median(v[1:]) for k, v in t.items()} for s, t in times.items()}
        hidden_bytes = x.numel() * x.element_size()  # the last chunk's output: a hidden state like every other
        return ProbedCosts(per_stage=per_stage, hidden_bytes=hidden_bytes,
                           layers=[list(c.layer_range) for c in setup.chunks])


def stage_activations(settings: BenchSettings, *, stages: int, batch: int, microbatches: int) -> dict[str, list[int]]:
    """What one micro-batch of BP keeps per stage of the arm's chunks (`kept_bytes`, --recompute's inputs
    included) and what a backward adds back while it recomputes a layer (`recompute_bytes`), measured with
    the engine's meter (analysis/stage_memory.py)."""
    from zerolock_core.analysis.stage_memory import stage_memory

    # 1F1B's chunks: every exact-gradient schedule trains the same ones
    cfg = in_process_config(settings, method="1f1b", stages=stages, batch=batch, microbatches=microbatches)
    with pinned_threads(settings.threads):
        setup = build_run_setup(cfg)
        workers = [StageWorker.of_run(c, setup.cfg) for c in setup.chunks]
        memory = stage_memory(workers, setup.microbatches(0)[0], backprop=True)
    return {"kept_bytes": [m.activation_bytes for m in memory],
            "recompute_bytes": [m.recompute_bytes for m in memory]}
