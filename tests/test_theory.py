"""Tests for the ``theory`` package (ZeroLock Section II-B/II-C).

Every symbolic identity is also checked numerically; every identity has at
least one companion case where a plausible-looking variant must NOT hold.
All randomness is seeded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from theory import bregman as B
from theory import lemma1 as L1
from theory import lemma2 as L2
from theory import proposition1 as P1
from theory import task_loss as TL
from theory import theorem1 as T1
from theory import three_point as TP
from theory.optimize import minimize_on_simplex
from theory.simplex import (
    as_simplex,
    check_alpha,
    label_smooth,
    one_hot,
    random_simplex,
    softmax,
)

TOL = 1e-9


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------
# simplex.py
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "p, kwargs",
    [
        (3.0, {}),                                    # scalar
        ([1.0], {}),                                  # a single category
        ([0.5, 0.6], {}),                             # sums to 1.1
        ([1.2, -0.2], {}),                            # negative entry
        ([np.nan, 1.0], {}),                          # non-finite
        ([0.3, 0.3, 0.3], {}),                        # sums to 0.9
        ([1.0, 0.0], {"strictly_positive": True}),    # on the boundary
        ([[0.5, 0.5], [0.9, 0.2]], {}),               # one bad row in a batch
    ],
)
def test_as_simplex_rejects(p, kwargs):
    with pytest.raises(ValueError):
        as_simplex(p, **kwargs)


@pytest.mark.parametrize("p", [[0.5, 0.5], [1.0, 0.0, 0.0], [[0.2, 0.8], [0.7, 0.3]]])
def test_as_simplex_accepts(p):
    assert np.allclose(as_simplex(p), p)


@pytest.mark.parametrize("alpha", [1e-9, 0.3, 0.5, 1.0])
def test_check_alpha_accepts(alpha):
    assert check_alpha(alpha) == alpha


@pytest.mark.parametrize("alpha", [0.0, -0.1, 1.0 + 1e-12, 2.0, float("nan"), float("inf"), True, "x", None])
def test_check_alpha_rejects(alpha):
    with pytest.raises(ValueError):
        check_alpha(alpha)


def test_simplex_helpers():
    r = rng(1)
    p = random_simplex(r, 7, size=(4, 3), concentration=0.3, floor=0.01)
    assert p.shape == (4, 3, 7)
    as_simplex(p, strictly_positive=True)
    assert np.allclose(softmax(np.log(p)), p)
    y = label_smooth(one_hot(2, 5), 0.1)
    as_simplex(y, strictly_positive=True)
    assert y[2] == pytest.approx(0.92)
    with pytest.raises(ValueError):
        one_hot(5, 5)
    with pytest.raises(ValueError):
        label_smooth(one_hot(0, 3), 1.0)


# ---------------------------------------------------------------------------
# bregman.py
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 3, 5])
def test_negentropy_is_kl_on_simplex_only(n):
    proof = B.prove_negentropy_is_kl(n)
    # On the simplex: symbolic zero AND numerically zero.
    assert proof.on_simplex.symbolic_zero
    assert proof.on_simplex.holds
    # Off the simplex: residual is exactly sum v - sum u (generalised KL) ...
    u, v = B.simplex_symbols("u", n), B.simplex_symbols("v", n)
    assert sp.expand(proof.off_simplex_residual - (sum(v) - sum(u))) == 0
    assert proof.off_simplex_matches.symbolic_zero and proof.off_simplex_matches.holds
    # ... which really is non-zero for unnormalised positive vectors.
    assert proof.off_simplex_nonzero_max > 1e-2


@pytest.mark.parametrize("n", [1, 2, 4])
def test_squared_norm_is_half_squared_distance(n):
    check = B.prove_squared_norm_is_distance(n)
    assert check.symbolic_zero and check.holds


@pytest.mark.parametrize("psi", [B.negative_entropy, B.squared_norm, B.undefined_potential()])
def test_bregman_vanishes_on_diagonal(psi):
    u = B.simplex_symbols("u", 3)
    assert sp.expand(B.bregman(psi, u, u)) == 0


def test_bregman_rejects_mismatched_dimensions():
    with pytest.raises(ValueError):
        B.bregman(B.negative_entropy, B.simplex_symbols("u", 2), B.simplex_symbols("v", 3))
    with pytest.raises(ValueError):
        B.bregman_numeric(B.squared_norm_numeric, B.squared_norm_grad_numeric, [1.0, 2.0], [1.0])


def test_symbolic_and_numeric_bregman_agree():
    n = 4
    u, v = B.simplex_symbols("u", n), B.simplex_symbols("v", n)
    f = sp.lambdify([u, v], B.bregman(B.negative_entropy, u, v))
    r = rng(2)
    for _ in range(20):
        a, b = r.uniform(0.1, 2, n), r.uniform(0.1, 2, n)   # off the simplex on purpose
        num = B.bregman_numeric(B.negative_entropy_numeric, B.negative_entropy_grad_numeric, a, b)
        assert num == pytest.approx(f(a, b), abs=1e-12)
        assert num == pytest.approx(np.sum(a * np.log(a / b)) - a.sum() + b.sum(), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_numeric_kl_and_asymmetry(seed):
    r = rng(seed)
    u, v = random_simplex(r, 6), random_simplex(r, 6)
    d = B.bregman_numeric(B.negative_entropy_numeric, B.negative_entropy_grad_numeric, u, v)
    assert d == pytest.approx(B.kl(u, v), abs=1e-12)
    assert B.kl(u, v) > 0
    # Wrong direction: KL is not symmetric.
    assert abs(B.kl(u, v) - B.kl(v, u)) > 1e-6
    # Squared norm is symmetric.
    sq = B.bregman_numeric(B.squared_norm_numeric, B.squared_norm_grad_numeric, u, v)
    sq_rev = B.bregman_numeric(B.squared_norm_numeric, B.squared_norm_grad_numeric, v, u)
    assert sq == pytest.approx(sq_rev) == pytest.approx(0.5 * np.sum((u - v) ** 2))


def test_kl_conventions_and_validation():
    p = np.array([0.2, 0.3, 0.5])
    e = one_hot(1, 3)
    assert B.kl(p, e) == math.inf                       # prediction-first KL to a one-hot
    assert B.kl(e, p) == pytest.approx(-math.log(0.3))  # target-first: cross-entropy
    assert np.allclose(B.kl(np.stack([p, e]), np.stack([p, e])), 0.0)
    with pytest.raises(ValueError):
        B.kl([0.5, 0.6], p[:2])
    with pytest.raises(ValueError):
        B.kl(p, [0.5, 0.5])


def test_check_numerically_behaviour():
    x, y = sp.symbols("x y", positive=True)
    u = B.simplex_symbols("u", 3)
    assert B.check_numerically(x - x, [x]) == 0.0
    assert B.check_numerically(x - 1, [x], rng=rng(0)) > 0.5
    assert B.check_numerically(sum(u) - 1, list(u), simplex_groups=[u]) < 1e-12
    assert B.check_numerically(sum(u) - 1, list(u)) > 0.1               # without the group
    z = sp.Symbol("z", real=True)
    assert B.check_numerically(sp.log(z), [z], ranges={z: (-2.0, -1.0)}) == math.inf  # nan -> inf
    with pytest.raises(ValueError):
        B.check_numerically(x + y, [x])                                   # unlisted symbol
    with pytest.raises(ValueError):
        B.check_numerically(x, [x], simplex_groups=[[y]])
    with pytest.raises(ValueError):
        B.check_numerically(x, [x], n_points=0)


# ---------------------------------------------------------------------------
# three_point.py
# ---------------------------------------------------------------------------

THREE_POINT_CASES = [
    # (potential, variant, holds)
    (None, "correct", True),                   # general psi (undefined function)
    (B.negative_entropy, "correct", True),
    (B.squared_norm, "correct", True),
    (None, "swapped_last", False),
    (B.negative_entropy, "swapped_last", False),
    (B.squared_norm, "swapped_last", True),    # symmetric divergence: swap is harmless
    (B.negative_entropy, "reversed_arguments", False),
    (B.squared_norm, "reversed_arguments", True),
    (B.negative_entropy, "gradient_at_p", False),
    (B.squared_norm, "gradient_at_p", False),  # wrong even in Euclidean geometry
]


@pytest.mark.parametrize("psi, variant, holds", THREE_POINT_CASES)
def test_three_point_table(psi, variant, holds):
    check = TP.prove_three_point(3, psi, variant=variant)
    assert check.holds is holds
    if holds:
        assert check.symbolic_zero
    else:
        assert check.numeric_max_abs > 1e-3


@pytest.mark.parametrize("n", [1, 2, 4])
def test_three_point_general_psi_any_dimension(n):
    check = TP.prove_three_point(n)
    assert check.symbolic_zero and check.holds


def test_three_point_on_simplex_and_numeric():
    assert TP.prove_three_point(3, B.negative_entropy, on_simplex=True).holds
    r = rng(3)
    for _ in range(10):
        p, q, y = (random_simplex(r, 5) for _ in range(3))
        res = TP.three_point_numeric(B.negative_entropy_numeric, B.negative_entropy_grad_numeric, p, q, y)
        assert abs(res) < 1e-12
        # Same identity with the remainder's arguments swapped: fails numerically.
        swapped = (B.kl(p, y) - B.kl(q, y) - np.dot(np.log(q) - np.log(y), p - q) - B.kl(q, p))
        assert abs(swapped) > 1e-6


def test_three_point_rejects_bad_input():
    p = B.simplex_symbols("p", 2)
    with pytest.raises(ValueError):
        TP.three_point_residual(B.negative_entropy, p, p, p, variant="nonsense")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TP.three_point_residual(B.negative_entropy, p, B.simplex_symbols("q", 3), p)


# ---------------------------------------------------------------------------
# task_loss.py (Eq. 4)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_printed_sign_pushes_away_from_label(seed):
    r = rng(seed)
    label = int(r.integers(5))
    y = label_smooth(one_hot(label, 5), 0.2)
    worst = TL.printed_loss_minimiser(y)
    assert np.argmax(worst) != label
    # The printed loss prefers the least likely class to the label itself ...
    assert TL.printed_task_loss(worst, y) < TL.printed_task_loss(y, y)
    # ... while the corrected (+) loss is minimised at the label.
    assert TL.task_loss(y, y) == pytest.approx(0.0, abs=1e-15)
    assert TL.task_loss(worst, y) > TL.task_loss(y, y)
    # The printed minimiser is the vertex with the smallest p_y (value log min p_y).
    assert TL.printed_task_loss(worst, y) == pytest.approx(math.log(y.min()))


def test_printed_loss_with_one_hot_is_minus_infinity():
    p = np.array([0.2, 0.3, 0.5])
    assert TL.printed_task_loss(p, one_hot(0, 3)) == -math.inf


@pytest.mark.parametrize("seed", range(4))
def test_argument_order_target_first_is_cross_entropy(seed):
    r = rng(seed)
    p = random_simplex(r, 6, size=3)
    y_soft = label_smooth(np.eye(6)[[0, 2, 5]], 0.1)
    y_hard = np.eye(6)[[0, 2, 5]]
    ce_soft = np.mean(TL.cross_entropy(y_soft, p))
    assert TL.task_loss(p, y_soft, "target_first") == pytest.approx(ce_soft - np.mean(TL.entropy(y_soft)))
    assert TL.task_loss(p, y_hard, "target_first") == pytest.approx(np.mean(TL.cross_entropy(y_hard, p)))
    # Prediction-first KL is a different function (not CE up to a constant).
    assert abs(TL.task_loss(p, y_soft, "prediction_first") - TL.task_loss(p, y_soft, "target_first")) > 1e-3
    assert TL.task_loss(p, y_hard, "prediction_first") == math.inf
    with pytest.raises(ValueError):
        TL.task_loss(p, y_soft, "sideways")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# lemma1.py
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("vocab", list(range(3, 51)))
def test_prox_closed_form_matches_numeric(vocab):
    r = rng(100 + vocab)
    q = random_simplex(r, vocab)
    g = 2.0 * r.standard_normal(vocab)
    alpha = float(r.uniform(0.05, 1.0))
    closed = L1.prox_step_closed_form(q, g, alpha)
    numeric = L1.prox_step_numeric(q, g, alpha)
    assert np.max(np.abs(closed - numeric)) < 1e-6
    # And the closed form beats random nearby distributions on the Eq. (7) objective.
    f_star = L1.prox_objective(closed, q, g, alpha)
    for _ in range(3):
        other = softmax(np.log(closed) + 0.05 * r.standard_normal(vocab))
        assert L1.prox_objective(other, q, g, alpha) > f_star


@pytest.mark.parametrize("vocab", [3, 10, 30])
def test_prox_numeric_slsqp_agrees(vocab):
    r = rng(vocab)
    q = random_simplex(r, vocab, floor=0.05)
    g = r.standard_normal(vocab)
    closed = L1.prox_step_closed_form(q, g, 0.7)
    assert np.max(np.abs(closed - L1.prox_step_numeric(q, g, 0.7, method="slsqp"))) < 1e-6


@pytest.mark.parametrize("n", [2, 3])
def test_prox_closed_form_from_kkt(n):
    checks = L1.prove_prox_closed_form_kkt(n)
    assert len(checks) == n
    for c in checks:
        assert c.symbolic_zero and c.holds
    stat = L1.prove_kkt_stationarity(n)
    assert stat.symbolic_zero and stat.holds


ALPHA = sp.Symbol("alpha", positive=True)

SCALED_PROX_CASES = [
    # (psi, consistency_weight, step, holds)
    (None, None, None, True),                       # paper: weights (alpha, 1-alpha), step alpha
    (B.negative_entropy, None, None, True),
    (B.squared_norm, None, None, True),
    (None, None, ALPHA, True),                      # explicitly: step alpha, no rescaling
    (None, 1, ALPHA, False),                        # unnormalised weights with step alpha: wrong
    (None, 1, ALPHA / (1 + ALPHA), True),           # ... correct step alpha/(1+alpha)
    (None, None, 1, False),                         # step 1 ignores the consistency weight
    (B.negative_entropy, None, ALPHA / 2, False),
]


@pytest.mark.parametrize("psi, weight, step, holds", SCALED_PROX_CASES)
def test_local_loss_is_alpha_times_eq7(psi, weight, step, holds):
    check = L1.prove_local_loss_is_scaled_prox(3, psi, consistency_weight=weight, step=step)
    assert check.holds is holds
    assert check.symbolic_zero is holds


@pytest.mark.parametrize(
    "a, b, expected", [(0.5, 0.5, 0.5), (0.3, 0.7, 0.3), (1.0, 0.0, 1.0), (0.5, 1.0, 1 / 3), (0.2, 1.0, 0.2 / 1.2)]
)
def test_effective_step_size(a, b, expected):
    assert L1.effective_step_size(a, b) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(4))
def test_local_loss_prox_gap_numeric(seed):
    r = rng(seed)
    y = label_smooth(one_hot(int(r.integers(6)), 6), 0.1)
    q = random_simplex(r, 6)
    alpha = float(r.uniform(0.1, 0.9))
    for _ in range(5):
        p = random_simplex(r, 6)
        assert abs(L1.local_loss_prox_gap(p, y, q, alpha)) < 1e-12
        assert abs(L1.local_loss_prox_gap(p, y, q, alpha, consistency_weight=1.0)) < 1e-12
    # Wrong step: the gap depends on p (so the minimisers differ).
    gaps = [L1.local_loss_prox_gap(random_simplex(r, 6), y, q, alpha, consistency_weight=1.0, step=alpha)
            for _ in range(5)]
    assert np.ptp(gaps) > 1e-4


@pytest.mark.parametrize("vocab, alpha", [(3, 0.2), (5, 0.5), (12, 0.8), (25, 1.0)])
def test_local_minimiser_is_prox_step_is_geometric_target(vocab, alpha):
    r = rng(vocab)
    y = label_smooth(one_hot(0, vocab), 0.1)
    q = random_simplex(r, vocab)
    numeric = L1.local_minimiser_numeric(y, q, alpha)
    prox = L1.prox_step_closed_form(q, L1.task_gradient(q, y), alpha)
    geo = L2.geometric_target(y, q, alpha)
    assert np.max(np.abs(numeric - prox)) < 1e-6
    assert np.max(np.abs(prox - geo)) < 1e-12
    # With unnormalised weights (alpha, 1) the minimiser is the prox step of size alpha/(1+alpha).
    numeric_u = L1.local_minimiser_numeric(y, q, alpha, consistency_weight=1.0)
    prox_u = L1.prox_step_closed_form(q, L1.task_gradient(q, y), alpha / (1 + alpha))
    assert np.max(np.abs(numeric_u - prox_u)) < 1e-6
    assert np.max(np.abs(numeric_u - prox)) > 1e-4


@pytest.mark.parametrize("seed", range(4))
def test_lemma1_fails_with_cross_entropy_task_term(seed):
    """With CE (target-first) the local minimiser is not the prox step with grad CE."""
    r = rng(seed)
    y = label_smooth(one_hot(0, 5), 0.1)
    q = random_simplex(r, 5, floor=0.1)
    alpha = 0.5
    local_min = L2.reverse_target_numeric(y, q, alpha)        # argmin alpha CE + (1-alpha) KL(p||q)
    prox = L1.prox_step_closed_form(q, -y / q, alpha)          # Eq. (7) with grad CE(q) = -y/q
    assert np.max(np.abs(local_min - prox)) > 1e-3


@pytest.mark.parametrize(
    "call",
    [
        lambda: L1.prox_step_closed_form([0.5, 0.5], [1.0, 0.0], 0.0),
        lambda: L1.prox_step_closed_form([0.5, 0.5], [1.0, 0.0], 1.5),
        lambda: L1.prox_step_closed_form([0.6, 0.6], [1.0, 0.0], 0.5),
        lambda: L1.prox_step_closed_form([1.0, 0.0], [1.0, 0.0], 0.5),
        lambda: L1.prox_step_closed_form([0.5, 0.5], [1.0, 0.0, 2.0], 0.5),
        lambda: L1.prox_step_closed_form([0.5, 0.5], [np.inf, 0.0], 0.5),
        lambda: L1.prox_step_numeric([0.5, 0.5], [1.0, 0.0], -1.0),
        lambda: L1.local_loss([0.5, 0.5], [1.0, 0.0], [0.5, 0.5], 0.5),  # one-hot in KL(p||p_y)
        lambda: L1.task_gradient([0.5, 0.5], [1.0, 0.0]),
        lambda: L1.effective_step_size(0.0, 1.0),
    ],
)
def test_lemma1_rejects_bad_input(call):
    with pytest.raises(ValueError):
        call()


def test_prox_closed_form_batched_and_stable():
    r = rng(7)
    q = random_simplex(r, 4, size=(3, 2))
    g = r.standard_normal((3, 2, 4))
    out = L1.prox_step_closed_form(q, g, 0.4)
    for i in range(3):
        for j in range(2):
            assert np.allclose(out[i, j], L1.prox_step_closed_form(q[i, j], g[i, j], 0.4))
    big = L1.prox_step_closed_form([0.5, 0.5], [-1e6, 0.0], 1.0)   # would overflow naively
    assert np.allclose(big, [1.0, 0.0])


# ---------------------------------------------------------------------------
# lemma2.py
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("vocab, alpha, eps", [(2, 0.3, 0.1), (4, 0.5, 0.2), (10, 0.7, 0.05), (30, 0.9, 0.1)])
def test_geometric_target_is_minimiser(vocab, alpha, eps):
    r = rng(vocab)
    y = label_smooth(one_hot(1, vocab), eps)
    q = random_simplex(r, vocab)
    target = L2.geometric_target(y, q, alpha)
    obj = lambda p: L2.geometric_objective(p, y, q, alpha)  # noqa: E731
    jac = lambda p: alpha * (np.log(p / y) + 1) + (1 - alpha) * (np.log(p / q) + 1)  # noqa: E731
    numeric = minimize_on_simplex(obj, jac, q)
    assert np.max(np.abs(numeric - target)) < 1e-6
    for _ in range(5):
        p = random_simplex(r, vocab)
        assert abs(L2.geometric_identity_residual(p, y, q, alpha)) < 1e-12
        assert obj(p) >= obj(target)


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.5, 0.9, 1.0])
def test_geometric_target_collapses_for_one_hot(alpha):
    r = rng(11)
    q = random_simplex(r, 6)
    y = one_hot(3, 6)
    with pytest.raises(ValueError):
        L2.geometric_target(y, q, alpha)                                # refuses by default
    collapsed = L2.geometric_target(y, q, alpha, allow_degenerate=True)
    assert np.array_equal(collapsed, y)                                 # independent of alpha
    assert L2.geometric_objective(collapsed, y, q, alpha) < math.inf
    assert L2.geometric_objective(random_simplex(r, 6), y, q, alpha) == math.inf


def test_geometric_target_approaches_one_hot_as_smoothing_vanishes():
    q = random_simplex(rng(12), 6)
    off_label = []
    for eps in [1e-1, 1e-3, 1e-6, 1e-9]:
        t = L2.geometric_target(label_smooth(one_hot(0, 6), eps), q, 0.5)
        off_label.append(1.0 - t[0])
    assert all(a > b for a, b in zip(off_label, off_label[1:]))
    assert off_label[-1] < 1e-3
    # Disjoint supports: Z = 0, the target is undefined.
    with pytest.raises(ValueError):
        L2.geometric_target(one_hot(0, 3), [0.0, 0.5, 0.5], 0.5, allow_degenerate=True)


@pytest.mark.parametrize("vocab, alpha, hard", [(3, 0.3, False), (7, 0.6, False), (7, 0.6, True), (20, 0.9, True)])
def test_arithmetic_target_minimises_forward_objective(vocab, alpha, hard):
    r = rng(vocab)
    y = one_hot(2, vocab) if hard else label_smooth(one_hot(2, vocab), 0.1)
    q = random_simplex(r, vocab)
    target = L2.arithmetic_target(y, q, alpha)
    obj = lambda p: L2.forward_objective(p, y, q, alpha)  # noqa: E731
    jac = lambda p: -(alpha * y + (1 - alpha) * q) / p  # noqa: E731
    numeric = minimize_on_simplex(obj, jac, q)
    assert np.max(np.abs(numeric - target)) < 1e-6
    assert obj(target) <= obj(L2.geometric_target(label_smooth(y, 0.01), q, alpha)) + 1e-12


REVERSE_CASES = [
    # (vocab, alpha, hard label)
    (2, 0.5, False),
    (3, 0.1, False),
    (5, 0.5, False),
    (10, 0.9, False),
    (50, 0.5, False),
    (4, 0.5, True),
    (20, 0.3, True),
]


@pytest.mark.parametrize("vocab, alpha, hard", REVERSE_CASES)
def test_reverse_target_is_neither_mixture(vocab, alpha, hard):
    r = rng(1000 + vocab)
    y = one_hot(0, vocab) if hard else label_smooth(one_hot(0, vocab), 0.1)
    q = random_simplex(r, vocab, floor=0.05)
    rev = L2.reverse_target_numeric(y, q, alpha)
    generic = L2.reverse_target_numeric(y, q, alpha, method="logits")
    assert np.max(np.abs(rev - generic)) < 1e-6
    assert np.max(np.abs(L2.reverse_stationarity_residual(rev, y, q, alpha))) < 1e-9
    ari = L2.arithmetic_target(y, q, alpha)
    assert np.max(np.abs(rev - ari)) > 1e-4
    assert np.max(np.abs(L2.reverse_stationarity_residual(ari, y, q, alpha))) > 1e-4
    assert L2.reverse_objective(rev, y, q, alpha) < L2.reverse_objective(ari, y, q, alpha)
    if not hard:
        geo = L2.geometric_target(y, q, alpha)
        assert np.max(np.abs(rev - geo)) > 1e-4
        assert np.max(np.abs(L2.reverse_stationarity_residual(geo, y, q, alpha))) > 1e-4
        assert L2.reverse_objective(rev, y, q, alpha) < L2.reverse_objective(geo, y, q, alpha)
    else:
        # Off the label, the reverse target stays proportional to q (like the arithmetic one).
        ratio = rev[1:] / q[1:]
        assert np.ptp(ratio) < 1e-9 * ratio.mean()


def test_reverse_target_slsqp_and_alpha_one():
    r = rng(5)
    y = label_smooth(one_hot(1, 6), 0.1)
    q = random_simplex(r, 6, floor=0.05)
    rev = L2.reverse_target_numeric(y, q, 0.4)
    assert np.max(np.abs(rev - L2.reverse_target_numeric(y, q, 0.4, method="slsqp"))) < 1e-5
    # alpha = 1: all three targets are the label distribution.
    for t in (L2.reverse_target_numeric(y, q, 1.0), L2.arithmetic_target(y, q, 1.0), L2.geometric_target(y, q, 1.0)):
        assert np.allclose(t, y)


@pytest.mark.parametrize(
    "case, holds",
    [("geometric", True), ("arithmetic", True), ("reverse_vs_arithmetic", False), ("reverse_vs_geometric", False)],
)
def test_two_point_symbolic_targets(case, holds):
    check = L2.prove_two_point_target(case)
    assert check.holds is holds
    if holds:
        assert check.symbolic_zero
    else:
        assert check.numeric_max_abs > 1e-3


@pytest.mark.parametrize("n", [2, 3])
def test_reverse_stationarity_condition_symbolic(n):
    check = L2.prove_reverse_stationarity(n)
    assert check.symbolic_zero and check.holds


@pytest.mark.parametrize(
    "call",
    [
        lambda: L2.geometric_target([0.5, 0.5], [0.2, 0.3, 0.5], 0.5),
        lambda: L2.geometric_target([0.5, 0.5], [0.5, 0.5], 0.0),
        lambda: L2.arithmetic_target([0.5, 0.6], [0.5, 0.5], 0.5),
        lambda: L2.reverse_target_numeric([0.5, 0.5], [1.0, 0.0], 0.5),
        lambda: L2.reverse_target_numeric([0.5, 0.5], [0.5, 0.5], 0.5, method="magic"),
        lambda: L2.reverse_stationarity_residual([1.0, 0.0], [0.5, 0.5], [0.5, 0.5], 0.5),
        lambda: L2.prove_two_point_target("bogus"),  # type: ignore[arg-type]
    ],
)
def test_lemma2_rejects_bad_input(call):
    with pytest.raises(ValueError):
        call()


# ---------------------------------------------------------------------------
# proposition1.py
# ---------------------------------------------------------------------------

def test_loss_bregman_matches_definition():
    r = rng(21)
    y = label_smooth(one_hot(2, 5), 0.1)
    for _ in range(10):
        u, v = random_simplex(r, 5), random_simplex(r, 5)
        direct = P1.global_loss(u, y) - P1.global_loss(v, y) - np.dot(P1.global_loss_grad(v, y), u - v)
        assert P1.loss_bregman(u, v, y) == pytest.approx(direct, abs=1e-12)
        assert P1.global_loss(u, y, "ce") - P1.global_loss(u, y, "kl") == pytest.approx(TL.entropy(y))


@pytest.mark.parametrize("seed", range(5))
def test_eq13_is_an_identity(seed):
    r = rng(seed)
    y = label_smooth(one_hot(0, 7), 0.1)
    q = random_simplex(r, 7, floor=0.05)
    for _ in range(5):
        p = random_simplex(r, 7)
        assert abs(P1.eq13_residual(p, q, y, float(r.uniform(0.05, 1.0)))) < 1e-10


@pytest.mark.parametrize("seed, tokens", [(0, 1), (1, 1), (2, 3), (3, 4), (4, 2), (5, 1)])
def test_proposition1_holds_under_assumptions(seed, tokens):
    inst = P1.random_instance(rng(seed), 8, 4, tokens=tokens)
    assert inst.ps.shape == (5, tokens, 8)
    res = P1.proposition1_bound(inst.ps, inst.p_y, inst.alpha)
    assert res.step_condition and res.beta == pytest.approx(inst.beta)
    assert res.holds and res.slack >= 0
    assert res.smoothness_slack >= -1e-12 and res.prox_slack >= -1e-12
    assert res.slack == pytest.approx(res.smoothness_slack + res.prox_slack, rel=1e-8, abs=1e-10)
    assert np.all(res.deltas > 0)                       # noisy chain: imperfect chunks
    # "ce" and "kl" differ by a constant that cancels in the slack.
    res_ce = P1.proposition1_bound(inst.ps, inst.p_y, inst.alpha, kind="ce")
    assert res_ce.slack == pytest.approx(res.slack, abs=1e-10)


def test_proposition1_exact_steps_descend_and_delta_zero():
    inst = P1.random_instance(rng(9), 6, 5, noise=0.0)
    res = P1.proposition1_bound(inst.ps, inst.p_y, inst.alpha)
    assert np.allclose(res.deltas, 0.0, atol=1e-12)
    assert res.holds and res.descent
    assert res.rhs <= res.loss_initial + 1e-12


@pytest.mark.parametrize("seed", range(6))
def test_proposition1_still_holds_when_alpha_exceeds_inverse_beta(seed):
    """Eq. (11) never fails for a valid beta: alpha < 1/beta is not used in the proof."""
    for alpha in (0.25, 0.5, 1.0):
        inst = P1.random_instance(rng(seed), 6, 2, alpha=alpha, noise=0.02, enforce_step_condition=False)
        res = P1.proposition1_bound(inst.ps, inst.p_y, alpha)
        if not np.isfinite(res.rhs):
            continue
        assert res.holds


def test_alpha_above_inverse_beta_loses_the_descent_guarantee():
    """What does fail for alpha >= 1/beta: exact prox steps can increase the loss."""
    failures = []
    for seed in range(10):
        inst = P1.random_instance(rng(seed), 6, 2, alpha=0.5, noise=0.0, enforce_step_condition=False)
        res = P1.proposition1_bound(inst.ps, inst.p_y, 0.5)
        if np.isfinite(res.rhs) and not res.descent:
            failures.append((seed, res))
    assert failures, "expected an overshooting instance among seeds 0..9"
    for _, res in failures:
        assert not res.step_condition                   # only happens when alpha * beta >= 1
        assert res.holds                                # yet Eq. (11) is satisfied ...
        assert res.rhs > res.loss_initial               # ... because its RHS no longer certifies descent


def test_proposition1_fails_with_underestimated_beta():
    failed = 0
    for seed in range(8):
        inst = P1.random_instance(rng(seed), 8, 3)
        good = P1.proposition1_bound(inst.ps, inst.p_y, inst.alpha)
        assert good.holds
        bad = P1.proposition1_bound(inst.ps, inst.p_y, inst.alpha, beta=0.0)
        if not bad.holds:
            failed += 1
            assert bad.smoothness_slack < 0
    assert failed >= 1


def test_estimate_beta_is_valid_on_its_pairs():
    inst = P1.random_instance(rng(4), 6, 3, tokens=2)
    beta_all = P1.estimate_beta(inst.ps, inst.p_y)
    beta_cons = P1.estimate_beta(inst.ps, inst.p_y, pairs="consecutive")
    beta_more = P1.estimate_beta(inst.ps, inst.p_y, n_random=5, rng=rng(0))
    assert 0 <= beta_cons <= beta_all <= beta_more
    ps, y = inst.ps, inst.p_y
    for i in range(ps.shape[0]):
        for j in range(ps.shape[0]):
            if i != j:
                lhs = P1.loss_bregman(ps[i], ps[j], y)
                rhs = beta_all * B.kl(ps[i], ps[j])
                assert np.all(lhs <= rhs + 1e-12)
    assert P1.estimate_beta(np.stack([ps[0], ps[0]]), y) == 0.0


def test_proposition1_accepts_2d_chain():
    inst = P1.random_instance(rng(6), 5, 3)
    res2 = P1.proposition1_bound(inst.ps[:, 0, :], inst.p_y[0], inst.alpha, inst.beta)
    res3 = P1.proposition1_bound(inst.ps, inst.p_y, inst.alpha, inst.beta)
    assert res2.slack == pytest.approx(res3.slack)
    assert res2.p_star.shape == (3, 1, 5)


@pytest.mark.parametrize(
    "call",
    [
        lambda ps, y: P1.proposition1_bound(ps, y, 1.5),
        lambda ps, y: P1.proposition1_bound(ps, y, 0.0),
        lambda ps, y: P1.proposition1_bound(ps, y, 0.5, beta=-1.0),
        lambda ps, y: P1.proposition1_bound(ps[:1], y, 0.5),
        lambda ps, y: P1.proposition1_bound(ps * 1.1, y, 0.5),
        lambda ps, y: P1.proposition1_bound(ps, y[..., :3], 0.5),
        lambda ps, y: P1.proposition1_bound(ps[..., 0], y, 0.5),
        lambda ps, y: P1.proposition1_bound(ps, y, 0.5, kind="mse"),  # type: ignore[arg-type]
        lambda ps, y: P1.estimate_beta(ps, y, pairs="some"),  # type: ignore[arg-type]
        lambda ps, y: P1.random_instance(rng(0), 1, 2),
    ],
)
def test_proposition1_rejects_bad_input(call):
    inst = P1.random_instance(rng(0), 6, 2, tokens=2)
    with pytest.raises(ValueError):
        call(inst.ps, inst.p_y)


# ---------------------------------------------------------------------------
# theorem1.py
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "eta0, gamma, T, expected",
    [
        (1.0, 1.0, 4, [1.0, 1 / math.sqrt(2), 1 / math.sqrt(3), 0.5]),
        (0.5, 4.0, 3, [0.25, 0.5 / math.sqrt(5), 0.5 / math.sqrt(6)]),
        (2.0, 0.25, 1, [4.0]),
    ],
)
def test_lr_schedule(eta0, gamma, T, expected):
    assert np.allclose(T1.lr_schedule(eta0, gamma, T), expected)


@pytest.mark.parametrize("eta0, gamma, T", [(0.0, 1.0, 5), (1.0, 0.0, 5), (1.0, -1.0, 5), (1.0, 1.0, 0), (1.0, 1.0, 2.5)])
def test_lr_schedule_rejects(eta0, gamma, T):
    with pytest.raises(ValueError):
        T1.lr_schedule(eta0, gamma, T)


@pytest.mark.parametrize(
    "xs, expected",
    [([1.0], [1.0]), ([1.0, 3.0], [1.0, 2.0]), ([4.0, 0.0, 2.0, 2.0], [4.0, 2.0, 2.0, 2.0])],
)
def test_running_average(xs, expected):
    assert np.allclose(T1.running_average(xs), expected)


@pytest.mark.parametrize("xs", [[], [[1.0, 2.0]], [1.0, np.nan]])
def test_running_average_rejects(xs):
    with pytest.raises(ValueError):
        T1.running_average(xs)


@pytest.mark.parametrize("c, C", [(-0.5, 3.0), (-1.0, 0.2), (0.25, 7.0), (0.0, 1.0)])
def test_fit_rate_exponent_exact_power_laws(c, C):
    Ts = np.array([10, 30, 100, 300, 1000, 3000])
    assert T1.fit_rate_exponent(Ts, C * Ts.astype(float) ** c) == pytest.approx(c, abs=1e-12)


def test_fit_rate_exponent_synthetic_sgd_average():
    """Squared gradient norms decaying like 1/sqrt(t), with noise: running average ~ T^-1/2."""
    r = rng(31)
    T = 20000
    t = np.arange(1, T + 1)
    g2 = (1.0 / np.sqrt(t)) * r.uniform(0.5, 1.5, T)
    avg = T1.running_average(g2)
    Ts = np.array([100, 300, 1000, 3000, 10000, 20000])
    assert T1.fit_rate_exponent(Ts, avg[Ts - 1]) == pytest.approx(-0.5, abs=0.03)


@pytest.mark.parametrize("form", ["derived", "printed"])
def test_rhs_rate_is_root_T_up_to_log(form):
    Ts = np.logspace(2, 6, 9).astype(int)
    pure = [T1.rhs_rate(int(T), sigma=0.0, form=form) for T in Ts]       # no sum eta^2 term
    logged = [T1.rhs_rate(int(T), drift_coeff=0.5, form=form) for T in Ts]
    assert T1.fit_rate_exponent(Ts, pure) == pytest.approx(-0.5, abs=0.02)
    slope = T1.fit_rate_exponent(Ts, logged)
    assert -0.5 < slope < -0.3                                         # log factor: slightly slower
    # value * sqrt(T) / log(T) stays bounded
    scaled = np.array(logged) * np.sqrt(Ts) / np.log(Ts)
    assert scaled.max() / scaled.min() < 3.0


def test_rhs_rate_forms_agree_asymptotically_and_reject_bad_input():
    big = 10**6
    assert T1.rhs_rate(big, form="derived") / T1.rhs_rate(big, form="printed") == pytest.approx(1.0, abs=1e-2)
    with pytest.raises(ValueError):
        T1.rhs_rate(100, form="other")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        T1.rhs_rate(100, sigma=-1.0)
    with pytest.raises(ValueError):
        T1.rhs_rate(100, batch_size=0)


@pytest.mark.parametrize("Ts, values", [([1, 2], [1.0]), ([5], [1.0]), ([1, 2], [1.0, -1.0]), ([3, 3], [1.0, 2.0])])
def test_fit_rate_exponent_rejects(Ts, values):
    with pytest.raises(ValueError):
        T1.fit_rate_exponent(Ts, values)
