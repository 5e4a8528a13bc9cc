"""The probability simplex: validation, construction and a few numeric helpers.

Every object in the ZeroLock theory lives on the probability simplex

    P = { p in R^V : p_i >= 0, sum_i p_i = 1 },

the set of categorical distributions over a vocabulary of size V. A chunk's
readout ``p_k = softmax(z_k)`` is always in the *interior* of P (all entries
strictly positive), while a one-hot label ``p_y`` sits on a *vertex* of P.
That distinction matters a lot for Bregman geometry: the negative-entropy
potential has an infinite gradient (``log 0``) on the boundary, so several
results only make sense for distributions with full support.

The helpers here are deliberately strict: anything that is not a distribution
raises ``ValueError`` rather than being silently renormalised, because a
silently renormalised input would make a failed identity look like a passing
one. All array helpers work along the *last* axis, so a batch of per-token
distributions of shape ``[..., V]`` is accepted wherever a single vector is.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

#: Absolute tolerance on ``|sum(p) - 1|`` accepted by :func:`as_simplex`.
SIMPLEX_ATOL: float = 1e-8


def as_simplex(
    p: ArrayLike,
    name: str = "p",
    *,
    atol: float = SIMPLEX_ATOL,
    strictly_positive: bool = False,
) -> FloatArray:
    """Return ``p`` as a float array after checking it lies on the simplex.

    Args:
        p: array of shape ``[..., V]`` with ``V >= 2``; each slice along the
            last axis must be a probability vector.
        name: used in error messages.
        atol: tolerance on the sum of each vector.
        strictly_positive: additionally require every entry to be ``> 0``
            (interior of the simplex), needed whenever ``log p`` appears.

    Raises:
        ValueError: if ``p`` is a scalar, has fewer than two categories,
            contains non-finite or negative entries, does not sum to one, or
            (with ``strictly_positive``) has a zero entry.
    """
    arr = np.asarray(p, dtype=float)
    if arr.ndim == 0:
        raise ValueError(f"{name} must be a vector (got a scalar)")
    if arr.shape[-1] < 2:
        raise ValueError(f"{name} must have at least 2 categories, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite entries")
    if np.any(arr < 0):
        raise ValueError(f"{name} has negative entries, so it is not on the simplex")
    sums = arr.sum(axis=-1)
    if np.any(np.abs(sums - 1.0) > atol):
        worst = float(np.max(np.abs(sums - 1.0)))
        raise ValueError(f"{name} does not sum to 1 (max |sum-1| = {worst:.3g}), so it is not on the simplex")
    if strictly_positive and np.any(arr <= 0):
        raise ValueError(
            f"{name} must have full support (all entries > 0); "
            "use label smoothing for one-hot targets"
        )
    return arr


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """Validate the blend weight ``alpha`` of Eq. (3), which must lie in ``(0, 1]``.

    ``alpha = 1`` means "task term only"; ``alpha -> 0`` means "consistency
    only" and is excluded because Lemma 1's step size ``alpha`` would vanish
    (the proximal term ``(1/alpha) D`` would blow up).

    Raises:
        ValueError: if ``alpha`` is not a finite real number in ``(0, 1]``.
    """
    if isinstance(alpha, bool):
        raise ValueError(f"{name} must be a real number in (0, 1], got a bool")
    try:
        a = float(alpha)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real number in (0, 1], got {alpha!r}") from exc
    if not math.isfinite(a) or not (0.0 < a <= 1.0):
        raise ValueError(f"{name} must lie in (0, 1], got {alpha!r}")
    return a


def check_finite(x: ArrayLike, name: str, shape: Optional[tuple[int, ...]] = None) -> FloatArray:
    """Return ``x`` as a finite float array, optionally checking its shape."""
    arr = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite entries")
    if shape is not None and arr.shape != shape:
        raise ValueError(f"{name} has shape {arr.shape}, expected {shape}")
    return arr


def softmax(z: ArrayLike, axis: int = -1) -> FloatArray:
    """Numerically stable softmax ``exp(z) / sum(exp(z))`` along ``axis``."""
    z = np.asarray(z, dtype=float)
    z = z - np.max(z, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def one_hot(index: int, vocab: int) -> FloatArray:
    """The vertex ``e_index`` of the simplex in ``R^vocab`` (a hard label)."""
    if vocab < 2:
        raise ValueError("vocab must be >= 2")
    if not 0 <= index < vocab:
        raise ValueError(f"index {index} out of range for vocab {vocab}")
    out = np.zeros(vocab)
    out[index] = 1.0
    return out


def label_smooth(p_y: ArrayLike, eps: float) -> FloatArray:
    """Label smoothing ``(1 - eps) p_y + eps / V``: moves a vertex into the interior.

    With ``eps > 0`` the result has full support, which is what the
    negative-entropy geometry (``KL(p || p_y)``, the geometric target of
    Lemma 2) needs.
    """
    y = as_simplex(p_y, "p_y")
    if not (0.0 <= eps < 1.0):
        raise ValueError(f"eps must be in [0, 1), got {eps}")
    return (1.0 - eps) * y + eps / y.shape[-1]


def random_simplex(
    rng: np.random.Generator,
    vocab: int,
    size: Optional[int | tuple[int, ...]] = None,
    concentration: float = 1.0,
    floor: float = 0.0,
) -> FloatArray:
    """Sample from a symmetric Dirichlet, optionally mixed with the uniform.

    Args:
        rng: numpy generator (pass a seeded one for reproducibility).
        vocab: number of categories ``V``.
        size: leading batch shape, ``None`` for a single vector.
        concentration: Dirichlet parameter; small values give peaked vectors.
        floor: mix in ``floor`` of the uniform distribution so that every entry
            is at least ``floor / V`` (keeps points away from the boundary).
    """
    if vocab < 2:
        raise ValueError("vocab must be >= 2")
    if not (0.0 <= floor < 1.0):
        raise ValueError("floor must be in [0, 1)")
    shape: tuple[int, ...]
    if size is None:
        shape = ()
    elif isinstance(size, int):
        shape = (size,)
    else:
        shape = tuple(size)
    p = rng.dirichlet(np.full(vocab, concentration), size=shape if shape else None)
    p = np.asarray(p, dtype=float)
    if floor > 0:
        p = (1.0 - floor) * p + floor / vocab
    # Renormalise exactly (Dirichlet samples can be off by one ulp).
    return p / p.sum(axis=-1, keepdims=True)
