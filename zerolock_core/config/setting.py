"""A setting: one field of the run's config with everything said about it in one place.

`setting(default, flag=..., help=...)` is a `dataclasses.field` whose metadata holds a `Setting`: the
field's flag and help on the command line, its label on the dashboard's Run form (and the short
symbol the form's suggestions use), and the bounds or choices every value must keep: its own, and a
limit only the model or the machine knows (`most`, checked by train/preflight.py). The CLI's run
flags, the words of the error messages, the Run form's defaults and labels and the TOML config files
are generated from these (run_fields.py holds the fields).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

SETTING = "setting"  # the key of a dataclass field's metadata that holds its Setting


@dataclass(kw_only=True, frozen=True)
class Limit:
    """A bound from outside the config: the model's or the machine's (preflight.py measures it)."""
    what: str  # in the flag's help and the form's label: "the model's positions"
    said: str  # in a refusal, with the number: "the model's {n} positions (its max_position_embeddings)"


LIMITS = {
    "positions": Limit(what="the model's positions",
                       said="the model's {n} positions (its max_position_embeddings): it has no position beyond"),
    "hidden": Limit(what="the model's hidden size",
                    said="the model's hidden size, {n}: a LoRA rank above it adds nothing but memory"),
    "cores": Limit(what="this machine's cores",
                   said="the {n} cores this process may run on (more threads than cores only wait for each other)"),
}


@dataclass(kw_only=True, frozen=True)
class Setting:
    flag: str  # the CLI's name ("--stages")
    help: str  # the flag's help; the help formatter appends the default
    label: str = ""  # the Run form's label ("stages K"); "" = the field's name in words ("weight decay")
    symbol: str = ""  # the short name of the form's suggestions ("K" in "try K = 2"); "" = the label
    # what every value (every item of a tuple) must keep: minimum is inclusive, above exclusive; a float
    # with a bound must also be finite
    minimum: float | None = None
    above: float | None = None
    maximum: float | None = None
    why_maximum: str = ""  # said with a refusal above the maximum (what the engine cannot honour)
    most: str = ""  # a LIMITS key: at most the model's or the machine's, checked when the run is preflighted
    choices: tuple[str, ...] = ()
    # the command line
    parse: Callable[[str], Any] | None = None  # the flag's text -> the value; None: int, float or str, as the default
    metavar: str = ""  # "" = the flag's name; given with choices, argparse shows it instead of the choices and
    #                    leaves them to the config's validation (one line naming the flag, not a usage message)
    const: Any = None  # the value of the flag given without one ("--readout-adapter" alone = mlp)
    repeat: bool = False  # the flag is given once per item of a tuple ("--fail 1@3 --fail 2@5")
    switch: bool = False  # a flag without a value that sets the opposite of the default ("--no-final-eval")
    group: str = ""  # the --help group; "" = the section's

    def __post_init__(self) -> None:
        assert not self.most or self.most in LIMITS, self.most

    @property
    def bound(self) -> str:
        """The limit from outside the config, as the help and the form's label say it ("" if none)."""
        return f"at most {LIMITS[self.most].what}" if self.most else ""

    @property
    def help_text(self) -> str:
        """The flag's help with that limit."""
        return f"{self.help}; {self.bound}" if self.most else self.help

    @property
    def cli_choices(self) -> tuple[str, ...]:
        """The choices argparse enforces (none where a metavar names them instead)."""
        return () if self.metavar else self.choices


def setting(default: Any, **words: Any) -> Any:
    """A dataclass field with its `Setting` (the fields are frozen: a tuple default is safe)."""
    return field(default=default, metadata={SETTING: Setting(**words)})


def setting_of(f: dataclasses.Field) -> Setting:
    assert SETTING in f.metadata, f"{f.name} is not declared with setting()"
    return f.metadata[SETTING]


def value_text(value: Any) -> str:
    """A value as the command line writes it: a tuple comma-separated ("0.5", "q_proj,v_proj")."""
    return ",".join(str(x) for x in value) if isinstance(value, (tuple, list)) else str(value)
