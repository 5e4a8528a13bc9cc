"""The dashboard benchmark's interleaved measurement: steps per second with the Watch tab shown and
hidden, from the step end times and the stretches the page spent on each tab."""
from __future__ import annotations

import pytest

from benchmarks.dashboard import segment_rates

MS = 1_000_000


def every(step_ms: int, start_ms: int, end_ms: int) -> list[int]:
    return [t * MS for t in range(start_ms, end_ms + 1, step_ms)]


@pytest.mark.parametrize("ends, segments, rates", [
    # one rhythm throughout: the same rate shown and hidden (the first step starts the clock)
    (every(100, 100, 2000), [(True, 0, 1000 * MS), (False, 1000 * MS, 2000 * MS)], {True: 10.0, False: 10.0}),
    # half as fast while shown
    (every(200, 200, 1000) + every(100, 1100, 2000), [(True, 0, 1000 * MS), (False, 1000 * MS, 2000 * MS)],
     {True: 5.0, False: 10.0}),
    # several stretches of each kind add up; stretches after the last step count for nothing
    (every(100, 100, 2000), [(True, 0, 500 * MS), (False, 500 * MS, 1000 * MS), (True, 1000 * MS, 1500 * MS),
                             (False, 1500 * MS, 2000 * MS), (True, 2000 * MS, 9000 * MS)], {True: 10.0, False: 10.0}),
    # only ever shown: no hidden rate to compare with
    (every(100, 100, 1000), [(True, 0, 1000 * MS)], {True: 10.0}),
    ([500 * MS], [(True, 0, 1000 * MS), (False, 1000 * MS, 2000 * MS)], {}),  # one step: no rate
])
def test_steps_per_second_shown_and_hidden(ends, segments, rates):
    got = segment_rates(ends, segments)
    assert got.keys() == rates.keys()
    assert all(got[k] == pytest.approx(v) for k, v in rates.items())
