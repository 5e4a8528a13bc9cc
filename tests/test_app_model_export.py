"""The Runs tab's model exports (a zip under the run's exports/) and its Try it panel, called as the page calls them."""
from __future__ import annotations

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
    assert message.startswith("`tuned`: ") and "of 4 answers changed" in message


@pytest.mark.parametrize("name, prompts, use_eval, says", [
    ("tuned", "", False, "nothing to ask"),
    ("", "x", False, "choose a run first"),
    ("../tuned", "x", False, "is not a run under the runs folder"),
])
def test_try_it_says_why_not(controller, name, prompts, use_eval, says):
    table, message = try_it(controller, name, prompts, use_eval, 2, 4)
    assert message.startswith("⚠️") and says in message
