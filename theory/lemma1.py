r"""Lemma 1 / Eq. (7): the local optimum is one proximal (mirror-descent) step.

Setting
-------
One token position. ``q = p_{k-1}`` is the previous chunk's readout (a fixed
target thanks to the stop-gradient), ``p_y`` the label distribution, ``psi``
the potential, ``L(p) = D_psi(p, p_y)`` the global task loss in the Bregman
form (plus sign; prediction first -- see :mod:`theory.task_loss`). The
chunk's local loss, Eq. (3) with Eqs. (4)-(5) in Bregman form, is::

    L_k(p) = alpha * D(p, p_y) + (1 - alpha) * D(p, q).

The claim (Eq. 7) is that its minimiser over the simplex is::

    p_k* = argmin_p  <grad L(q), p - q> + (1/alpha) * D(p, q),

a *proximal gradient step* on ``L`` from ``q`` with step size ``alpha``:
linearise the global loss at the previous chunk's output and stay close to
that output in Bregman distance.

Why it is exact, including the constants
----------------------------------------
Expand ``D(p, p_y)`` around ``q`` with the three-point identity (Eq. 9)::

    D(p, p_y) = D(q, p_y) + <grad L(q), p - q> + D(p, q).

Multiply by ``alpha`` and add ``(1 - alpha) D(p, q)``::

    L_k(p) = alpha * D(q, p_y) + alpha * <grad L(q), p - q> + (alpha + 1 - alpha) * D(p, q)
           = alpha * [ <grad L(q), p - q> + (1/alpha) * D(p, q) ] + alpha * D(q, p_y).

The ``alpha`` that the three-point expansion puts in front of ``D(p, q)`` and
the printed ``(1 - alpha)`` of the consistency term add up to exactly
``1 = alpha * (1/alpha)``. So the local loss equals ``alpha`` times the Eq. (7)
objective plus a ``p``-independent constant, **with no rescaling of alpha**.
More generally, weights ``a * D(p, p_y) + b * D(p, q)`` give step size
``a / (a + b)`` (:func:`effective_step_size`); the paper's convex combination
``(alpha, 1 - alpha)`` is what makes the step size equal ``alpha``. (An
implementation that used ``alpha * task + consistency`` would take steps of
size ``alpha / (1 + alpha)``.)

When it holds: (i) both terms are Bregman divergences of the *same* ``psi``
with the prediction ``p`` as *first* argument, ``D(p, p_y)`` and ``D(p, q)``;
(ii) the task term has a plus sign; (iii) ``grad L`` means
``grad_p D(p, p_y) = grad psi(p) - grad psi(p_y)``. The identity itself is
pure algebra (any ``p``, ``q``, ``p_y`` in the domain of ``psi``); the
simplex only enters through the ``argmin``. With negative entropy, (i)
requires a full-support (label-smoothed) ``p_y``. With the implementation's
cross-entropy task term ``CE(p_y, p) = D(p_y, p) + const`` (target first) the
local minimiser is *not* the prox step: the prox step is then only the
first-order (linearised) version of it; see :mod:`theory.lemma2`.

Closed form for negative entropy
--------------------------------
With ``psi = sum x log x``, ``D(p, q) = KL(p || q)`` on the simplex and the
KKT conditions of ``<g, p> + (1/alpha) KL(p || q) + lambda (sum p - 1)`` read
``g_i + (1/alpha)(log(p_i/q_i) + 1) + lambda = 0``, so::

    p* = q * exp(-alpha * g) / Z,     Z = sum_j q_j exp(-alpha * g_j),

the multiplicative-weights / exponentiated-gradient update. With
``g = grad KL(. || p_y)(q) = log(q / p_y) + 1`` this is the geometric target
``p_y^alpha q^(1-alpha) / Z`` of Lemma 2.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import sympy as sp
from numpy.typing import ArrayLike
from scipy.special import logsumexp

from .bregman import (
    IdentityCheck,
    Potential,
    bregman,
    check_identity,
    check_numerically,
    kl,
    negative_entropy,
    simplex_symbols,
    simplify_to_zero,
    undefined_potential,
)
from .optimize import Method, minimize_on_simplex
from .simplex import FloatArray, as_simplex, check_alpha, check_finite


# ---------------------------------------------------------------------------
# Numeric objects
# ---------------------------------------------------------------------------

def task_gradient(p: ArrayLike, p_y: ArrayLike) -> FloatArray:
    """``grad_p KL(p || p_y) = log(p / p_y) + 1``: gradient of the Bregman-form task loss.

    This is ``grad psi(p) - grad psi(p_y)`` for negative entropy; it is the
    ``grad L(p_{k-1})`` of Eq. (7) when evaluated at ``p = p_{k-1}``.
    Requires full support of both arguments.
    """
    p = as_simplex(p, "p", strictly_positive=True)
    y = as_simplex(p_y, "p_y", strictly_positive=True)
    return np.log(p) - np.log(y) + 1.0


def prox_objective(p: ArrayLike, p_prev: ArrayLike, grad: ArrayLike, alpha: float) -> float:
    """Eq. (7) objective ``<g, p - q> + (1/alpha) KL(p || q)`` for one distribution."""
    a = check_alpha(alpha)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    p = as_simplex(p, "p")
    g = check_finite(grad, "grad", q.shape)
    if p.shape != q.shape:
        raise ValueError("p and p_prev must have the same shape")
    return float(np.sum(g * (p - q), axis=-1) + kl(p, q) / a)


def prox_step_closed_form(p_prev: ArrayLike, grad: ArrayLike, alpha: float) -> FloatArray:
    """Closed-form minimiser of Eq. (7) with negative entropy: ``q * exp(-alpha g) / Z``.

    Computed in log space (``softmax(log q - alpha g)``) so large gradients do
    not overflow. Works along the last axis for batches ``[..., V]``.

    Raises:
        ValueError: if ``p_prev`` is not a full-support distribution, ``grad``
            has the wrong shape or non-finite entries, or ``alpha`` is not in
            ``(0, 1]``.
    """
    a = check_alpha(alpha)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    g = check_finite(grad, "grad", q.shape)
    logits = np.log(q) - a * g
    return np.exp(logits - logsumexp(logits, axis=-1, keepdims=True))


def prox_step_numeric(
    p_prev: ArrayLike, grad: ArrayLike, alpha: float, method: Method = "logits"
) -> FloatArray:
    """Minimise Eq. (7) numerically with SciPy (no closed form used).

    ``method="logits"`` (default) optimises over softmax logits with L-BFGS;
    ``method="slsqp"`` optimises ``p`` directly under the simplex constraint.
    Starts from ``p_prev`` (the minimiser as ``alpha -> 0``).
    """
    a = check_alpha(alpha)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    if q.ndim != 1:
        raise ValueError("prox_step_numeric takes a single distribution")
    g = check_finite(grad, "grad", q.shape)
    logq = np.log(q)

    def fun(p: FloatArray) -> float:
        return float(np.dot(g, p - q) + np.dot(p, np.log(p) - logq) / a)

    def jac(p: FloatArray) -> FloatArray:
        return g + (np.log(p) - logq + 1.0) / a

    return minimize_on_simplex(fun, jac, q, method)


def effective_step_size(task_weight: float, consistency_weight: float) -> float:
    """Step size ``a / (a + b)`` of the prox step equivalent to ``a D(p,p_y) + b D(p,q)``.

    The paper's weights ``(alpha, 1 - alpha)`` give exactly ``alpha``.
    """
    a, b = float(task_weight), float(consistency_weight)
    if not (np.isfinite(a) and np.isfinite(b)) or a <= 0 or b < 0:
        raise ValueError("need task_weight > 0 and consistency_weight >= 0")
    return a / (a + b)


def local_loss(
    p: ArrayLike,
    p_y: ArrayLike,
    p_prev: ArrayLike,
    alpha: float,
    consistency_weight: Optional[float] = None,
) -> float:
    """Bregman-form local loss ``alpha KL(p || p_y) + b KL(p || p_prev)``, ``b = 1 - alpha`` by default."""
    a = check_alpha(alpha)
    b = 1.0 - a if consistency_weight is None else float(consistency_weight)
    p = as_simplex(p, "p")
    y = as_simplex(p_y, "p_y", strictly_positive=True)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    return float(a * kl(p, y) + b * kl(p, q))


def local_loss_prox_gap(
    p: ArrayLike,
    p_y: ArrayLike,
    p_prev: ArrayLike,
    alpha: float,
    consistency_weight: Optional[float] = None,
    step: Optional[float] = None,
) -> float:
    """``L_k(p) - alpha * [Eq.(7) objective with step `step`](p) - alpha KL(q || p_y)``.

    Zero for every ``p`` exactly when ``step = effective_step_size(alpha, b)``
    (``= alpha`` for the paper's weights). Any other step leaves a residual
    that depends on ``p``, i.e. the two objectives would have different
    minimisers.
    """
    a = check_alpha(alpha)
    b = 1.0 - a if consistency_weight is None else float(consistency_weight)
    eta = effective_step_size(a, b) if step is None else float(step)
    if eta <= 0:
        raise ValueError("step must be positive")
    p = as_simplex(p, "p")
    y = as_simplex(p_y, "p_y", strictly_positive=True)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    g = task_gradient(q, y)
    prox = float(np.dot(g, p - q) + kl(p, q) / eta)
    return local_loss(p, y, q, a, b) - a * prox - a * float(kl(q, y))


def local_minimiser_numeric(
    p_y: ArrayLike,
    p_prev: ArrayLike,
    alpha: float,
    consistency_weight: Optional[float] = None,
    method: Method = "logits",
) -> FloatArray:
    """Numerically minimise the Bregman-form local loss (independent of Eq. 7)."""
    a = check_alpha(alpha)
    b = 1.0 - a if consistency_weight is None else float(consistency_weight)
    y = as_simplex(p_y, "p_y", strictly_positive=True)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    if q.ndim != 1 or y.shape != q.shape:
        raise ValueError("p_y and p_prev must be single distributions of the same size")
    ly, lq = np.log(y), np.log(q)

    def fun(p: FloatArray) -> float:
        lp = np.log(p)
        return float(a * np.dot(p, lp - ly) + b * np.dot(p, lp - lq))

    def jac(p: FloatArray) -> FloatArray:
        lp = np.log(p)
        return a * (lp - ly + 1.0) + b * (lp - lq + 1.0)

    return minimize_on_simplex(fun, jac, q, method)


# ---------------------------------------------------------------------------
# Symbolic checks
# ---------------------------------------------------------------------------

def prove_prox_closed_form_kkt(n: int, *, n_points: int = 200, seed: int = 0) -> tuple[IdentityCheck, ...]:
    """Derive the Eq. (7) minimiser from the Lagrangian and compare with the closed form.

    Lagrangian: ``sum g_i p_i + (1/alpha) sum p_i log(p_i/q_i) + lambda (sum p_i - 1)``.
    Solving ``dLag/dp_i = 0`` gives ``p_i = q_i exp(-alpha g_i) * c`` with the
    common factor ``c = exp(-alpha lambda - 1)``; the constraint fixes
    ``c = 1 / sum_j q_j exp(-alpha g_j)``. (Solving for ``c`` rather than
    ``lambda`` keeps SymPy on the real branch.) Returns one check per
    coordinate of ``p_kkt_i - closed_form_i``.
    """
    if n < 2:
        raise ValueError("n must be >= 2")
    p, q = simplex_symbols("p", n), simplex_symbols("q", n)
    g = tuple(sp.symbols(f"g1:{n + 1}", real=True))
    a = sp.Symbol("alpha", positive=True)
    lam = sp.Symbol("lambda", real=True)
    c = sp.Symbol("c", positive=True)
    lag = sp.Add(*[gi * pi for gi, pi in zip(g, p)]) + sp.Add(*[pi * sp.log(pi / qi) for pi, qi in zip(p, q)]) / a \
        + lam * (sp.Add(*p) - 1)
    p_kkt = []
    for i in range(n):
        sols = sp.solve(sp.Eq(sp.diff(lag, p[i]), 0), p[i])
        if len(sols) != 1:
            raise RuntimeError(f"unexpected KKT solutions {sols}")
        # sols[0] == q_i * exp(-alpha g_i - alpha lambda - 1); name the common factor c.
        p_kkt.append(sp.simplify(sols[0] / sp.exp(-a * lam - 1)) * c)
    c_sol = sp.solve(sp.Eq(sp.Add(*p_kkt), 1), c)
    if len(c_sol) != 1:
        raise RuntimeError(f"unexpected normaliser solutions {c_sol}")
    z = sp.Add(*[qi * sp.exp(-a * gi) for qi, gi in zip(q, g)])
    syms = list(q) + list(g) + [a]
    checks = []
    for i in range(n):
        residual = p_kkt[i].subs(c, c_sol[0]) - q[i] * sp.exp(-a * g[i]) / z
        checks.append(check_identity(
            f"KKT solution of Eq. (7) = q exp(-alpha g)/Z, coordinate {i + 1} (n={n})",
            residual, syms, n_points=n_points, seed=seed + i,
            simplex_groups=[q], ranges={a: (0.05, 1.0)},
        ))
    return tuple(checks)


def prove_local_loss_is_scaled_prox(
    n: int,
    psi: Optional[Potential] = None,
    *,
    consistency_weight: Optional[sp.Expr] = None,
    step: Optional[sp.Expr] = None,
    numeric_psi: Potential = negative_entropy,
    n_points: int = 200,
    seed: int = 0,
) -> IdentityCheck:
    """Symbolic ``a D(p,y) + b D(p,q) - a [<grad L(q), p-q> + (1/step) D(p,q)] - a D(q,y) == 0``.

    ``a`` is the symbol ``alpha``; ``b`` defaults to ``1 - alpha`` and ``step``
    to ``a / (a + b)`` (which is ``alpha`` for the default ``b``). With
    ``psi=None`` the potential is a general undefined function; the numeric
    check then uses ``numeric_psi`` at random points with ``alpha`` in
    ``(0.05, 1)``. Pass e.g. ``consistency_weight=1, step=alpha`` to see the
    identity fail when the weights do not sum to one.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    p, q, y = simplex_symbols("p", n), simplex_symbols("q", n), simplex_symbols("y", n)
    a = sp.Symbol("alpha", positive=True)
    b = 1 - a if consistency_weight is None else sp.sympify(consistency_weight)
    eta = a / (a + b) if step is None else sp.sympify(step)

    def residual_for(pot: Potential) -> sp.Expr:
        task = bregman(pot, p, y)
        grad_at_q = [sp.diff(task, pi).subs(dict(zip(p, q)), simultaneous=True) for pi in p]
        lin = sp.Add(*[gi * (pi - qi) for gi, pi, qi in zip(grad_at_q, p, q)])
        local = a * task + b * bregman(pot, p, q)
        return local - a * (lin + bregman(pot, p, q) / eta) - a * bregman(pot, q, y)

    pot = undefined_potential() if psi is None else psi
    residual = residual_for(pot)
    numeric_residual = residual_for(numeric_psi) if psi is None else None
    return check_identity(
        f"local loss = alpha * Eq.(7) + const (b={b}, step={eta}, n={n})",
        residual, list(p) + list(q) + list(y) + [a],
        n_points=n_points, seed=seed, simplex_groups=[p, q, y], ranges={a: (0.05, 1.0)},
        numeric_residual=numeric_residual,
    )


def prove_kkt_stationarity(n: int, *, n_points: int = 200, seed: int = 0) -> IdentityCheck:
    """Plug the closed form into ``dLag/dp_i`` with ``lambda = (log Z - 1)/alpha``: get 0.

    Returns a single check on the sum of squared per-coordinate residuals
    (numerically) and on each coordinate symbolically.
    """
    if n < 2:
        raise ValueError("n must be >= 2")
    q = simplex_symbols("q", n)
    g = tuple(sp.symbols(f"g1:{n + 1}", real=True))
    a = sp.Symbol("alpha", positive=True)
    z = sp.Add(*[qi * sp.exp(-a * gi) for qi, gi in zip(q, g)])
    lam = (sp.log(z) - 1) / a
    p_star = [qi * sp.exp(-a * gi) / z for qi, gi in zip(q, g)]
    residuals = [g[i] + (sp.log(p_star[i] / q[i]) + 1) / a + lam for i in range(n)]
    simplified = [simplify_to_zero(r) for r in residuals]
    total = sp.Add(*[r**2 for r in residuals])
    syms = list(q) + list(g) + [a]
    err = check_numerically(total, syms, n_points, np.random.default_rng(seed),
                            simplex_groups=[q], ranges={a: (0.05, 1.0)})
    return IdentityCheck(
        name=f"closed form satisfies KKT stationarity of Eq. (7) (n={n})",
        residual=total,
        simplified=sp.Add(*[s**2 for s in simplified]),
        numeric_max_abs=err,
    )
