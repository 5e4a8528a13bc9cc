"""The single-process reference trainers: equivalences and a real (short) fine-tune."""
import json

import pytest
import torch

from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.config.run_config import DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig
from zerolock_core.method.objectives import task_cross_entropy
from zerolock_core.train.reference_trainer import train_reference
from zerolock_core.train.stage_worker import answer_positions
from zerolock_core.train.run_setup import build_run_setup


def small_cfg(out=None, *, model="tiny", method="zerolock", stages=2, steps=3, alpha=(0.5,), **train):
    return RunConfig(model=ModelConfig(model=model), data=DataConfig(seq_len=48, eval_size=32),
                     objective=ObjectiveConfig(alpha=alpha),
                     train=TrainConfig(runtime="reference", method=method, stages=stages, batch=4,
                                       microbatches=2, steps=steps, threads=1, **train),
                     out=str(out) if out else None)


def test_metrics_and_final_weights_are_written(tmp_path):
    m = train_reference(small_cfg(tmp_path, stages=3), progress=False)
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert on_disk["config"]["train"]["stages"] == 3
    for key in ("accuracy", "label_accuracy", "nll", "per_chunk"):
        assert key in on_disk["eval"]
    assert len(on_disk["eval"]["per_chunk"]) == 3
    assert [c["chunk"] for c in on_disk["curves"]] == ["chunk0", "chunk1", "chunk2"]
    assert len(on_disk["curves"][0]["loss"]) == 3
    assert on_disk["state"] == "finished" and on_disk["final_steps"] == [3, 3, 3]
    assert on_disk["wall_s"] > 0 and on_disk["throughput_samples_per_s"] > 0
    weights = load_final_weights(tmp_path)
    assert sorted(weights) == [0, 1, 2]
    assert all(any("lora_A" in n for n in w) for w in weights.values())
    assert m.eval == on_disk["eval"]
    assert not list(tmp_path.glob(".*tmp*"))


def test_zerolock_with_one_chunk_and_alpha_one_is_ordinary_fine_tuning(tmp_path):
    cfg = small_cfg(tmp_path, stages=1, alpha=(1.0,), steps=3)
    train_reference(cfg, progress=False)
    got = load_final_weights(tmp_path)[0]

    # ordinary LoRA fine-tuning: the whole model's logits, CE over Ω, AdamW, accumulation over m
    setup = build_run_setup(cfg)
    chunk = setup.chunks[0]
    params = [p for p in chunk.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.train.lr, weight_decay=0.0, foreach=False)
    for step in range(cfg.train.steps):
        for mb in setup.microbatches(step):
            omega, targets = answer_positions(mb)
            h = chunk(mb["input_ids"], mb["attention_mask"])
            logits = chunk.lm_head(chunk.norm(h))
            (task_cross_entropy(logits[omega], targets) / cfg.train.microbatches).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    # Equal up to float rounding: the trainer reads out only the Ω rows (a smaller matmul),
    # ordinary fine-tuning computes logits everywhere and then indexes them.
    for name, p in chunk.trainable_state().items():
        torch.testing.assert_close(got[name], p.detach(), rtol=1e-4, atol=1e-5)


def test_bp_and_zerolock_differ_but_both_train(tmp_path):
    bp = train_reference(small_cfg(tmp_path / "bp", method="bp"), progress=False)
    zl = train_reference(small_cfg(tmp_path / "zl", method="zerolock"), progress=False)
    assert [c["chunk"] for c in bp.curves] == ["global"]
    wb, wz = load_final_weights(tmp_path / "bp"), load_final_weights(tmp_path / "zl")
    assert not torch.equal(next(iter(wb[0].values())), next(iter(wz[0].values())))
    for weights in (wb, wz):  # LoRA's B starts at zero: every chunk's adapters moved in both methods
        for chunk in weights.values():
            assert any(float(t.abs().sum()) > 0 for n, t in chunk.items() if "lora_B" in n), sorted(chunk)
    for metrics in (bp, zl):  # and the task loss went down
        task = metrics.curves[-1]["task"]
        assert task[-1] < task[0], task


def test_reference_run_is_deterministic(tmp_path):
    a = train_reference(small_cfg(tmp_path / "a"), progress=False)
    b = train_reference(small_cfg(tmp_path / "b"), progress=False)
    wa, wb = load_final_weights(tmp_path / "a"), load_final_weights(tmp_path / "b")
    for k in wa:
        for n in wa[k]:
            assert torch.equal(wa[k][n], wb[k][n])
    assert a.curves == b.curves


def test_model_directory_written_by_save_pretrained_loads_through_model_path(tmp_path, tiny_random_model_dir):
    m = train_reference(small_cfg(tmp_path, model=tiny_random_model_dir, stages=4, steps=2), progress=False)
    assert len(m.eval["per_chunk"]) == 4


@pytest.mark.slow
@pytest.mark.parametrize("method", ["bp", "zerolock"])
def test_short_fine_tune_on_topics_is_well_above_chance(tmp_path, method):
    cfg = RunConfig(data=DataConfig(seq_len=64, eval_size=200),
                    train=TrainConfig(runtime="reference", method=method, stages=3, batch=8, microbatches=4, steps=160,
                                      lr=5e-3, threads=1),
                    out=str(tmp_path))
    m = train_reference(cfg, progress=False)
    assert m.eval["label_accuracy"] > 0.45, m.eval  # chance is 0.25
