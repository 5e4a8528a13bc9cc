r"""Eq. (4), the task term: its sign and its argument order.

As printed in the paper::

    L_Task(p_k) = - (1/|Omega|) sum_{i in Omega} D_psi(p_{k,i}, p_y).        (4)

Two things are off, and both matter for the theory.

1. **The sign.** A Bregman divergence is ``>= 0`` and vanishes only at
   ``p = p_y``. With the leading minus, *minimising* Eq. (4) pushes the
   prediction *away* from the label: over the simplex, ``-KL(p || p_y)`` is
   minimised at the vertex ``e_j`` with the *smallest* ``p_y[j]`` (KL is
   convex, so its maximum over the simplex is at a vertex, where
   ``KL(e_j || p_y) = -log p_y[j]``), see :func:`printed_loss_minimiser`. For
   a one-hot label it is ``-inf`` for every ``p != p_y``. The minus sign is
   almost certainly a transcription of the cross-entropy's own sign,
   ``CE(p_y, p) = - sum_l p_y[l] log p[l]``: the minus belongs *inside* the
   cross-entropy, not in front of a divergence. The implementation
   (Algorithm 1, line 5) uses ordinary cross-entropy, i.e. the ``+`` sign,
   and so does everything in this package; Lemma 1 needs
   ``L(p) = +D_psi(p, p_y)`` for ``grad L = grad_p D_psi(p, p_y)``.

2. **The argument order.** With ``psi`` = negative entropy,

   * ``D_psi(p_y, p) = KL(p_y || p) = CE(p_y, p) - H(p_y)``: the target comes
     first. This is cross-entropy up to a constant (exactly CE for a
     one-hot label, whose entropy is 0). This is what training optimises.
   * ``D_psi(p, p_y) = KL(p || p_y)``: the prediction comes first. This is the
     form used in the proof of Lemma 1 (Eq. 9 expands ``p -> D(p, p_y)``) and
     Lemma 2. It is *not* cross-entropy, and it is ``+inf`` for a one-hot
     ``p_y`` unless ``p = p_y``, so it needs a label-smoothed target.

   The sentence "choosing negative entropy recovers KL, and KL to a one-hot
   target is cross-entropy" silently switches from the second bullet to the
   first. Only for a symmetric divergence (the squared norm, giving the Brier
   score rather than CE) are the two orders the same.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import xlogy

from .bregman import kl
from .simplex import FloatArray, as_simplex

Order = Literal["prediction_first", "target_first"]


def cross_entropy(p_y: ArrayLike, p: ArrayLike) -> FloatArray | float:
    """``CE(p_y, p) = - sum_l p_y[l] log p[l]`` along the last axis (``+inf`` if ``p`` misses the label)."""
    y = as_simplex(p_y, "p_y")
    p = as_simplex(p, "p")
    with np.errstate(divide="ignore"):
        out = -np.sum(xlogy(y, p), axis=-1)
    return float(out) if np.ndim(out) == 0 else out


def entropy(p: ArrayLike) -> FloatArray | float:
    """Shannon entropy ``H(p) = - sum p log p`` along the last axis."""
    p = as_simplex(p, "p")
    out = -np.sum(xlogy(p, p), axis=-1)
    return float(out) if np.ndim(out) == 0 else out


def task_loss(p: ArrayLike, p_y: ArrayLike, order: Order = "prediction_first") -> float:
    """Corrected Eq. (4): ``+ mean_i D_negentropy(., .)`` over token positions.

    Args:
        p: predictions, shape ``[V]`` or ``[T, V]`` (tokens in ``Omega``).
        p_y: targets, same shape (or broadcastable).
        order: ``"prediction_first"`` gives ``KL(p || p_y)`` (the form the
            proofs use); ``"target_first"`` gives ``KL(p_y || p)``, which is
            the cross-entropy minus the (constant) target entropy.
    """
    p = as_simplex(p, "p")
    y = np.broadcast_to(as_simplex(p_y, "p_y"), p.shape)
    if order == "prediction_first":
        vals = kl(p, y)
    elif order == "target_first":
        vals = kl(y, p)
    else:
        raise ValueError(f"unknown order {order!r}")
    return float(np.mean(vals))


def printed_task_loss(p: ArrayLike, p_y: ArrayLike) -> float:
    """Eq. (4) exactly as printed (with negative entropy): ``- mean_i KL(p_i || p_y)``.

    Kept only to demonstrate why the sign must be ``+``; do not optimise it.
    """
    return -task_loss(p, p_y, "prediction_first")


def printed_loss_minimiser(p_y: ArrayLike) -> FloatArray:
    """Minimiser over the simplex of the printed Eq. (4) for a full-support ``p_y``.

    ``-KL(p || p_y)`` is concave in ``p``, so its minimum over the simplex is
    at a vertex; at vertex ``e_j`` it equals ``log p_y[j]``, smallest for the
    *least likely* class. Minimising the printed loss therefore trains the
    chunk to predict the least likely token.
    """
    y = as_simplex(p_y, "p_y", strictly_positive=True)
    if y.ndim != 1:
        raise ValueError("p_y must be a single distribution")
    out = np.zeros_like(y)
    out[int(np.argmin(y))] = 1.0
    return out
