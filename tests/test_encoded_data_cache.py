"""A pipeline run's encoded data, kept in its directory: what a replacement reads is exactly what a fresh
encoding makes, a different config misses, and a fresh run never reads an earlier run's."""
import dataclasses

import pytest
import torch

from zerolock_core.rundir import encoded_data_cache as cache
from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.train.run_setup import DATA_SEED, build_run_setup, encoded_data, prepare
from zerolock_core.models.loading import load_tokenizer

FIELDS = ("input_ids", "attention_mask", "labels", "label_index")


def cfg_in(path, *, runtime="pipeline", seq_len=32, dataset="topics"):
    path.mkdir(parents=True, exist_ok=True)
    return RunConfig(data=DataConfig(dataset=dataset, seq_len=seq_len, eval_size=8),
                     train=TrainConfig(runtime=runtime, method="zerolock", stages=2, batch=4, microbatches=2, steps=1),
                     out=str(path))


def same(a, b) -> bool:
    return all(torch.equal(getattr(a, f), getattr(b, f)) for f in FIELDS)


def test_a_pipeline_run_keeps_its_encoding_and_reading_it_back_gives_the_same_tensors(tmp_path):
    cfg = cfg_in(tmp_path / "run")
    tokenizer = load_tokenizer("tiny")
    made = encoded_data(cfg, tokenizer)
    assert RunDir(cfg.out).encoded_data.exists()
    key = cache.cache_key(dataclasses.asdict(cfg.data), model="tiny", data_seed=DATA_SEED)
    read = cache.load(RunDir(cfg.out).encoded_data, key)
    assert read is not None and same(read.train, made.train) and same(read.eval, made.eval)
    assert read.task.label_words == made.task.label_words and read.task.cue == made.task.cue
    assert torch.equal(read.label_first_tokens, made.label_first_tokens)
    assert all(getattr(read.train, f).dtype == torch.long for f in FIELDS)


@pytest.mark.parametrize("change", [{"seq_len": 48}, {"dataset": "needle", "seq_len": 64}])
def test_a_different_data_config_misses_and_is_encoded_afresh(tmp_path, change):
    cfg = cfg_in(tmp_path / "run")
    tokenizer = load_tokenizer("tiny")
    encoded_data(cfg, tokenizer)
    other = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, **change))
    key = cache.cache_key(dataclasses.asdict(other.data), model="tiny", data_seed=DATA_SEED)
    assert cache.load(RunDir(cfg.out).encoded_data, key) is None
    fresh = encoded_data(other, tokenizer)
    assert fresh.train.input_ids.shape[1] == other.data.seq_len


def test_a_reference_run_keeps_nothing_and_a_corrupt_file_is_a_miss(tmp_path):
    cfg = cfg_in(tmp_path / "ref", runtime="reference")
    encoded_data(cfg, load_tokenizer("tiny"))
    assert not RunDir(cfg.out).encoded_data.exists()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a torch file")
    assert cache.load(bad, "k") is None


def test_a_prepared_process_builds_the_same_stage_as_a_fresh_one(tmp_path):
    cfg = cfg_in(tmp_path / "run")
    fresh = build_run_setup(cfg, stage=1)
    prepare(cfg.to_dict())  # what a warm standby does ahead
    warm = build_run_setup(cfg, stage=1)
    assert same(fresh.train, warm.train) and same(fresh.eval, warm.eval)
    a, b = fresh.chunks[0].trainable_state(), warm.chunks[0].trainable_state()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_fresh_run_in_the_same_directory_deletes_the_earlier_encoding(tmp_path):
    cfg = cfg_in(tmp_path / "run")
    encoded_data(cfg, load_tokenizer("tiny"))
    lock = RunDir(cfg.out).prepare_fresh(cfg, overwrite=True)
    lock.release()
    assert not RunDir(cfg.out).encoded_data.exists()


@pytest.mark.parametrize("state, evaluated, kept", [
    ("finished", True, False),   # done and evaluated: nothing reads it again
    ("finished", False, True),   # stopped during the final eval: `--resume` evaluates it
    ("stopped", False, True),    # `--resume` trains on
    ("failed", False, True),
])
def test_the_encoding_is_dropped_only_when_the_run_is_finished_and_evaluated(tmp_path, state, evaluated, kept):
    from zerolock_core.rundir.metrics import Metrics

    cfg = cfg_in(tmp_path / "run")
    encoded_data(cfg, load_tokenizer("tiny"))
    RunDir(cfg.out).write_metrics(Metrics(config=cfg.to_dict(), state=state,
                                          eval={"accuracy": 1.0} if evaluated else None))
    assert RunDir(cfg.out).encoded_data.exists() == kept


class FullDisk:
    """A file that takes a few bytes, then says the disk is full (what write(2) says at ENOSPC)."""

    def __init__(self, path, mode="r", *args, **kwargs) -> None:
        self.f = open(path, mode, *args, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()

    def write(self, data) -> int:
        import errno

        self.f.write(bytes(data[:100]))
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_cache_that_cannot_be_written_is_skipped_with_a_one_line_warning(tmp_path, monkeypatch, capsys):
    cfg = cfg_in(tmp_path / "run")
    tokenizer = load_tokenizer("tiny")
    monkeypatch.setattr(cache, "open", FullDisk, raising=False)
    made = encoded_data(cfg, tokenizer)  # the run goes on: nothing raised
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zerolock: warning: the encoded data was not kept")
    assert "No space left on device" in err and "inline_container" not in err and str(tmp_path) not in err
    assert list((tmp_path / "run").iterdir()) == []  # no cache, no temporary
    monkeypatch.undo()
    again = encoded_data(cfg, tokenizer)  # with room again: written, and the same tensors
    assert RunDir(cfg.out).encoded_data.exists() and same(again.train, made.train) and same(again.eval, made.eval)
