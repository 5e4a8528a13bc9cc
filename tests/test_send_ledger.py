"""Idempotent sends: a micro-batch goes out at most once per link generation."""
import pytest
import torch

from zerolock_core.runtime.links import HIDDEN
from zerolock_core.runtime.send_ledger import SendLedger


def test_a_resent_microbatch_is_not_sent_again_on_the_same_generation():
    ledger = SendLedger()
    for mb in (12, 13, 14):
        ledger.record(1, HIDDEN, mb)
    assert ledger.already_sent(1, HIDDEN, 14) and ledger.already_sent(1, HIDDEN, 12)
    assert not ledger.already_sent(1, HIDDEN, 15)
    assert not ledger.already_sent(2, HIDDEN, 14)  # a new generation starts empty


def test_recording_out_of_order_is_an_invariant_violation():
    ledger = SendLedger()
    ledger.record(0, HIDDEN, 5)
    with pytest.raises(AssertionError):
        ledger.record(0, HIDDEN, 5)


class FakeLink:
    """Records every delivery."""

    def __init__(self, generation, deliveries):
        self.link, self.generation, self.deliveries = 0, generation, deliveries

    def send(self, tensor, *, kind, microbatch):
        self.deliveries.append((self.generation, kind, microbatch))

        class Done:
            def wait(self):
                return None
        return Done()


def test_executor_retrying_a_send_after_a_relink_delivers_each_microbatch_once_per_generation():
    """The hang of issue 11: the relink resends mb, then the interrupted SF ran again and sent mb twice."""
    from zerolock_core.runtime.executor import Executor

    deliveries = []
    ex = Executor.__new__(Executor)  # only the send path: no worker, no schedule
    ex.ledger, ex.sends, ex.depth = SendLedger(), [], 2
    h = torch.zeros(2)
    dead = FakeLink(0, deliveries)
    ex._send(dead, h, kind=HIDDEN, mb=3)
    new = FakeLink(1, deliveries)
    for mb in (3, 4):  # the relink resends from the replay buffer ...
        ex._send(new, h, kind=HIDDEN, mb=mb)
    ex._send(new, h, kind=HIDDEN, mb=4)  # ... then the interrupted SF 4 runs again
    ex._send(new, h, kind=HIDDEN, mb=5)
    on_new = [d for d in deliveries if d[0] == 1]
    assert on_new == [(1, HIDDEN, 3), (1, HIDDEN, 4), (1, HIDDEN, 5)]
