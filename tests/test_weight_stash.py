"""PipeDream weight stashing: the backward uses the version its forward used."""
import torch
from torch import nn

from zerolock_core.runtime.weight_stash import WeightStash


def grads_for(module, x, weight):
    w = weight.clone().requires_grad_(True)
    (x @ w.T).pow(2).sum().backward()
    return w.grad


def test_backward_uses_the_stashed_version_not_the_current_weights():
    torch.manual_seed(0)
    lin = nn.Linear(4, 3, bias=False)
    opt = torch.optim.SGD(lin.parameters(), lr=0.5)
    stash = WeightStash(lin)
    x0, x1 = torch.randn(2, 4), torch.randn(2, 4)
    w_v0 = lin.weight.detach().clone()

    y0 = stash.forward(0, x0)  # forward of micro-batch 0 with version 0
    # an optimizer step lands between forward and backward (as in asynchronous 1F1B)
    lin.weight.grad = torch.ones_like(lin.weight)
    opt.step()
    opt.zero_grad(set_to_none=True)
    stash.stepped()
    w_v1 = lin.weight.detach().clone()
    assert not torch.equal(w_v0, w_v1)
    y1 = stash.forward(1, x1)  # micro-batch 1 uses version 1
    assert len(stash.versions) == 2 and stash.peak_versions == 2

    y0.pow(2).sum().backward()
    stash.after_backward(0)
    expected_old = grads_for(lin, x0, w_v0)
    would_be_current = grads_for(lin, x0, w_v1)
    assert torch.allclose(lin.weight.grad, expected_old)
    assert not torch.allclose(lin.weight.grad, would_be_current)
    assert list(stash.versions) == [1]  # version 0 freed once its last user finished

    lin.weight.grad = None
    y1.pow(2).sum().backward()
    stash.after_backward(1)
    assert torch.allclose(lin.weight.grad, grads_for(lin, x1, w_v1))


def test_gradients_of_micro_batches_accumulate():
    lin = nn.Linear(3, 2, bias=False)
    stash = WeightStash(lin)
    xs = [torch.randn(1, 3) for _ in range(3)]
    for i, x in enumerate(xs):
        stash.forward(i, x).sum().backward()
        stash.after_backward(i)
    total = torch.zeros_like(lin.weight)
    for x in xs:
        w = lin.weight.detach().clone().requires_grad_(True)
        (x @ w.T).sum().backward()
        total += w.grad
    assert torch.allclose(lin.weight.grad, total)


def test_stashed_versions_are_not_counted_as_activations():
    """The meter sees only what autograd saves beyond the weights: with a stash it equals the
    activation bytes of the same forward on the live module (the input x, here)."""
    from zerolock_core.telemetry import ActivationMeter

    torch.manual_seed(0)
    x = torch.randn(8, 64)
    counted = {}
    for stashing in (False, True):
        lin = nn.Linear(64, 64, bias=False)
        meter = ActivationMeter([*lin.parameters()])
        stash = WeightStash(lin, meter=meter) if stashing else None
        with meter.measuring():
            y = stash.forward(0, x) if stash else lin(x)
        counted[stashing] = meter.current_bytes
        y.sum().backward()
        if stash:
            stash.after_backward(0)
            stash.stepped()  # version 0 is freed: the meter forgets its storages
            assert not meter._excluded - {p.untyped_storage().data_ptr() for p in lin.parameters()}
    assert counted[True] == counted[False] == x.numel() * x.element_size()
