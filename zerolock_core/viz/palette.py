"""Colours and names shared by every view (Watch, Compare, Explain, Runs, exports, notebooks) and by
the benchmarks' figures. It lives in the engine, below the dashboard and the benchmarks, because
its colours name the engine's action kinds, stages and methods. Pure Python: no plotly, no torch.

One palette, one meaning per colour family. Each family lives in its own band of HSL saturation /
lightness, so a colour's family can be told at a glance and no colour string is ever used by two
families (tests/test_palette.py checks both):

* **Action kinds** (`KIND_COLOURS`, plus the failure marks `FAILURE_COLOURS`): bright and
  saturated (saturation >= 0.3, lightness >= 0.38). Compute kinds are full hues (F blue, L green,
  B orange, STEP gold, CKPT cyan, REPLAY red), W (the weight half of a split backward) B's darker rust; recovery is purple (RESTORE, and RELINK a lighter
  orchid of it); sends are light tints of the compute they carry (SF light blue, SB peach); waits
  are soft tints (RF lavender, RB pink, WAIT sand); start-up a pale yellow. Kinds (one colour and
  one label for every `vocabulary.Kind`) fill the timeline's bars and nothing else.
* **Stages** (`STAGE_RAMP`): one sequential, desaturated blue-grey (slate) ramp, dark for stage 0
  and lighter with depth (saturation <= 0.25, lightness >= 0.33). In timelines a stage is its lane
  (position only); where a stage needs a colour (memory rows, per-chunk loss, per-chunk accuracy,
  active/idle bars) it is a slate shade, with a dash pattern (`stage_dash`) as a second cue.
* **Methods** (`METHOD_COLOURS`, each defined in its methods.py entry): dark, saturated earth tones (saturation >= 0.6, lightness
  <= 0.31): ZeroLock dark teal, GPipe brown, 1F1B wine, PipeDream olive, ZB-H1 ocean blue, the BP reference
  indigo, terminal (only the last chunk trains) dark violet.
  They colour whole runs in Compare (loss curves, accuracy/throughput bars, memory peaks).
* **Structure** (`NEUTRAL`): pure greys (saturation 0) for everything that carries no data
  meaning: step boundaries, idle time, chance lines, muted text, the whole-model loss line.

The benchmarks' figures draw with the same families: a method's series in its method colour, a
stage's (or chunk's) in its slate shade, and a second estimate of what a series measured (a bound,
the textbook or paper value, a simulation, another implementation) as a fainter tint of the same
colour (`estimate_colour`); lines that share a colour differ by dash (`dash`).

So orange is only ever B, green only L, and the methods never borrow a kind's hue at a kind's
lightness. Do not add a second colour table elsewhere: add a name here.
"""
from __future__ import annotations

from ..methods import METHODS, label
from ..vocabulary import BUSY_KINDS, Kind

# --- action kinds: bright, saturated; every timeline (live, compare, explain, notebooks) ---------
KIND_COLOURS: dict[Kind, str] = {
    Kind.F: "#2F6FDB",  # forward
    Kind.L: "#2CA02C",  # ZeroLock local step: readout + local loss + local backward
    Kind.B: "#E8772E",  # backward (BP methods)
    Kind.W: "#B5541C",  # weight gradient of a split backward (zb-h1: B's kin, darker rust)
    Kind.SF: "#9CC3F5",  # send hidden state downstream (tint of F)
    Kind.RF: "#B9A6D6",  # receive hidden state (time spent waiting for it)
    Kind.SB: "#F8C08F",  # send gradient upstream (tint of B)
    Kind.RB: "#E7A1B7",  # receive gradient (time spent waiting for it)
    Kind.STEP: "#F2B701",  # optimizer step
    Kind.CKPT: "#17A2B8",  # checkpoint
    Kind.REPLAY: "#D62728",  # replay of a micro-batch after recovery
    Kind.RESTORE: "#8E44AD",  # restore from a checkpoint (recovery)
    Kind.RELINK: "#CE5FC0",  # rebuild a link to a restarted neighbour and resend (recovery: orchid, RESTORE's kin)
    Kind.WAIT: "#D9CBB0",  # any other wait
    Kind.STARTUP: "#FBE3A1",  # a stage process starting: spawned -> its first action (drawn hatched)
}
UNKNOWN_KIND_COLOUR = "#7F7F7F"

KIND_LABELS: dict[Kind, str] = {
    Kind.F: "F forward",
    Kind.L: "L local loss + backward",
    Kind.B: "B backward",
    Kind.W: "W weight gradient",
    Kind.SF: "SF send hidden",
    Kind.RF: "RF wait for hidden",
    Kind.SB: "SB send gradient",
    Kind.RB: "RB wait for gradient",
    Kind.STEP: "STEP optimizer",
    Kind.CKPT: "CKPT checkpoint",
    Kind.REPLAY: "REPLAY",
    Kind.RESTORE: "RESTORE",
    Kind.RELINK: "RELINK relink + resend",
    Kind.WAIT: "WAIT",
    Kind.STARTUP: "start-up",
}
KIND_ORDER: tuple[Kind, ...] = tuple(KIND_COLOURS)
# drawing, not accounting (what counts as busy is zerolock_core.vocabulary): thick bars for work,
# thin ones for sends and waits; RESTORE and REPLAY drawn at a minimum visible width and labelled
THICK_KINDS = BUSY_KINDS | {Kind.RESTORE}
ALWAYS_VISIBLE_KINDS = frozenset({Kind.RESTORE, Kind.REPLAY})

# The failure story on the timeline (same family as the kinds: they are events on a lane).
FAILURE_COLOURS: dict[str, str] = {
    "kill": "#B71C1C",  # the ✕ at the instant a stage failed
    "band": "rgba(183,28,28,0.13)",  # detection + restart (every lane for a global rollback)
    "band_edge": "rgba(183,28,28,0.45)",
    # a straggler fails nothing: its lane is shaded fainter, edged dashed, from where it turned slow on
    "slow_band": "rgba(183,28,28,0.06)",
}

# What a lesson points at on a figure (the Lessons tab): a bright outline no kind, stage or method uses.
HIGHLIGHT_COLOUR = "#FF00A8"

# --- stages: a desaturated slate ramp, dark (stage 0) to light (the last stage) ---------------------
STAGE_RAMP: tuple[str, ...] = ("#3F5566", "#4D6373", "#5C7180", "#6A7F8D", "#798C99", "#8799A5", "#95A6B1",
                               "#A3B3BD")
STAGE_COLOURS = STAGE_RAMP  # the name older callers import
# line dashes: a second cue where lines share a colour (a stage's shade; the variants of one method)
DASHES: tuple[str, ...] = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
# marker symbols: a third cue beside the dash, readable where two dashed lines run together
MARKERS: tuple[str, ...] = ("circle", "square", "diamond", "triangle-up", "x", "star")

# --- methods: dark, saturated earth tones, each defined with its method (methods.py), in its order --------
METHOD_LABELS: dict[str, str] = {m.name: m.label for m in METHODS}
METHOD_COLOURS: dict[str, str] = {m.name: m.colour for m in METHODS}
UNKNOWN_METHOD_COLOUR = "#4A2C0A"

# --- structure: pure greys, no data meaning ---------------------------------------------------------------
NEUTRAL: dict[str, str] = {
    "ink": "#222222",  # the whole model's loss (one line, no stage)
    "muted": "#666666",  # footnotes, placeholder text
    "step": "#9A9A9A",  # optimizer step boundaries
    "chance": "#555555",  # chance / majority-class lines
    "idle": "#E3E3E3",  # idle / unrecorded time
    "panel": "#FAFAFA",  # the range slider's background
    "base": "#808080",  # the pretrained model before any fine-tune (readability curves)
    "boundary": "#BBBBBB",  # chunk boundaries (readability figures)
}

# --- the frame every figure sits in: plotly_white's look written out (app/figures/layout.py; the template
# itself costs tens of ms to copy into each figure, which a 2 Hz live view cannot afford) -----------------
FRAME: dict[str, str] = {
    "grid": "#E5ECF6",  # grid, axis and zero lines
    "text": "#2a3f5f",  # titles, ticks, legends
}

# A benchmark's second estimate of what it measured (a bound, the textbook or paper value, a simulation,
# another implementation) is a translucent tint of the measurement's colour: the same family, fainter.
ESTIMATE_ALPHAS: tuple[float, ...] = (0.45, 0.2)

# Every family, for tests/test_palette.py and for anyone who needs to check a new colour.
FAMILIES: dict[str, tuple[str, ...]] = {
    "kind": (*KIND_COLOURS.values(), UNKNOWN_KIND_COLOUR, *FAILURE_COLOURS.values()),
    "stage": STAGE_RAMP,
    "method": (*METHOD_COLOURS.values(), UNKNOWN_METHOD_COLOUR),
    "structure": tuple(NEUTRAL.values()),
}


def kind_colour(kind: str) -> str:
    return KIND_COLOURS.get(kind, UNKNOWN_KIND_COLOUR)


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind)


def stage_colour(stage: int, stages: int | None = None) -> str:
    """Stage `stage`'s slate shade. With `stages` (K <= len(STAGE_RAMP)), the K shades are spread
    over the whole ramp, so stage 0 is the darkest and stage K-1 the lightest."""
    n = len(STAGE_RAMP)
    if stages is not None and 1 < stages <= n:
        return STAGE_RAMP[round(stage * (n - 1) / (stages - 1))]
    return STAGE_RAMP[stage % n]


def with_alpha(colour: str, alpha: float) -> str:
    """`#RRGGBB` as an `rgba(...)` string with opacity `alpha` (fills under a family's lines)."""
    h = colour.lstrip("#")
    if len(h) != 6:
        raise ValueError(f"with_alpha needs a #RRGGBB colour (got {colour!r})")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha:g})"


def dash(i: int) -> str:
    """The `i`-th line dash."""
    return DASHES[i % len(DASHES)]


def marker(i: int) -> str:
    """The `i`-th marker symbol."""
    return MARKERS[i % len(MARKERS)]


def stage_dash(stage: int) -> str:
    """The line dash of stage `stage` (a second cue next to its shade)."""
    return dash(stage)


def estimate_colour(colour: str, nth: int) -> str:
    """The colour of the `nth` estimate of one quantity drawn beside its measurement (nth = 0: the
    measurement itself, in `colour`): the same colour, fainter for each further estimate."""
    return colour if nth == 0 else with_alpha(colour, ESTIMATE_ALPHAS[min(nth, len(ESTIMATE_ALPHAS)) - 1])


def method_colour(method: str) -> str:
    return METHOD_COLOURS.get(method, UNKNOWN_METHOD_COLOUR)


def method_label(method: str) -> str:
    return label(method)


def kind_sort_key(kind: str) -> tuple[int, str]:
    """Legend order: the known kinds in KIND_ORDER, then anything new alphabetically."""
    return (KIND_ORDER.index(kind), "") if kind in KIND_ORDER else (len(KIND_ORDER), kind)
