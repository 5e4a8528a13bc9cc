"""An export loads with one line, offline: `AutoPeftModelForCausalLM.from_pretrained(DIR)` gives exactly the run's
trained model; nothing the export writes names the run's place on this machine (only adapter_config.json's
`base_model_name_or_path` is a path: the base model's); without targets the export goes inside the run, and no
export, wherever it lies, is taken for a run by the runs folder."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from zerolock_core.cli import main
from zerolock_core.export.peft_export import ExportTargets, export_run, loadable_base
from zerolock_core.export.trained_model import load_trained_model
from zerolock_core.models.locations import TINY_DIR
from zerolock_core.rundir.runs_root import NotARun, RunsRoot

pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing")

BASE_FIELD = "base_model_name_or_path"


def places_named(folder: Path, places: set[str]) -> list[str]:
    """Every file under `folder` (binary ones read as bytes) that holds one of `places`, with which; the adapter
    config's base model field left out, the one path an export must write."""
    found = []
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        text = p.read_bytes().decode(errors="replace")
        if p.name == "adapter_config.json":
            text = "\n".join(line for line in text.splitlines() if f'"{BASE_FIELD}"' not in line)
        found += [f"{p.relative_to(folder)}: {place}" for place in places if place in text]
    return found


@pytest.fixture()
def exported(trained_run, tmp_path):
    """A copy of a tiny run under tmp_path/runs, exported by `zerolock export RUN` (no targets)."""
    run = tmp_path / "runs" / "20261202-101500-zerolock-K2"
    shutil.copytree(trained_run("zerolock"), run)
    assert main(["export", str(run)]) == 0
    return run


def test_an_export_without_targets_goes_inside_the_run(exported):
    assert sorted(p.name for p in (exported / "exports").iterdir()) == ["merged", "peft"]
    assert sorted(p.name for p in exported.parent.iterdir()) == [exported.name]


def test_the_adapter_loads_with_auto_peft_offline_and_gives_the_trained_models_logits(exported, monkeypatch):
    from peft import AutoPeftModelForCausalLM

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(exported / "exports")  # as the export's README says: from the folder that holds it
    loaded = AutoPeftModelForCausalLM.from_pretrained("peft", dtype="float32").eval()
    trained = load_trained_model(exported)
    ids = trained.tokenizer("the striker scores twice in the cup final", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, trained.peft_model(input_ids=ids).logits)


def test_the_exports_readme_says_the_two_lines_that_load_it(exported):
    card = (exported / "exports" / "peft" / "README.md").read_text()
    assert "from peft import AutoPeftModelForCausalLM\n" in card
    assert 'model = AutoPeftModelForCausalLM.from_pretrained("peft", dtype="float32")\n' in card


@pytest.mark.parametrize("folder", ["peft", "merged"])
def test_no_file_of_an_export_names_the_run_or_the_temporary_root(exported, folder):
    places = {os.path.abspath(exported), os.path.realpath(exported), str(Path(exported).parent.parent),
              os.path.realpath(Path(exported).parent.parent), str(TINY_DIR)}
    assert places_named(exported / "exports" / folder, places) == []


@pytest.mark.parametrize("model, expected", [
    ("tiny", str(TINY_DIR)),  # the preset's own folder: nothing copied, loads offline
    ("HuggingFaceTB/SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M"),  # a hub id stays one (the cache serves it)
])
def test_the_base_model_field_is_what_from_pretrained_loads(model, expected):
    assert loadable_base(model) == expected


def test_the_runs_folder_lists_no_export_beside_or_inside_a_run(exported):
    export_run(exported, ExportTargets(peft=exported.parent / f"{exported.name}-peft",
                                       merged=exported.parent / "group" / f"{exported.name}-merged"))
    root = RunsRoot(exported.parent)
    assert [root.run_id(rd) for rd in root.runs()] == [exported.name]
    for export in (f"{exported.name}-peft", f"group/{exported.name}-merged"):
        with pytest.raises(NotARun, match="is an export of a run, not a run"):
            root.resolve(export)


def test_generate_on_an_export_says_it_is_not_a_run(exported, capsys):
    assert main(["generate", str(exported / "exports" / "merged"), "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "merged is an export of a run, not a run" in err, err
