"""Everything the Watch tab shows for one run, computed from its events / metrics (no Gradio here)."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Collection

import plotly.graph_objects as go

from zerolock_core.jobs.base import JobState
from zerolock_core.rundir.eval_progress import evaluating_words
from zerolock_core.rundir.metrics import shown_accuracy
from zerolock_core.method.chunks import planned_bounds
from zerolock_core.config.run_fields import stage_speeds
from zerolock_core.train.preflight import model_layers

from .controller import Tracked
from .controller import failures as failures_of
from .figures.live_loss import live_loss_curves
from zerolock_core.telemetry.activity import bubble_fraction, live_throughput
from .figures.memory import memory_figure
from .run_label import run_label
from .figures.training import activity_figure, placeholder_figure, training_figure
from .page.watch_parts import PARTS
from .figures.timebase import recent, tail_since
from .figures.step_view import should_aggregate, step_aggregate_figure
from .figures.timeline import LABEL_MAX_BARS, failure_window, timeline_figure

TABLE_COLUMNS = ["stage", "layers", "steps", "computing %", "peak act. MiB", "peak in-flight mb",
                 "sent MiB", "received MiB", "resent MiB"]  # bytes: each micro-batch once (telemetry/activity.py)
STATE_WORDS = {  # a job's states (JobState), and the app's own: queued, stopping, cancelled, interrupted
    "queued": "queued",
    JobState.STARTING: "starting: every stage process loads the model and its chunk",
    JobState.RUNNING: "running",
    JobState.RECOVERING: "recovering: a failed stage restarts from its checkpoint",
    JobState.FINISHING: "training ended; evaluating the final weights",
    "stopping": "stopping",
    JobState.FINISHED: "finished",
    JobState.STOPPED: "stopped",
    JobState.FAILED: "failed",
    "cancelled": "cancelled (stopped before it started)",
    "interrupted": "interrupted (no metrics.json: the app ended while it ran)",
}


COUNTING = (JobState.RUNNING, JobState.RECOVERING, JobState.STARTING, "stopping")  # the states that show a step count


@dataclass(kw_only=True)
class WatchView:
    """The parts asked for (watch_parts.PARTS); None: not asked for."""
    timeline: go.Figure | None = None
    memory: go.Figure | None = None
    training: go.Figure | None = None
    activity: go.Figure | None = None
    table: list[list[Any]] | None = None
    status: dict[str, Any] | None = None


def _seconds(s: float | None) -> str:
    if s is None:
        return "–"
    return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"


def title_of(t: Tracked) -> str:
    return run_label(t.cfg, method=t.method, shape=True)


def outage_words(open_recoveries: list[dict[str, Any]]) -> str:
    """"stage 1 down — restarting (3.2 s)": what the run is doing while a stage is down."""
    words = []
    for r in open_recoveries:
        doing = ("every stage rolls back to its last checkpoint" if r["kind"] == "global" else "restarting")
        words.append(f"**stage {r['stage']} down — {doing} ({r['down_s']:.1f} s)**")
    return "; ".join(words)


def state_words(t: Tracked, st: dict[str, Any]) -> str:
    """The state, with what each waiting phase is waiting for: the job's status fields the CLI's
    `progress_words` reads (open recoveries, stage phases, eval progress), in the dashboard's words."""
    if st.get("open_recoveries"):
        return outage_words(st["open_recoveries"])
    if t.state == JobState.STARTING and st.get("stage_states"):
        return "starting: " + ", ".join(f"stage {s} {phase}" for s, phase in enumerate(st["stage_states"]))
    if t.state == JobState.FINISHING and st.get("eval_progress"):
        return f"training ended; {evaluating_words(st['eval_progress'])}"
    return STATE_WORDS.get(t.state, t.state)


def status_markdown(t: Tracked, st: dict[str, Any], *, position: str = "", earlier: str = "") -> str:
    m = t.metrics
    parts = [f"**{title_of(t)}**", state_words(t, st)]
    reason = (m.reason if m else "") or st.get("reason")
    if t.state in (JobState.FAILED, JobState.STOPPED) and reason:
        parts.append(f"({reason})")
    if st.get("steps_done") is not None and t.state in COUNTING:
        parts.append(f"step {st['steps_done']} / {st['total_steps']}")
        if st.get("s_per_step") is not None:  # training time only: start-up and outages left out
            parts.append(f"{st['s_per_step']:.2f} s/step")
        parts.append(f"ETA {_seconds(st.get('eta_s'))}")
    if st.get("elapsed_s") is not None and not t.engine_done:
        parts.append(f"elapsed {_seconds(st['elapsed_s'])}")
    tput = m.throughput_samples_per_s if m else None
    if tput is None and t.events:
        tput = live_throughput(t.stage_stats(), elapsed_s=t.span_s(), batch=t.cfg["train"]["batch"])
    if tput:
        parts.append(f"{tput:.1f} samples/s")
    ev = m.eval if m else None
    if ev:
        what, value = shown_accuracy(ev)
        parts.append(f"eval {what} {value:.3f} (strict accuracy {ev['accuracy']:.3f})")
    if position:
        parts.append(position)
    lines = [" · ".join(parts), *([earlier] if earlier else []),
             f"run folder `{t.name}`"]  # under the runs folder: no server path
    errors = m.errors if m else {}
    if errors or st.get("error"):
        first = next(iter(errors.values()), st.get("error", ""))
        lines.append(f"**Error:** `{first.strip().splitlines()[-1] if first.strip() else first}`")
    return "  \n".join(lines)


def planned_layers(cfg: dict[str, Any]) -> tuple[tuple[int, int], ...] | None:
    """Each stage's [first, end) layers from the config (the model's layer count from its config
    file, no weights), so the table shows them while the run goes, not only in metrics.json."""
    model, train = cfg.get("model", {}), cfg["train"]
    boundaries, stages = model.get("boundaries"), int(train["stages"])
    return _planned(model.get("model", "tiny"), stages, tuple(boundaries) if boundaries is not None else None,
                    stage_speeds(train.get("stage_speed", ()), stages), model.get("readout", "head"),
                    train.get("method", "zerolock"))


@functools.lru_cache(maxsize=32)  # a table redraw every few seconds need not reread a config or GGUF header
def _planned(spec: str, stages: int, boundaries: tuple[int, ...] | None, speeds: tuple[float, ...], readout: str,
             method: str) -> tuple[tuple[int, int], ...] | None:
    try:
        layers = model_layers(spec)
        if layers is None:
            return None
        # a tuple: every caller shares the cached value
        return tuple(planned_bounds(layers, stages, boundaries=boundaries, speeds=speeds, readout=readout,
                                    method=method))
    except (ValueError, OSError):  # e.g. a model directory that has gone since: no plan, no error
        return None


def stage_table(t: Tracked) -> list[list[Any]]:
    stats = t.stage_stats()
    per_stage = {p["stage"]: p for p in (t.metrics.per_stage if t.metrics else [])}
    planned = planned_layers(t.cfg) if len(per_stage) < len(stats) else None
    rows = []
    for s in stats:
        p = per_stage.get(s.stage, {})
        layers = p.get("layers") or (planned[s.stage] if planned and s.stage < len(planned) else None)
        peak = p.get("peak_activation_bytes", s.peak_act_bytes)
        rows.append([s.stage, f"{layers[0]}–{layers[1] - 1}" if layers else "", s.steps,
                     round(100 * p.get("active_fraction", s.active_fraction), 1), round(peak / 2**20, 3),
                     p.get("peak_inflight_microbatches", s.peak_inflight),
                     round(p.get("bytes_sent", s.bytes_sent) / 2**20, 2),
                     round(p.get("bytes_received", s.bytes_received) / 2**20, 2),
                     round(p.get("bytes_resent", s.bytes_resent) / 2**20, 2)])
    return rows


def training_view(t: Tracked) -> go.Figure:
    """Loss curves (live from the events until metrics.json has the final ones) and eval accuracy."""
    live = None
    if t.metrics is None and t.runtime == "pipeline":
        live = live_loss_curves(t.events, microbatches=t.cfg["train"]["microbatches"], method=t.method)
    return training_figure(t.metrics, title="Training loss and eval accuracy", live_curves=live)


FOCUS_BEFORE_S, FOCUS_AFTER_S = 3.0, 4.0  # the view around a failure: from a little before it to after the catch-up


def around_failure(events: list[dict[str, Any]], failure: dict[str, Any]) -> list[dict[str, Any]]:
    """The events from FOCUS_BEFORE_S before `failure` until FOCUS_AFTER_S after it caught up (or
    until now, while it is under way)."""
    end = failure.get("t_end_ns") or max((e["t1"] for e in events), default=failure["t_fail_ns"])
    a, b = failure["t_fail_ns"] - int(FOCUS_BEFORE_S * 1e9), end + int(FOCUS_AFTER_S * 1e9)
    return [e for e in events if e["t1"] >= a and e["t0"] <= b]


def watch_view(t: Tracked, *, window_s: float | None, status: dict[str, Any] | None = None,
               parts: Collection[str] = tuple(PARTS), focus_failure: bool = False,
               measure: str = "act_bytes") -> WatchView:
    """The `parts` of the Watch view (each costs the app's CPU only when asked for).
    `focus_failure`: show the time around the most recent failure instead of `window_s`."""
    st = status if status is not None else t.status()
    view = WatchView(status=st if "status" in parts else None)
    if "timeline" in parts or "memory" in parts:
        view.timeline, view.memory = _lanes(t, st, window_s=window_s, focus_failure=focus_failure, measure=measure,
                                            timeline="timeline" in parts, memory="memory" in parts)
    if "training" in parts:
        view.training = training_view(t)
    if "activity" in parts:
        stats = t.stage_stats()
        bubble = t.metrics.bubble_fraction if t.metrics else \
            (bubble_fraction(stats, t.span_s()) if t.events else None)
        view.activity = (activity_figure(stats, bubble=bubble) if t.runtime == "pipeline" else
                         placeholder_figure("pipeline runs only", title="active vs idle per stage", height=240))
    if "table" in parts:
        view.table = stage_table(t) if t.runtime == "pipeline" else []
    return view


def _lanes(t: Tracked, st: dict[str, Any], *, window_s: float | None, focus_failure: bool, measure: str,
           timeline: bool = True, memory: bool = True) -> tuple[go.Figure | None, go.Figure | None]:
    """The timeline and the memory chart over the same window (each only if asked for)."""
    events = t.events
    stages = t.stages
    failures = failures_of(st)
    fold = t.activity()
    # one origin for every view: the first stage process's spawn (start-up is part of the run)
    origin = min([e["t0"] for e in t.lifecycle] + ([fold.first_t0] if fold.first_t0 is not None else []), default=0)
    window = window_s if window_s is not None and fold.makespan_s > window_s else None
    # the figures are redrawn every few seconds, the status line every tick: say which step they show
    # (the step every stage has finished in the events drawn: the status line, redrawn every tick, is ahead)
    drawn_step = min((s.steps for s in t.stage_stats()), default=None)
    at_step = f", at step {drawn_step}" if drawn_step is not None and t.events and not t.engine_done else ""
    shown = f" (the last {_seconds(window)} of {_seconds(fold.makespan_s)} of training{at_step})" if window \
        else ", the whole run"  # also a short run's "recent actions": the window holds all of it
    sampled = None
    if window is not None and not (focus_failure and failures):
        # the live window: only its own events (and what each stage held when it opened), not the run's
        end = max([e["t1"] for e in t.lifecycle] + [fold.last_t1])
        events = tail_since(events, end - int(window * 1e9), stages=stages)
        stats = t.stage_stats()
        sampled = [s.peak_act_bytes if measure == "act_bytes" else s.peak_inflight for s in stats]
    everything = [*t.lifecycle, *events]
    timeline_events, memory_events, x_range = recent(everything, window), events, None
    if focus_failure and failures:
        f = failures[-1]
        timeline_events, memory_events = around_failure(everything, f), around_failure(events, f)
        now = max((e["t1"] for e in everything), default=f["t_fail_ns"])
        pinned = {**f, "t_end_ns": f.get("t_end_ns") or now}  # under way: up to the latest action
        x_range = failure_window(everything, [pinned], before_s=FOCUS_BEFORE_S, after_s=FOCUS_AFTER_S,
                                 origin_ns=origin)
        shown = (f" around stage {f['stage']}'s failure at {(f['t_fail_ns'] - origin) / 1e9:.1f} s"
                 f"{' (still recovering)' if f.get('open') else ''}")
        window = None
    if t.runtime == "reference":
        note = "The reference trainer runs in one process: no per-stage telemetry. Its results appear below."
        return (placeholder_figure(note, title="Timeline per stage", height=230) if timeline else None,
                placeholder_figure(note, title="Activation memory per stage", height=230) if memory else None)
    per_stage = t.metrics.per_stage if t.metrics else []
    peaks = [p["peak_activation_bytes"] for p in per_stage] if len(per_stage) == stages else None
    # the zoom is kept while the same run is watched (the page redraws its plots with Plotly.react);
    # a new uirevision when the view is pinned: the pin must win over an earlier zoom
    revision = f"{t.name}-{'failure-%d' % len(failures) if x_range else window is None}"
    lanes = None
    if timeline and x_range is None and window is None and should_aggregate(events):
        # the whole of a long run: one stacked bar per stage and step, not tens of thousands of bars
        lanes = step_aggregate_figure(events, stages=stages, recoveries=failures, uirevision=revision,
                                      title=f"Time per step and stage, the whole run ({len(events):,} "
                                            "actions; pick “recent actions” or a failure for single bars)")
    elif timeline:
        # while the run goes, every redraw costs the browser CPU the training shares: no range
        # slider (a second copy of every bar) and no bar labels except around a failure
        live = not t.engine_done
        lanes = timeline_figure(timeline_events, stages=stages, origin_ns=origin, recoveries=failures,
                                stragglers=st.get("stragglers", []), x_range=x_range, uirevision=revision,
                                title=f"Timeline per stage{shown}",
                                rangeslider=not live, label_max_bars=LABEL_MAX_BARS if (x_range or not live) else 0)
    held = None
    if memory:
        held = memory_figure(memory_events, stages=stages, window_s=window, origin_ns=origin, peak_bytes=peaks,
                             measure=measure, x_range=x_range, recoveries=failures, uirevision=revision,
                             sampled_peaks=sampled, title=f"Activation memory per stage{shown}")
    return lanes, held
