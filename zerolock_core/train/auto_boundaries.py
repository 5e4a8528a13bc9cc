"""`--boundaries auto`, resolved once per run: the coordinator measures what each layer costs
(layer_costs.py), balances the chunks on those costs and the stages' speeds (balance.py), and every
process of the run is handed the resulting boundaries — the run's config.json holds them, so each
stage, a respawned one, a `--resume` and the final evaluation build the same chunks, and the config.toml
reruns them exactly. What was measured is kept in the run directory's balance.json (`record`).

A timing can differ between two measurements, so it is taken once: no stage measures for itself, and a
resumed run keeps the boundaries it was made with (its checkpoints are of those chunks).
"""
from __future__ import annotations

from typing import Any

from ..method.balance import AUTO, ChunkCosts, is_auto
from ..config.run_config import RunConfig, replace


def resolve_auto_boundaries(cfg: RunConfig, *, made_with: RunConfig | None = None
                            ) -> tuple[RunConfig, dict[str, Any] | None]:
    """`cfg` with `--boundaries auto` replaced by the boundaries measured costs give, and the record of the
    measurement for balance.json; `cfg` and None when its boundaries are not auto. `made_with`: the config a
    run being resumed was made with — its boundaries are taken, nothing is measured. (A run made before
    `auto` measured holds "auto" itself: it was built on the equal-cost estimate, `chunks.chunk_bounds`, and
    every process of its resumption builds that again.)"""
    if not is_auto(cfg.model.boundaries):
        return cfg, None
    if made_with is not None:
        return replace(cfg, model={"boundaries": made_with.model.boundaries}), None
    from ..method.chunks import planned_bounds
    from .layer_costs import measure_chunk_costs
    from .preflight import preflight

    preflight(cfg)  # a mistyped model, a readout `auto` cannot balance: said before anything loads
    m, t = cfg.model, cfg.train
    measured = measure_chunk_costs(cfg)
    bounds = planned_bounds(len(measured.costs.layers), t.stages, boundaries=AUTO, speeds=t.speeds,
                            readout=m.readout, method=t.method, costs=measured.costs)
    boundaries = tuple(first for first, _ in bounds[1:])
    record = {"boundaries": list(boundaries), "layers": [list(b) for b in bounds], "speeds": list(t.speeds),
              "method": t.method, "readout": m.readout, "measured": measured.to_dict(),
              "stage_s": _stage_seconds(measured.costs, bounds, cfg)}
    return replace(cfg, model={"boundaries": boundaries}), record


def _stage_seconds(costs: ChunkCosts, bounds: list[tuple[int, int]], cfg: RunConfig) -> list[float]:
    """Each stage's modelled seconds per micro-batch on its device: what the split evened out."""
    from ..method.chunks import weighed_readout_layers
    from ..methods import every_chunk_trains

    extras = costs.extras(len(bounds), every_chunk_reads_out=every_chunk_trains(cfg.train.method),
                          readout_layers=weighed_readout_layers(cfg.model.readout, cfg.train.method))
    speeds = cfg.train.speeds or (1.0,) * len(bounds)
    return [(sum(costs.layers[first:end]) + extra) / speed
            for (first, end), extra, speed in zip(bounds, extras, speeds)]
