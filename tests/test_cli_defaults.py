"""The CLI in the dashboard's words (issue 44): plain `zerolock train` runs what the Run form runs, runs are
named alike from both, a bad value is one line, and --help is grouped without doubled defaults."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from zerolock_core.cli import build_parser, config_from_args, main
from zerolock_core.rundir.run_name import RUN_NAME, fresh_run_path, run_name
from zerolock_core.rundir.runs_root import RunsRoot


def test_the_cli_default_runtime_is_the_run_forms():
    from app.form import RunForm, config_for

    cli = config_from_args(build_parser().parse_args(["train"]), out="unused")
    form = config_for(RunForm(), RunForm().methods[0], out="unused")
    assert cli.train.runtime == form.train.runtime == "pipeline"


@pytest.mark.parametrize("method, stages", [("zerolock", 2), ("1f1b", 4), ("zb-h1", 3), ("bp", 1)])
def test_run_names_from_the_cli_and_the_dashboard_match_one_pattern(tmp_path, method, stages):
    cli = fresh_run_path(tmp_path, method, stages)  # cmd_train's --out default
    dashboard = RunsRoot(tmp_path).new_run(method, stages).path  # app/controller.py's
    for path in (cli, dashboard):
        assert RUN_NAME.fullmatch(path.name) and path.name.endswith(f"-{method}-K{stages}"), path.name


def test_a_taken_run_name_is_numbered(tmp_path):
    (tmp_path / run_name("zerolock", 2)).mkdir()
    path = fresh_run_path(tmp_path, "zerolock", 2)
    assert RUN_NAME.fullmatch(path.name) and not path.exists() and re.search(r"-K2-\d+$", path.name)


@pytest.mark.parametrize("argv, said", [
    (["train", "--steps", "ten"], "zerolock train: --steps: 'ten' is not an integer"),
    (["train", "--lr", "fast"], "zerolock train: --lr: 'fast' is not a number"),
    (["train", "--runtime", "gpu"], "zerolock train: --runtime: invalid choice: 'gpu'"),
    (["eval", "run", "--eval-size", "all"], "zerolock eval: --eval-size: 'all' is not an integer"),
])
def test_a_bad_value_is_one_line_on_stderr_and_exit_2(capsys, argv, said):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(said) and f"see zerolock {argv[0]} --help" in err and "usage" not in err


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    return capsys.readouterr().out


def test_train_help_has_the_groups_and_working_examples(capsys):
    text = _help(["train", "--help"], capsys)
    for group in ("model:", "data:", "objective:", "schedule:", "faults (pipeline)", "output:", "examples:"):
        assert f"\n{group}" in text, group
    examples = [line.split("#")[0].split()[2:] for line in text.split("\nexamples:\n")[1].splitlines()]
    assert 3 <= len(examples) <= 5
    for argv in examples:  # each parses into a valid config
        config_from_args(build_parser().parse_args(["train", *argv]), out="unused")


@pytest.mark.parametrize("argv", [["train", "--help"], ["eval", "--help"]])
def test_no_help_entry_says_an_empty_or_a_second_default(capsys, argv):
    text = _help(argv, capsys)
    entries = re.split(r"\n  (?=-)", text)
    assert "(default: )" not in text
    assert [e for e in entries if e.count("default") > 1 and "(default:" in e] == []
