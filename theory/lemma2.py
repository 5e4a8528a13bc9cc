r"""Lemma 2 / Eq. (15): which distribution does the local loss pull ``p_k`` towards?

Minimising a blend of "match the label" and "match the previous chunk" over
the simplex always has a unique minimiser -- the chunk's *target*. Which
target you get depends entirely on the direction of each divergence. With
``y = p_y``, ``q = p_{k-1}`` and ``alpha in (0, 1]``:

=====================  ==========================================  =============================================
name                   objective                                   minimiser
=====================  ==========================================  =============================================
geometric (Eq. 15)     ``alpha KL(p||y) + (1-alpha) KL(p||q)``     ``y^alpha q^(1-alpha) / Z``
arithmetic ("fwd")     ``alpha CE(y,p) + (1-alpha) KL(q||p)``      ``alpha y + (1-alpha) q``
reverse (Eq. 5 as      ``alpha CE(y,p) + (1-alpha) KL(p||q)``      neither: solve the stationarity condition
printed)
=====================  ==========================================  =============================================

*Geometric.* ``sum_l p_l [alpha log(p_l/y_l) + (1-alpha) log(p_l/q_l)]``
``= sum p log p - sum p log(y^alpha q^(1-alpha)) = KL(p || p*) - log Z`` with
``p* = y^alpha q^(1-alpha) / Z``: exactly the paper's statement
(:func:`geometric_identity_residual` checks it). This requires ``KL(p || y)``
to be finite, i.e. a label with full support. For an exactly one-hot ``y``
(label ``c``) the objective is ``+inf`` for every ``p`` except ``e_c``, and
the formula gives ``0^alpha = 0`` off the label, so the target *collapses to
the one-hot* ``e_c`` for every ``alpha in (0, 1]`` (it is defined as long as
``q_c > 0``): the consistency term has no effect at all. Label smoothing
``eps`` removes the degeneracy; as ``eps -> 0`` the target tends to ``e_c``
for every fixed ``alpha``, with off-label mass shrinking like ``eps^alpha``
(slowly for small ``alpha``). See :func:`geometric_target`.

*Arithmetic.* ``alpha CE(y,p) + (1-alpha) KL(q||p) = -sum_l m_l log p_l + const``
with ``m = alpha y + (1-alpha) q``; Gibbs' inequality says this is minimised at
``p = m``. Works fine for a one-hot ``y``. This is the "forward" consistency of
the authors' public code.

*Reverse.* Eq. (5) puts the prediction first in the consistency term,
``KL(p || q)``, while the task term is cross-entropy (label first). The
Lagrangian ``-alpha sum y_l log p_l + (1-alpha) sum p_l log(p_l/q_l) +
lambda (sum p_l - 1)`` has stationarity condition, for every coordinate ``l``::

    -alpha y_l / p_l + (1 - alpha) (log(p_l / q_l) + 1) + lambda = 0.

(The objective is strictly convex and blows up at the boundary only through
``-log p_l`` for ``y_l > 0``; coordinates with ``y_l = 0`` get
``p_l = q_l exp(-1 - lambda/(1-alpha))``, i.e. stay proportional to ``q``.)
The condition mixes ``1/p`` and ``log p``, so there is no closed form in
general: :func:`reverse_target_numeric` solves it by a one-dimensional
search over ``lambda`` (each coordinate's equation is monotone in ``p_l``),
and :func:`reverse_stationarity_residual` measures how far a point is from
satisfying it. Neither mixture satisfies it.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import sympy as sp
from numpy.typing import ArrayLike
from scipy.optimize import brentq
from scipy.special import logsumexp, rel_entr, xlogy

from .bregman import IdentityCheck, check_numerically, simplify_to_zero
from .optimize import minimize_on_simplex
from .simplex import FloatArray, as_simplex, check_alpha


def _pair(p_y: ArrayLike, p_prev: ArrayLike, alpha: float) -> tuple[FloatArray, FloatArray, float]:
    a = check_alpha(alpha)
    y = as_simplex(p_y, "p_y")
    q = as_simplex(p_prev, "p_prev")
    if y.shape != q.shape:
        raise ValueError(f"p_y and p_prev must have the same shape, got {y.shape} and {q.shape}")
    return y, q, a


# ---------------------------------------------------------------------------
# Geometric target (Eq. 15)
# ---------------------------------------------------------------------------

def geometric_target(
    p_y: ArrayLike, p_prev: ArrayLike, alpha: float, *, allow_degenerate: bool = False
) -> FloatArray:
    """Eq. (15): ``p_y^alpha * p_prev^(1-alpha) / Z``, the minimiser of
    ``alpha KL(p || p_y) + (1-alpha) KL(p || p_prev)``.

    Args:
        p_y: label distribution; must have full support unless
            ``allow_degenerate`` (e.g. label-smoothed).
        p_prev: previous chunk's readout (full support for ``alpha < 1``).
        alpha: blend weight in ``(0, 1]``.
        allow_degenerate: evaluate the formula with ``0^alpha = 0`` even for a
            ``p_y`` with zeros. For a one-hot ``p_y = e_c`` the result is
            ``e_c`` regardless of ``alpha`` -- the degenerate collapse.

    Raises:
        ValueError: if ``p_y`` has zeros and ``allow_degenerate`` is False, or
            if the normaliser ``Z`` is 0 (``p_y`` and ``p_prev`` have disjoint
            supports: the objective is ``+inf`` everywhere and no minimiser exists).
    """
    y, q, a = _pair(p_y, p_prev, alpha)
    if np.any(y <= 0) and not allow_degenerate:
        raise ValueError(
            "geometric target needs p_y with full support (KL(p || p_y) is +inf otherwise); "
            "label-smooth p_y or pass allow_degenerate=True to see the collapse"
        )
    if a < 1.0 and np.any(q <= 0) and not allow_degenerate:
        raise ValueError("geometric target needs p_prev with full support when alpha < 1")
    with np.errstate(divide="ignore"):
        logw = a * np.log(y) + (1.0 - a) * np.log(q) if a < 1.0 else np.log(y)
    if np.any(np.all(np.isneginf(logw), axis=-1)):
        raise ValueError("p_y and p_prev have disjoint supports: Z = 0 and the target is undefined")
    return np.exp(logw - logsumexp(logw, axis=-1, keepdims=True))


def geometric_objective(p: ArrayLike, p_y: ArrayLike, p_prev: ArrayLike, alpha: float) -> float:
    """``alpha KL(p || p_y) + (1-alpha) KL(p || p_prev)`` (``+inf`` where ``p`` leaves the label's support)."""
    y, q, a = _pair(p_y, p_prev, alpha)
    p = as_simplex(p, "p")
    return float(a * np.sum(rel_entr(p, y), axis=-1) + (1.0 - a) * np.sum(rel_entr(p, q), axis=-1))


def geometric_identity_residual(p: ArrayLike, p_y: ArrayLike, p_prev: ArrayLike, alpha: float) -> float:
    """Lemma 2 statement: objective ``- [KL(p || p*) - log Z]``; zero for every ``p``."""
    y, q, a = _pair(p_y, p_prev, alpha)
    y = as_simplex(y, "p_y", strictly_positive=True)
    q = as_simplex(q, "p_prev", strictly_positive=True)
    p = as_simplex(p, "p")
    logw = a * np.log(y) + (1.0 - a) * np.log(q)
    log_z = float(logsumexp(logw))
    target = np.exp(logw - log_z)
    return geometric_objective(p, y, q, a) - (float(np.sum(rel_entr(p, target))) - log_z)


# ---------------------------------------------------------------------------
# Arithmetic target (forward consistency)
# ---------------------------------------------------------------------------

def arithmetic_target(p_y: ArrayLike, p_prev: ArrayLike, alpha: float) -> FloatArray:
    """``alpha p_y + (1-alpha) p_prev``: minimiser of ``alpha CE(p_y, p) + (1-alpha) KL(p_prev || p)``."""
    y, q, a = _pair(p_y, p_prev, alpha)
    return a * y + (1.0 - a) * q


def forward_objective(p: ArrayLike, p_y: ArrayLike, p_prev: ArrayLike, alpha: float) -> float:
    """``alpha CE(p_y, p) + (1-alpha) KL(p_prev || p)`` (the authors' code: forward consistency)."""
    y, q, a = _pair(p_y, p_prev, alpha)
    p = as_simplex(p, "p")
    with np.errstate(divide="ignore"):
        ce = -np.sum(xlogy(y, p), axis=-1)
    return float(a * ce + (1.0 - a) * np.sum(rel_entr(q, p), axis=-1))


# ---------------------------------------------------------------------------
# Reverse consistency (Eq. 5 as printed)
# ---------------------------------------------------------------------------

def reverse_objective(p: ArrayLike, p_y: ArrayLike, p_prev: ArrayLike, alpha: float) -> float:
    """``alpha CE(p_y, p) + (1-alpha) KL(p || p_prev)`` (Eq. 3 with Eqs. 4-5 as implemented/printed)."""
    y, q, a = _pair(p_y, p_prev, alpha)
    p = as_simplex(p, "p")
    with np.errstate(divide="ignore"):
        ce = -np.sum(xlogy(y, p), axis=-1)
    return float(a * ce + (1.0 - a) * np.sum(rel_entr(p, q), axis=-1))


def _coordinate_solutions(lam: float, y: FloatArray, logq: FloatArray, a: float) -> FloatArray:
    """``log p_l(lambda)`` solving ``-a y_l e^{-t} + b (t - log q_l + 1) + lambda = 0`` for each ``l``.

    The left side is strictly increasing in ``t = log p_l``, so vectorised
    bisection on a guaranteed bracket converges; ``y_l = 0`` is explicit.
    """
    b = 1.0 - a
    c = b * (1.0 - logq) + lam                   # equation: a y e^{-t} = b t + c
    lo = -c / b                                  # b t + c > 0 is necessary
    hi = np.maximum(0.0, (a * y - c) / b)        # there h(t) >= 0 (see module docs)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        h = -a * y * np.exp(-mid) + b * mid + c
        neg = h < 0
        lo = np.where(neg, mid, lo)
        hi = np.where(neg, hi, mid)
        if np.all(hi - lo <= 1e-15 * np.maximum(1.0, np.abs(mid))):
            break
    t = 0.5 * (lo + hi)
    return np.where(y > 0, t, logq - 1.0 - lam / b)


def reverse_target_numeric(
    p_y: ArrayLike,
    p_prev: ArrayLike,
    alpha: float,
    method: Literal["dual", "logits", "slsqp"] = "dual",
) -> FloatArray:
    """Minimiser of ``alpha CE(p_y, p) + (1-alpha) KL(p || p_prev)`` over the simplex.

    Methods:
        ``"dual"`` (default, accurate): for a given multiplier ``lambda`` each
        coordinate of the stationarity condition is a monotone 1-D equation
        in ``p_l``; ``brentq`` then finds the ``lambda`` with ``sum p = 1``.
        ``"logits"`` / ``"slsqp"``: generic SciPy minimisation of the
        objective (independent cross-check, no stationarity formula used).

    ``alpha = 1`` returns ``p_y`` (pure cross-entropy is minimised at the label).

    Raises:
        ValueError: bad inputs; ``p_prev`` must have full support when ``alpha < 1``.
    """
    y, q, a = _pair(p_y, p_prev, alpha)
    if y.ndim != 1:
        raise ValueError("reverse_target_numeric takes single distributions")
    if a == 1.0:
        return y.copy()
    q = as_simplex(q, "p_prev", strictly_positive=True)
    logq = np.log(q)
    if method == "dual":
        def log_mass(lam: float) -> float:
            return float(logsumexp(_coordinate_solutions(lam, y, logq, a)))

        lo, hi = -1.0, 1.0                       # log_mass is decreasing in lambda
        while log_mass(lo) < 0:
            lo = 2 * lo - 1
        while log_mass(hi) > 0:
            hi = 2 * hi + 1
        lam = brentq(log_mass, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500)
        p = np.exp(_coordinate_solutions(lam, y, logq, a))
        return p / p.sum()
    if method in ("logits", "slsqp"):
        def fun(p: FloatArray) -> float:
            return float(-a * np.dot(y, np.log(p)) + (1 - a) * np.dot(p, np.log(p) - logq))

        def jac(p: FloatArray) -> FloatArray:
            return -a * y / p + (1 - a) * (np.log(p) - logq + 1.0)

        return minimize_on_simplex(fun, jac, arithmetic_target(y, q, a), method)
    raise ValueError(f"unknown method {method!r}")


def reverse_stationarity_residual(p: ArrayLike, p_y: ArrayLike, p_prev: ArrayLike, alpha: float) -> FloatArray:
    """Per-coordinate residual of the reverse-consistency stationarity condition.

    With ``r_l = -alpha y_l / p_l + (1-alpha)(log(p_l / q_l) + 1)``, an interior
    point ``p`` is stationary (hence, by strict convexity, the minimiser) iff
    ``r_l + lambda = 0`` for a common ``lambda``, i.e. iff all ``r_l`` are equal.
    Returns ``r - mean(r)`` (the best ``lambda`` in least squares is ``-mean(r)``);
    its max-abs is zero exactly at the minimiser.

    Raises:
        ValueError: if ``p`` is not a full-support distribution, or bad inputs.
    """
    y, q, a = _pair(p_y, p_prev, alpha)
    p = as_simplex(p, "p", strictly_positive=True)
    q = as_simplex(q, "p_prev", strictly_positive=True)
    if p.shape != y.shape:
        raise ValueError("p must have the same shape as p_y")
    r = -a * y / p + (1.0 - a) * (np.log(p) - np.log(q) + 1.0)
    return r - r.mean(axis=-1, keepdims=True)


# ---------------------------------------------------------------------------
# Symbolic checks (n = 2 and Lagrangian for general n)
# ---------------------------------------------------------------------------

TargetName = Literal["geometric", "arithmetic", "reverse_vs_arithmetic", "reverse_vs_geometric"]


def _two_point_symbols() -> tuple[sp.Symbol, sp.Symbol, sp.Symbol, sp.Symbol]:
    # x = p_1, y1 = p_y[1], q1 = p_prev[1]; second coordinates are 1 - (.)
    return (sp.Symbol("x", positive=True), sp.Symbol("y1", positive=True),
            sp.Symbol("q1", positive=True), sp.Symbol("alpha", positive=True))


def prove_two_point_target(name: TargetName, *, n_points: int = 200, seed: int = 0) -> IdentityCheck:
    """For ``n = 2``: derivative of an objective along the simplex at a candidate target.

    ``p = (x, 1 - x)``; the objective's derivative in ``x`` must vanish at the
    minimiser. Cases:

    * ``"geometric"``: ``d/dx [alpha KL(p||y) + (1-alpha) KL(p||q)]`` at Eq. (15) -> 0;
    * ``"arithmetic"``: ``d/dx [alpha CE(y,p) + (1-alpha) KL(q||p)]`` at the mixture -> 0;
    * ``"reverse_vs_arithmetic"`` / ``"reverse_vs_geometric"``: the reverse
      objective's derivative at either mixture -- expected NOT to vanish.
    """
    x, y1, q1, a = _two_point_symbols()
    p, y, q = (x, 1 - x), (y1, 1 - y1), (q1, 1 - q1)
    kl_pq = sum(pi * sp.log(pi / qi) for pi, qi in zip(p, q))
    kl_py = sum(pi * sp.log(pi / yi) for pi, yi in zip(p, y))
    kl_qp = sum(qi * sp.log(qi / pi) for pi, qi in zip(p, q))
    ce = -sum(yi * sp.log(pi) for pi, yi in zip(p, y))
    geo = y1**a * q1 ** (1 - a) / (y1**a * q1 ** (1 - a) + (1 - y1) ** a * (1 - q1) ** (1 - a))
    ari = a * y1 + (1 - a) * q1
    if name == "geometric":
        obj, at = a * kl_py + (1 - a) * kl_pq, geo
    elif name == "arithmetic":
        obj, at = a * ce + (1 - a) * kl_qp, ari
    elif name == "reverse_vs_arithmetic":
        obj, at = a * ce + (1 - a) * kl_pq, ari
    elif name == "reverse_vs_geometric":
        obj, at = a * ce + (1 - a) * kl_pq, geo
    else:
        raise ValueError(f"unknown case {name!r}")
    residual = sp.diff(obj, x).subs(x, at)
    # The "reverse_*" residuals are expected to be non-zero: skip the costly simplify().
    simplified = simplify_to_zero(residual, use_simplify=not name.startswith("reverse"))
    err = check_numerically(residual, [y1, q1, a], n_points, np.random.default_rng(seed),
                            ranges={y1: (0.05, 0.95), q1: (0.05, 0.95), a: (0.05, 0.95)})
    return IdentityCheck(f"n=2 stationarity, case {name}", residual, simplified, err)


def prove_reverse_stationarity(n: int, *, n_points: int = 200, seed: int = 0) -> IdentityCheck:
    """Differentiate the reverse Lagrangian symbolically and compare with the stated condition.

    Lagrangian ``-alpha sum y log p + (1-alpha) sum p log(p/q) + lambda (sum p - 1)``;
    residual: ``sum_l (dLag/dp_l - [-alpha y_l/p_l + (1-alpha)(log(p_l/q_l)+1) + lambda])^2``.
    """
    if n < 2:
        raise ValueError("n must be >= 2")
    p = tuple(sp.symbols(f"p1:{n + 1}", positive=True))
    y = tuple(sp.symbols(f"y1:{n + 1}", positive=True))
    q = tuple(sp.symbols(f"q1:{n + 1}", positive=True))
    a = sp.Symbol("alpha", positive=True)
    lam = sp.Symbol("lambda", real=True)
    lag = -a * sp.Add(*[yi * sp.log(pi) for yi, pi in zip(y, p)]) \
        + (1 - a) * sp.Add(*[pi * sp.log(pi / qi) for pi, qi in zip(p, q)]) + lam * (sp.Add(*p) - 1)
    diffs = [sp.diff(lag, p[l]) - (-a * y[l] / p[l] + (1 - a) * (sp.log(p[l] / q[l]) + 1) + lam) for l in range(n)]
    simplified = sp.Add(*[simplify_to_zero(d) ** 2 for d in diffs])
    total = sp.Add(*[d**2 for d in diffs])
    err = check_numerically(total, list(p) + list(y) + list(q) + [a, lam], n_points,
                            np.random.default_rng(seed), simplex_groups=[p, y, q], ranges={a: (0.05, 1.0)})
    return IdentityCheck(f"reverse-consistency stationarity condition (n={n})", total, simplified, err)
