"""A RunConfig as a TOML file: one table per section ([model], [data], [objective], [train], [link])
holding the dataclasses' field names (run_fields.py).

`write_config_toml(cfg, path)` writes every field, so a file keeps meaning the same run when a default
changes; `read_config_toml(path)` reads one back (`zerolock train --config FILE.toml`), and
`loads(dumps(cfg))` equals `cfg` with `out` left unset: `out` names the run directory, so it is not
part of the file (`--out` gives it). TOML has no null: a field set to None is left out of the file,
and a field left out reads as its default, which is None for every field that can be None (the chunk
boundaries, the link's bandwidth and latency). A file may leave out any field or table.

Reading refuses, with a ConfigError naming the file, the key and what is allowed, an unknown table or
key, a value of the wrong type and anything `RunConfig` refuses (in the file's words: "train.stages").
It creates nothing.
"""
from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

from ..rundir.atomic_files import write_text_atomic
from ..method.balance import AUTO
from .run_config import RunConfig, upgrade_sections
from .field_words import FILE, ConfigError, render
from .run_fields import RUN_FIELDS, SECTIONS

TOP_LEVEL_NOT_IN_FILE = {"out": "out names the run directory and is not part of a config file: give --out"}


def dumps(cfg: RunConfig, *, comment: str = "") -> str:
    """`cfg` as TOML (without `out`), an array on one line; `comment` becomes "# " lines at the top."""
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    for name in SECTIONS:
        section = getattr(cfg, name)
        lines += ["", f"[{name}]"] if lines else [f"[{name}]"]
        for key in (f.name for f in dataclasses.fields(section)):
            value = getattr(section, key)
            if value is None:  # TOML has no null: left out, it reads back as its default (None)
                continue
            text = f"[{', '.join(_literal(v) for v in value)}]" if isinstance(value, tuple) else _literal(value)
            if key == "boundaries" and value == AUTO:
                text = '"auto"'
            lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"


def _literal(value: Any) -> str:
    """A scalar as TOML writes it (tomli-w: strings escaped, floats kept floats)."""
    import tomli_w  # only a writer needs it

    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()


def loads(text: str, *, source: str = "config") -> RunConfig:
    """A validated RunConfig (out unset) from TOML text; `source` names it in the messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{source}: not valid TOML: {err}") from None
    for key, value in data.items():
        if key in TOP_LEVEL_NOT_IN_FILE:
            raise ConfigError(f"{source}: {TOP_LEVEL_NOT_IN_FILE[key]}")
        if key not in SECTIONS or not isinstance(value, dict):
            raise ConfigError(f"{source}: {key!r} is not a table of a run config; the tables are "
                              f"{', '.join(f'[{name}]' for name in SECTIONS)}")
    tables = upgrade_sections({name: dict(data.get(name, {})) for name in SECTIONS})  # a file of an earlier version
    sections = {name: _section(source, name, tables[name]) for name in SECTIONS}
    try:
        return RunConfig(**sections)
    except ConfigError as err:
        raise ConfigError(f"{source}: {render(err, FILE)}") from None


def write_config_toml(cfg: RunConfig, path: str | Path, *, comment: str = "") -> Path:
    """Writes `cfg` (without `out`) to `path` as TOML; `zerolock train --config PATH` runs it again."""
    path = Path(path)
    write_text_atomic(path, dumps(cfg, comment=comment))
    return path


def read_config_toml(path: str | Path) -> RunConfig:
    """The RunConfig of a TOML file (out unset), or a ConfigError naming the file."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ConfigError(f"--config {path}: cannot read it ({err.strerror or err})") from None
    return loads(text, source=str(path))


def _section(source: str, name: str, table: dict[str, Any]) -> Any:
    kinds = {f.key: f.kind for f in RUN_FIELDS.values() if f.section == name}
    unknown = [key for key in table if key not in kinds]
    if unknown:
        raise ConfigError(f"{source}: [{name}] has no key {unknown[0]!r}; its keys are {', '.join(kinds)}")
    return SECTIONS[name](**{key: _typed(source, f"{name}.{key}", kinds[key], _auto(source, key, value))
                             for key, value in table.items()})


def _auto(source: str, key: str, value: Any) -> Any:
    """`boundaries = "auto"` (--boundaries auto) as the array the field reads; any other value as it is."""
    if key != "boundaries" or not isinstance(value, str):
        return value
    if value != "auto":
        raise ConfigError(f"{source}: model.boundaries must be an array of integers or \"auto\" (got {value!r})")
    return list(AUTO)


def _typed(source: str, where: str, kind: Any, value: Any) -> Any:
    """`value` as a field of type `kind` holds it (a tuple from an array, a float from an integer), or
    a ConfigError saying what the field takes."""
    converted = _convert(_without_none(kind), value)
    if converted is _WRONG:
        raise ConfigError(f"{source}: {where} must be {_described(_without_none(kind))} (got {value!r})")
    return converted


_WRONG = object()


def _without_none(kind: Any) -> Any:
    """`X | None` -> X (a file leaves a None out); other kinds as they are."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        rest = [k for k in typing.get_args(kind) if k is not type(None)]
        assert len(rest) == 1, kind
        return rest[0]
    return kind


def _convert(kind: Any, value: Any) -> Any:
    if typing.get_origin(kind) is tuple:
        item = typing.get_args(kind)[0]
        if not isinstance(value, list):
            return _WRONG
        items = [_convert(item, v) for v in value]
        return _WRONG if any(v is _WRONG for v in items) else tuple(items)
    if kind is bool:
        return value if isinstance(value, bool) else _WRONG
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _WRONG
    if kind is float:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else _WRONG
    assert kind is str, kind
    return value if isinstance(value, str) else _WRONG


def _described(kind: Any) -> str:
    if typing.get_origin(kind) is tuple:
        return f"an array of {_NAMES[typing.get_args(kind)[0]][1]}"
    return _NAMES[kind][0]


_NAMES = {bool: ("true or false", "booleans"), int: ("an integer", "integers"), float: ("a number", "numbers"),
          str: ("a string", "strings")}
