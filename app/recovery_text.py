"""The recovery line under the Inject panel: every failure of the watched run, from its status (a
live run) or its metrics.json (a reopened one), so reopening a run brings its story back."""
from __future__ import annotations

from typing import Any

from zerolock_core.runtime.recovery_phases import phases_text
from zerolock_core.vocabulary import failure_word

from .watch_view import outage_words


def microbatches(n: int) -> str:
    return f"{n} micro-batch" if n == 1 else f"{n} micro-batches"


def recovery_text(status: dict[str, Any]) -> str:
    lines = []
    for r in status.get("recoveries") or []:
        kind = "local recovery (that stage only)" if r["kind"] == "local" else "global rollback (every stage)"
        lines.append(f"stage {r['stage']} {failure_word(r.get('mode'))} → {kind}: {phases_text(r)} "
                     f"({microbatches(r['replayed_microbatches'])}, {r['bytes_transferred'] / 2**20:.2f} MiB)")
    if status.get("open_recoveries"):
        lines.append(outage_words(status["open_recoveries"]))
    return "  \n".join(lines)
