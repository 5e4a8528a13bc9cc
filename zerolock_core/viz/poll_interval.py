"""How often the dashboard's Watch tab fetches its status line, and how often its figures may be redrawn
(every FIGURES_EVERY_S, or the poll if longer): one definition for `zerolock dashboard --poll`, the
server options, the app and `zerolock bench dashboard` (which measures the default), so it lives in
the engine, below the dashboard and the benchmarks.

Every update costs the browser CPU, and on a small machine the browser shares the cores with the
training it shows (`zerolock bench dashboard` measures what watching costs)."""
from __future__ import annotations

MIN_POLL_S = 0.5  # at most two redraws a second
DEFAULT_POLL_S = 1.0
FIGURES_EVERY_S = 5.0  # what is on screen and changed: ~7 % of a core for the browser (bench dashboard)


def check_poll(poll_s: float) -> float:
    if not poll_s >= MIN_POLL_S:  # also refuses NaN
        raise ValueError(f"--poll must be at least {MIN_POLL_S:g} s (at most 2 redraws a second), got {poll_s}")
    return poll_s
