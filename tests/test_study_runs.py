"""A study's runs side by side (benchmarks/common/study_runs.py): SIGINT or SIGTERM to the study stops every
running child before the study ends, starts no other, and ends it as Ctrl-C ends a command. The study is a
driver process of its own (signals go to a process's main thread); each child writes its pid when it is
running and what ended it, so the test waits on files, never on a clock."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

WAIT_S = 120.0  # the longest any wait below may take on a busy 2-core box (never reached when it works)

CHILD = textwrap.dedent("""
    import os, signal, sys, time
    here = sys.argv[1]
    def stopped(signum, frame):
        open(here + ".stopped", "w").write(str(signum))
        sys.exit(3)
    signal.signal(signal.SIGTERM, stopped if sys.argv[2] == "stops" else signal.SIG_IGN)
    open(here + ".running", "w").write(str(os.getpid()))
    time.sleep(600)
""")

DRIVER = textwrap.dedent("""
    import sys
    from benchmarks.common import study_runs
    study_runs.STOP_GRACE_S = 2.0  # a child that ignores SIGTERM is killed soon after
    folder, behaviour = sys.argv[1], sys.argv[2]
    child = [sys.executable, folder + "/child.py"]
    def work(name):
        with open(folder + "/" + name + ".log", "w") as log:
            return study_runs.call([*child, folder + "/" + name, behaviour], stdout=log)
    try:
        for name, code in study_runs.side_by_side(work, ["a", "b", "c"], jobs=2):
            print("finished", name, code, flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
""")


def _wait_for(paths: list[Path], driver: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT_S
    while not all(p.exists() for p in paths):
        assert driver.poll() is None, driver.communicate()
        assert time.monotonic() < deadline, f"no {[p.name for p in paths if not p.exists()]} in {WAIT_S} s"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("behaviour", ["stops", "ignores"])
def test_a_stopped_study_ends_every_running_child_and_starts_no_other(tmp_path, sig, behaviour):
    (tmp_path / "child.py").write_text(CHILD)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path), behaviour], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        running = [tmp_path / "a.running", tmp_path / "b.running"]
        _wait_for(running, driver)
        pids = [int(p.read_text()) for p in running]
        driver.send_signal(sig)
        out, _ = driver.communicate(timeout=WAIT_S)
    finally:
        driver.kill()
    assert driver.returncode == 130 and out.strip().endswith("interrupted"), out
    assert not any(map(_alive, pids))
    # a child that takes the stop request was asked with SIGTERM; one that ignores it was killed all the same
    assert [(tmp_path / f"{n}.stopped").exists() for n in "ab"] == [behaviour == "stops"] * 2
    assert not (tmp_path / "c.log").exists()  # the third run never started


def test_a_study_that_is_not_stopped_yields_every_result_in_order(tmp_path):
    from benchmarks.common import study_runs

    def work(n: int) -> int:
        return study_runs.call([sys.executable, "-c", f"import sys; sys.exit({n})"], stdout=subprocess.DEVNULL)

    assert list(study_runs.side_by_side(work, [3, 0, 5], jobs=2)) == [(3, 3), (0, 0), (5, 5)]
