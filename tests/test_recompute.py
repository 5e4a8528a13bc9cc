"""--recompute: a stage's first layers keep only their input for the backward and run their forward again
there. The gradients, hence the trained weights, are the same bit for bit as without it (reference and
pipeline, BP and PipeDream); what a micro-batch keeps shrinks; a bad value is refused in one line naming
the flag."""
from __future__ import annotations

import pytest
import torch

from zerolock_core.analysis.stage_memory import stage_memory
from zerolock_core.cli import build_parser, config_from_args
from zerolock_core.config.run_config import DataConfig, ModelConfig, RunConfig, TrainConfig, replace
from zerolock_core.jobs.job import train
from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.train.reference_trainer import train_reference
from zerolock_core.train.run_setup import build_run_setup
from zerolock_core.train.stage_worker import StageWorker


def cfg_for(out, *, runtime: str, method: str, recompute: tuple[int, ...] = (), stages: int = 3) -> RunConfig:
    return RunConfig(model=ModelConfig(recompute=recompute), data=DataConfig(seq_len=32, eval_size=16),
                     train=TrainConfig(runtime=runtime, method=method, stages=stages, batch=4, microbatches=4,
                                       steps=3, threads=1, final_eval=False),
                     out=str(out))


def assert_same_weights(a, b) -> None:
    wa, wb = load_final_weights(a), load_final_weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        x, y = wa[k], wb[k]
        assert x.keys() == y.keys()
        for name in x:
            assert torch.equal(x[name], y[name]), (k, name)


@pytest.mark.parametrize("method,recompute", [
    ("bp", (1,)), ("bp", (3, 1, 0)), ("zerolock", (2,)), ("terminal", (0, 0, 2)),
])
def test_a_recomputed_reference_run_trains_the_same_weights_bit_for_bit(tmp_path, method, recompute):
    train_reference(cfg_for(tmp_path / "plain", runtime="reference", method=method), progress=False)
    train_reference(cfg_for(tmp_path / "re", runtime="reference", method=method, recompute=recompute),
                    progress=False)
    assert_same_weights(tmp_path / "plain", tmp_path / "re")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["1f1b", "pipedream"])
def test_a_recomputed_pipeline_equals_the_same_pipeline_without_it_bit_for_bit(tmp_path, method):
    for name, recompute in (("plain", ()), ("re", (3, 2, 0))):
        got = train(cfg_for(tmp_path / name, runtime="pipeline", method=method, recompute=recompute),
                    progress=False)
        assert got.state == "finished", got.reason
    assert_same_weights(tmp_path / "plain", tmp_path / "re")


def test_recomputed_layers_keep_only_their_input_and_add_one_layer_during_the_backward():
    """Chunk 0 of the tiny model, one micro-batch under BP: each recomputed layer keeps its input instead of
    its activations; the most its backward adds back is the largest recomputed layer's activations."""
    def measured(recompute: tuple[int, ...]):
        setup = build_run_setup(replace(cfg_for(None, runtime="reference", method="bp", recompute=recompute),
                                        out=None))
        workers = [StageWorker.of_run(c, setup.cfg) for c in setup.chunks]
        return stage_memory(workers, setup.microbatches(0)[0], backprop=True)

    plain, half, full = measured(()), measured((1,)), measured((3, 3, 2))  # the tiny model: 3 / 3 / 2 layers
    layer = [m.layer_bytes for m in full]  # each layer's activations, measured without recompute
    assert [len(b) for b in layer] == [3, 3, 2] and min(map(min, layer)) > 0, layer
    assert [m.layer_bytes for m in half] == layer  # whatever the recompute, the same layers measured
    assert [(m.layer_bytes, m.recompute_bytes) for m in plain] == [((), 0)] * 3  # nothing measured twice
    hidden = 4 * 32 * setup_hidden()  # one layer's input: a micro-batch's hidden state, fp32
    for k in range(3):
        # a layer's activations leave; its input and the rotary tables it shared with the next layer stay
        assert plain[k].activation_bytes - layer[k][0] < half[k].activation_bytes < plain[k].activation_bytes
        assert half[k].recompute_bytes == layer[k][0]
        assert full[k].activation_bytes < half[k].activation_bytes
        assert full[k].recompute_bytes == max(layer[k])
    for k in (0, 1):  # every layer recomputed: its input kept, nothing else (the token ids aside)
        assert full[k].activation_bytes <= len(layer[k]) * hidden + 1024, (k, full[k].activation_bytes)


def setup_hidden() -> int:
    return build_run_setup(replace(cfg_for(None, runtime="reference", method="bp"), out=None)).chunks[0] \
        .config.hidden_size


def cli_config(*flags: str, out: str) -> RunConfig:
    return config_from_args(build_parser().parse_args(["train", *flags, "--out", out]), out=out)


@pytest.mark.parametrize("flags,words", [
    (["--stages", "3", "--recompute", "1,1"], "has 2 values; give one, or one per stage (3)"),
    (["--stages", "2", "--recompute", "9"], "recomputes 9 layers of chunk 0, which has"),
    (["--runtime", "pipeline", "--method", "1f1b", "--stages", "3", "--frozen-stages", "1", "--recompute", "1"],
     "recomputes layers of stage 0, which --frozen-stages 1 freezes"),
    (["--recompute", "-1"], "--recompute"),
])
def test_a_recompute_refusal_is_one_line_naming_the_flag(tmp_path, flags, words):
    with pytest.raises(ValueError) as err:
        cfg = cli_config(*flags, out=str(tmp_path / "run"))
        build_run_setup(replace(cfg, out=None))
    text = str(err.value)
    assert "--recompute" in text and words in text and "\n" not in text, text
    assert list(tmp_path.iterdir()) == []
