"""Per-stage memory for one micro-batch: weights held and activation bytes saved, as each arm trains."""
import pytest
import torch

from zerolock_core.method.chunks import build_chunks
from zerolock_core.config.run_config import ModelConfig
from zerolock_core.models.loading import load_causal_lm
from zerolock_core.analysis.stage_memory import stage_memory
from zerolock_core.train.stage_worker import StageWorker

from test_chunks import make_batch

STAGES = 3


def workers_for(model_dir, readout, *, terminal=False):
    model = load_causal_lm(model_dir)
    chunks = build_chunks(model, ModelConfig(model=model_dir, readout=readout), stages=STAGES, seed=0)
    return model, [StageWorker(chunk=c, alpha=1.0, consistency="reverse", microbatches=1, lr=1e-3, weight_decay=0,
                               trains=not terminal or c.is_last, agrees_with_upstream=not terminal)
                   for c in chunks]


def measure(model_dir, readout, *, terminal=False, backprop=False):
    torch.manual_seed(0)
    model, workers = workers_for(model_dir, readout, terminal=terminal)
    before = {(k, n): p.clone() for k, w in enumerate(workers) for n, p in w.chunk.named_parameters()}
    memory = stage_memory(workers, make_batch(model.config.vocab_size), backprop=backprop)
    # the weights are untouched and no gradient is left behind
    assert all(torch.equal(p, before[k, n]) for k, w in enumerate(workers) for n, p in w.chunk.named_parameters())
    assert all(p.grad is None for w in workers for p in w.chunk.parameters())
    return model, memory


@pytest.mark.parametrize("readout,terminal,backprop", [
    ("head", False, False), ("top:1", False, False), ("top-lora:1", False, False), ("head", True, False),
    ("head", False, True),
])
def test_every_training_stage_saves_activations_and_a_forward_only_stage_saves_none(
        tiny_random_model_dir, readout, terminal, backprop):
    _, memory = measure(tiny_random_model_dir, readout, terminal=terminal, backprop=backprop)
    assert len(memory) == STAGES and all(m.weight_bytes > 0 for m in memory)
    for k, m in enumerate(memory):
        trains = not terminal or k == STAGES - 1
        assert (m.activation_bytes > 0) == trains, (k, m)


def test_a_top_readout_holds_its_layers_beside_the_chunk_and_saves_their_activations(tiny_random_model_dir):
    model, head = measure(tiny_random_model_dir, "head")
    _, top = measure(tiny_random_model_dir, "top:1")
    pristine = load_causal_lm(tiny_random_model_dir).model.layers[-1]  # the copy is taken before any LoRA
    layer_bytes = sum(t.numel() * t.element_size() for t in [*pristine.parameters(), *pristine.buffers()])
    for k in range(STAGES - 1):  # one more layer held, and its activations saved for the backward through it
        assert top[k].weight_bytes - head[k].weight_bytes == layer_bytes
        assert top[k].activation_bytes > head[k].activation_bytes
    assert top[-1] == head[-1]  # the last chunk reads through the head alone
