"""The gradient-cosine helper on cases with a known answer."""
import pytest
import torch

from zerolock_core.method.chunks import build_chunks
from zerolock_core.config.run_config import ModelConfig
from zerolock_core.analysis.gradient_alignment import gradient_cosines
from zerolock_core.models.loading import load_causal_lm
from zerolock_core.train.stage_worker import StageWorker

from test_chunks import make_batch


def workers_for(model_dir, stages, alpha, readout="head"):
    model = load_causal_lm(model_dir)
    chunks = build_chunks(model, ModelConfig(model=model_dir, readout=readout), stages=stages, seed=0)
    with torch.no_grad():  # LoRA B starts at zero: move it, so every chunk's output depends on its LoRA
        for c in chunks:
            for name, p in c.named_parameters():
                if "lora_B" in name:
                    p.add_(0.1 * torch.randn_like(p))
    return model, [StageWorker(chunk=c, alpha=alpha, consistency="reverse", microbatches=1, lr=1e-3, weight_decay=0)
                   for c in chunks]


@pytest.mark.parametrize("stages,alpha,known", [
    (1, 0.5, {0: 1.0}),  # one chunk: the local loss is the task loss (any α: the first chunk has no KL term)
    (3, 1.0, {2: 1.0}),  # the last chunk at α = 1: its local loss is the task loss on its own weights
    (2, 1.0, {1: 1.0}),
])
def test_the_cosine_is_one_where_the_local_loss_is_the_task_loss(tiny_random_model_dir, stages, alpha, known):
    torch.manual_seed(0)
    model, workers = workers_for(tiny_random_model_dir, stages, alpha)
    before = {n: p.clone() for w in workers for n, p in w.chunk.named_parameters()}
    cosines = gradient_cosines(workers, make_batch(model.config.vocab_size))
    assert len(cosines) == stages and all(-1 - 1e-9 <= c <= 1 + 1e-9 for c in cosines)
    for k, value in known.items():
        assert cosines[k] == pytest.approx(value, abs=1e-9)
    assert all(torch.equal(p, before[n]) for w in workers for n, p in w.chunk.named_parameters())
    assert all(p.grad is None for w in workers for p in w.chunk.parameters())


def test_an_early_chunks_local_gradient_is_not_the_bp_gradient(tiny_random_model_dir):
    torch.manual_seed(0)
    model, workers = workers_for(tiny_random_model_dir, 3, 1.0)
    cosines = gradient_cosines(workers, make_batch(model.config.vocab_size))
    assert cosines[0] < 0.999 and cosines[1] < 0.999
