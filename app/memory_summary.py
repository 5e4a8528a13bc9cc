"""The memory calculator's words: the setting it counted, a table of each method's fullest stage, and the
win said as a ratio at the model's scale (and what `top-lora:last` pays for its accuracy)."""
from __future__ import annotations

from collections.abc import Mapping

from .figures.memory_calculator import byte_unit
from .memory_calculator import CALC_METHODS, PRECISIONS, CalcSetting, StageBytes, model_weights


def _size(n: float) -> str:
    unit, scale = byte_unit(n)
    return f"{n / scale:.3g} {unit}"


def _fullest(plan: tuple[StageBytes, ...]) -> StageBytes:
    return max(plan, key=lambda s: s.total)


def memory_summary(plans: Mapping[str, tuple[StageBytes, ...] | str], setting: CalcSetting) -> str:
    model = setting.calc_model
    rows = []
    for method, plan in plans.items():
        label = CALC_METHODS[method].label
        if isinstance(plan, str):
            rows.append(f"| {label} | — | — | {plan} |")
            continue
        top = _fullest(plan)
        held = ", ".join(str(s.held) for s in plan)
        rows.append(f"| {label} | {_size(top.total)} (stage {top.stage}) | {_size(top.activations)} | {held} |")
    table = "\n".join(rows)
    return f"""
**{model.label}** ({model_weights(model) / 1e9:.3g} B parameters; numbers from {model.source}) cut into
K = {setting.stages} stages, m = {setting.microbatches} micro-batches of b = {setting.microbatch_size} sequences ×
{setting.seq_len} tokens, LoRA r = {setting.rank} on {", ".join(setting.targets)}; frozen weights and activations
in {setting.precision} ({PRECISIONS[setting.precision]} bytes), the adapters, their gradients and AdamW's two
moments in fp32.

| method | fullest stage | its activations | micro-batches held, stage 0 … {setting.stages - 1} |
|---|---|---|---|
{table}

{_verdict(plans)}
""".strip()


def _verdict(plans: Mapping[str, tuple[StageBytes, ...] | str]) -> str:
    zl, top = plans["zerolock"], plans["zerolock-top-lora"]
    if isinstance(zl, str) or isinstance(top, str):
        return ""
    baseline = "1f1b" if not isinstance(plans["1f1b"], str) else "gpipe"
    bp = plans[baseline]
    assert not isinstance(bp, str), "GPipe has a schedule for every K and m"
    bp_top, zl_top = _fullest(bp), _fullest(zl)
    said = (f"**At this scale, ZeroLock (head readout) holds {bp_top.activations / zl_top.activations:.1f}× less "
            f"activation memory than {CALC_METHODS[baseline].label} on its fullest stage** ({_size(zl_top.activations)} "
            f"against {_size(bp_top.activations)}), and needs {bp_top.total / zl_top.total:.1f}× less in all there: "
            "each stage holds one micro-batch, whatever K and m. It pays with a copy of the frozen head on every "
            "stage.")
    first_top, first_zl = top[0], zl[0]
    if first_top.readout_layers:
        said += (f" With `top-lora:last` every stage but the last also holds and runs a copy of the model's top "
                 f"{first_top.readout_layers} layers: on stage 0, {first_top.parameters / first_zl.parameters:.1f}× "
                 f"the head readout's parameters and {first_top.activations / first_zl.activations:.1f}× its "
                 "activations — the price of its accuracy.")
    return said
