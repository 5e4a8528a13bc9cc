"""ZeroLock against the baselines: its throughput over each one's, for a configuration and as a table."""

from __future__ import annotations

from typing import Any

from zerolock_core.methods import BASELINES  # the paper's baselines, in the tables' order

from .measure import best_estimate
from .table import markdown_table, pct


def advantage(rows: list[dict[str, Any]], source: str = "quoted") -> dict[str, float]:
    """ZeroLock's throughput over each baseline's, for one configuration, from the `quoted` numbers
    (measured unless oversubscribed), the `measured` ones or the `predicted` (simulated) ones."""
    if source == "quoted":
        value = {r["method"]: best_estimate(r)[0] for r in rows}
    else:
        value = {r["method"]: r[source]["samples_per_s"] for r in rows if source in r}
    z = value.get("zerolock")
    return {m: z / v - 1.0 for m, v in value.items() if m != "zerolock" and z is not None and v > 0}


def advantage_table(results: dict[str, Any], first: str) -> str:
    """ZeroLock over each baseline, measured and simulated, for every block of `results` (a K, a link)."""
    rows = []
    for name, block in results.items():
        over = " (oversubscribed)" if any(r["oversubscribed"] for r in block["rows"]) else ""
        for source, label in (("measured", "measured" + over), ("predicted", "simulated")):
            if vs := advantage(block["rows"], source):
                rows.append([name, label, *[pct(vs.get(b)) for b in BASELINES]])
    return markdown_table([first, "from", *[f"vs {b}" for b in BASELINES]], rows)
