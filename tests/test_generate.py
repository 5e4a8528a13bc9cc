"""`zerolock generate`: the base and the fine-tuned model's greedy answers, side by side, the same every time."""
from __future__ import annotations

import re

import pytest

from zerolock_core.cli import main
from zerolock_core.export.generation import MAX_NEW_TOKENS, Answer, GenerateRequest, generate_answers

pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing")

ASK = GenerateRequest(prompts=("the keeper saves a late penalty",), eval_rows=3, max_new_tokens=4)


def test_training_changes_what_the_model_says_and_each_answer_is_a_record(trained_run):
    answers = generate_answers(trained_run("zerolock"), ASK)
    assert [type(a) for a in answers] == [Answer] * 4
    assert answers[0].prompt == ASK.prompts[0] and answers[0].expected is None
    assert all(a.expected in ("World", "Sports", "Business", "Tech") for a in answers[1:])
    assert all(a.picked and {a.base, a.tuned} <= {"World", "Sports", "Business", "Tech"} for a in answers)
    assert any(a.base != a.tuned for a in answers)  # three steps at lr 1e-2 move the greedy words


def test_the_answers_are_the_same_every_time(trained_run):
    assert generate_answers(trained_run("zerolock"), ASK) == generate_answers(trained_run("zerolock"), ASK)


@pytest.mark.parametrize("fields, says", [
    (dict(), "nothing to ask"),
    (dict(prompts=("  ",)), "a prompt is empty"),
    (dict(eval_rows=1, max_new_tokens=0), f"not in 1..{MAX_NEW_TOKENS}"),
    (dict(eval_rows=1, max_new_tokens=MAX_NEW_TOKENS + 1), f"not in 1..{MAX_NEW_TOKENS}"),
    (dict(eval_rows=-1), "eval rows: -1"),
])
def test_a_bad_request_is_refused(fields, says):
    with pytest.raises(ValueError, match=says):
        GenerateRequest(**fields)


def test_the_command_prints_each_prompt_with_both_answers_and_scores_the_eval_rows(trained_run, tmp_path, capsys):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("stocks fall on weak sales\n\nrover lands on mars\n")
    assert main(["generate", trained_run("zerolock"), "--prompt", "a late goal", "--file", str(prompts),
                 "--eval-rows", "1", "--max-new-tokens", "3"]) == 0
    *lines, score = capsys.readouterr().out.splitlines()
    assert [l.split(":")[0] for l in lines if l and not l.startswith(" ")] == \
        ["prompt", "base", "fine-tuned"] * 3 + ["prompt", "expected", "base", "fine-tuned"]
    assert lines[0] == "prompt:     a late goal"
    # the eval row's answers are judged against its label, the user's prompts are not
    expected = next(l.split(":", 1)[1].strip() for l in lines if l.startswith("expected:"))
    tuned = lines[-2].split(":", 1)[1].strip()  # the eval row's fine-tuned answer, then a blank line
    assert tuned in (f"{expected} ✓", *(f"{w} ✗" for w in ("World", "Sports", "Business", "Tech") if w != expected))
    assert not any(l.endswith(("✓", "✗")) for l in lines[:9])
    assert re.fullmatch(r"fine-tuned [01]/1 correct, base [01]/1 over the 1 eval rows \(.*\)", score)


def test_the_command_refuses_a_directory_without_a_run_in_one_line(tmp_path, capsys):
    assert main(["generate", str(tmp_path), "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a run directory" in err
