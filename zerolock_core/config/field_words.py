"""The words of a field in the messages about it, from its one definition (run_fields.FIELDS): the CLI's
flag ("--microbatches"), the Run form's label ("micro-batches m") or a config file's key
("train.microbatches").

A refusal about one field is a `FieldError` (a `ConfigError`) whose message is built in the words of
whoever renders it. `check_field` refuses a value outside its setting's bounds or choices; config.py
adds the rules between fields, preflight.py what needs a look at the model and the data, the
dashboard's Run form what its widgets can hold.
"""
from __future__ import annotations

import math
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .run_fields import FIELDS


class ConfigError(ValueError):
    """A bad user-supplied value; the message is meant to be shown as is."""


AUDIENCES = ("cli", "form", "file")


@dataclass(kw_only=True, frozen=True)
class Words:
    """How one audience names a field: the CLI by its flag, the Run form by its label, a config file by
    its section and key."""
    audience: str

    def __post_init__(self) -> None:
        assert self.audience in AUDIENCES, self.audience

    def name(self, key: str) -> str:
        f = FIELDS[key]
        if self.audience == "form":
            return f.setting.label or key.replace("_", " ")
        if self.audience == "file" and f.section:
            return f"{f.section}.{key}"
        return f.setting.flag

    def label(self, key: str, hint: str = "") -> str:
        """A widget's label: the field's name with the caller's hint, else the limit the model or the machine
        sets it ("sequence length (at most the model's positions)")."""
        hint = hint or FIELDS[key].setting.bound
        return f"{self.name(key)} ({hint})" if hint else self.name(key)

    def value(self, key: str, value: object) -> str:
        """The field holding a value: "--batch 6" | "batch b = 6" | "train.batch = 6" (text: "method 1f1b")."""
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        sep = " = " if self.audience == "file" or (self.audience == "form" and number) else " "
        return f"{self.name(key)}{sep}{shown(value)}"

    def failure(self, text: str) -> str:
        """One scheduled failure: "--fail '1@3:kill'" | "the scheduled failure" (the form schedules one,
        from fields of its own) | "train.failures = '1@3:kill'"."""
        return "the scheduled failure" if self.audience == "form" else self.value("failures", repr(clipped(text)))

    def failure_part(self, text: str, key: str, value: int) -> str:
        """A number of one scheduled failure (`key` fail_stage | fail_step): "--fail '2@3:kill': stage 2" |
        "failure stage = 2" (the form's own field) | "train.failures = '2@3:kill': stage 2"."""
        if self.audience == "form":
            return self.value(key, value)
        return f"{self.failure(text)}: {key.removeprefix('fail_')} {shown(value)}"

    def resume(self, path: object) -> str:
        """Resuming the run in `path`: "--resume runs/r1" | "run r1" (the dashboard names a run by its folder)."""
        return f"run {Path(str(path)).name}" if self.audience == "form" else f"--resume {path}"

    def suggest(self, key: str, value: object) -> str:
        """A value to try: "--batch 8" | "b = 8" | "train.batch = 8"."""
        if self.audience == "form":
            return f"{FIELDS[key].setting.symbol or self.name(key)} = {value}"
        return f"{self.name(key)}{' = ' if self.audience == 'file' else ' '}{value}"


CLI, FORM, FILE = Words(audience="cli"), Words(audience="form"), Words(audience="file")


SPEC_CHARS = 40  # of a --fail spec in a message: the numbers inside it are said in short after it


def shown(value: object) -> str:
    """A value as a message shows it: a huge whole number in short (`--batch` 10**100 must not make a
    message of a hundred digits), a list's items too, anything else as it is."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        digits = str(abs(value))  # argparse refuses an int of more than 4,300 digits before this
        return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:3]}e+{len(digits) - 1}"
    if isinstance(value, (list, tuple)):
        return f"[{', '.join(shown(v) for v in value)}]"
    return str(value)


def clipped(text: str, chars: int = SPEC_CHARS) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "…"


class FieldError(ConfigError):
    """A refusal about one field; `str()` is the CLI's wording, `render(FORM)` the Run form's."""

    def __init__(self, field: str, say: Callable[[Words], str]) -> None:
        super().__init__(say(CLI))
        self.field, self.say = field, say

    def render(self, words: Words) -> str:
        return self.say(words)

    def __reduce__(self):  # `say` is a closure: across processes the error travels as its CLI text
        return ConfigError, (str(self),)


class ConfigErrors(ConfigError):
    """Several refusals at once (a form's every mistake), one line each: `str()` in the CLI's words,
    `render()` in anyone's."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = tuple(errors)

    def __reduce__(self):  # across processes: the CLI's text, as FieldError does
        return ConfigError, (str(self),)


def raise_all(errors: Sequence[ConfigError]) -> None:
    """Nothing when `errors` is empty, the one error as it is, or all of them as one ConfigErrors."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)


def render(err: ConfigError, words: Words) -> str:
    """Any ConfigError in `words`, one line per refusal: a FieldError speaks them; the others have one
    wording (the CLI's)."""
    if isinstance(err, ConfigErrors):
        return "\n".join(render(e, words) for e in err.errors)
    return err.render(words) if isinstance(err, FieldError) else str(err)


def qualified(err: ConfigError, prefix: str) -> ConfigError:
    """`err` with "PREFIX: " in front (which of several runs it is about), still renderable."""
    if isinstance(err, ConfigErrors):
        return ConfigErrors([qualified(e, prefix) for e in err.errors])
    if isinstance(err, FieldError):
        return FieldError(err.field, lambda w: f"{prefix}: {err.say(w)}")
    return ConfigError(f"{prefix}: {err}")


def require(ok: bool, field: str, say: Callable[[Words], str]) -> None:
    if not ok:
        raise FieldError(field, say)


# ---- a field's own bounds and choices ---------------------------------------------------------------
def check_field(key: str, value: Any) -> None:
    """Refuses a value outside its setting's choices or bounds (every item of a tuple); None is an
    optional field left unset."""
    s = FIELDS[key].setting
    if value is None:
        return
    if s.choices:
        require(value in s.choices, key, lambda w: f"{w.value(key, repr(value))} is not one of {', '.join(s.choices)}")
    for item in value if isinstance(value, tuple) else (value,):
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            _check_bounds(key, item)


def _check_bounds(key: str, v: float) -> None:
    s = FIELDS[key].setting
    if s.minimum is None and s.above is None and s.maximum is None:
        return
    if math.isfinite(v) and (s.minimum is None or v >= s.minimum) and (s.above is None or v > s.above) \
            and (s.maximum is None or v <= s.maximum):
        return
    if s.why_maximum and s.maximum is not None and math.isfinite(v) and v > s.maximum:  # the engine's limit, why
        raise FieldError(key, lambda w: f"{w.value(key, v)} is more than the engine runs, {_num(s.maximum)} "
                                        f"({s.why_maximum})")
    if s.maximum is not None and not s.why_maximum:  # a range: "α = 1.5 is outside (0, 1]"
        left = f"({_num(s.above)}" if s.above is not None else f"[{_num(s.minimum)}" if s.minimum is not None \
            else "(-inf"
        raise FieldError(key, lambda w: f"{w.value(key, v)} is outside {left}, {_num(s.maximum)}]")
    if s.above is not None:
        bound = "positive" if s.above == 0 else f"greater than {s.above:g}"
    elif s.minimum is not None:
        bound = ">= 0" if s.minimum == 0 else f"at least {s.minimum:g}"
    else:  # only a maximum, with its reason: v is nan or -inf
        bound = f"at most {_num(s.maximum)}"
    finite = " and finite" if isinstance(v, float) else ""
    raise FieldError(key, lambda w: f"{w.name(key)} must be {bound}{finite} (got {shown(v)})")


def _num(x: float) -> str:
    """A bound as a person writes it: 1000000 -> "1,000,000", 0.5 -> "0.5"."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 1000 else f"{x:g}"


# ---- the messages of rules that suggest a valid value -------------------------------------------
def _or(values: list[int]) -> str:
    text = [str(v) for v in values]
    return text[0] if len(text) == 1 else f"{', '.join(text[:-1])} or {text[-1]}"


DIVISOR_SCAN = 4096  # the divisors a suggestion looks at on either side of a value: any --batch is quick


def _divisors(n: int, *, around: int) -> list[int]:
    """The divisors of `n` within DIVISOR_SCAN of `around` (all of them for any batch a run can hold)."""
    return [d for d in range(max(1, around - DIVISOR_SCAN), min(n, around + DIVISOR_SCAN) + 1) if n % d == 0]


def not_divisible(w: Words, *, batch: int, microbatches: int) -> str:
    """ "--batch 6 is not divisible by --microbatches 4; try --microbatches 2, 3 or 6, or --batch 8"."""
    near = [d for d in _divisors(batch, around=microbatches) if d > 1] or [1]
    near = sorted(sorted(near, key=lambda d: (abs(d - microbatches), d))[:3])
    up = -(-batch // microbatches) * microbatches
    return (f"{w.value('batch', batch)} is not divisible by {w.value('microbatches', microbatches)}; "
            f"try {w.suggest('microbatches', _or(near))}, or {w.suggest('batch', up)}")


def microbatches_below_stages(w: Words, *, method: str, batch: int, microbatches: int, stages: int) -> str:
    """1F1B's (and ZB-H1's) warm-up forwards K micro-batches before the first backward, so it needs m >= K."""
    fits = [d for d in _divisors(batch, around=stages) if d >= stages]
    if fits:
        fix = w.suggest("microbatches", fits[0])
    else:  # no m >= K divides b: grow b as well
        fix = f"{w.suggest('microbatches', stages)} with {w.suggest('batch', -(-batch // stages) * stages)}"
    return (f"{w.value('method', method)} needs {w.name('microbatches')} >= {w.name('stages')} "
            f"(got m={shown(microbatches)}, K={shown(stages)}); try {fix}, or {w.suggest('stages', microbatches)}")


# ---- the form's widgets ---------------------------------------------------------------------------
def whole(key: str, value: object) -> int:
    """An integer field's value, or a FieldError: K = 2.5 must not run as K = 2."""
    if value is None or value == "":
        raise FieldError(key, lambda w: f"{w.name(key)} is empty")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FieldError(key, lambda w: f"{w.name(key)} must be a whole number (got {value!r})") from None
    if not math.isfinite(number):
        raise FieldError(key, lambda w: f"{w.name(key)} must be a whole number (got {value})")
    if number != int(number):
        low = math.floor(number)
        raise FieldError(key, lambda w: f"{w.value(key, number)} is not a whole number; "
                                        f"try {w.suggest(key, low)} or {low + 1}")
    return int(number)


def number(key: str, value: object) -> float:
    if value is None or value == "":
        raise FieldError(key, lambda w: f"{w.name(key)} is empty")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FieldError(key, lambda w: f"{w.name(key)} must be a number (got {value!r})") from None
