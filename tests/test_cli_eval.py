"""`zerolock eval RUN` (export/run_eval.py): a finished run's final weights scored again equal the final
eval its metrics.json records, for both runtimes; another eval set is scored and nothing is written."""
from __future__ import annotations

import json

import pytest

from zerolock_core.cli import main
from zerolock_core.rundir.run_dir import RunDir

TINY = ["--stages", "2", "--batch", "4", "--microbatches", "2", "--steps", "2", "--seq-len", "32",
        "--eval-size", "16", "--threads", "1", "--quiet"]


@pytest.fixture(scope="module", params=["reference", "pipeline"])
def finished_run(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "run"
    assert main(["train", "--runtime", request.param, *TINY, "--out", str(out)]) == 0
    return out


def _files(path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in path.rglob("*")}


def test_eval_on_the_runs_own_set_equals_the_recorded_final_eval(finished_run, tmp_path, capsys):
    before = _files(finished_run)
    record = tmp_path / "eval.json"
    assert main(["eval", str(finished_run), "--json", str(record)]) == 0
    assert json.loads(record.read_text()) == RunDir(finished_run).read_metrics().eval
    assert _files(finished_run) == before  # nothing written into the run
    assert capsys.readouterr().out.startswith("eval: accuracy ")


def test_eval_on_another_set_scores_it_and_writes_nothing(finished_run, capsys):
    before = _files(finished_run)
    assert main(["eval", str(finished_run), "--dataset", "needle", "--eval-size", "8"]) == 0
    out = capsys.readouterr().out
    assert "(8 examples)" in out and _files(finished_run) == before
