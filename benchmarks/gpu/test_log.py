"""A pytest plugin (`-p benchmarks.gpu.test_log`): every test's outcome as one JSON line in the file named by
$ZEROLOCK_TEST_LOG the moment it ends, so a tests section stopped at its timeout keeps what had finished."""
from __future__ import annotations

import json
import os
from typing import Any

LOG_ENV = "ZEROLOCK_TEST_LOG"
ERROR_LINES = 30  # of a failure's report


def outcome_line(*, test: str, outcome: str, duration_s: float, properties: dict[str, Any],
                 error: str | None = None) -> dict[str, Any]:
    """One test's record, the same whether pytest or the direct runner (gpu_sections.py) ran it."""
    return {"test": test, "outcome": outcome, "duration_s": round(duration_s, 3), "properties": properties,
            "error": "\n".join(error.splitlines()[-ERROR_LINES:]) if error else None}


def append_line(record: dict[str, Any]) -> None:
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(record, default=str) + "\n")


def pytest_runtest_logreport(report) -> None:
    # the call's outcome; a setup that did not pass (skipped, or an error) or a teardown that failed stands for it
    if report.when == "call" or (report.when == "setup" and not report.passed) or \
            (report.when == "teardown" and report.failed):
        outcome = "error" if report.when != "call" and report.failed else report.outcome
        append_line(outcome_line(test=report.nodeid, outcome=outcome, duration_s=report.duration,
                                 properties=dict(report.user_properties),
                                 error=str(report.longrepr) if report.longrepr else None))
