r"""Bregman divergences, symbolically (SymPy) and numerically (NumPy).

What a Bregman divergence is
----------------------------
Pick a strictly convex, differentiable "potential" ``psi``. Its first-order
Taylor expansion around a point ``v`` is a tangent plane that lies *below* the
graph of ``psi`` everywhere. The Bregman divergence is the gap between the
function and that tangent plane, measured at ``u``::

    D_psi(u, v) = psi(u) - psi(v) - <grad psi(v), u - v>   (>= 0, = 0 iff u = v)

If you know gradient descent, you already know one example: with
``psi(x) = 1/2 ||x||^2`` the tangent-plane gap is ``1/2 ||u - v||^2``, the
usual squared distance, and a "proximal step"
``argmin <g, p> + (1/eta) D_psi(p, p_old)`` is exactly a gradient step
``p_old - eta g``. Swapping in a different potential changes the *geometry*
in which the step is taken. On the probability simplex the natural choice is
the negative entropy ``psi(x) = sum_i x_i log x_i``; its Bregman divergence
is the Kullback-Leibler divergence, and the proximal step becomes the
multiplicative "exponentiated gradient" / mirror-descent update used in
Lemma 1 of the ZeroLock paper.

Two facts to keep in mind:

* ``D_psi`` is generally **not symmetric**: ``D_psi(u, v) != D_psi(v, u)``
  (KL is the standard example; the squared norm is the exception).
* For negative entropy, ``D_psi(u, v) = sum u log(u/v) - sum u + sum v`` is
  the *generalised* KL; it equals ``KL(u || v)`` only when both arguments sum
  to one (see :func:`prove_negentropy_is_kl`).

Symbolic identities are proved with SymPy, but SymPy's ``simplify`` can fail
to recognise zero, so every identity in this package is *also* evaluated at
random points (:func:`check_numerically`). An :class:`IdentityCheck` carries
both verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import sympy as sp
from numpy.typing import ArrayLike
from scipy.special import rel_entr, xlogy

from .simplex import FloatArray, as_simplex

#: A potential maps a list of SymPy expressions (the coordinates) to a scalar.
Potential = Callable[[Sequence[sp.Expr]], sp.Expr]

#: Default numeric tolerance for "the identity holds at random points".
NUMERIC_TOL: float = 1e-9


# ---------------------------------------------------------------------------
# Potentials
# ---------------------------------------------------------------------------

def negative_entropy(xs: Sequence[sp.Expr]) -> sp.Expr:
    """``psi(x) = sum_i x_i log x_i``: the potential whose Bregman divergence is KL."""
    return sp.Add(*[x * sp.log(x) for x in xs])


def squared_norm(xs: Sequence[sp.Expr]) -> sp.Expr:
    """``psi(x) = 1/2 sum_i x_i^2`` (half squared norm): Bregman divergence ``1/2 ||u-v||^2``."""
    return sp.Rational(1, 2) * sp.Add(*[x**2 for x in xs])


def undefined_potential(name: str = "psi") -> Potential:
    """An *arbitrary* potential: an undefined SymPy function ``psi(x_1, ..., x_n)``.

    Identities proved with this potential hold for every differentiable ``psi``
    because SymPy knows nothing about it except the rules of calculus.
    """
    f = sp.Function(name)
    return lambda xs: f(*xs)


def gradient(psi: Potential, at: Sequence[sp.Expr]) -> list[sp.Expr]:
    """``grad psi`` evaluated at the point ``at`` (list of SymPy expressions).

    Differentiates with respect to fresh dummy variables and substitutes
    afterwards, so ``at`` may contain arbitrary expressions (e.g. ``1 - u1``).
    """
    xs = [sp.Dummy(f"x{i}") for i in range(len(at))]
    expr = psi(xs)
    sub = dict(zip(xs, at))
    return [sp.diff(expr, x).subs(sub, simultaneous=True) for x in xs]


def _inner(a: Sequence[sp.Expr], b: Sequence[sp.Expr]) -> sp.Expr:
    return sp.Add(*[ai * bi for ai, bi in zip(a, b)])


def bregman(psi: Potential, u_syms: Sequence[sp.Expr], v_syms: Sequence[sp.Expr]) -> sp.Expr:
    """Symbolic ``D_psi(u, v) = psi(u) - psi(v) - <grad psi(v), u - v>``.

    Args:
        psi: potential, a callable taking a list of coordinates.
        u_syms, v_syms: equal-length lists of SymPy symbols/expressions.

    Raises:
        ValueError: if the two points have different (or zero) dimension.
    """
    u, v = list(u_syms), list(v_syms)
    if len(u) != len(v) or not u:
        raise ValueError(f"u and v must be non-empty and of equal length, got {len(u)} and {len(v)}")
    diff = [ui - vi for ui, vi in zip(u, v)]
    return psi(u) - psi(v) - _inner(gradient(psi, v), diff)


def kl_symbolic(u: Sequence[sp.Expr], v: Sequence[sp.Expr]) -> sp.Expr:
    """``KL(u || v) = sum u_i log(u_i / v_i)`` (meaningful on the simplex)."""
    return sp.Add(*[ui * sp.log(ui / vi) for ui, vi in zip(u, v)])


def generalised_kl_symbolic(u: Sequence[sp.Expr], v: Sequence[sp.Expr]) -> sp.Expr:
    """``sum u log(u/v) - sum u + sum v``: KL extended to unnormalised vectors."""
    return kl_symbolic(u, v) - sp.Add(*u) + sp.Add(*v)


def simplex_symbols(name: str, n: int) -> tuple[sp.Symbol, ...]:
    """``n`` positive symbols ``name1 .. name{n}`` (coordinates of a distribution)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    return tuple(sp.symbols(f"{name}1:{n + 1}", positive=True))


# ---------------------------------------------------------------------------
# Checking identities
# ---------------------------------------------------------------------------

def _split_log(arg: sp.Expr) -> sp.Expr:
    num, den = sp.fraction(sp.together(arg))
    return sp.log(num) - sp.log(den)


def simplify_to_zero(expr: sp.Expr, *, use_simplify: bool = True) -> sp.Expr:
    """Try hard (but cheaply) to reduce ``expr`` to 0.

    ``expand_log(force=True)`` splits ``log(u/v)`` into ``log u - log v`` (valid
    for the positive symbols used throughout), then ``expand`` cancels like
    terms; then logs of sums are split as ``log(num) - log(den)`` after
    ``together``; ``simplify`` is only a fallback. These steps are formal
    (they assume the arguments are positive, as they are on the simplex).
    A non-zero result does NOT prove
    the expression is non-zero -- use :func:`check_numerically` for that.
    """
    e = sp.expand(sp.expand_log(sp.expand(expr), force=True))
    if e == 0:
        return sp.Integer(0)
    # log(a/b + c) -> log(numerator) - log(denominator) after bringing the
    # argument over a common denominator (formal, like force=True above).
    e = sp.expand(sp.expand_log(expr.replace(sp.log, _split_log), force=True))
    if e == 0 or not use_simplify:
        return sp.Integer(0) if e == 0 else e
    e = sp.simplify(e)
    if e == 0:
        return sp.Integer(0)
    return sp.expand(sp.expand_log(e, force=True))


def check_numerically(
    expr: sp.Expr,
    symbols: Sequence[sp.Symbol],
    n_points: int = 200,
    rng: Optional[np.random.Generator] = None,
    simplex_groups: Sequence[Sequence[sp.Symbol]] = (),
    ranges: Optional[Mapping[sp.Symbol, tuple[float, float]]] = None,
) -> float:
    """Evaluate ``expr`` at random points and return the max ``|expr|``.

    Sampling rules, per symbol:

    * symbols in one of ``simplex_groups`` are sampled jointly from a
      Dirichlet(1) distribution (mixed 10% with uniform to stay away from 0),
      so each group is a random point of the simplex;
    * symbols in ``ranges`` are uniform on the given interval;
    * other symbols declared ``positive`` are uniform on ``[0.1, 2]``;
    * everything else is uniform on ``[-2, 2]``.

    Returns ``inf`` if the expression is non-finite at some point.

    Raises:
        ValueError: if ``expr`` has free symbols not listed in ``symbols``, or
            a simplex group mentions an unlisted symbol, or ``n_points < 1``.
    """
    if n_points < 1:
        raise ValueError("n_points must be >= 1")
    rng = np.random.default_rng(0) if rng is None else rng
    symbols = list(symbols)
    missing = set(expr.free_symbols) - set(symbols)
    if missing:
        raise ValueError(f"expression has unlisted free symbols: {sorted(map(str, missing))}")
    ranges = dict(ranges or {})
    values: dict[sp.Symbol, np.ndarray] = {}
    for group in simplex_groups:
        group = list(group)
        for s in group:
            if s not in symbols:
                raise ValueError(f"simplex group symbol {s} is not in symbols")
        pts = rng.dirichlet(np.ones(len(group)), size=n_points)
        pts = 0.9 * pts + 0.1 / len(group)
        for j, s in enumerate(group):
            values[s] = pts[:, j]
    for s in symbols:
        if s in values:
            continue
        if s in ranges:
            lo, hi = ranges[s]
        elif s.is_positive:
            lo, hi = 0.1, 2.0
        else:
            lo, hi = -2.0, 2.0
        values[s] = rng.uniform(lo, hi, size=n_points)
    f = sp.lambdify(symbols, expr, modules="numpy")
    with np.errstate(all="ignore"):
        out = np.asarray(f(*[values[s] for s in symbols]), dtype=complex)
    out = np.broadcast_to(out, (n_points,))
    if not np.all(np.isfinite(out)):
        return float("inf")
    return float(np.max(np.abs(out)))


@dataclass(frozen=True)
class IdentityCheck:
    """Outcome of checking ``lhs - rhs == 0`` symbolically and numerically.

    Attributes:
        name: human-readable statement.
        residual: the raw SymPy expression ``lhs - rhs``.
        simplified: ``residual`` after :func:`simplify_to_zero`.
        numeric_max_abs: max ``|residual|`` over random points.
        tol: numeric tolerance used for :attr:`holds`.
    """

    name: str
    residual: sp.Expr
    simplified: sp.Expr
    numeric_max_abs: float
    tol: float = NUMERIC_TOL

    @property
    def symbolic_zero(self) -> bool:
        """True iff SymPy reduced the residual to exactly 0."""
        return self.simplified == 0

    @property
    def holds(self) -> bool:
        """The numeric verdict (SymPy cannot always prove zero, numbers can refute it)."""
        return self.numeric_max_abs <= self.tol


def check_identity(
    name: str,
    residual: sp.Expr,
    symbols: Sequence[sp.Symbol],
    *,
    n_points: int = 200,
    seed: int = 0,
    simplex_groups: Sequence[Sequence[sp.Symbol]] = (),
    ranges: Optional[Mapping[sp.Symbol, tuple[float, float]]] = None,
    numeric_residual: Optional[sp.Expr] = None,
    simplify: bool = True,
    tol: float = NUMERIC_TOL,
) -> IdentityCheck:
    """Simplify ``residual`` and evaluate it (or ``numeric_residual``) at random points.

    ``numeric_residual`` lets a caller prove an identity for an abstract
    potential symbolically while checking it numerically with a concrete one.
    """
    simplified = simplify_to_zero(residual) if simplify else residual
    target = residual if numeric_residual is None else numeric_residual
    err = check_numerically(
        target, symbols, n_points=n_points, rng=np.random.default_rng(seed),
        simplex_groups=simplex_groups, ranges=ranges,
    )
    return IdentityCheck(name=name, residual=residual, simplified=simplified, numeric_max_abs=err, tol=tol)


# ---------------------------------------------------------------------------
# Named identities
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class NegentropyKLProof:
    """Result of :func:`prove_negentropy_is_kl`.

    Attributes:
        on_simplex: ``D_negentropy(u, v) - KL(u || v)`` with the last
            coordinates eliminated via ``sum u = sum v = 1``; reduces to 0.
        off_simplex_residual: ``D_negentropy(u, v) - KL(u || v)`` for free
            positive ``u, v``, simplified; equals ``sum v - sum u``.
        off_simplex_matches: checks ``off_simplex_residual == sum v - sum u``
            (i.e. ``D_negentropy`` is the generalised KL).
        off_simplex_nonzero_max: max ``|D - KL|`` at random positive
            (non-normalised) points: clearly non-zero, so the simplex
            constraint is really needed.
    """

    on_simplex: IdentityCheck
    off_simplex_residual: sp.Expr
    off_simplex_matches: IdentityCheck
    off_simplex_nonzero_max: float


def prove_negentropy_is_kl(n: int, *, n_points: int = 200, seed: int = 0) -> NegentropyKLProof:
    """Prove ``D_psi(u, v) = KL(u || v)`` for ``psi = sum x log x`` on the simplex.

    Derivation (``grad psi(v)_i = log v_i + 1``)::

        D(u, v) = sum u log u - sum v log v - sum (log v_i + 1)(u_i - v_i)
                = sum u log(u / v) - sum u + sum v.

    The last two sums cancel exactly when ``sum u = sum v = 1``; otherwise
    the residual ``D - KL`` is ``sum v - sum u`` (the generalised KL).
    """
    if n < 2:
        raise ValueError("n must be >= 2 for a simplex with a free coordinate")
    u, v = simplex_symbols("u", n), simplex_symbols("v", n)
    raw = bregman(negative_entropy, u, v) - kl_symbolic(u, v)
    general = simplify_to_zero(raw)
    # Impose the simplex explicitly: u_n = 1 - sum_{i<n} u_i, same for v.
    sub = {u[-1]: 1 - sp.Add(*u[:-1]), v[-1]: 1 - sp.Add(*v[:-1])}
    on_simplex_residual = raw.subs(sub, simultaneous=True)
    on_simplex = IdentityCheck(
        name=f"D_negentropy(u,v) = KL(u||v) on the simplex (n={n})",
        residual=on_simplex_residual,
        simplified=sp.expand(general.subs(sub, simultaneous=True)),
        numeric_max_abs=check_numerically(
            raw, list(u) + list(v), n_points, np.random.default_rng(seed), simplex_groups=[u, v]
        ),
    )
    expected = sp.Add(*v) - sp.Add(*u)
    matches = check_identity(
        f"D_negentropy(u,v) - KL(u||v) = sum v - sum u off the simplex (n={n})",
        raw - expected, list(u) + list(v), n_points=n_points, seed=seed,
    )
    nonzero = check_numerically(raw, list(u) + list(v), n_points, np.random.default_rng(seed + 1))
    return NegentropyKLProof(on_simplex, general, matches, nonzero)


def prove_squared_norm_is_distance(n: int, *, n_points: int = 200, seed: int = 0) -> IdentityCheck:
    """Prove ``D_psi(u, v) = 1/2 ||u - v||^2`` for ``psi = 1/2 ||x||^2`` (any ``u, v``)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    u = tuple(sp.symbols(f"u1:{n + 1}", real=True))
    v = tuple(sp.symbols(f"v1:{n + 1}", real=True))
    residual = bregman(squared_norm, u, v) - sp.Rational(1, 2) * sp.Add(*[(a - b) ** 2 for a, b in zip(u, v)])
    return check_identity(
        f"D_sqnorm(u,v) = 1/2 ||u-v||^2 (n={n})", residual, list(u) + list(v), n_points=n_points, seed=seed
    )


# ---------------------------------------------------------------------------
# Numeric versions
# ---------------------------------------------------------------------------

def negative_entropy_numeric(x: ArrayLike) -> FloatArray:
    """``sum x log x`` along the last axis (with ``0 log 0 = 0``)."""
    x = np.asarray(x, dtype=float)
    return np.sum(xlogy(x, x), axis=-1)


def negative_entropy_grad_numeric(x: ArrayLike) -> FloatArray:
    """``log x + 1`` (infinite at zero entries: the boundary of the simplex)."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(x, dtype=float)) + 1.0


def squared_norm_numeric(x: ArrayLike) -> FloatArray:
    """``1/2 ||x||^2`` along the last axis."""
    x = np.asarray(x, dtype=float)
    return 0.5 * np.sum(x * x, axis=-1)


def squared_norm_grad_numeric(x: ArrayLike) -> FloatArray:
    """Gradient of ``1/2 ||x||^2``: ``x`` itself."""
    return np.asarray(x, dtype=float)


def bregman_numeric(
    psi: Callable[[FloatArray], FloatArray | float],
    grad_psi: Callable[[FloatArray], FloatArray],
    u: ArrayLike,
    v: ArrayLike,
) -> FloatArray | float:
    """``psi(u) - psi(v) - <grad_psi(v), u - v>`` along the last axis.

    ``psi`` must reduce the last axis; ``grad_psi`` must preserve shape.

    Raises:
        ValueError: if ``u`` and ``v`` have different shapes.
    """
    u = np.asarray(u, dtype=float)
    v = np.asarray(v, dtype=float)
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same shape, got {u.shape} and {v.shape}")
    return psi(u) - psi(v) - np.sum(grad_psi(v) * (u - v), axis=-1)


def kl(u: ArrayLike, v: ArrayLike) -> FloatArray | float:
    """``KL(u || v) = sum u log(u / v)`` along the last axis, for points of the simplex.

    Conventions: ``0 log(0 / v) = 0`` and ``u log(u / 0) = +inf`` for ``u > 0``
    (so ``KL(p || one_hot)`` is infinite unless ``p`` is that one-hot).

    Raises:
        ValueError: if either argument is not on the simplex or shapes differ.
    """
    u = as_simplex(u, "u")
    v = as_simplex(v, "v")
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same shape, got {u.shape} and {v.shape}")
    out = np.sum(rel_entr(u, v), axis=-1)
    return float(out) if out.ndim == 0 else out
