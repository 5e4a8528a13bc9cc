"""The verdict Compare opens with: what each run is, how ZeroLock (or any run) fares against the
backprop schedule in the set, and why, from the runs' configs.

    ZeroLock · top-lora:last is 2.38× slower than 1F1B (14.1 vs 33.6 samples/s), holds 1.76× less
    activation memory (busiest stage 4.99 vs 8.78 MiB), accuracy +0.035 (0.285 vs 0.250, 1 seed each).

The reference is the exact-gradient run of the set (a flushing schedule or the BP reference, never a
local method nor PipeDream's stale weights): 1F1B when there is one, else the fastest. Runs of one config
that differ only in the seed are one group: its numbers are the mean over the runs that have them, with
their count. Every number is a `Series` property (figures/compare.py), the one definition the charts
read too. The why: a readout that runs extra layers on every stage (how many, from the readout spec and
the record's chunk bounds), more stages than cores, different steps / data / seeds / K, b, m."""
from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass
from typing import Sequence

from zerolock_core.config.readout_spec import LORA_KINDS, SAMPLE_KINDS, ReadoutSpec
from zerolock_core.methods import method as method_entry

from .figures.compare import Series
from .run_label import dataset_name

REFERENCE_METHOD = "1f1b"  # the best-known backprop schedule: the reference when the set has it
MIB = 2**20


def exact_gradient(method: str) -> bool:
    """Trains on the true gradient of the task loss with current weights: not a local method, and a
    schedule that flushes (PipeDream's weight stash trains on stale weights)."""
    try:
        entry = method_entry(method)
    except KeyError:
        return False
    return not entry.local and entry.flushes


def _mean(values: Sequence[float | None]) -> tuple[float | None, int]:
    known = [v for v in values if v is not None]
    return (statistics.fmean(known) if known else None), len(known)


def _config_key(s: Series) -> str:
    """A run's config but its seed and output folder: runs with one key are seeds of one configuration."""
    cfg = {k: v for k, v in s.run_config.items() if k != "out"}
    cfg["train"] = {k: v for k, v in (cfg.get("train") or {}).items() if k != "seed"}
    return json.dumps([s.method, s.stages, cfg], sort_keys=True, default=str)


@dataclass(kw_only=True, frozen=True)
class Group:
    """The runs of one configuration (seeds of it): the numbers are means over the runs that have them."""
    name: str
    runs: tuple[Series, ...]

    @property
    def first(self) -> Series:
        return self.runs[0]

    @property
    def samples_per_s(self) -> tuple[float | None, int]:
        return _mean([s.samples_per_s for s in self.runs])

    @property
    def accuracy(self) -> tuple[float | None, int]:
        return _mean([s.accuracy for s in self.runs])

    @property
    def peak_activation_bytes(self) -> tuple[float | None, int]:
        return _mean([s.peak_activation_bytes for s in self.runs])


def groups_of(series: Sequence[Series]) -> list[Group]:
    """The runs grouped by configuration, in the order they come; each group named by its method and
    readout, with K and then its steps added only where that is needed to tell two groups apart."""
    by_key: dict[str, list[Series]] = {}
    for s in series:
        by_key.setdefault(_config_key(s), []).append(s)
    runs = list(by_key.values())

    def tiers(s: Series) -> list[str]:
        train = s.run_config.get("train") or {}
        k = f"{s.short} · K={s.stages}"
        return [s.short, k, f"{k} · {train.get('steps')} steps", s.label]

    names = []
    for rs in runs:
        options = tiers(rs[0])
        tier = next((t for t in range(len(options)) if [tiers(o[0])[t] for o in runs].count(options[t]) == 1),
                    len(options) - 1)
        names.append(options[tier])
    return [Group(name=n, runs=tuple(rs)) for n, rs in zip(names, runs)]


def reference_group(groups: Sequence[Group]) -> Group | None:
    """1F1B's group (the one with the most runs), else the fastest exact-gradient one; None if none is."""
    exact = [g for g in groups if exact_gradient(g.first.method)]
    ones = [g for g in exact if g.first.method == REFERENCE_METHOD]
    if ones:
        return max(ones, key=lambda g: len(g.runs))
    return max(exact, key=lambda g: g.samples_per_s[0] or 0.0, default=None)


def _times(ratio: float, up: str, down: str, *, same: str, then: str = "") -> str:
    """"**2.38× slower** than" (a ratio below 1 said the other way round); `same` within half a percent."""
    if abs(ratio - 1) < 0.005:
        return same
    word, times = (up, ratio) if ratio > 1 else (down, 1 / ratio)
    return f"**{times:.2f}× {word}**{then}"


def _seeds(a: int, b: int) -> str:
    return f"{a} seed each" if a == b == 1 else f"mean of {a} vs {b} seeds"


def verdict_line(g: Group, ref: Group) -> str:
    """"**A** is x× faster / slower than **B** (…), holds y× less activation memory (…), accuracy ±z (…)"."""
    parts = []
    (a, _), (b, _) = g.samples_per_s, ref.samples_per_s
    if a and b:
        speed = _times(a / b, "faster", "slower", same="as fast as", then=" than")
        parts.append(f"is {speed} {ref.name} ({a:.1f} vs {b:.1f} samples/s)")
    else:
        parts.append(f"against {ref.name}: no throughput yet")
    (a, _), (b, _) = g.peak_activation_bytes, ref.peak_activation_bytes
    if a and b:
        parts.append(f"holds {_times(b / a, 'less', 'more', same='as much')} activation memory "
                     f"(busiest stage {a / MIB:.3g} vs {b / MIB:.3g} MiB)")
    (a, n), (b, m) = g.accuracy, ref.accuracy
    if a is not None and b is not None:
        parts.append(f"accuracy **{a - b:+.3f}** ({a:.3f} vs {b:.3f}, {_seeds(n, m)})")
    return f"**{g.name}** " + ", ".join(parts) + "."


def _readout_words(spec: ReadoutSpec, extra: int) -> str:
    """"a copy of the model's top 2 layers (the last chunk's) on every stage but the last and trains …"."""
    if spec.kind in SAMPLE_KINDS:
        what = f"copies of {extra} of the model's later layers (sampled over the rest of its depth)"
    else:
        what = f"a copy of the model's top {extra} layers" + (" (the last chunk's)" if spec.to_last else "")
    how = " and trains LoRA on them" if spec.kind in LORA_KINDS else (
        f" with the last chunk's own LoRA, pushed every {spec.period} steps (nothing more to train)"
        if spec.tracks else " (frozen)")
    return f"{what} on every stage but the last{how}"


def _layers(layers: list[tuple[int, int]]) -> str:
    return " / ".join(f"{own}+{extra}" if extra else str(own) for own, extra in layers)


def readout_why(g: Group, ref: Group | None) -> str | None:
    """Why a readout costs time: the layers it runs on every stage but the last, against the reference's."""
    s = g.first
    if not s.readout:
        return None
    try:
        spec = ReadoutSpec.parse(s.readout)
    except ValueError:
        return None
    if spec.is_adapter:
        return (f"**{g.name}** reads out through a trained {spec.kind} translator before the head on every "
                "chunk: more trainable parameters than backprop, little extra time.")
    if not spec.reads_layers:
        return None
    layers = s.stage_layers
    if not layers or not any(extra for _, extra in layers):
        n = "the last chunk's" if spec.to_last else str(spec.layers)
        return (f"**{g.name}**'s readout runs {n} extra layers on every stage but the last, and keeps their "
                "activations for its backward: more work per micro-batch than backprop.")
    extra = max(e for _, e in layers)
    text = f"**{g.name}**'s readout runs {_readout_words(spec, extra)}: {_layers(layers)} layers per micro-batch"
    theirs = ref.first.stage_layers if ref is not None else None
    if theirs and len(theirs) == len(layers):
        busiest = max(o + e for o, e in layers) / max(o + e for o, e in theirs)
        text += (f" against {_layers(theirs)} for {ref.name} — its busiest stage runs {busiest:.2f}× the "
                 "layers and keeps their activations for the backward too")
    return text + "."


def _differ(values: Sequence[object]) -> list[str]:
    return [str(v) for v in dict.fromkeys(values)] if len(set(map(str, values))) > 1 else []


def why_lines(series: Sequence[Series], groups: Sequence[Group], ref: Group | None, *,
              cores: int | None = None) -> list[str]:
    """What in the configs explains the numbers (or makes them incomparable), one line each."""
    cores = cores or os.cpu_count() or 1
    out = [w for g in groups if (w := readout_why(g, ref))]
    trains = [s.run_config.get("train") or {} for s in series]
    k = max(s.stages for s in series)
    if k > cores:
        out.append(f"K = {k} > {cores} cores here: the stages take turns on the cores, which hides bubbles and "
                   "flatters the exact-gradient schedules' throughput. Memory is unaffected.")
    if steps := _differ([t.get("steps") for t in trains]):
        out.append(f"Different numbers of steps ({' vs '.join(steps)}): their accuracies are not comparable.")
    if data := _differ([(s.run_config.get("data") or {}).get("dataset") for s in series]):
        out.append(f"Different datasets ({' vs '.join(data)}): their accuracies are not comparable.")
    shape = [f"{name} {' vs '.join(v)}" for name, field in (("K", "stages"), ("b", "batch"), ("m", "microbatches"))
             if (v := _differ([t.get(field) for t in trains]))]
    if shape:
        out.append(f"Different pipeline shapes ({'; '.join(shape)}): compare with care.")
    if all(len(g.runs) == 1 for g in groups) and len(groups) > 1:
        seeds = _differ([t.get("seed") for t in trains])
        out.append("One seed each" + (f", and different seeds ({' vs '.join(seeds)})" if seeds else "")
                   + ": an accuracy gap within the seed spread is noise.")
    reference = [s.label for s in series if (s.run_config.get("train") or {}).get("runtime") == "reference"]
    if reference:
        out.append(f"{', '.join(reference)}: trained in one process (reference runtime): its samples/s is not a "
                   "pipeline's, and it has no per-stage memory.")
    unfinished = [s.label for s in series if s.metrics is None]
    if unfinished:
        out.append(f"Still running or without a record: {', '.join(unfinished)}.")
    return out


def _cell(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)


def runs_table(series: Sequence[Series]) -> str:
    """One row per run: its label (run_label.py), data, steps and numbers."""
    rows = ["| run | dataset | steps | samples/s | accuracy | busiest stage's activations |",
            "|---|---|---|---|---|---|"]
    for s in series:
        data = dataset_name(s.run_config) or "?"
        steps = (s.run_config.get("train") or {}).get("steps", "?")
        peak = s.peak_activation_bytes
        rows.append(f"| {s.label} | {data} | {steps} | {_cell(s.samples_per_s, '{:.1f}')} | "
                    f"{_cell(s.accuracy, '{:.3f}')} | {_cell(None if peak is None else peak / MIB, '{:.3g} MiB')} |")
    return "\n".join(rows)


def verdict_markdown(series: Sequence[Series], *, cores: int | None = None) -> str:
    """The card: the runs, one verdict line per configuration against the reference, and why."""
    if not series:
        return "Nothing selected."
    groups = groups_of(series)
    ref = reference_group(groups)
    parts = ["### Verdict", runs_table(series)]
    if ref is None:
        parts.append("No exact-gradient run (1F1B, GPipe, ZB-H1 or the BP reference) among these: add one to "
                     "see how the others compare with backprop.")
    else:
        parts.extend(verdict_line(g, ref) for g in groups if g is not ref)
    why = why_lines(series, groups, ref, cores=cores)
    if why:
        parts.append("**Why**\n" + "\n".join(f"- {w}" for w in why))
    return "\n\n".join(parts)
