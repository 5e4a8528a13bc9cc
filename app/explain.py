"""The paper's Fig. 1 from the schedule simulator: BP vs ZeroLock timelines and the activations
each stage holds, for any K and m, per-stage costs and link, in milliseconds and without running a model;
the timeline played back to any instant, the textbook bubble beside the simulated one."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from zerolock_core.schedule import Schedule, SimResult, build_schedule, simulate
from zerolock_core.methods import names, schedule_of
from zerolock_core.schedule.dualpipe_v import DUALPIPE_V
from zerolock_core.schedule.interleaved import INTERLEAVED_1F1B, INTERLEAVED_LABEL, build_interleaved_1f1b

from .bubble_formula import Textbook, textbook, why_they_differ
from .figures.compare import Series, compare_memory_figure
from .figures.playback import X_TITLE, Played, playback_figure
from zerolock_core.viz.palette import method_label  # bar colours: palette.KIND_COLOURS, named in the text below
from .figures.simulated import events_from_simulation
from .schedule_costs import DEFAULT_COST, LinkCost, StageCost, schedule_costs, uniform

# the backprop pipelines with a schedule whose optimizer step drains the pipeline (one step is a picture of
# them: not PipeDream), in the registry's order (methods.py)
BP_METHODS = names(where=lambda m: m.schedule is not None and not m.local and m.flushes)
# schedules the simulator has and the runtime does not run (one process per stage): Explain's own
SIMULATED_ONLY = (INTERLEAVED_1F1B,)
CHOICES = BP_METHODS + SIMULATED_ONLY
CHUNKS = (2, 3, 4)  # interleaved 1F1B's chunks per device v
# what a stage of each backprop pipeline holds while it waits for a gradient
HELD = {"gpipe": "every micro-batch it has forwarded",
        "1f1b": "the micro-batches it forwarded while waiting (K − s on stage s)",
        "zb-h1": "the micro-batches it forwarded while waiting and those whose W (weight gradient, dark rust) "
                 "is still to run: K on every stage, 1F1B's peak, its later stages' idle tail filled with W",
        DUALPIPE_V: "the micro-batches both its chunks forwarded and have not finished (each chunk is half a "
                    "stage: two chunk micro-batches count as one): K + ½ on every device, more than 1F1B's K "
                    "on stage 0",
        INTERLEAVED_1F1B: "the micro-batches each of its chunks forwarded and has not finished (a chunk's "
                          "micro-batch counts 1/v of a stage's): its longer warm-up holds more than 1F1B"}
HELD_BY_DEFAULT = "the micro-batches it forwarded whose gradient has not come back yet"  # a method not above


@dataclass(kw_only=True)
class Explanation:
    timeline: go.Figure
    memory: go.Figure
    text: str
    peaks: dict[str, tuple[int, ...]]  # method -> micro-batches held at the peak, per stage
    makespan_ms: dict[str, float]
    played: tuple[Played, ...]  # the two simulations the timeline plays back
    bubble: dict[str, float]  # method -> simulated idle share of the step
    textbook: dict[str, Textbook | None]  # method -> its formula (None: none given)


def schedule_for(method: str, *, stages: int, microbatches: int, chunks: int = 2) -> Schedule:
    """The schedule Explain simulates for `method` (a registry method's, or interleaved 1F1B with v = `chunks`)."""
    if method == INTERLEAVED_1F1B:
        return build_interleaved_1f1b(devices=stages, chunks_per_device=chunks, microbatches=microbatches)
    return build_schedule(schedule_of(method), stages=stages, microbatches=microbatches)


def simulate_method(method: str, *, stages: int, microbatches: int, stage_costs: Sequence[StageCost],
                    link: LinkCost, chunks: int = 2) -> SimResult:
    sched = schedule_for(method, stages=stages, microbatches=microbatches, chunks=chunks)
    return simulate(sched, costs=schedule_costs(stage_costs, sched, link), link=link.profile())


def label_of(method: str) -> str:
    return INTERLEAVED_LABEL if method == INTERLEAVED_1F1B else method_label(method)


def simulations(*, stages: int, microbatches: int, bp_method: str = "gpipe",
                stage_costs: Sequence[StageCost] | None = None, link: LinkCost | None = None,
                chunks: int = 2) -> tuple[Played, Played]:
    """`bp_method` and ZeroLock simulated on K = `stages`, m = `microbatches`; `stage_costs` one per stage
    (default: F 10, B 20, W 10, L 20 ms), `link` (default: ideal), `chunks` = v of interleaved 1F1B.
    ValueError for a combination with no schedule."""
    if bp_method not in CHOICES:
        raise ValueError(f"bp_method must be one of {', '.join(CHOICES)} (got {bp_method!r})")
    if not 1 <= stages <= 16 or not 1 <= microbatches <= 64:
        raise ValueError(f"choose 1 <= K <= 16 and 1 <= m <= 64 (got K={stages}, m={microbatches})")
    if bp_method == INTERLEAVED_1F1B and chunks not in CHUNKS:
        raise ValueError(f"choose v among {', '.join(map(str, CHUNKS))} chunks per device (got {chunks})")
    stage_costs = tuple(stage_costs or (DEFAULT_COST,) * stages)
    if len(stage_costs) != stages:
        raise ValueError(f"give one row of costs per stage: {len(stage_costs)} rows for K = {stages}")
    out = []
    for method in (bp_method, "zerolock"):
        sim = simulate_method(method, stages=stages, microbatches=microbatches, stage_costs=stage_costs,
                              link=link or LinkCost(), chunks=chunks)
        v = sim.schedule.stages // sim.schedule.devices
        where = f"{stages} devices × {v} chunks" if sim.schedule.placement else f"K={stages}"
        only = ", simulated only" if method in SIMULATED_ONLY else ""
        out.append(Played(label=f"{label_of(method)} (simulated{only}, {where}, m={microbatches})", sim=sim))
    return out[0], out[1]


def timeline_at(played: Sequence[Played], t_ms: float | None = None) -> go.Figure:
    """The timeline up to `t_ms` (default: the end of the step, which shows the whole step: the actions
    that start at its very end too, a free last STEP)."""
    end_ms = 1e3 * max(p.sim.makespan_s for p in played)
    t = end_ms if t_ms is None else min(max(0.0, t_ms), end_ms)
    return playback_figure(played, t_s=math.inf if t >= end_ms else t / 1e3, title=_timeline_title(t, end_ms))


def explain(*, stages: int, microbatches: int, bp_method: str = "gpipe",
            stage_costs: Sequence[StageCost] | None = None, link: LinkCost | None = None, chunks: int = 2,
            t_ms: float | None = None) -> Explanation:
    """The figures and words of `simulations(...)`, the timeline drawn up to `t_ms` (default: the whole step)."""
    played = simulations(stages=stages, microbatches=microbatches, bp_method=bp_method, stage_costs=stage_costs,
                         link=link, chunks=chunks)
    stage_costs = tuple(stage_costs or (DEFAULT_COST,) * stages)
    link = link or LinkCost()
    mean = _mean_cost(stage_costs)
    series, peaks, makespan, bubble, books = [], {}, {}, {}, {}
    for method, p in zip((bp_method, "zerolock"), played):
        sim = p.sim
        series.append(Series(label=p.label, events=events_from_simulation(sim), stages=stages, method=method))
        share = sim.schedule.devices / sim.schedule.stages  # a chunk's micro-batch is this much of a stage's
        peaks[method] = tuple(c * share for c in sim.inflight_peak)
        makespan[method], bubble[method] = 1e3 * sim.makespan_s, sim.bubble_fraction
        books[method] = textbook(method, stages=stages, microbatches=microbatches, cost=mean,
                                 chunks=sim.schedule.stages // sim.schedule.devices)
    memory = compare_memory_figure(series, measure="inflight", title="Activations each stage holds (micro-batches)",
                                   x_title=X_TITLE)
    setting = _Setting(k=stages, m=microbatches, bp=bp_method, v=chunks, stage_costs=stage_costs, link=link)
    return Explanation(timeline=timeline_at(played, t_ms), memory=memory, peaks=peaks, makespan_ms=makespan,
                       played=played, bubble=bubble, textbook=books,
                       text=_text(setting, peaks, makespan, bubble, books))


def _timeline_title(t_ms: float, end_ms: float) -> str:
    if t_ms >= end_ms:
        return "One optimizer step: backprop pipeline vs ZeroLock"
    return f"One optimizer step, played back: the actions started before t = {t_ms:.1f} ms"


def _mean_cost(stage_costs: Sequence[StageCost]) -> StageCost:
    """The textbook's equal stage: every cost averaged over the stages (W capped by B, as a stage's is)."""
    n = len(stage_costs)
    f, b, w, loc = (sum(getattr(c, name) for c in stage_costs) / n for name in ("F", "B", "W", "L"))
    return StageCost(F=f, B=b, W=min(w, b), L=loc)


@dataclass(kw_only=True, frozen=True)
class _Setting:
    k: int
    m: int
    bp: str
    v: int
    stage_costs: tuple[StageCost, ...]
    link: LinkCost


def _costs_words(s: _Setting) -> str:
    if uniform(s.stage_costs):
        c = s.stage_costs[0]
        costs = f"F = {c.F:g} ms, B = {c.B:g} ms, L = {c.L:g} ms a stage"
    else:
        costs = "the per-stage costs of the table below (the stages are unequal)"
    link = "an ideal link" if s.link.ideal else \
        f"a link of {s.link.latency_ms:g} ms latency and {s.link.send_ms:g} ms per message"
    return f"{costs} and {link}"


def _split_words(s: _Setting) -> str:
    c = s.stage_costs[0]
    if s.bp == "zb-h1":
        return (f" (ZB-H1 splits each B into B = {c.B - c.W:g} ms for the input gradient and W = {c.W:g} ms for "
                "the weights')")
    if s.bp == DUALPIPE_V:
        return (f". DualPipe-V cuts the same model into {2 * s.k} chunks, two per device in a V (device d holds "
                f"chunks d and {2 * s.k - 1} − d; a bar \"3F0\" is chunk 3's forward of micro-batch 0), each half a "
                f"stage: F = {c.F / 2:g} ms, B = {(c.B - c.W) / 2:g} ms for the input gradient, W = {c.W / 2:g} ms "
                "for the weights'. It runs one chunk's forward beside the other's backward; the overlap that hides "
                "communication on GPUs is not modelled (one compute stream per device)")
    if s.bp == INTERLEAVED_1F1B:
        return (f". Interleaved 1F1B cuts the same model into {s.v * s.k} chunks, {s.v} per device (device d "
                f"holds chunks d, d + {s.k}, …; a bar \"3F0\" is chunk 3's forward of micro-batch 0), each 1/{s.v} "
                "of a stage, so a micro-batch goes round the devices v times: a shorter fill for v times the "
                "messages. **Simulated only**: the engine's runtime runs one stage per process, so no run of it "
                "exists; its order is torch.distributed.pipelining's ScheduleInterleaved1F1B")
    return ""


def _text(s: _Setting, peaks: dict, makespan: dict, bubble: dict, books: dict) -> str:
    name = label_of(s.bp)
    lane = "device" if s.bp in (DUALPIPE_V, INTERLEAVED_1F1B) else "stage"
    return f"""
**What you see.** Both pipelines train a model cut over K = {s.k} devices on m = {s.m} micro-batches for one
optimizer step, with {_costs_words(s)}{_split_words(s)}. Nothing is trained: this is the schedule simulator.

**Backprop ({name}).** A stage can run its backward (B, orange) only when the gradient has come back from the
stage after it; the pink *RB* bars are stages waiting for it — *update locking*. Until then it must keep the
activations of {HELD.get(s.bp, HELD_BY_DEFAULT)}: at the peak the stages hold **{_list(peaks[s.bp])}** micro-batches.

**ZeroLock.** Every stage sends its hidden state on first (early forwarding), then reads it out through the
frozen LM head and trains on its own local loss (L, green). No gradient comes back, so no stage ever waits
for one, and a micro-batch's activations are freed right after its L: each stage holds
**{_list(peaks['zerolock'])}** micro-batch at a time, whatever K and m. The only idle time is the pipeline
fill at the start (lavender *RF* bars: waiting for the first hidden state).

| | {name} | ZeroLock |
|---|---|---|
| time for the step | {makespan[s.bp]:.0f} ms | {makespan['zerolock']:.0f} ms |
| idle (bubble), simulated | {100 * bubble[s.bp]:.0f}% | {100 * bubble['zerolock']:.0f}% |
| idle, by the formula | {_percent(books[s.bp])} | {_percent(books['zerolock'])} |
| peak micro-batches held, {lane} 0 … {s.k - 1} | {_list(peaks[s.bp])} | {_list(peaks['zerolock'])} |

**The textbook bubble beside the simulated one** (the idle share of the step):
{_formula_line(s, s.bp, bubble, books)}
{_formula_line(s, 'zerolock', bubble, books)}
"""


def _percent(book: Textbook | None) -> str:
    return "—" if book is None else f"{100 * book.value:.0f}%"


def _formula_line(s: _Setting, method: str, bubble: dict, books: dict) -> str:
    book = books[method]
    said = "" if book is None else f"{book.formula} → **{100 * book.value:.0f}%** ({book.source}); "
    why = why_they_differ(method, simulated=bubble[method], book=book, stage_costs=s.stage_costs, link=s.link,
                          stages=s.k, microbatches=s.m)
    return f"- *{label_of(method)}*: {said}simulated **{100 * bubble[method]:.0f}%**. {why}"


def _list(values: tuple[float, ...]) -> str:
    return ", ".join(f"{v:g}" for v in values)
