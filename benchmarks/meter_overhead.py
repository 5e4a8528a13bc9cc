"""What measuring activations costs: a chunk's forward + backward with and without the engine's
saved-tensor meter (a Python pack/unpack hook on every tensor autograd saves), in this process.

torch.distributed.pipelining runs no such hook; the cross-check uses this to explain part of any
gap between the two implementations.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Any

import torch

from zerolock_core.train.stage_worker import StageWorker
from zerolock_core.telemetry import ActivationMeter
from zerolock_core.train.run_setup import build_run_setup
from .common.probe import in_process_config, pinned_threads
from .common.settings import BenchSettings


def meter_overhead(settings: BenchSettings, *, batch: int, microbatches: int, repeats: int = 9) -> dict[str, Any]:
    """Median seconds of stage 1's forward + BP backward (K=2) with and without the meter."""
    with pinned_threads(settings.threads):
        setup = build_run_setup(in_process_config(settings, method="gpipe", stages=2, batch=batch,
                                                  microbatches=microbatches))
        chunk = setup.chunks[1]
        worker = StageWorker(chunk=chunk, alpha=1.0, consistency="reverse", microbatches=microbatches, lr=settings.lr,
                             weight_decay=0.0)
        meter = ActivationMeter([*chunk.parameters(), *chunk.buffers()])
        mb = setup.microbatches(0)[0]
        with torch.no_grad():
            h_in = setup.chunks[0](mb["input_ids"], mb["attention_mask"])

        def once(metered: bool) -> float:
            x = h_in.detach().requires_grad_(True)
            t0 = time.perf_counter()
            with meter.measuring() if metered else contextlib.nullcontext():
                h = worker.forward(mb, x)
            worker.bp_loss_backward(mb, h)
            return time.perf_counter() - t0

        times: dict[bool, list[float]] = {True: [], False: []}
        once(True), once(False)  # warm-up
        for _ in range(repeats):  # interleaved, so drifts in machine load hit both alike
            for metered in (False, True):
                times[metered].append(once(metered))
        plain, metered = statistics.median(times[False]), statistics.median(times[True])
        return {"plain_s": plain, "metered_s": metered, "overhead": metered / plain - 1.0, "repeats": repeats}
