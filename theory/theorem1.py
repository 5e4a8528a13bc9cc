r"""Theorem 1 / Eq. (23): the ``O~(1/sqrt(T))`` rate, and tools to measure a rate.

The theorem treats all chunks' local SGD steps as one SGD step on a moving
global surrogate ``R^t`` (Lemma 3) and runs the standard non-convex SGD
argument with the decaying step size::

    eta_t = eta_0 / sqrt(t + gamma),        t = 0, 1, ..., T-1.

The argument gives ``sum_t eta_t E||grad R^t||^2 <= 2 (R_0 - R_opt + D_T) +
beta_R sigma^2 sum_t eta_t^2 / B``. Dividing by ``sum_t eta_t >= T eta_{T-1}
>= T eta_0 / sqrt(T + gamma)`` bounds the *average* squared gradient norm::

    (1/T) sum_t E||grad R^t||^2
        <= [2 (R_0 - R_opt + D_T) + beta_R sigma^2 (sum_t eta_t^2) / B] / (T eta_0 / sqrt(T + gamma)).

Because ``sum_t eta_t^2 = eta_0^2 sum_t 1/(t + gamma) ~ eta_0^2 log T`` (and
the drift ``D_T`` of Lemma 4 is bounded by a constant times the same sum),
the numerator grows like ``log T`` and the denominator like ``sqrt(T)``:
the rate is ``O(log T / sqrt(T)) = O~(1/sqrt(T))``.

The paper prints the denominator as ``T eta_0 / sqrt(T) + gamma``, which reads
as ``eta_0 sqrt(T) + gamma``; we believe ``T eta_0 / sqrt(T + gamma)`` is
meant (it is what the derivation produces). Both are ``Theta(sqrt(T))``, so
the rate is the same; :func:`rhs_rate` offers both via ``form``.

For experiments, :func:`running_average` turns a sequence of measured squared
gradient norms into the left-hand side, and :func:`fit_rate_exponent`
estimates the exponent ``c`` in ``value ~ T^c`` by a log-log least-squares
fit (expect ``c`` a bit above ``-1/2`` because of the log factor).
"""

from __future__ import annotations

from typing import Literal, Optional

import numpy as np
from numpy.typing import ArrayLike

from .simplex import FloatArray


def lr_schedule(eta0: float, gamma: float, T: int) -> FloatArray:
    """Step sizes ``eta_t = eta0 / sqrt(t + gamma)`` for ``t = 0 .. T-1``.

    Raises:
        ValueError: if ``eta0 <= 0``, ``gamma <= 0`` (``t = 0`` would divide by
            zero) or ``T < 1``.
    """
    if not np.isfinite(eta0) or eta0 <= 0:
        raise ValueError("eta0 must be positive")
    if not np.isfinite(gamma) or gamma <= 0:
        raise ValueError("gamma must be positive")
    if int(T) != T or T < 1:
        raise ValueError("T must be a positive integer")
    t = np.arange(int(T), dtype=float)
    return eta0 / np.sqrt(t + gamma)


def rhs_rate(
    T: int,
    *,
    eta0: float = 1.0,
    gamma: float = 1.0,
    loss_gap: float = 1.0,
    beta_r: float = 1.0,
    sigma: float = 1.0,
    batch_size: int = 1,
    drift: Optional[float] = None,
    drift_coeff: float = 0.0,
    form: Literal["derived", "printed"] = "derived",
) -> float:
    """Right-hand side of Eq. (23) for horizon ``T``.

    Args:
        T: number of iterations.
        eta0, gamma: step-size schedule parameters.
        loss_gap: ``R_0 - R_opt`` (>= 0).
        beta_r: smoothness constant ``beta_R(alpha)`` of the surrogate.
        sigma: gradient-noise standard deviation ``sigma(alpha)``.
        batch_size: mini-batch size ``B``.
        drift: the drift ``D_T(alpha)`` directly, or ``None`` to use Lemma 4's
            form ``drift_coeff * sum_t eta_t^2``.
        form: ``"derived"`` denominator ``T eta0 / sqrt(T + gamma)`` or the
            ``"printed"`` one ``T eta0 / sqrt(T) + gamma``.

    Raises:
        ValueError: on negative constants or an unknown form.
    """
    if loss_gap < 0 or beta_r < 0 or sigma < 0 or drift_coeff < 0 or batch_size < 1:
        raise ValueError("constants must be non-negative and batch_size >= 1")
    etas = lr_schedule(eta0, gamma, T)
    sum_sq = float(np.sum(etas**2))
    d_t = drift_coeff * sum_sq if drift is None else float(drift)
    if d_t < 0:
        raise ValueError("drift must be non-negative")
    numerator = 2.0 * (loss_gap + d_t) + beta_r * sigma**2 * sum_sq / batch_size
    if form == "derived":
        denominator = T * eta0 / np.sqrt(T + gamma)
    elif form == "printed":
        denominator = T * eta0 / np.sqrt(T) + gamma
    else:
        raise ValueError(f"unknown form {form!r}")
    return float(numerator / denominator)


def running_average(xs: ArrayLike) -> FloatArray:
    """Cumulative means ``(1/T) sum_{t<T} x_t`` for ``T = 1 .. len(xs)``.

    Raises:
        ValueError: for an empty, non-1-D or non-finite input.
    """
    x = np.asarray(xs, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("xs must be a non-empty 1-D sequence")
    if not np.all(np.isfinite(x)):
        raise ValueError("xs contains non-finite values")
    return np.cumsum(x) / np.arange(1, x.size + 1)


def fit_rate_exponent(Ts: ArrayLike, values: ArrayLike) -> float:
    """Slope ``c`` of the least-squares line ``log value = c log T + b``.

    A pure power law ``value = C T^c`` returns ``c`` exactly; the Theorem 1
    reference ``log(T)/sqrt(T)`` gives a slope slightly above ``-0.5`` over
    any finite range.

    Raises:
        ValueError: if the inputs differ in length, have fewer than two
            points, non-positive entries, or all ``T`` equal.
    """
    t = np.asarray(Ts, dtype=float)
    v = np.asarray(values, dtype=float)
    if t.ndim != 1 or t.shape != v.shape:
        raise ValueError("Ts and values must be 1-D of equal length")
    if t.size < 2:
        raise ValueError("need at least two points")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(v))) or np.any(t <= 0) or np.any(v <= 0):
        raise ValueError("Ts and values must be finite and positive (log-log fit)")
    if np.ptp(np.log(t)) == 0:
        raise ValueError("Ts must not all be equal")
    slope, _ = np.polyfit(np.log(t), np.log(v), 1)
    return float(slope)
