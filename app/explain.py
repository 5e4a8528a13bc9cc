"""The paper's Fig. 1 from the schedule simulator: BP vs ZeroLock timelines and the activations
each stage holds, for any K and m, in milliseconds and without running a model."""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from zerolock_core.schedule import Costs, LinkProfile, build_schedule, simulate
from zerolock_core.methods import names, schedule_of
from zerolock_core.schedule.dualpipe_v import DUALPIPE_V

from .figures.compare import Series, compare_memory_figure, compare_timeline_figure
from zerolock_core.viz.palette import method_label  # bar colours: palette.KIND_COLOURS, named in the text below
from .figures.simulated import events_from_simulation

# Assumed costs: a backward costs about two forwards; ZeroLock's local step (readout + local loss
# + local backward) about the same as a backward. ZB-H1 splits the backward into B and W, half each:
# the zero-bubble paper's F = B = W (under LoRA W is the adapters' gradient alone, likely less).
EXPLAIN_COSTS = Costs(forward=0.010, local=0.020, backward=0.020, weight_grad=0.010)
# DualPipe-V cuts the same model into 2K chunks, two on each of the K devices: a chunk costs half a stage
CHUNK_COSTS = Costs(forward=0.005, local=0.010, backward=0.010, weight_grad=0.005)
# the backprop pipelines with a schedule whose optimizer step drains the pipeline (one step is a picture of
# them: not PipeDream), in the registry's order (methods.py)
BP_METHODS = names(where=lambda m: m.schedule is not None and not m.local and m.flushes)
# what a stage of each backprop pipeline holds while it waits for a gradient
HELD = {"gpipe": "every micro-batch it has forwarded",
        "1f1b": "the micro-batches it forwarded while waiting (K − s on stage s)",
        "zb-h1": "the micro-batches it forwarded while waiting and those whose W (weight gradient, dark rust) "
                 "is still to run: K on every stage, 1F1B's peak, its later stages' idle tail filled with W",
        DUALPIPE_V: "the micro-batches both its chunks forwarded and have not finished (each chunk is half a "
                    "stage: two chunk micro-batches count as one): K + ½ on every device, more than 1F1B's K "
                    "on stage 0"}
HELD_BY_DEFAULT = "the micro-batches it forwarded whose gradient has not come back yet"  # a method not above


@dataclass(kw_only=True)
class Explanation:
    timeline: go.Figure
    memory: go.Figure
    text: str
    peaks: dict[str, tuple[int, ...]]  # method -> micro-batches held at the peak, per stage
    makespan_ms: dict[str, float]


def explain(*, stages: int, microbatches: int, bp_method: str = "gpipe") -> Explanation:
    if bp_method not in BP_METHODS:
        raise ValueError(f"bp_method must be one of {', '.join(BP_METHODS)} (got {bp_method!r})")
    if not 1 <= stages <= 16 or not 1 <= microbatches <= 64:
        raise ValueError(f"choose 1 <= K <= 16 and 1 <= m <= 64 (got K={stages}, m={microbatches})")
    series, peaks, makespan, bubble = [], {}, {}, {}
    for method in (bp_method, "zerolock"):
        placed = method == DUALPIPE_V
        sim = simulate(build_schedule(schedule_of(method), stages=stages, microbatches=microbatches),
                       costs=CHUNK_COSTS if placed else EXPLAIN_COSTS, link=LinkProfile.profile("ideal"))
        where = f"{stages} devices × 2 chunks" if placed else f"K={stages}"
        label = f"{method_label(method)} (simulated, {where}, m={microbatches})"
        series.append(Series(label=label, events=events_from_simulation(sim), stages=stages, method=method))
        share = sim.schedule.devices / sim.schedule.stages  # a chunk's micro-batch is this much of a stage's
        peaks[method] = tuple(p * share for p in sim.inflight_peak)
        makespan[method], bubble[method] = 1e3 * sim.makespan_s, sim.bubble_fraction
    axis = "simulated seconds from the step's first action"
    timeline = compare_timeline_figure(series, title="One optimizer step: backprop pipeline vs ZeroLock",
                                       predicted=False, x_title=axis)
    if bp_method == DUALPIPE_V:  # its lanes are devices, each running two chunks (bars read "3F0": chunk 3)
        timeline.update_yaxes(ticktext=[f"device {d}" for d in range(stages)], row=1, col=1)
    memory = compare_memory_figure(series, measure="inflight", title="Activations each stage holds (micro-batches)",
                                   x_title=axis)
    return Explanation(timeline=timeline, memory=memory, peaks=peaks, makespan_ms=makespan,
                       text=_text(stages, microbatches, bp_method, peaks, makespan, bubble))


def _text(k: int, m: int, bp: str, peaks: dict, makespan: dict, bubble: dict) -> str:
    name = method_label(bp)
    split = {"zb-h1": " (ZB-H1 splits each B into B = 10 ms for the input gradient and W = 10 ms for the "
                      "weights')",
             DUALPIPE_V: f". DualPipe-V cuts the same model into {2 * k} chunks, two per device in a V (device d "
                         f"holds chunks d and {2 * k - 1} − d; a bar \"3F0\" is chunk 3's forward of micro-batch "
                         "0), each half a stage: F = 5 ms, B = 5 ms for the input gradient, W = 5 ms for the "
                         "weights'. It runs one chunk's forward beside the other's backward; the overlap that "
                         "hides communication on GPUs is not modelled (one compute stream per device)"}.get(bp, "")
    return f"""
**What you see.** Both pipelines train a model cut over K = {k} devices on m = {m} micro-batches for one
optimizer step, with assumed costs F = 10 ms, B = L = 20 ms a stage and an ideal link{split}. Nothing is
trained: this is the schedule simulator.

**Backprop ({name}).** A stage can run its backward (B, orange) only when the gradient has come back from the
stage after it; the pink *RB* bars are stages waiting for it — *update locking*. Until then it must keep the
activations of {HELD.get(bp, HELD_BY_DEFAULT)}: at the peak the stages hold **{_list(peaks[bp])}** micro-batches.

**ZeroLock.** Every stage sends its hidden state on first (early forwarding), then reads it out through the
frozen LM head and trains on its own local loss (L, green). No gradient comes back, so no stage ever waits
for one, and a micro-batch's activations are freed right after its L: each stage holds
**{_list(peaks['zerolock'])}** micro-batch at a time, whatever K and m. The only idle time is the pipeline
fill at the start (lavender *RF* bars: waiting for the first hidden state).

| | {name} | ZeroLock |
|---|---|---|
| time for the step | {makespan[bp]:.0f} ms | {makespan['zerolock']:.0f} ms |
| idle (bubble) | {100 * bubble[bp]:.0f}% | {100 * bubble['zerolock']:.0f}% |
| peak micro-batches held, {"device" if bp == DUALPIPE_V else "stage"} 0 … {k - 1} | {_list(peaks[bp])} | {_list(peaks['zerolock'])} |
"""


def _list(values: tuple[float, ...]) -> str:
    return ", ".join(f"{v:g}" for v in values)
