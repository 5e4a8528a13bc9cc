"""The guided lessons: the paper's story in six steps, each with its narration, what to look at, the
recorded example runs that show it at once, and the Run form's values that run it live.

One definition of each step: the Lessons tab shows it, `python -m app.record_lessons` records its
example runs from the same form values (so the recording is the live run, made earlier), and the tests
check that every recording still loads and draws with the current code. No number is typed into a
step's words: the ones it states come from its recording or the committed results (the figure's own
`headline`, figures/lessons.py), or from the form values that made the recording.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from zerolock_core.analysis.frontier_goal import GOAL
from zerolock_core.config.readout_spec import DEPTH_READOUT, HEAD
from zerolock_core.rundir.run_dir import RunDir

from .form import RunForm

RECORDINGS = Path(__file__).resolve().parent / "recordings"  # shipped with the app: small, no weights

# the runs the first three steps share: the three schedules on one config, a few steps each
SCHEDULES = RunForm(methods=("gpipe", "1f1b", "zerolock"), stages=3, batch=8, microbatches=4, steps=4, eval_size=32)
# the same ZeroLock run through its readout that holds backprop's accuracy at depth (what it holds, Lesson 2)
TOP_READOUT = RunForm(methods=("zerolock",), stages=3, batch=8, microbatches=4, steps=4, eval_size=32,
                      readout=DEPTH_READOUT)
# a stage killed mid-window (checkpoints every 2 steps): ZeroLock restarts it alone, 1F1B rolls back
FAILURE = RunForm(methods=("zerolock", "1f1b"), stages=3, batch=8, microbatches=4, steps=6, eval_size=32,
                  fail_stage=1, fail_step=3, fail_mode="kill")


@dataclass(kw_only=True, frozen=True)
class Lesson:
    key: str
    title: str
    narration: str  # two or three sentences, read aloud
    look_at: str  # what the highlight on the figure points at
    figure: str  # the kind of figure (figures/lessons.py FIGURES)
    live: tuple[RunForm, ...] = ()  # what "Run it live" starts, in order (none: a result of the project)
    methods: tuple[str, ...] = field(default=())  # the recorded runs shown, by method (default: all of live's)

    @property
    def shown(self) -> tuple[tuple[RunForm, str], ...]:
        """The recorded runs the step draws, in order: (the form that made it, its method)."""
        return tuple((form, m) for form in self.live for m in form.methods if not self.methods or m in self.methods)


EXAMPLE_PREFIX = "example: "  # how Compare lists a recording beside the user's runs (never a path)


def recorded_runs() -> dict[str, Path]:
    """Compare's name of every recording shipped -> its folder (a fixed set: a request can only pick one)."""
    if not RECORDINGS.is_dir():
        return {}
    return {f"{EXAMPLE_PREFIX}{p.name}": p for p in sorted(RECORDINGS.iterdir()) if RunDir(p).metrics.is_file()}


def recording_name(form: RunForm, method: str) -> str:
    """The folder of a recorded run under RECORDINGS: one per (form, method)."""
    readout = "" if form.readout == HEAD.kind else "-" + form.readout.replace(":", "-")
    failure = f"-fail{form.fail_stage}at{form.fail_step}{form.fail_mode}" if form.failures else ""
    return f"{method}-k{form.stages}-m{form.microbatches}-{form.steps}steps{readout}{failure}"


LESSONS: tuple[Lesson, ...] = (
    Lesson(key="bubble", title="1 · The bubble", figure="timelines", live=(SCHEDULES,),
           narration="A pipeline gives each stage a slice of the model. With backprop, a stage must wait for the "
                     "gradient to come back from every stage after it before it can update: GPipe's and 1F1B's "
                     "stages sit idle waiting for it. ZeroLock's stages train on a local loss and never wait for "
                     "a gradient. Every schedule still waits for its input from upstream while the pipeline "
                     "fills; 1F1B's bubble is GPipe's by design: it saves memory (next step), not time.",
           look_at="the waits for a gradient (outlined)"),
    Lesson(key="memory", title="2 · The memory", figure="memory", live=(SCHEDULES, TOP_READOUT),
           narration="To compute its backward, a backprop stage keeps every micro-batch's activations from its "
                     "forward until the gradient arrives: GPipe all m micro-batches of a step, 1F1B up to K. A "
                     "ZeroLock stage runs its local loss right after each forward and frees them. Read out "
                     "through the paper's frozen head, it holds its own chunk's; through "
                     f"`{DEPTH_READOUT}` (its readout that keeps backprop's accuracy as K grows on the "
                     "classification tasks), the copy of the last chunk's layers it also runs.",
           look_at="the largest stage's peak (outlined)"),
    Lesson(key="early-forwarding", title="3 · Early forwarding", figure="early-forwarding", live=(SCHEDULES,),
           methods=("zerolock",),
           narration="No gradient crosses a stage boundary, so a ZeroLock stage sends its hidden state on (SF) "
                     "before its own loss and backward (L): the next stage starts its forward at once, and the "
                     "stages overlap.",
           look_at="stage 1's first forward running under stage 0's loss and backward of the same micro-batch "
                   "(outlined)"),
    Lesson(key="failure", title="4 · A stage dies", figure="failure", live=(FAILURE,),
           narration=f"Stage {FAILURE.fail_stage} is killed in the middle of step {FAILURE.fail_step + 1}. "
                     "ZeroLock restarts that stage alone: it restores its checkpoint and replays the inputs its "
                     "upstream neighbour kept; the others keep their work, and wait for it (RELINK) only where "
                     "they need its output or room in its buffer — in a run this small, soon. 1F1B's stages "
                     "are locked to each other's gradients: every stage restarts, rolls back to the last "
                     "checkpoint and replays from there.",
           look_at="the kill until caught up: the failed lane (ZeroLock), every lane (1F1B) (outlined)"),
    Lesson(key="quality", title="5 · Does it learn as well?", figure="quality",
           narration="Speed and memory are only worth it if the model learns. On SmolLM2-135M the paper's local "
                     "objective, read through the frozen head, trails backprop and falls further behind with "
                     "every chunk added; reading through a copy of the model's own top layers with LoRA holds "
                     "backprop's level at every K measured on this task, and costs more time, parameters and "
                     "activations (right; its seconds per step were measured on a shared machine, so "
                     "roughly). On real data with four stages (TREC questions, Alpaca instructions) it stays "
                     "behind backprop at well over 1F1B's time per step, while PipeDream, also free of update "
                     "locking, matches backprop at 1F1B's memory. Measured by this project.",
           look_at="backprop's level (- - outlined)"),
    Lesson(key="frontier", title="6 · The frontier", figure="frontier",
           narration="Every way to train the four-stage pipeline, on both real tasks: how long it takes to reach "
                     "backprop's level, against 1F1B, and how much activation memory its largest stage holds. "
                     f"The goal is the outlined corner: backprop's level in at most {GOAL.time_vs_1f1b:g}× 1F1B's "
                     f"time, with at most {GOAL.activation_vs_1f1b:g}× its memory, ahead of every backprop "
                     "schedule. Open markers never reach backprop's level: ZeroLock's readouts among them. "
                     "PipeDream with its backward recomputing a few layers' activations (the gradients do not "
                     "change) is the configuration the project recommends at depth. Measured by this project.",
           look_at="the goal's corner (outlined)"),
)


def lesson(key: str) -> Lesson:
    for item in LESSONS:
        if item.key == key:
            return item
    raise ValueError(f"no lesson {key!r}; the lessons are {', '.join(x.key for x in LESSONS)}")
