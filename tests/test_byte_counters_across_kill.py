"""A kill on a tiny K = 2 pipeline: the recovery record counts the micro-batches that were replayed.

"Replayed" is read from the records themselves: the micro-batches the replacement ran forward that an
earlier process of the same stage had already run forward. (Watch once said "0 micro-batches" beside a
replay phase that resent 0.28 MiB: the count knew only the predecessor's finished local steps.)
"""
import pytest

from benchmarks.faults import case_config, run_with_deadline
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.telemetry.events import read_events

pytestmark = pytest.mark.slow

FORWARD = ("F", "REPLAY")
CASES = [  # (failure, stage killed): after step 3 of 6, checkpoints every 2 steps: a replay from step 2
    ("1@3:kill", 1),
]


@pytest.mark.parametrize("failure,stage", CASES)
def test_replay_count_equals_the_microbatches_run_again(tmp_path, failure, stage):
    cfg = case_config(tmp_path, method="zerolock", failures=(failure,), stages=2)
    metrics, ended = run_with_deadline(cfg, deadline_s=300.0)
    assert ended and metrics.state == "finished", metrics
    [rec] = metrics.recovery
    events, _ = read_events(RunDir(tmp_path).event_files())
    ran = [e for e in events if e["stage"] == stage and e["kind"] in FORWARD]
    before = {e["mb"] for e in ran if e["gen"] < rec["gen"]}
    again = {e["mb"] for e in ran if e["gen"] == rec["gen"]} & before
    replays = [e["mb"] for e in ran if e["gen"] == rec["gen"] and e["kind"] == "REPLAY"]
    assert again, "the case must replay something"
    assert rec["replayed_microbatches"] == len(again) == len(replays)
    assert set(replays) == again
