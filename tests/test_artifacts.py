"""Final weights: saved per chunk, loaded back only when every trainable tensor is there."""
import pytest
import torch

from zerolock_core.rundir.artifacts import load_trained_weights, save_final_weights
from zerolock_core.config.run_config import DataConfig, ModelConfig, RunConfig, TrainConfig
from zerolock_core.train.run_setup import build_run_setup


@pytest.fixture(scope="module")
def tiny_setup():
    return build_run_setup(RunConfig(model=ModelConfig(readout="mlp"), data=DataConfig(seq_len=16),
                                     train=TrainConfig(stages=2)))


def _save(out, chunks, *, drop: str | None = None, extra: str | None = None):
    for c in chunks:
        tensors = {n: p.detach() + 1.0 for n, p in c.trainable_state().items() if n != drop}
        if extra is not None:
            tensors[extra] = torch.zeros(1)
        save_final_weights(out, c.index, tensors)


def test_saved_weights_load_back_into_every_chunk(tmp_path, tiny_setup):
    before = {c.index: {n: p.detach().clone() for n, p in c.trainable_state().items()} for c in tiny_setup.chunks}
    _save(tmp_path, tiny_setup.chunks)
    load_trained_weights(tiny_setup.chunks, tmp_path)
    for c in tiny_setup.chunks:
        for n, p in c.trainable_state().items():
            assert torch.equal(p, before[c.index][n] + 1.0), n
        with torch.no_grad():  # back to what the other tests expect
            for n, p in c.trainable_state().items():
                p.copy_(before[c.index][n])


@pytest.mark.parametrize("change,message", [
    ({"drop": "readout_adapter.up.weight"}, "lacks trainable tensor"),   # a renamed / missing adapter
    ({"extra": "layers.99.mystery"}, "does not have"),                   # another model or K
])
def test_incomplete_or_foreign_weights_are_refused(tmp_path, tiny_setup, change, message):
    _save(tmp_path, tiny_setup.chunks, **change)
    with pytest.raises(ValueError, match=message):
        load_trained_weights(tiny_setup.chunks, tmp_path)


def test_a_missing_chunk_file_is_refused(tmp_path, tiny_setup):
    _save(tmp_path, tiny_setup.chunks[:1])
    with pytest.raises(FileNotFoundError, match="chunk 1"):
        load_trained_weights(tiny_setup.chunks, tmp_path)
