"""Explain tab: the paper's Fig. 1 from the schedule simulator, redrawn at once for any K, m, schedule,
per-stage costs and link; the step played back action by action; the textbook bubble beside the simulated
one; a memory calculator at real model sizes; one predict-then-reveal question per section.

`ExplainTab.inputs` / `outputs` and `draw` are the schedule's (ui.py wires them, and the `explain` API);
the playback, the calculator and the questions are wired here, in `build_explain_tab`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from ..explain import CHOICES, CHUNKS, explain, label_of, simulations, timeline_at
from ..explain_questions import IDLE, MEMORY, MORE_M, Answer, Question, idle_answer, memory_answer, more_m_answer, \
    reveal
from ..figures.memory_calculator import memory_calculator_figure
from ..figures.playback import next_stop, playback_caption
from ..figures.training import placeholder_figure
from ..memory_calculator import CalcSetting, PRECISIONS, memory_plans
from ..memory_summary import memory_summary
from ..model_shapes import MODEL_NAMES, calc_model
from ..schedule_costs import HEADERS, cost_rows, parse_cost_table, parse_link

PLAY_TICK_S = 0.7  # one playback step per tick: a redraw takes ~0.2 s on 2 cores
DEFAULT_K, DEFAULT_M, DEFAULT_BP = 3, 4, "gpipe"
CALC_DEFAULTS = CalcSetting()  # Llama-2-7B, b = 8 × 512 tokens, r = 8, bf16


@dataclass(kw_only=True)
class ExplainTab:
    inputs: list[gr.components.Component]  # K, m, backprop pipeline, v, cost table, link latency, send time
    outputs: list[gr.components.Component]  # text, timeline, memory


def _whole(value: Any) -> Any:
    """A number box's float as an int when it is whole (else as typed, to be refused with its value)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def schedule_args(k: float, m: float, bp: str, v: float, costs: Any, latency: Any, send: Any) -> dict[str, Any]:
    """explain()'s keywords from the widgets; ValueError naming a bad cost."""
    k = int(k)
    rows = costs.values.tolist() if hasattr(costs, "values") else costs  # a DataFrame, or rows as typed
    return dict(stages=k, microbatches=int(m), bp_method=bp, chunks=int(v or 2),
                stage_costs=parse_cost_table(rows, k), link=parse_link(latency, send))


def draw(k: float, m: float, bp: str, v: float = 2, costs: Any = None, latency: Any = 0, send: Any = 0) -> tuple:
    """The text and figures for the settings; an invalid one redraws both figures with the reason, so no
    figure of an earlier setting stays on screen beside it."""
    try:
        e = explain(**schedule_args(k, m, bp, v, costs, latency, send))
    except ValueError as err:
        why = f"Nothing to draw for K = {int(k)}, m = {int(m)}: {err}"
        return (f"⚠️ {why}", placeholder_figure(why, title="One optimizer step", height=200),
                placeholder_figure(why, title="Activations each stage holds", height=200))
    return e.text, e.timeline, e.memory


def _end_ms(*settings: Any) -> float | None:
    try:
        return 1e3 * max(p.sim.makespan_s for p in simulations(**schedule_args(*settings)))
    except ValueError:
        return None


def play_at(t_ms: float, *settings: Any) -> tuple:
    """The timeline and its caption at `t_ms` (ms)."""
    try:
        played = simulations(**schedule_args(*settings))
    except ValueError as err:
        return gr.skip(), f"⚠️ {err}"
    return timeline_at(played, t_ms), playback_caption(played, t_ms / 1e3)


def step_to(t_ms: float, step: int, *settings: Any) -> tuple:
    """One stop forward (`step` = 1) or back (-1): the slider, the timeline and its caption."""
    try:
        played = simulations(**schedule_args(*settings))
    except ValueError as err:
        return gr.skip(), gr.skip(), f"⚠️ {err}"
    t = 1e3 * next_stop(played, t_ms / 1e3, step=step)
    return t, timeline_at(played, t), playback_caption(played, t / 1e3)


def tick(t_ms: float, *settings: Any) -> tuple:
    """A playback tick: the next stop, and the timer stopped at the end of the step."""
    end = _end_ms(*settings)
    t, fig, caption = step_to(t_ms, 1, *settings)
    running = end is not None and isinstance(t, float) and t < end
    return t, fig, caption, gr.Timer(active=running)


def settings_changed(*settings: Any) -> tuple:
    """After the settings change: the time slider over the new step, at its end; the reveals cleared."""
    end = _end_ms(*settings)
    if end is None:
        return gr.Slider(), "", gr.Timer(active=False), "", ""
    slider = gr.Slider(minimum=0, maximum=round(end, 3), value=round(end, 3))
    return slider, playback_caption(simulations(**schedule_args(*settings)), end / 1e3), gr.Timer(active=False), "", ""


def calc_setting(model: str, k: float, m: float, b: Any, seq: Any, rank: Any, precision: str) -> CalcSetting:
    return CalcSetting(model=model, stages=int(k), microbatches=int(m), microbatch_size=_whole(b), seq_len=_whole(seq),
                       rank=_whole(rank), precision=precision)


def calculate(model: str, k: float, m: float, b: Any, seq: Any, rank: Any, precision: str) -> tuple:
    """The calculator's figure and words, or the reason it has none; the reveal cleared."""
    try:
        setting = calc_setting(model, k, m, b, seq, rank, precision)
        plans = memory_plans(setting)
    except ValueError as err:
        return placeholder_figure(f"Nothing to count: {err}", title="Memory per stage", height=200), f"⚠️ {err}", ""
    title = (f"Memory per stage at its peak: {setting.calc_model.label}, K = {setting.stages}, m = {setting.microbatches}, "
             f"b = {setting.microbatch_size} × {setting.seq_len} tokens, LoRA r = {setting.rank}")
    return memory_calculator_figure(plans, title=title), memory_summary(plans, setting), ""


def _question(q: Question) -> tuple[gr.Radio, gr.Button, gr.Markdown]:
    with gr.Row(equal_height=False):
        pick = gr.Radio(list(q.choices), value=None, label=f"Predict, then reveal: {q.prompt}", scale=4,
                        elem_id=f"explain-q-{q.key}")
        with gr.Column(scale=0, min_width=110):
            button = gr.Button("Reveal", size="sm", elem_id=f"explain-q-{q.key}-reveal")
    shown = gr.Markdown(elem_id=f"explain-q-{q.key}-answer")
    return pick, button, shown


def _revealer(q: Question, answer: Callable[..., Answer]) -> Callable[..., str]:
    def handler(picked: str | None, *settings: Any) -> str:
        return reveal(q, picked, lambda: answer(*settings))
    return handler


def build_explain_tab() -> ExplainTab:
    start = explain(stages=DEFAULT_K, microbatches=DEFAULT_M, bp_method=DEFAULT_BP)
    end = round(max(start.makespan_ms.values()), 3)
    with gr.Row():
        k = gr.Slider(2, 8, value=DEFAULT_K, step=1, label="stages K", elem_id="explain-k")
        m = gr.Slider(1, 12, value=DEFAULT_M, step=1, label="micro-batches m", elem_id="explain-m")
        bp = gr.Radio([(label_of(c), c) for c in CHOICES], value=DEFAULT_BP, label="backprop pipeline",
                      elem_id="explain-bp", scale=2)
        v = gr.Dropdown(list(CHUNKS), value=2, label="interleaved 1F1B: chunks per device v", elem_id="explain-v",
                        scale=0, min_width=200)
    with gr.Accordion("Costs: per stage F / B / W / L and the link, in ms (edit them: the simulator redraws)",
                      open=False, elem_id="explain-costs"):
        costs = gr.Dataframe(value=cost_rows(None, DEFAULT_K), headers=HEADERS, datatype="number", type="array",
                             static_columns=[0], interactive=True, elem_id="explain-cost-table",
                             label="a row per stage (device): F forward, B whole backward, W its weights' part "
                                   "(ZB-H1, DualPipe-V), L ZeroLock's local step; 0.1 … 1000 ms, W ≤ B")
        with gr.Row():
            latency = gr.Number(0, label="link latency (ms, 0 … 1000)", elem_id="explain-latency")
            send = gr.Number(0, label="link send time per message (ms, 0 … 1000)", elem_id="explain-send")
    settings = [k, m, bp, v, costs, latency, send]
    with gr.Row(equal_height=False):
        t = gr.Slider(0, end, value=end, step=0.001, label="time t (ms): the actions started before t",
                      elem_id="explain-t", scale=4)
        with gr.Column(scale=0, min_width=340):
            with gr.Row():
                back = gr.Button("◀ step", size="sm", min_width=60, elem_id="explain-back")
                play = gr.Button("▶ play", size="sm", min_width=60, variant="primary", elem_id="explain-play")
                pause = gr.Button("pause", size="sm", min_width=60, elem_id="explain-pause")
                forward = gr.Button("step ▶", size="sm", min_width=60, elem_id="explain-forward")
    caption = gr.Markdown(playback_caption(start.played, end / 1e3), elem_id="explain-caption")
    timer = gr.Timer(PLAY_TICK_S, active=False)
    timeline = gr.Plot(show_label=False, elem_id="explain-timeline")
    idle_pick, idle_button, idle_shown = _question(IDLE)
    text = gr.Markdown(elem_id="explain-text")
    more_pick, more_button, more_shown = _question(MORE_M)
    memory = gr.Plot(show_label=False, elem_id="explain-memory")

    gr.Markdown("### Memory at scale: what each stage holds, per method (K and m from the sliders above)")
    with gr.Row():
        model = gr.Dropdown([(calc_model(n).label, n) for n in MODEL_NAMES], value=CALC_DEFAULTS.model, label="model",
                            elem_id="explain-calc-model")
        rank = gr.Number(CALC_DEFAULTS.rank, label="LoRA rank r", elem_id="explain-calc-rank")
        b = gr.Number(CALC_DEFAULTS.microbatch_size, label="micro-batch size b (sequences)", elem_id="explain-calc-b")
        seq = gr.Number(CALC_DEFAULTS.seq_len, label="sequence length (tokens)", elem_id="explain-calc-seq")
        precision = gr.Radio(list(PRECISIONS), value=CALC_DEFAULTS.precision, label="weights and activations",
                             elem_id="explain-calc-precision")
    calc_inputs = [model, k, m, b, seq, rank, precision]
    figure, words, _ = calculate(*(c.value for c in calc_inputs))
    calc_figure = gr.Plot(figure, show_label=False, elem_id="explain-calc")
    calc_words = gr.Markdown(words, elem_id="explain-calc-text")
    memory_pick, memory_button, memory_shown = _question(MEMORY)

    # the playback (the schedule's own redraw is ui.py's: `draw` on every setting)
    k.change(lambda kk, rows: cost_rows(rows, int(kk)), [k, costs], costs, show_progress="hidden")
    for widget in settings:
        widget.change(settings_changed, settings, [t, caption, timer, idle_shown, more_shown], show_progress="hidden")
    t.release(play_at, [t, *settings], [timeline, caption], show_progress="hidden")
    back.click(lambda tt, *s: step_to(tt, -1, *s), [t, *settings], [t, timeline, caption], show_progress="hidden")
    forward.click(lambda tt, *s: step_to(tt, 1, *s), [t, *settings], [t, timeline, caption], show_progress="hidden")
    play.click(lambda *s: (0.0, *play_at(0.0, *s), gr.Timer(active=True)), settings, [t, timeline, caption, timer],
               show_progress="hidden")
    pause.click(lambda: gr.Timer(active=False), None, timer, show_progress="hidden")
    timer.tick(tick, [t, *settings], [t, timeline, caption, timer], show_progress="hidden")
    # the calculator
    for widget in calc_inputs:
        widget.change(calculate, calc_inputs, [calc_figure, calc_words, memory_shown], show_progress="hidden")
    # predict, then reveal
    idle_button.click(_revealer(IDLE, lambda *s: idle_answer(**schedule_args(*s))), [idle_pick, *settings],
                      idle_shown, show_progress="hidden")
    more_button.click(_revealer(MORE_M, lambda *s: more_m_answer(**schedule_args(*s))), [more_pick, *settings],
                      more_shown, show_progress="hidden")
    memory_button.click(_revealer(MEMORY, lambda *s: memory_answer(calc_setting(*s))), [memory_pick, *calc_inputs],
                        memory_shown, show_progress="hidden")
    return ExplainTab(inputs=settings, outputs=[text, timeline, memory])
