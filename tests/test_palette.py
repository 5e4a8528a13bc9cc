"""One palette, one meaning per colour family (zerolock_core/viz/palette.py): no colour string in two families,
each family in its own band of saturation / lightness, and the dashboard's and the benchmarks' figures
take every colour from it."""
from __future__ import annotations

import colorsys
import importlib
import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from zerolock_core.viz import palette
from zerolock_core.viz.palette import FAMILIES, KIND_COLOURS, METHOD_COLOURS, STAGE_RAMP, stage_colour

HEX = re.compile(r"^#[0-9a-f]{6}$")


def norm(colour: str) -> str:
    """Lower case, no spaces; rgba(r,g,b,a) -> its #rrggbb (a translucent tint keeps its family)."""
    c = colour.strip().lower().replace(" ", "")
    m = re.match(r"^rgba?\((\d+),(\d+),(\d+)(,[\d.]+)?\)$", c)
    return "#%02x%02x%02x" % tuple(int(v) for v in m.groups()[:3]) if m else c


def hls(colour: str) -> tuple[float, float, float]:
    c = norm(colour)
    assert HEX.match(c), colour
    return colorsys.rgb_to_hls(*(int(c[i:i + 2], 16) / 255 for i in (1, 3, 5)))


def test_no_colour_string_is_used_by_two_families():
    owner: dict[str, str] = {}
    for family, colours in FAMILIES.items():
        for c in {norm(c) for c in colours}:
            assert c not in owner, f"{c} is both a {owner[c]} colour and a {family} colour"
            owner[c] = family


@pytest.mark.parametrize("family", list(FAMILIES))
def test_colours_within_a_family_differ(family):
    colours = [norm(c) for c in FAMILIES[family]]
    solid = [c for c in colours if HEX.match(c)]
    if family == "kind":  # the failure band's translucent fill is the kill colour's tint, on purpose
        solid = [norm(c) for c in (*KIND_COLOURS.values(), palette.UNKNOWN_KIND_COLOUR,
                                   palette.FAILURE_COLOURS["kill"])]
    assert len(set(solid)) == len(solid)


@pytest.mark.parametrize("family, colours, rule", [
    # kinds: bright and saturated (the unknown kind's grey aside)
    ("kind", [*KIND_COLOURS.values(), palette.FAILURE_COLOURS["kill"]], lambda h, l, s: s >= 0.3 and l >= 0.38),
    # stages: a desaturated slate ramp
    ("stage", list(STAGE_RAMP), lambda h, l, s: 0.05 <= s <= 0.25 and l >= 0.3),
    # methods: dark and saturated
    ("method", [*METHOD_COLOURS.values(), palette.UNKNOWN_METHOD_COLOUR], lambda h, l, s: s >= 0.6 and l <= 0.31),
    # structure: pure greys
    ("structure", list(palette.NEUTRAL.values()), lambda h, l, s: s == 0),
])
def test_each_family_keeps_to_its_band(family, colours, rule):
    for c in colours:
        assert rule(*hls(c)), f"{family} colour {c} is outside its band (h, l, s = {hls(c)})"


def test_stage_ramp_is_sequential_dark_to_light():
    lightness = [hls(c)[1] for c in STAGE_RAMP]
    assert lightness == sorted(lightness) and len(set(lightness)) == len(lightness)
    assert stage_colour(0, 2) == STAGE_RAMP[0] and stage_colour(1, 2) == STAGE_RAMP[-1]  # K=2: both ends
    assert stage_colour(9) == STAGE_RAMP[9 % len(STAGE_RAMP)]


def test_the_reported_clashes_are_gone():
    """Issue 13: orange was B, stage 1 and GPipe; green L, stage 2 and ZeroLock; purple RF and 1F1B."""
    stage_and_method = {norm(c) for c in (*STAGE_RAMP, *METHOD_COLOURS.values())}
    for kind in ("B", "L", "RF", "RESTORE"):
        assert norm(KIND_COLOURS[kind]) not in stage_and_method


def test_app_figures_use_no_colour_outside_the_palette():
    """The figure modules take every colour from zerolock_core/viz/palette.py (one definition of each colour)."""
    app = Path(__file__).resolve().parents[1] / "app"
    for path in [*sorted((app / "figures").glob("*.py")), app / "explain.py", app / "exports.py"]:
        text = path.read_text()
        assert not re.findall(r"#[0-9A-Fa-f]{6}\b", text), f"{path.name} has its own colour literal"


ROOT = Path(__file__).resolve().parents[1]
# a colour written out: #rgb / #rrggbb, rgb(...) / rgba(...), or a CSS colour name
COLOUR_LITERAL = re.compile(r"#[0-9A-Fa-f]{3}(?:[0-9A-Fa-f]{3})?\b|rgba?\(|"
                            r"[\"'](?:black|white|red|green|blue|gr[ae]y|orange|purple|yellow|pink|brown)[\"']")


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_benchmarks_write_no_colour_outside_the_palette(path):
    assert not COLOUR_LITERAL.findall(path.read_text()), f"{path.name} has its own colour literal"


def colours_in(node: Any) -> Iterator[str]:
    """Every value of a `...color` key in a figure's dict (lists of per-bar colours included)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith("color") and value is not None:
                yield from (value if isinstance(value, list) else [value])
            else:
                yield from colours_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from colours_in(item)


def committed_figures() -> list[tuple[str, str, Any]]:
    """(result file, figure name, figure) of every committed benchmark result that draws figures."""
    from benchmarks.readme import FORMATTERS

    out = []
    for path in sorted((ROOT / "docs" / "results").glob("*.json")):
        report = json.loads(path.read_text())
        figures = getattr(importlib.import_module(f"benchmarks.{FORMATTERS[report['bench']][0]}"), "figures", None)
        out += [(path.name, name, fig) for name, fig in (figures(report) if figures else {}).items()]
    return out


def test_every_benchmark_figure_draws_in_the_palettes_colours():
    """Each trace has a colour (none left to plotly's default sequence), and every colour drawn (traces,
    lines, shapes) is a palette colour or a translucent tint of one."""
    palette_colours = {norm(c) for colours in FAMILIES.values() for c in colours}
    figures = committed_figures()
    assert {name for _, name, _ in figures} >= {"memory_per_stage", "quality_curves", "readability_label_accuracy"}
    for result, name, fig in figures:
        d = fig.to_dict()
        d["layout"].pop("template", None)
        for trace in d["data"]:
            assert list(colours_in(trace)), f"{result} {name}: trace {trace.get('name')!r} has no colour"
        foreign = {c for c in colours_in(d) if norm(c) not in palette_colours}
        assert not foreign, f"{result} {name} draws {foreign}, outside the palette"
