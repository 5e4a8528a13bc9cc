"""`--readout sample:N` / `sample-lora:N`: each chunk before the last reads out through copies of N layers
spread over the layers after it down to the model's last (AugLocal), the last chunk through the head.
(Pipeline = reference bitwise: tests/test_pipeline_runtime.py's readout table has `sample-lora:2`; p_{k-1} is
what chunk k-1 trains: tests/test_chunks.py's readout table has `sample:2` and `sample-lora:2`.)"""
import re

import pytest
import torch

from benchmarks.depth import lora_params_per_layer
from zerolock_core.cli import main
from zerolock_core.config.field_words import ConfigError
from zerolock_core.config.readout_spec import ReadoutSpec, sampled_layers
from zerolock_core.config.run_config import DataConfig, ModelConfig, RunConfig, TrainConfig
from zerolock_core.method.chunks import (build_chunks, check_readout_fits, chunk_bounds, planned_bounds,
                                         readout_layer_indices, run_layers, weighed_readout_layers)
from zerolock_core.models.loading import load_causal_lm
from zerolock_core.train.stage_worker import answer_positions

from tests.test_chunks import make_batch


# (layers, K, chunk, N) -> the layers chunk `chunk` of an even split samples
SAMPLED = [
    ((30, 3, 0, 4), [14, 19, 24, 29]),  # downstream 10..29: the last of each 5-layer run
    ((30, 3, 1, 4), [21, 24, 26, 29]),  # downstream 20..29: runs of 2.5 layers
    ((30, 3, 0, 1), [29]),  # one layer: the model's last
    ((30, 3, 1, 10), list(range(20, 30))),  # N = the downstream: every layer of it (top:last)
    ((30, 3, 0, 20), list(range(10, 30))),
    ((8, 3, 0, 2), [4, 7]),  # downstream 3..7
    ((8, 3, 1, 2), [6, 7]),
    ((8, 4, 0, 3), [3, 5, 7]),  # downstream 2..7
    ((8, 4, 2, 2), [6, 7]),
    ((22, 3, 0, 7), [9, 11, 13, 15, 17, 19, 21]),  # downstream 8..21
    ((8, 2, 0, 3), [4, 5, 7]),  # downstream 4..7: runs of 1.33 layers, each run's last (floored)
]


@pytest.mark.parametrize("case,expected", SAMPLED)
def test_the_sampling_rule(case, expected):
    layers, stages, chunk, n = case
    bounds = chunk_bounds(layers, stages)
    after = bounds[chunk][1]
    assert sampled_layers(after, layers, n) == expected
    for kind in ("sample", "sample-lora"):
        spec = ReadoutSpec.parse(f"{kind}:{n}").of_chunk(chunk, stages, every_chunk_trains=True)
        assert readout_layer_indices(layers, spec, bounds, chunk) == expected
        last = ReadoutSpec.parse(f"{kind}:{n}").of_chunk(stages - 1, stages, every_chunk_trains=True)
        assert readout_layer_indices(layers, last, bounds, stages - 1) == []  # the last reads through the head
    # evenly spread, strictly after the chunk, the model's last layer always among them
    assert expected == sorted(set(expected)) and expected[0] >= after and expected[-1] == layers - 1


@pytest.mark.parametrize("after,layers,n", [(10, 30, 0), (10, 30, 21), (8, 8, 1)])
def test_the_sampling_rule_refuses_what_the_downstream_cannot_hold(after, layers, n):
    with pytest.raises(ValueError, match="cannot sample"):
        sampled_layers(after, layers, n)


@pytest.mark.parametrize("text,spec", [
    ("sample:4", ReadoutSpec(kind="sample", layers=4)),
    (" sample-lora:2 ", ReadoutSpec(kind="sample-lora", layers=2)),
    ("sample-lora:1", ReadoutSpec(kind="sample-lora", layers=1)),
])
def test_sampled_readouts_parse(text, spec):
    got = ReadoutSpec.parse(text)
    assert got == spec and got.reads_layers and got.ships_rows and not got.is_top
    assert got.trains_layers == (spec.kind == "sample-lora")


BAD = [  # (flags, the one line's words): the tiny model's 8 layers
    (["--readout", "sample-lora:0"], "--readout: 'sample-lora:0': sample-lora:N samples N >= 1 layers"),
    (["--readout", "sample:0"], "--readout: 'sample:0': sample:N samples N >= 1"),
    (["--readout", "sample-lora:last"], "--readout: 'sample-lora:last'.*a number"),
    (["--readout", "sample-lora:x"], "--readout: 'sample-lora:x'.*a number"),
    (["--readout", "sample-lora:-1"], "--readout: 'sample-lora:-1'.*a number"),
    (["--readout", "sample-lora"], "--readout: 'sample-lora'.*a number"),
    (["--readout", "sample-lora:3", "--stages", "3"],
     "--readout sample-lora:3 samples 3 layers after each chunk but the chunk before the last has only the last "
     r"chunk's 2 \(layers 6..7\)"),
    (["--readout", "sample:5", "--stages", "2"], "--readout sample:5 samples 5 layers .* only the last chunk's 4"),
    (["--runtime", "reference", "--readout", "sample-lora:2", "--method", "bp"], "--method bp trains only the last chunk"),
    (["--readout", "sample:1", "--method", "terminal"], "--method terminal trains only the last chunk"),
]


@pytest.mark.parametrize("flags,message", BAD)
def test_bad_sampled_readouts_are_one_line_naming_the_flag(flags, message, capsys, tmp_path):
    code = main(["train", "--quiet", "--out", str(tmp_path / "run"), *flags])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("zerolock: error: ")
    assert len(err.strip().splitlines()) == 1, err
    assert re.search(message, err), err


def test_auto_boundaries_weigh_n_sampled_layers_on_every_chunk_before_the_last():
    for readout in ("sample-lora:10", "sample:10"):
        assert weighed_readout_layers(readout, "zerolock") == 10
        assert weighed_readout_layers(readout, "bp") == 0
        # as top-lora:10: 7 + 10, 7 + 10, 16 layers' work; the last keeps the 10 the chunk before it samples
        assert planned_bounds(30, 3, boundaries=(), speeds=(), readout=readout, method="zerolock") == \
            planned_bounds(30, 3, boundaries=(), speeds=(), readout="top-lora:10", method="zerolock") == \
            [(0, 7), (7, 14), (14, 30)]
    assert planned_bounds(30, 3, boundaries=(), speeds=(), readout="sample-lora:10", method="bp") == \
        [(0, 10), (10, 20), (20, 30)]
    check_readout_fits("sample:10", [(0, 7), (7, 14), (14, 30)])
    with pytest.raises(ConfigError, match="--readout sample:11 samples 11"):
        check_readout_fits("sample:11", [(0, 10), (10, 20), (20, 30)])


def tiny_config(readout: str, stages: int = 3) -> RunConfig:
    return RunConfig(model=ModelConfig(model="tiny", readout=readout), data=DataConfig(seq_len=32, eval_size=8),
                     train=TrainConfig(stages=stages, batch=4, microbatches=2, steps=1, threads=1))


@pytest.mark.parametrize("readout,n,trains", [("sample-lora:2", 2, True), ("sample-lora:1", 1, True),
                                              ("sample:2", 2, False)])
def test_a_chunks_trainable_parameters_against_a_hand_count(readout, n, trains):
    from zerolock_core.train.run_setup import build_run_setup

    cfg = tiny_config(readout)
    chunks = build_run_setup(cfg).chunks
    config = chunks[0].config  # the tiny model: d = 128, 4 heads, 2 of keys and values (64), LoRA r = 4 on q, v
    per_layer = lora_params_per_layer(config, cfg.model.lora_targets, cfg.model.lora_rank)
    assert per_layer == 4 * (128 + 128) + 4 * (128 + 64) == 1792
    bounds = [c.layer_range for c in chunks]  # 0..2, 3..5, 6..7
    for k, c in enumerate(chunks):
        first, end = bounds[k]
        own = sum(p.numel() for name, p in c.trainable_state().items() if not name.startswith("readout_top."))
        readout_params = sum(p.numel() for name, p in c.trainable_state().items() if name.startswith("readout_top."))
        assert own == per_layer * (end - first)
        assert readout_params == (per_layer * n if trains and not c.is_last else 0)
        sampled = [] if c.is_last else sampled_layers(end, 8, n)
        assert (list(c.readout_top.layers) if c.readout_top is not None else []) == [str(i) for i in sampled]
    assert [list(c.readout_top.layers) for c in chunks[:2]] == (
        [["4", "7"], ["6", "7"]] if n == 2 else [["7"], ["7"]])


@pytest.mark.parametrize("readout", ["sample-lora:2", "sample:2"])
def test_a_stage_loads_the_layers_its_readout_samples(readout):
    """A pipeline stage's model holds only its layers and those its readout copies (partial_load's Keep):
    its chunk equals the reference's chunk, readout copies included."""
    from zerolock_core.train.run_setup import build_run_setup

    cfg = tiny_config(readout)
    reference = build_run_setup(cfg).chunks
    for stage in range(3):
        (chunk,) = build_run_setup(cfg, stage=stage).chunks
        mine, theirs = chunk.state_dict(), reference[stage].state_dict()
        assert mine.keys() == theirs.keys()
        assert all(torch.equal(mine[n], theirs[n]) for n in mine), stage


@pytest.fixture
def split_model(tiny_random_model_dir):  # 4 layers
    def make(stages, **model_kw):
        model = load_causal_lm(tiny_random_model_dir)
        return model, build_chunks(model, ModelConfig(model=tiny_random_model_dir, **model_kw), stages=stages, seed=0)
    return make


@pytest.mark.parametrize("readout", ["sample:2", "sample-lora:2"])
def test_a_sampled_readout_starts_as_the_models_own_sampled_layers(split_model, readout):
    """With LoRA B = 0, chunk 0 (layer 0) of K = 3 at 1 | 2, 3 | 4 reads out through layers 1 and 3 of the
    model itself — skipping layer 2 — then the norm and head; the last chunk through the head alone."""
    model, chunks = split_model(3, readout=readout, boundaries=(1, 2))
    first, middle, last = chunks
    assert list(first.readout_top.layers) == ["1", "3"] and list(middle.readout_top.layers) == ["2", "3"]
    assert last.readout_top is None and not last.ships_readout
    assert first.readout_top.layers["3"] is not middle.readout_top.layers["3"]  # each chunk its own copy
    mb = make_batch(model.config.vocab_size)
    omega, _ = answer_positions(mb)
    with torch.no_grad():
        h = first(mb["input_ids"], mb["attention_mask"])
        own = torch.nn.ModuleDict({str(i): model.model.layers[i] for i in (1, 3)})
        for through in run_layers(own, h, mb["attention_mask"], config=model.config, rotary=model.model.rotary_emb):
            pass
        expected = model.lm_head(model.model.norm(through[omega])).float()
        assert torch.allclose(first.readout(h, omega, mb["attention_mask"]), expected, atol=1e-5)
