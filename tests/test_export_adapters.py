"""`zerolock export`: a run's adapter in PEFT's layout and its merged model load elsewhere and compute exactly
the run's own final model; readouts are left out and said; bad inputs are refused in one line, creating nothing."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors import safe_open

from zerolock_core.rundir.artifacts import load_trained_weights
from zerolock_core.cli import main
from zerolock_core.export.peft_export import EXPORT_RECORD, MODEL_CARD, ExportTargets, export_run
from zerolock_core.models.loading import load_causal_lm
from zerolock_core.models.locations import TINY_DIR
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.train.run_setup import build_run_setup

pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing")

ATOL = 1e-5
MERGED_RTOL = 1e-5  # merging rounds W + s·BA into one fp32 matrix: logits of size ~6 move by up to ~1e-5
# (method, K, runtime): every way a run's final/ weights come to be that a short test can afford
RUNS = [("zerolock", 2, "reference"), ("zerolock", 3, "reference"), ("bp", 3, "reference"),
        ("terminal", 2, "reference"),
        pytest.param("1f1b", 2, "pipeline", marks=pytest.mark.slow)]


def runs_own_logits(run: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The run's final model as the run computes it: its chunks with load_trained_weights, end to end, then the
    last chunk's norm and head on every position; on the first rows of the eval split."""
    setup = build_run_setup(RunDir(run).saved_config())
    load_trained_weights(setup.chunks, run)
    ids, mask = setup.eval.input_ids[:4], setup.eval.attention_mask[:4]
    with torch.no_grad():
        h = ids
        for chunk in setup.chunks:
            h = chunk(h, mask)
        last = setup.chunks[-1]
        return ids, mask, last.lm_head(last.norm(h)).float()


def assert_same_logits(model, run: str, *, rtol: float = 0.0) -> None:
    ids, mask, expected = runs_own_logits(run)
    with torch.no_grad():
        got = model(input_ids=ids, attention_mask=mask).logits.float()
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=ATOL, rtol=rtol)


@pytest.mark.parametrize("method, stages, runtime", RUNS)
def test_the_peft_adapter_gives_the_runs_own_logits(trained_run, tmp_path, method, stages, runtime):
    from peft import PeftModel

    run = trained_run(method, stages=stages, runtime=runtime)
    export_run(run, ExportTargets(peft=tmp_path / "adapter"))
    assert_same_logits(PeftModel.from_pretrained(load_causal_lm("tiny"), str(tmp_path / "adapter")).eval(), run)


@pytest.mark.parametrize("method, stages, runtime", RUNS)
def test_the_merged_directory_gives_the_runs_own_logits(trained_run, tmp_path, method, stages, runtime):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = trained_run(method, stages=stages, runtime=runtime)
    export_run(run, ExportTargets(merged=tmp_path / "merged"))
    assert_same_logits(AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged")).eval(), run, rtol=MERGED_RTOL)
    assert AutoTokenizer.from_pretrained(str(tmp_path / "merged"))("a b")["input_ids"]


def test_the_adapter_config_round_trips_through_lora_config_with_peft_key_names(trained_run, tmp_path):
    from peft import LoraConfig

    export_run(trained_run("zerolock"), ExportTargets(peft=tmp_path / "a"))
    config = LoraConfig.from_pretrained(str(tmp_path / "a"))
    assert (config.r, config.lora_alpha, set(config.target_modules)) == (4, 16.0, {"q_proj", "v_proj"})
    assert (config.base_model_name_or_path, config.peft_type.value, config.task_type) == \
        (str(TINY_DIR), "LORA", "CAUSAL_LM")  # what AutoPeftModelForCausalLM loads, offline
    on_disk = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    assert LoraConfig(**{k: v for k, v in on_disk.items() if k not in ("peft_type", "peft_version",
                                                                       "auto_mapping")}).to_dict() == config.to_dict()
    with safe_open(str(tmp_path / "a" / "adapter_model.safetensors"), framework="pt") as f:
        keys = set(f.keys())
    assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in keys
    assert len(keys) == 8 * 2 * 2  # 8 layers, q and v, A and B: nothing else (no embedding, no readout)


def test_both_at_once_write_two_directories_and_leave_no_temporary(trained_run, tmp_path):
    result = export_run(trained_run("zerolock"), ExportTargets(peft=tmp_path / "a", merged=tmp_path / "m"))
    assert result.written == [tmp_path / "a", tmp_path / "m"] and result.note == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "m"]
    assert "Nothing was left out." in (tmp_path / "a" / MODEL_CARD).read_text()


@pytest.mark.parametrize("readout, left_out", [
    ("mlp", ["chunk 0's readout adapter", "chunk 1's readout adapter"]),
    ("top-lora:1", ["chunk 0's readout layers (LoRA on its copy of the top layers)"]),
    ("sample-lora:2", ["chunk 0's readout layers (LoRA on its copy of sampled layers 5, 7)"]),
])
def test_readouts_are_left_out_and_said_once_in_each_place(trained_run, tmp_path, capsys, readout, left_out):
    run = trained_run("zerolock", readout=readout)
    assert main(["export", run, "--peft", str(tmp_path / "a")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 and printed[0].startswith("left out: " + ", ".join(left_out) + ": readouts train")
    assert printed[0] in (tmp_path / "a" / MODEL_CARD).read_text().splitlines()
    assert json.loads((tmp_path / "a" / EXPORT_RECORD).read_text())["note"] == printed[0]
    assert_same_logits(__import__("peft").PeftModel.from_pretrained(load_causal_lm("tiny"), str(tmp_path / "a")), run)


def _not_a_run(tmp, run):
    (tmp / "plain").mkdir()
    (tmp / "plain" / "notes.txt").write_text("x")
    return ["export", str(tmp / "plain"), "--peft", str(tmp / "out")]


def _no_final_weights(tmp, run):
    shutil.copytree(run, tmp / "copy", ignore=shutil.ignore_patterns("final", ".lock"))
    return ["export", str(tmp / "copy"), "--merged", str(tmp / "out")]


def _a_chunk_missing(tmp, run):
    shutil.copytree(run, tmp / "copy", ignore=shutil.ignore_patterns("chunk1.safetensors", ".lock"))
    return ["export", str(tmp / "copy"), "--peft", str(tmp / "out")]


def _out_not_empty(tmp, run):
    (tmp / "out").mkdir()
    (tmp / "out" / "keep.txt").write_text("mine")
    return ["export", run, "--peft", str(tmp / "out")]


def _out_a_file(tmp, run):
    (tmp / "out").write_text("mine")
    return ["export", run, "--merged", str(tmp / "out")]


def _second_out_not_empty(tmp, run):  # the first would be fine: neither is written
    (tmp / "m").mkdir()
    (tmp / "m" / "keep.txt").write_text("mine")
    return ["export", run, "--peft", str(tmp / "a"), "--merged", str(tmp / "m")]


# case -> (the command, made in a fresh directory; what the one line says)
BAD = {
    "no such directory": (lambda tmp, run: ["export", str(tmp / "nothing"), "--peft", str(tmp / "out")],
                          "no such run directory"),
    "not a run": (_not_a_run, "is not a run directory (it has no config.json)"),
    "no final weights": (_no_final_weights, "has no trained weights in final/ for chunk(s) 0, 1"),
    "a chunk's weights missing": (_a_chunk_missing, "has no trained weights in final/ for chunk(s) 1"),
    "output not empty": (_out_not_empty, "exists and is not empty"),
    "output is a file": (_out_a_file, "exists and is not a directory"),
    "second output not empty": (_second_out_not_empty, "exists and is not empty"),
    "both in one directory": (lambda tmp, run: ["export", run, "--peft", str(tmp / "o"), "--merged", str(tmp / "o")],
                              "need directories of their own"),
}


def tree(folder):
    return sorted((str(p.relative_to(folder)), p.is_dir() or p.read_bytes()) for p in folder.rglob("*"))


@pytest.mark.parametrize("case", list(BAD))
def test_bad_inputs_are_refused_in_one_line_and_create_nothing(trained_run, tmp_path, capsys, case):
    make, says = BAD[case]
    run = trained_run("zerolock")
    argv = make(tmp_path, run)
    before, run_before = tree(tmp_path), tree(RunDir(run).path)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("zerolock: error: ") and says in err, err
    assert tree(tmp_path) == before and tree(RunDir(run).path) == run_before


def _under_a_file(tmp, run):
    (tmp / "afile").write_text("mine")
    return ["export", run, "--peft", str(tmp / "afile" / "out")]


@pytest.mark.parametrize("make, says", [
    (lambda tmp, run: ["export", run, "--peft", "/proc/zl-peft"], "/proc/zl-peft: cannot write there ("),
    (lambda tmp, run: ["export", run, "--merged", "/proc/no/such/zl-merged"], "/proc/no/such/zl-merged: cannot write "
                                                                               "there ("),
    (_under_a_file, "afile/out: cannot write there ("),
])
def test_an_unwritable_target_is_refused_in_one_line_naming_it_before_the_model_is_loaded(
        trained_run, tmp_path, capsys, monkeypatch, make, says):
    from zerolock_core.export import peft_export

    def loaded(run):
        raise AssertionError("the model was loaded before the target was checked")
    monkeypatch.setattr(peft_export, "load_trained_model", loaded)
    run = trained_run("zerolock")
    argv = make(tmp_path, run)
    before = tree(tmp_path)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("zerolock: error: ") and says in err, err
    assert tree(tmp_path) == before and not list(__import__("pathlib").Path("/proc").glob(".zl-*"))


def test_a_full_disk_while_exporting_is_one_line_naming_the_target_and_leaves_nothing(trained_run, tmp_path,
                                                                                       capsys, monkeypatch):
    import errno

    from zerolock_core.export import peft_export

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    run = trained_run("zerolock")
    monkeypatch.setattr(type(peft_export.load_trained_model(run).tokenizer), "save_pretrained", full)
    assert main(["export", run, "--merged", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'm'}: could not write the export (No space left on device)" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("given, public", [
    ("tiny", "tiny"), ("HuggingFaceTB/SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M"),
    ("/srv/models/my-llama", "my-llama"), ("/srv/models/q4.gguf", "q4.gguf"),
])
def test_an_export_names_the_base_model_without_a_server_path(given, public):
    from zerolock_core.export.peft_export import public_model_name

    assert public_model_name(given) == public


@pytest.mark.slow
def test_a_recovered_runs_adapter_equals_the_unfailed_runs(tmp_path):
    """A stage killed mid-run and recovered from its checkpoint leaves the same final/ weights as an unfailed
    run (the fault-tolerance oracle), so its exported adapter is the same tensors, byte for byte."""
    from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
    from zerolock_core.jobs.job import train

    def run(name, failures):
        cfg = RunConfig(data=DataConfig(seq_len=32, eval_size=8),
                        train=TrainConfig(runtime="pipeline", method="zerolock", stages=2, batch=4, microbatches=2,
                                          steps=4, lr=1e-2, threads=1, ckpt_every=1, failures=failures,
                                          final_eval=False), out=str(tmp_path / name))
        metrics = train(cfg, progress=False)
        assert metrics.state == "finished", metrics.reason
        export_run(str(tmp_path / name), ExportTargets(peft=tmp_path / f"{name}-adapter"))
        with safe_open(str(tmp_path / f"{name}-adapter" / "adapter_model.safetensors"), framework="pt") as f:
            return metrics, {k: f.get_tensor(k) for k in f.keys()}

    _, unfailed = run("unfailed", ())
    recovered_metrics, recovered = run("recovered", ("1@2:kill",))
    assert len(recovered_metrics.recovery) == 1  # it did fail and recover
    assert unfailed.keys() == recovered.keys() and all(torch.equal(unfailed[k], recovered[k]) for k in unfailed)
