"""The checkpoint commit protocol: verified loads, fallbacks, pruning, exact restore."""
import json

import pytest
import torch

from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.runtime.checkpoint import MANIFEST, META, TENSORS, Checkpoint, CheckpointStore, capture, restore


def ckpt(step, value=None):
    return Checkpoint(step=step, cursor=step * 4, tensors={"param/w": torch.full((8,), float(value or step))},
                      meta={"note": "x"})


def test_newest_verified_checkpoint_is_loaded(tmp_path):
    store = CheckpointStore(RunDir(tmp_path), stage=1, keep=3)
    for s in (1, 2, 3):
        store.save(ckpt(s))
    got = store.load_latest()
    assert got.step == 3 and got.cursor == 12 and torch.equal(got.tensors["param/w"], torch.full((8,), 3.0))
    assert store.load_latest(at_most=2).step == 2


def corrupt_truncate(d):
    data = (d / TENSORS).read_bytes()
    (d / TENSORS).write_bytes(data[: len(data) // 2])


def corrupt_flip(d):
    data = bytearray((d / TENSORS).read_bytes())
    data[-3] ^= 0x01
    (d / TENSORS).write_bytes(bytes(data))


def corrupt_no_manifest(d):
    (d / MANIFEST).unlink()


def corrupt_meta(d):
    (d / META).write_text(json.dumps({"step": 99, "cursor": 0}))


@pytest.mark.parametrize("corrupt,reason", [
    (corrupt_truncate, "SHA-256"),
    (corrupt_flip, "SHA-256"),
    (corrupt_no_manifest, "no manifest"),
    (corrupt_meta, "SHA-256"),
])
def test_corrupted_newest_falls_back_to_previous_and_says_so(tmp_path, corrupt, reason):
    messages = []
    store = CheckpointStore(RunDir(tmp_path), stage=0, keep=3, log=messages.append)
    store.save(ckpt(1))
    newest = store.save(ckpt(2))
    corrupt(newest)
    got = store.load_latest()
    assert got.step == 1
    assert len(messages) == 1 and reason in messages[0] and "step00000002" in messages[0]


def test_a_crash_before_the_manifest_leaves_no_checkpoint(tmp_path):
    store = CheckpointStore(RunDir(tmp_path), stage=0)
    store.save(ckpt(1))

    class Crash(Exception):
        pass

    def die():
        raise Crash()
    with pytest.raises(Crash):
        store.save(ckpt(2), before_manifest=die)
    assert store.load_latest().step == 1
    store.save(ckpt(2))  # retrying the same step replaces the leftover
    assert store.load_latest().step == 2


def test_only_the_last_few_are_kept(tmp_path):
    store = CheckpointStore(RunDir(tmp_path), stage=0, keep=2)
    for s in range(1, 6):
        store.save(ckpt(s))
    assert store.steps_on_disk() == [4, 5]


def test_nothing_is_unpickled(tmp_path, monkeypatch):
    """A checkpoint is safetensors + JSON: saving and loading it never touch pickle (or torch.load)."""
    import pickle

    def refuse(*args, **kwargs):
        raise AssertionError("a checkpoint must not be (un)pickled")

    for name in ("load", "loads", "dump", "dumps", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr(torch, "save", refuse)
    store = CheckpointStore(RunDir(tmp_path), stage=0)
    d = store.save(ckpt(1))
    assert sorted(p.name for p in d.iterdir()) == sorted([TENSORS, META, MANIFEST])
    assert store.load_latest().step == 1


def test_capture_and_restore_reproduce_training_bitwise():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(lin.parameters(), lr=0.1, foreach=False)
    x = torch.randn(3, 4)

    def train(n):
        for _ in range(n):
            lin(x).pow(2).sum().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    train(2)
    saved = capture(params=dict(lin.named_parameters()), optimizer=opt, step=2, cursor=8)
    train(3)
    expected = {n: p.detach().clone() for n, p in lin.named_parameters()}
    restore(saved, params=dict(lin.named_parameters()), optimizer=opt)
    train(3)
    for n, p in lin.named_parameters():
        assert torch.equal(p, expected[n])
