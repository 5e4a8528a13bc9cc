"""The guided lessons: the paper's story in five steps, each with its narration, what to look at, the
recorded example runs that show it at once, and the Run form's values that run it live.

One definition of each step: the Lessons tab shows it, `python -m app.record_lessons` records its
example runs from the same form values (so the recording is the live run, made earlier), and the tests
check that every recording still loads and draws with the current code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from zerolock_core.rundir.run_dir import RunDir

from .form import RunForm

RECORDINGS = Path(__file__).resolve().parent / "recordings"  # shipped with the app: small, no weights

# the runs the first three steps share: the three schedules on one config, a few steps each
SCHEDULES = RunForm(methods=("gpipe", "1f1b", "zerolock"), stages=3, batch=8, microbatches=4, steps=4, eval_size=32)
# a stage killed mid-window (checkpoints every 2 steps): ZeroLock restarts it alone, 1F1B rolls back
FAILURE = RunForm(methods=("zerolock", "1f1b"), stages=3, batch=8, microbatches=4, steps=6, eval_size=32,
                  fail_stage=1, fail_step=3, fail_mode="kill")


@dataclass(kw_only=True, frozen=True)
class Lesson:
    key: str
    title: str
    narration: str  # two or three sentences, read aloud
    look_at: str  # what the highlight on the figure points at
    figure: str  # the kind of figure (lesson_figures.FIGURES)
    live: RunForm | None = None  # what "Run it live" starts (None: a result of the project, nothing to run)
    methods: tuple[str, ...] = field(default=())  # the recorded runs shown, by method (default: all of live's)

    @property
    def shown(self) -> tuple[str, ...]:
        return self.methods or (self.live.methods if self.live else ())


EXAMPLE_PREFIX = "example: "  # how Compare lists a recording beside the user's runs (never a path)


def recorded_runs() -> dict[str, Path]:
    """Compare's name of every recording shipped -> its folder (a fixed set: a request can only pick one)."""
    if not RECORDINGS.is_dir():
        return {}
    return {f"{EXAMPLE_PREFIX}{p.name}": p for p in sorted(RECORDINGS.iterdir()) if RunDir(p).metrics.is_file()}


def recording_name(form: RunForm, method: str) -> str:
    """The folder of a recorded run under RECORDINGS: one per (form, method)."""
    failure = f"-fail{form.fail_stage}at{form.fail_step}{form.fail_mode}" if form.failures else ""
    return f"{method}-k{form.stages}-m{form.microbatches}-{form.steps}steps{failure}"


LESSONS: tuple[Lesson, ...] = (
    Lesson(key="bubble", title="1 · The bubble", figure="timelines", live=SCHEDULES,
           narration="A pipeline gives each stage a slice of the model. With backprop, a stage must wait for the "
                     "gradient to come back from every stage after it before it can update: GPipe and 1F1B leave "
                     "stages idle at the start and end of every step. ZeroLock's stages train on a local loss and "
                     "never wait for a gradient.",
           look_at="the highlighted gaps: a stage idle inside a step (the bubble)"),
    Lesson(key="memory", title="2 · The memory", figure="memory", live=SCHEDULES,
           narration="To compute its backward, a backprop stage keeps every micro-batch's activations from its "
                     "forward until the gradient arrives. GPipe holds all m micro-batches of a step; 1F1B up to K. "
                     "A ZeroLock stage runs its local loss right after each forward and frees the activations.",
           look_at="each stage's peak activation memory (the bars on the right)"),
    Lesson(key="early-forwarding", title="3 · Early forwarding", figure="early-forwarding", live=SCHEDULES,
           methods=("zerolock",),
           narration="No gradient crosses a stage boundary, so a ZeroLock stage sends its hidden state on (SF) "
                     "before its own backward (L): the next stage starts at once, and the stages overlap.",
           look_at="a send (SF) that leaves before the stage's own loss and backward (L) of the same micro-batch"),
    Lesson(key="failure", title="4 · A stage dies", figure="failure", live=FAILURE,
           narration="Stage 1 is killed in the middle of step 4. ZeroLock restarts that stage alone: it restores "
                     "its checkpoint and replays the inputs its upstream neighbour kept; the others keep their "
                     "work and only wait for it (RELINK) where they need its output or room in its buffer. 1F1B's "
                     "stages are locked to each other's gradients: every stage restarts and rolls back to the "
                     "last checkpoint.",
           look_at="the failure: the band while the stage is away, RESTORE and REPLAY on its lane only (ZeroLock), "
                   "on every lane (1F1B)"),
    Lesson(key="quality", title="5 · Does it learn as well?", figure="quality",
           narration="Speed and memory are only worth it if the model learns. On SmolLM2-135M (30 layers) the "
                     "paper's local objective, read through the frozen head, trails backprop and falls further "
                     "behind with every chunk added; reading through a copy of the model's own top layers with "
                     "LoRA (top-lora:last) holds backprop's level at every K measured. Measured by this project "
                     "(seeds where the study ran them).",
           look_at="where each objective stands against backprop at each number of chunks"),
)


def lesson(key: str) -> Lesson:
    for item in LESSONS:
        if item.key == key:
            return item
    raise ValueError(f"no lesson {key!r}; the lessons are {', '.join(x.key for x in LESSONS)}")
