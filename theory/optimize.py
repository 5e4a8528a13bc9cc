"""Generic numerical minimisation over the probability simplex (SciPy).

The closed forms elsewhere in this package are *claims*; this module supplies
an independent, assumption-free way to find a minimiser so the claims can be
tested. Two parameterisations are offered:

* ``"logits"``: write ``p = softmax(z)`` and run unconstrained L-BFGS on ``z``.
  Every iterate is automatically a strictly positive distribution, which is
  the right domain for objectives containing ``log p``. By the chain rule the
  gradient in ``z`` is ``J^T g`` with ``J = diag(p) - p p^T``, i.e.
  ``p * (g - <p, g>)``.
* ``"slsqp"``: optimise ``p`` directly with bounds ``p_i >= tiny`` and the
  equality constraint ``sum p = 1`` (sequential quadratic programming). This
  is closer to the textbook constrained problem but less accurate.
"""

from __future__ import annotations

from typing import Callable, Literal

import numpy as np
from scipy.optimize import minimize

from .simplex import FloatArray, as_simplex, softmax

Objective = Callable[[FloatArray], float]
Gradient = Callable[[FloatArray], FloatArray]
Method = Literal["logits", "slsqp"]


def minimize_on_simplex(
    fun: Objective,
    grad: Gradient,
    p0: FloatArray,
    method: Method = "logits",
    *,
    max_iter: int = 5000,
) -> FloatArray:
    """Minimise ``fun(p)`` over the simplex starting from ``p0``.

    Args:
        fun: objective, defined for strictly positive distributions.
        grad: its (Euclidean) gradient with respect to ``p``; any component
            along the all-ones vector is irrelevant on the simplex.
        p0: strictly positive starting distribution.
        method: ``"logits"`` (softmax + L-BFGS) or ``"slsqp"``.

    Returns:
        The minimiser found (a 1-D distribution).

    Raises:
        ValueError: for an unknown method or invalid ``p0``.
    """
    p0 = as_simplex(p0, "p0", strictly_positive=True)
    if p0.ndim != 1:
        raise ValueError("minimize_on_simplex works on a single distribution (1-D p0)")
    if method == "logits":
        def f(z: FloatArray) -> tuple[float, FloatArray]:
            p = softmax(z)
            g = grad(p)
            return float(fun(p)), p * (g - np.dot(p, g))

        z0 = np.log(p0)
        res = minimize(f, z0, jac=True, method="L-BFGS-B",
                       options={"maxiter": max_iter, "gtol": 1e-13, "ftol": 1e-16, "maxcor": 30})
        # A few Newton-free polishing restarts help when L-BFGS stops on ftol.
        for _ in range(3):
            res = minimize(f, res.x, jac=True, method="L-BFGS-B",
                           options={"maxiter": max_iter, "gtol": 1e-13, "ftol": 1e-16, "maxcor": 30})
        return softmax(res.x)
    if method == "slsqp":
        tiny = 1e-12
        res = minimize(
            lambda p: float(fun(np.maximum(p, tiny))),
            p0,
            jac=lambda p: grad(np.maximum(p, tiny)),
            method="SLSQP",
            bounds=[(tiny, 1.0)] * p0.size,
            constraints=[{"type": "eq", "fun": lambda p: np.sum(p) - 1.0, "jac": lambda p: np.ones_like(p)}],
            options={"maxiter": max_iter, "ftol": 1e-15},
        )
        p = np.maximum(res.x, tiny)
        return p / p.sum()
    raise ValueError(f"unknown method {method!r}; use 'logits' or 'slsqp'")
