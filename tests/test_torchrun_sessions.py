"""torchrun sessions: a rank restarted by torchrun never passes for its predecessor. Finding the store
of an earlier session (its rank 0 still running), it tells that session to stop, naming itself, waits
for that store to go and joins the next session; a rank from an earlier session than the store's is
refused. The store protocol on one machine, no torchrun needed."""
import datetime
import threading
import time

import pytest
import torch.distributed as dist

from benchmarks.common.machine import free_port
from zerolock_core.config.field_words import ConfigError
from zerolock_core.runtime import protocol
from zerolock_core.runtime.torchrun_entry import _join_session

TIMEOUT = datetime.timedelta(seconds=30)


def rank0_store(port: int, session: int) -> dist.TCPStore:
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=TIMEOUT)
    store.set(protocol.SESSION, str(session))
    return store


def test_a_restarted_rank_stops_the_old_session_and_joins_the_next_one():
    port = free_port()
    old = rank0_store(port, session=0)
    joined: list = []
    worker = threading.Thread(target=lambda: joined.append(_join_session("127.0.0.1", port, rank=1, session=1)),
                              daemon=True)
    worker.start()
    deadline = time.monotonic() + 60
    while not old.check([protocol.STOP]):  # the old session is told to stop, and why
        assert time.monotonic() < deadline, "the restarted rank never told the old session"
        time.sleep(0.05)
    assert "rank 1 (stage 1) was restarted by torchrun (restart 1)" in old.get(protocol.STOP).decode()
    assert old.get(protocol.stage_state(1)).decode() == "error"
    assert "restarted by torchrun" in old.get(protocol.stage_error(1)).decode()
    assert not joined  # it waits: that store is not its session's
    del old  # rank 0 of session 0 ends; torchrun starts session 1's rank 0 on the same port
    new = None
    while new is None:
        try:
            new = rank0_store(port, session=1)
        except Exception:  # the old listening socket may linger a moment
            assert time.monotonic() < deadline
            time.sleep(0.2)
    worker.join(60)
    assert joined and joined[0].get(protocol.SESSION).decode() == "1"
    assert not new.check([protocol.STOP])  # the new session starts clean


def test_a_rank_older_than_the_jobs_session_is_refused():
    port = free_port()
    store = rank0_store(port, session=2)
    with pytest.raises(ConfigError, match="this worker is stale"):
        _join_session("127.0.0.1", port, rank=1, session=1)
    del store
