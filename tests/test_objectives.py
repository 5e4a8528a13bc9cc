"""The local objective: hand computations and the minimisers over the simplex."""
import math

import pytest
import torch

from zerolock_core.method.objectives import consistency_kl, local_loss, task_cross_entropy


def hand_kl(p, q):
    return sum(a * math.log(a / b) for a, b in zip(p, q))


CASES = [
    ([0.0, 1.0, 2.0], [1.0, 0.0, -1.0]),
    ([3.0, -2.0, 0.5, 0.1], [0.0, 0.0, 0.0, 0.0]),
    ([0.2, 0.2], [0.2, 0.2]),
]


@pytest.mark.parametrize("logits,prev", CASES)
@pytest.mark.parametrize("direction", ["reverse", "forward"])
def test_consistency_matches_hand_computation(logits, prev, direction):
    p = torch.softmax(torch.tensor(logits), -1).tolist()
    q = torch.softmax(torch.tensor(prev), -1).tolist()
    expected = hand_kl(p, q) if direction == "reverse" else hand_kl(q, p)
    got = consistency_kl(torch.tensor([logits]), torch.tensor([prev]), direction)
    assert got.item() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("alpha", [0.3, 0.5, 0.9])
def test_local_loss_is_the_weighted_sum_and_first_chunk_is_task_only(alpha):
    logits, prev, y = torch.randn(5, 7), torch.randn(5, 7), torch.randint(0, 7, (5,))
    loss = local_loss(logits=logits, targets=y, prev_logits=prev, alpha=alpha, direction="reverse")
    ce, kl = task_cross_entropy(logits, y), consistency_kl(logits, prev, "reverse")
    assert loss.total.item() == pytest.approx(alpha * ce.item() + (1 - alpha) * kl.item(), rel=1e-6)
    first = local_loss(logits=logits, targets=y, prev_logits=None, alpha=alpha, direction="reverse")
    assert first.total.item() == pytest.approx(ce.item()) and first.consistency is None


def test_no_gradient_reaches_the_previous_distribution():
    prev = torch.randn(3, 5, requires_grad=True)
    logits = torch.randn(3, 5, requires_grad=True)
    loss = local_loss(logits=logits, targets=torch.tensor([0, 1, 2]), prev_logits=prev, alpha=0.5,
                      direction="reverse")
    loss.total.backward()
    assert prev.grad is None and logits.grad is not None


def minimise_over_simplex(alpha, direction, y, q, steps=3000):
    """Per-token minimiser of the local loss, over logits (softmax keeps p on the simplex)."""
    z = torch.zeros(1, q.numel(), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([z], lr=1, max_iter=steps, tolerance_grad=1e-12, tolerance_change=1e-15,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = local_loss(logits=z, targets=torch.tensor([y]), prev_logits=q.log().unsqueeze(0).double(),
                          alpha=alpha, direction=direction).total
        loss.backward()
        return loss
    opt.step(closure)
    return torch.softmax(z.detach()[0], -1)


Q = torch.tensor([0.5, 0.2, 0.2, 0.1], dtype=torch.float64)


@pytest.mark.parametrize("alpha", [0.25, 0.5, 0.75])
def test_forward_minimiser_is_the_arithmetic_mixture(alpha):
    # α·CE(y, p) + (1−α)·KL(q‖p) = CE(α·onehot + (1−α)·q, p) + const, minimised at the mixture.
    # The mixture puts mass α on y; softmax logits can get arbitrarily close, not exactly there.
    p = minimise_over_simplex(alpha, "forward", 1, Q)
    target = (1 - alpha) * Q
    target[1] += alpha
    assert torch.allclose(p, target, atol=1e-5)


@pytest.mark.parametrize("alpha", [0.25, 0.5, 0.75])
def test_reverse_minimiser_satisfies_its_stationarity_and_is_neither_mixture(alpha):
    y = 1
    p = minimise_over_simplex(alpha, "reverse", y, Q)
    onehot = torch.zeros_like(Q)
    onehot[y] = 1
    # Stationarity on the simplex: −α·y_l/p_l + (1−α)(log(p_l/q_l) + 1) + λ = 0 for every l.
    r = -alpha * onehot / p + (1 - alpha) * (torch.log(p / Q) + 1)
    assert (r - r.mean()).abs().max() < 1e-6
    arithmetic = alpha * onehot + (1 - alpha) * Q
    geometric_unnormalised = Q ** (1 - alpha) * torch.where(onehot > 0, 1.0, 1e-300) ** alpha
    geometric = geometric_unnormalised / geometric_unnormalised.sum()
    assert (p - arithmetic).abs().max() > 1e-3
    assert (p - geometric).abs().max() > 1e-3
