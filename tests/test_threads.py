"""The one thread policy (zerolock_core/train/threads.py): one thread a process by default, --threads as given,
0 for a fair share of the cores."""
from __future__ import annotations

import pytest

from zerolock_core.train import threads


@pytest.fixture(autouse=True)
def torch_threads_restored():
    """A trainer here pins this process's torch threads: the tests after it get theirs back."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("requested,sharing,cores,expected", [
    (0, 1, 2, 2),  # the reference trainer, the evaluation: alone, all the cores
    (0, 2, 2, 1),  # K=2 stages on 2 cores: one each
    (0, 3, 2, 1),  # more stages than cores: never 0
    (0, 4, 16, 4),
    (0, 3, 16, 5),
    (1, 1, 16, 1),  # --threads is taken as given
    (3, 4, 2, 3),
])
def test_threads_are_the_request_or_a_fair_share_of_the_cores(monkeypatch, requested, sharing, cores, expected):
    monkeypatch.setattr(threads, "available_cores", lambda: cores)
    assert threads.threads_for(requested, sharing=sharing) == expected


def test_a_negative_thread_count_is_a_value_error():
    with pytest.raises(ValueError, match="--threads must be >= 0"):
        threads.threads_for(-1)


@pytest.mark.parametrize("requested,expected", [(None, 1), (0, 2), (2, 2)])
def test_the_reference_trainer_computes_with_the_policys_threads(monkeypatch, requested, expected):
    from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
    from zerolock_core.train.reference_trainer import train_reference

    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    given = {} if requested is None else {"threads": requested}  # None: the default
    cfg = RunConfig(data=DataConfig(eval_size=2),
                    train=TrainConfig(runtime="reference", method="bp", stages=2, batch=2, microbatches=1, steps=1,
                                      **given))
    assert train_reference(cfg, progress=False).threads == expected


def test_a_stage_takes_one_thread_or_its_share_of_the_cores(monkeypatch):
    from zerolock_core.config.run_config import RunConfig, TrainConfig
    from zerolock_core.runtime.stage_process import stage_threads

    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    assert stage_threads(RunConfig(train=TrainConfig(stages=4))) == 1  # the default
    assert stage_threads(RunConfig(train=TrainConfig(stages=4, threads=0))) == 2  # a fair share
    assert stage_threads(RunConfig(train=TrainConfig(stages=4, threads=3))) == 3
