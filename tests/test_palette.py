"""One palette, one meaning per colour family (zerolock_core/palette.py): no colour string in two families,
and each family in its own band of saturation / lightness."""
from __future__ import annotations

import colorsys
import re
from pathlib import Path

import pytest

from zerolock_core import palette
from zerolock_core.palette import FAMILIES, KIND_COLOURS, METHOD_COLOURS, STAGE_RAMP, stage_colour

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
    """The figure modules take every colour from zerolock_core/palette.py (one definition of each colour)."""
    app = Path(__file__).resolve().parents[1] / "app"
    for name in ("timeline.py", "memory.py", "compare_figures.py", "training_figures.py", "explain.py", "exports.py",
                 "simulated.py"):
        text = (app / name).read_text()
        assert not re.findall(r"#[0-9A-Fa-f]{6}\b", text), f"{name} has its own colour literal"
