"""Child processes start with the engine imported, yet see the caller's environment as a spawned one would."""
import json
import os
import sys
from pathlib import Path

import pytest

from zerolock_core.runtime.processes import START_METHOD_ENV, START_METHODS, start_method, start_process, warm_up


def _report(path: str) -> None:
    Path(path).write_text(json.dumps({"probe": os.environ.get("ZEROLOCK_PROBE"), "cwd": os.getcwd(),
                                      "preloaded": "transformers" in sys.modules}))


@pytest.mark.slow
@pytest.mark.parametrize("method", START_METHODS)
def test_a_child_sees_the_callers_environment_and_directory_of_now(tmp_path, monkeypatch, method):
    monkeypatch.setenv(START_METHOD_ENV, method)
    warm_up()  # the server (if any) starts before the caller changes its environment
    monkeypatch.setenv("ZEROLOCK_PROBE", "set after the server started")
    monkeypatch.chdir(tmp_path)
    p = start_process(_report, (str(tmp_path / "report.json"),), name="probe")
    p.join(180)
    assert p.exitcode == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["probe"] == "set after the server started" and report["cwd"] == str(tmp_path)
    assert report["preloaded"] is (method == "forkserver")  # forked from the server: the imports are done


def test_an_unknown_start_method_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv(START_METHOD_ENV, "fork")
    with pytest.raises(ValueError, match="forkserver, spawn"):
        start_method()


@pytest.mark.parametrize("stage,link,peer", [(0, 0, 1), (1, 0, 0), (1, 1, 2), (3, 2, 2)])
def test_a_broken_link_names_the_stage_on_its_other_end(stage, link, peer):
    """Under torchrun a survivor's record can be the run's first: it must say which stage went away."""
    from zerolock_core.runtime.errors import LinkBroken
    from zerolock_core.runtime.stage_process import _link_broken_reason

    why = _link_broken_reason(stage, LinkBroken(link, 0, "send of hidden state 3", ConnectionResetError("reset")))
    assert why.startswith(f"the link to stage {peer} broke (link {link} (generation 0)") and f"stage {peer}'s rank" in why
