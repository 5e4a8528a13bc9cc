"""The Runs tab's model exports (a zip under the run's exports/) and its Try it panel, called as the page calls them."""
from __future__ import annotations

import re
import shutil
import zipfile

import pytest

from app.controller import EngineController
from app.tabs.runs import TRY_COLUMNS, export, try_it

pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing")


@pytest.fixture(scope="module")
def controller(trained_run, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    shutil.copytree(trained_run("zerolock"), root / "tuned", ignore=shutil.ignore_patterns(".lock"))
    shutil.copytree(trained_run("zerolock", readout="mlp"), root / "with-readouts", ignore=shutil.ignore_patterns(".lock"))
    c = EngineController(root)
    yield c
    c.close()


# kind -> (the zip's name, files it must hold)
ZIPS = {
    "PEFT adapter (zip)": ("peft-adapter.zip", {"adapter_config.json", "adapter_model.safetensors", "README.md"}),
    "merged model (zip)": ("merged-model.zip", {"config.json", "model.safetensors", "tokenizer.json"}),
}


@pytest.mark.parametrize("kind", list(ZIPS))
@pytest.mark.parametrize("run, note", [("tuned", False), ("with-readouts", True)])
def test_a_model_export_is_one_zip_under_the_runs_exports(controller, kind, run, note):
    name, files = ZIPS[kind]
    path, message = export(controller, run, kind)
    exports = controller.root.path / run / "exports"
    assert path == str(exports / name) and message.startswith(f"Wrote `{path}`.")
    assert ("readout adapter" in message) == note
    with zipfile.ZipFile(path) as z:
        assert files <= {n.split("/", 1)[1] for n in z.namelist()}
    assert not [p for p in exports.iterdir() if p.name.startswith(".")]  # the temporary folder is gone


def test_try_it_fills_the_table_with_both_answers(controller):
    table, message = try_it(controller, "tuned", "a late goal\n\nstocks fall", True, 2, 4)
    assert len(table) == 4 and all(len(row) == len(TRY_COLUMNS) for row in table)
    assert [row[1] for row in table[:2]] == ["", ""] and all(row[1] for row in table[2:])
    assert message.startswith("`tuned`: ") and "/2 correct" in message


LABELS = ("World", "Sports", "Business", "Tech")  # the topics task's label words
VERDICT = re.compile(r"fine-tuned (\d+)/(\d+) correct, base (\d+)/(\d+)")


def test_try_it_on_a_classification_run_picks_labels_and_counts_the_right_ones(controller):
    """Each answer a label word, ✓ exactly where it is the expected one, the counts those of the ✓ rows, and
    the fine-tuned count over the whole eval split the run's recorded label accuracy (the engine's rule)."""
    rows = controller.root.resolve("tuned").read_metrics().eval["examples"]
    table, message = try_it(controller, "tuned", "a late goal", True, rows, 4)
    prompt, *evals = table
    assert prompt[1] == "" and {prompt[2], prompt[3]} <= set(LABELS)  # a prompt of the user's: no verdict
    counts = {}
    for model, column in (("base", 2), ("tuned", 3)):
        said = [row[column].rsplit(" ", 1) for row in evals]
        assert all(word in LABELS and mark == ("✓" if word == row[1] else "✗")
                   for (word, mark), row in zip(said, evals))
        counts[model] = sum(mark == "✓" for _, mark in said)
    tuned, n, base, n_base = map(int, VERDICT.search(message).groups())
    assert (tuned, base, n, n_base) == (counts["tuned"], counts["base"], rows, rows)
    recorded = controller.root.resolve("tuned").read_metrics().eval["label_accuracy"]
    assert tuned / n == pytest.approx(recorded)


def test_try_it_on_prompts_alone_says_there_is_nothing_to_count(controller):
    table, message = try_it(controller, "tuned", "a late goal", False, 2, 4)
    assert len(table) == 1 and "no expected label" in message and not VERDICT.search(message)


@pytest.mark.parametrize("name, prompts, use_eval, says", [
    ("tuned", "", False, "nothing to ask"),
    ("", "x", False, "choose a run first"),
    ("../tuned", "x", False, "is not a run under the runs folder"),
])
def test_try_it_says_why_not(controller, name, prompts, use_eval, says):
    table, message = try_it(controller, name, prompts, use_eval, 2, 4)
    assert message.startswith("⚠️") and says in message
