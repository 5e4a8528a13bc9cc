r"""The Bregman three-point identity behind Eq. (9) of the ZeroLock paper.

Statement
---------
For any differentiable potential ``psi`` and any three points ``p`` (the new
chunk output), ``q = p_{k-1}`` (the previous chunk output) and ``y = p_y``
(the target)::

    D(p, y) = D(q, y) + <grad_p D(p, y) |_{p=q}, p - q> + D(p, q).      (9)

Read it as an *exact* Taylor expansion of ``p -> D(p, y)`` around ``q``: the
constant term is ``D(q, y)``, the linear term uses the gradient at ``q``, and
the "remainder" is not a vague ``O(|p - q|^2)`` but exactly ``D(p, q)``. For
``psi = 1/2 ||x||^2`` this is the familiar expansion of a squared distance
``1/2|p-y|^2 = 1/2|q-y|^2 + <q-y, p-q> + 1/2|p-q|^2``.

Proof in one line: ``grad_p D(p, y) = grad psi(p) - grad psi(y)``, so the
right-hand side is ``psi(p) - psi(y) - <grad psi(y), (q - y) + (p - q)>``,
which is ``D(p, y)``. No convexity, no simplex constraint is needed: it is
pure algebra, which is why SymPy can verify it for an *undefined* ``psi``.

Why the argument order matters
------------------------------
Bregman divergences are not symmetric. Variants that look plausible on paper
are false in general (they happen to hold for the squared norm, whose
divergence is symmetric, which is exactly why intuition from Euclidean
gradient descent can mislead here):

* ``"swapped_last"``: remainder ``D(q, p)`` instead of ``D(p, q)``
  (true for the squared norm, false for negative entropy);
* ``"reversed_arguments"``: every ``D(a, b)`` replaced by ``D(b, a)``, i.e.
  expanding ``p -> D(y, p)`` (the *cross-entropy* direction for KL) instead
  (true for the squared norm, false for negative entropy);
* ``"gradient_at_p"``: gradient taken at ``p`` instead of ``q`` (false even
  for the squared norm: the residual is ``D(p, q) + D(q, p)``).
"""

from __future__ import annotations

from typing import Callable, Literal, Optional, Sequence

import numpy as np
import sympy as sp
from numpy.typing import ArrayLike
from sympy.core.function import AppliedUndef

from .bregman import (
    IdentityCheck,
    Potential,
    bregman,
    check_identity,
    negative_entropy,
    simplex_symbols,
    undefined_potential,
)

Variant = Literal["correct", "swapped_last", "reversed_arguments", "gradient_at_p"]
VARIANTS: tuple[Variant, ...] = ("correct", "swapped_last", "reversed_arguments", "gradient_at_p")


def _grad_wrt(expr: sp.Expr, wrt: Sequence[sp.Symbol], at: Sequence[sp.Expr]) -> list[sp.Expr]:
    sub = dict(zip(wrt, at))
    return [sp.diff(expr, w).subs(sub, simultaneous=True) for w in wrt]


def _inner(a: Sequence[sp.Expr], b: Sequence[sp.Expr]) -> sp.Expr:
    return sp.Add(*[ai * bi for ai, bi in zip(a, b)])


def three_point_residual(
    psi: Potential,
    p: Sequence[sp.Symbol],
    q: Sequence[sp.Symbol],
    y: Sequence[sp.Symbol],
    variant: Variant = "correct",
) -> sp.Expr:
    """``lhs - rhs`` of Eq. (9) (or of a wrong variant), as a SymPy expression.

    Args:
        psi: potential (concrete, or :func:`undefined_potential` for a general one).
        p, q, y: coordinate symbols of the new point, the previous chunk's
            output ``p_{k-1}`` and the target ``p_y``; ``p`` must be symbols
            because we differentiate with respect to them.
        variant: which statement to build (see module docstring).

    Raises:
        ValueError: on an unknown variant or mismatched dimensions.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {VARIANTS}")
    p, q, y = list(p), list(q), list(y)
    if not (len(p) == len(q) == len(y)) or not p:
        raise ValueError("p, q, y must be non-empty and of equal length")
    step = [pi - qi for pi, qi in zip(p, q)]
    if variant == "reversed_arguments":
        lhs = bregman(psi, y, p)
        grad = _grad_wrt(lhs, p, q)
        rhs = bregman(psi, y, q) + _inner(grad, step) + bregman(psi, q, p)
        return lhs - rhs
    lhs = bregman(psi, p, y)
    grad_at = p if variant == "gradient_at_p" else q
    grad = _grad_wrt(lhs, p, grad_at)
    remainder = bregman(psi, q, p) if variant == "swapped_last" else bregman(psi, p, q)
    rhs = bregman(psi, q, y) + _inner(grad, step) + remainder
    return lhs - rhs


def _is_abstract(expr: sp.Expr) -> bool:
    return bool(expr.atoms(AppliedUndef)) or bool(expr.atoms(sp.Subs)) or bool(expr.atoms(sp.Derivative))


def prove_three_point(
    n: int,
    psi: Optional[Potential] = None,
    *,
    variant: Variant = "correct",
    numeric_psi: Optional[Potential] = None,
    n_points: int = 200,
    seed: int = 0,
    on_simplex: bool = False,
) -> IdentityCheck:
    """Check Eq. (9) (or a variant) in dimension ``n``, symbolically and numerically.

    With ``psi=None`` the symbolic part uses a completely general potential
    (an undefined SymPy function). Numbers need a concrete potential, so the
    numeric part then uses ``numeric_psi`` (default: negative entropy). The
    random points are positive vectors (``on_simplex=False``: the identity
    does not need normalisation) or points of the simplex.

    For ``variant="correct"`` expect ``symbolic_zero`` and ``holds``; for the
    wrong variants with negative entropy expect ``holds == False``.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    p, q, y = simplex_symbols("p", n), simplex_symbols("q", n), simplex_symbols("y", n)
    psi_sym = undefined_potential() if psi is None else psi
    residual = three_point_residual(psi_sym, p, q, y, variant)
    numeric_residual: Optional[sp.Expr] = None
    if _is_abstract(residual):
        numeric_residual = three_point_residual(numeric_psi or negative_entropy, p, q, y, variant)
    elif numeric_psi is not None:
        numeric_residual = three_point_residual(numeric_psi, p, q, y, variant)
    groups = [p, q, y] if on_simplex else []
    return check_identity(
        f"three-point identity, variant={variant} (n={n})",
        residual,
        list(p) + list(q) + list(y),
        n_points=n_points,
        seed=seed,
        simplex_groups=groups,
        numeric_residual=numeric_residual,
    )


def three_point_numeric(
    psi: Callable[[np.ndarray], np.ndarray | float],
    grad_psi: Callable[[np.ndarray], np.ndarray],
    p: ArrayLike,
    q: ArrayLike,
    y: ArrayLike,
) -> float:
    """Numeric residual of Eq. (9): ``D(p,y) - D(q,y) - <grad psi(q) - grad psi(y), p-q> - D(p,q)``.

    Uses ``grad_p D(p, y)|_{p=q} = grad psi(q) - grad psi(y)``.
    """
    p, q, y = (np.asarray(a, dtype=float) for a in (p, q, y))
    if not (p.shape == q.shape == y.shape):
        raise ValueError("p, q, y must have the same shape")

    def d(u: np.ndarray, v: np.ndarray) -> float:
        return float(psi(u) - psi(v) - np.sum(grad_psi(v) * (u - v)))

    lin = float(np.sum((grad_psi(q) - grad_psi(y)) * (p - q)))
    return d(p, y) - (d(q, y) + lin + d(p, q))
