r"""Proposition 1 / Eq. (11): a chunk-wise performance bound.

Setting
-------
A chain of readouts ``p_0, p_1, ..., p_K`` (one per chunk) at one token
position, the global loss ``L`` and ``psi`` = negative entropy, so
``D(u, v) = KL(u || v)``. Three global losses (``kind``):

* ``"kl"``: ``L(p) = KL(p_y || p)`` (label first) and ``"ce"``: the
  cross-entropy ``CE(p_y, p) = KL(p_y || p) + H(p_y)`` -- what the engine's
  task term is. Both have gradient ``-p_y / p`` and the same Bregman
  divergence, so every quantity below except the value of ``L`` itself is
  identical. One-hot labels are allowed.
* ``"bregman"``: ``L(p) = D_psi(p, p_y) = KL(p || p_y)`` (prediction first) --
  the form the paper's proofs of Lemma 1 and Lemma 2 use. It needs a
  full-support (label-smoothed) ``p_y``. Its own Bregman divergence is
  ``D_L(u, v) = KL(u || v)`` *exactly* (``L`` is ``psi`` plus a linear
  function), so ``beta = 1`` on the whole simplex, ``alpha < 1/beta`` holds
  for every ``alpha < 1``, and the Lemma 1 step ``p_k*`` is the geometric
  target ``p_y^alpha p_{k-1}^(1-alpha) / Z`` of Lemma 2.

Assumption 1 (relative smoothness): for all ``u, v``::

    L(u) <= L(v) + <grad L(v), u - v> + beta * D(u, v),

i.e. ``D_L(u, v) <= beta * D(u, v)`` where ``D_L`` is the Bregman divergence
of ``L`` itself, here ``D_L(u, v) = sum_l y_l (u_l/v_l - 1 - log(u_l/v_l))``.
This ratio is *unbounded* over the whole simplex (let ``v_l -> 0`` on a
labelled coordinate), so a global ``beta`` does not exist for cross-entropy;
:func:`estimate_beta` returns the smallest ``beta`` that works over the
**given points** (all ordered pairs, optionally plus random convex
combinations). It is an empirical estimate: valid for those pairs, a lower
bound on any constant valid over a larger set.

With ``p_k*`` the exact Lemma 1 step from ``p_{k-1}`` and
``delta_k = D(p_k, p_k*)`` the claim is, for ``alpha < 1/beta``::

    L(p_K) <= L(p_0) - (1/alpha - beta) sum_k D(p_k, p_{k-1}) + (1/alpha) sum_k delta_k.   (11)

What the proof really uses (and what we found)
----------------------------------------------
Per step, with ``q = p_{k-1}``, ``g = grad L(q)``::

    slack_k = [beta D(p_k, q) - D_L(p_k, q)]                  (smoothness slack, >= 0 by Assumption 1)
            + [-<g, p_k* - q> - (1/alpha) D(p_k*, q)]         (prox slack, >= 0 since p_k* beats p = q)

*exactly* (this uses Eq. 13, ``alpha <g, p_k - p_k*> = delta_k + D(p_k*, q) -
D(p_k, q)``, which holds with equality for the negative-entropy prox step; see
:func:`eq13_residual`). Summing gives ``rhs - lhs`` of (11). Two consequences:

* **Eq. (11) holds for every alpha in (0, 1]**, also ``alpha >= 1/beta``,
  whenever ``beta`` satisfies Assumption 1 on the consecutive pairs. The
  condition ``alpha < 1/beta`` is *not* used in the proof; it only makes the
  coefficient ``(1/alpha - beta)`` positive, so that (11) certifies a
  *decrease* of the loss. For ``alpha >= 1/beta`` the middle term becomes a
  penalty and exact prox steps (``delta = 0``) can indeed *increase* ``L``
  (mirror descent with too large a step overshoots) -- the bound is then
  satisfied but vacuous as a descent guarantee.
* What does break (11) is an invalid ``beta``: using a ``beta`` below the
  true relative-smoothness constant on the trajectory makes the smoothness
  slack negative, and (11) can fail.
* For ``kind="bregman"`` with ``beta = 1`` the smoothness slack is exactly 0
  and the prox slack has a closed form (:func:`bregman_step_slack`)::

      slack_k = KL(p_{k-1} || p_y) - D^Renyi_{1-alpha}(p_{k-1} || p_y) >= 0,

  independent of ``p_k`` (Renyi divergences grow with their order). So the
  bound is *tight* as ``alpha -> 0`` and loose by ``KL(p_{k-1} || p_y)`` at
  ``alpha = 1``; Eq. (11) is then the identity ``L(p_K) = rhs - sum_k slack_k``.
* With the cross-entropy (``"kl"``/``"ce"``) the gradient ``-p_y / p`` is
  unbounded, so on readouts that give the label little mass the prox step
  jumps (numerically) onto the label vertex and ``delta_k`` is huge: the
  bound holds but says nothing (see :mod:`theory.readouts`). ``delta_k`` and
  ``p_k*`` are computed in log space, so they stay finite.
* The telescoping is within each step (the ``D(p_k*, p_{k-1})`` terms cancel
  between the two bounds of the same ``k``), not "across consecutive k" as
  the paper's sketch says; the result is the same.

Shapes: ``ps`` is ``[K+1, V]`` or ``[K+1, T, V]`` (per-token readouts, e.g.
real chunk readouts of a model); ``p_y`` is ``[V]`` or ``[T, V]``. Every
quantity is averaged over the ``T`` tokens, which preserves (11) because it
is linear in the per-token quantities and ``beta`` is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp, rel_entr, xlogy

from .lemma1 import prox_step_closed_form
from .simplex import FloatArray, as_simplex, check_alpha, label_smooth, random_simplex, softmax

LossKind = Literal["kl", "ce", "bregman"]
LOSS_KINDS: tuple[str, ...] = ("kl", "ce", "bregman")
PairMode = Literal["all", "consecutive"]


def _kl(u: FloatArray, v: FloatArray) -> FloatArray:
    return np.sum(rel_entr(u, v), axis=-1)


def _check_kind(kind: str) -> str:
    if kind not in LOSS_KINDS:
        raise ValueError(f"unknown loss kind {kind!r}; expected one of {', '.join(LOSS_KINDS)}")
    return kind


def global_loss(p: ArrayLike, p_y: ArrayLike, kind: LossKind = "kl") -> FloatArray:
    """``L(p)`` per distribution: ``KL(p_y || p)`` (``"kl"``), ``CE(p_y, p)`` (``"ce"``)
    or ``KL(p || p_y)`` (``"bregman"``, needs a full-support ``p_y``)."""
    _check_kind(kind)
    p = as_simplex(p, "p")
    if kind == "bregman":
        y = as_simplex(p_y, "p_y", strictly_positive=True)
        return np.sum(rel_entr(p, np.broadcast_to(y, p.shape)), axis=-1)
    y = as_simplex(p_y, "p_y")
    with np.errstate(divide="ignore"):
        ce = -np.sum(xlogy(y, p), axis=-1)
    if kind == "ce":
        return ce
    return ce + np.sum(xlogy(y, y), axis=-1)


def global_loss_grad(p: ArrayLike, p_y: ArrayLike, kind: LossKind = "kl") -> FloatArray:
    """``grad L(p)``: ``-p_y / p`` (``"kl"``, ``"ce"``) or ``log(p / p_y) + 1`` (``"bregman"``).

    Needs ``p > 0`` (and ``p_y > 0`` for ``"bregman"``).
    """
    _check_kind(kind)
    p = as_simplex(p, "p", strictly_positive=True)
    if kind == "bregman":
        y = as_simplex(p_y, "p_y", strictly_positive=True)
        return np.log(p) - np.log(np.broadcast_to(y, p.shape)) + 1.0
    y = as_simplex(p_y, "p_y")
    return -np.broadcast_to(y, p.shape) / p


def loss_bregman(u: ArrayLike, v: ArrayLike, p_y: ArrayLike, kind: LossKind = "kl") -> FloatArray:
    """``D_L(u, v) = L(u) - L(v) - <grad L(v), u - v>``.

    ``sum y (u/v - 1 - log(u/v))`` for ``"kl"``/``"ce"``; exactly ``KL(u || v)``
    for ``"bregman"`` (``p_y`` then only has to be a full-support distribution).
    """
    _check_kind(kind)
    u = as_simplex(u, "u", strictly_positive=True)
    v = as_simplex(v, "v", strictly_positive=True)
    if kind == "bregman":
        as_simplex(p_y, "p_y", strictly_positive=True)
        return _kl(u, v)
    y = as_simplex(p_y, "p_y")
    r = u / v
    return np.sum(y * (r - 1.0 - np.log(r)), axis=-1)


def log_prox_step(p_prev: ArrayLike, grad: ArrayLike, alpha: float) -> FloatArray:
    """``log p*`` of the Lemma 1 step ``p* = q exp(-alpha g) / Z``, computed in log space.

    Unlike ``exp`` of it, this stays finite when ``alpha * g`` spans thousands of
    nats (cross-entropy gradients ``-p_y / q`` at readouts with a tiny ``q`` on the label).
    """
    a = check_alpha(alpha)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    g = np.asarray(grad, dtype=float)
    if g.shape != q.shape or not np.all(np.isfinite(g)):
        raise ValueError(f"grad must be finite with shape {q.shape}")
    logits = np.log(q) - a * g
    return logits - logsumexp(logits, axis=-1, keepdims=True)


def renyi_divergence(p: ArrayLike, q: ArrayLike, order: float) -> FloatArray:
    """Renyi divergence ``D_a(p || q) = log(sum p^a q^(1-a)) / (a - 1)`` along the last axis.

    ``order = 1`` is ``KL(p || q)``; ``order = 0`` is ``-log q(supp p)``. Non-decreasing in
    the order. Needs full-support ``q`` for ``order < 1`` to be finite (it always is here).
    """
    a = float(order)
    if not np.isfinite(a) or a < 0:
        raise ValueError(f"order must be a finite number >= 0, got {order!r}")
    p = as_simplex(p, "p")
    q = as_simplex(q, "q")
    if a == 1.0:
        return _kl(p, q)
    with np.errstate(divide="ignore"):
        logp, logq = np.log(p), np.log(q)
        if a == 0.0:
            terms = np.where(p > 0, logq, -np.inf)
        else:
            terms = np.where(p > 0, a * logp + (1.0 - a) * logq, -np.inf)
    return logsumexp(terms, axis=-1) / (a - 1.0)


def bregman_step_slack(p_prev: ArrayLike, p_y: ArrayLike, alpha: float) -> FloatArray:
    """Closed-form slack of one step of Eq. (11) for ``kind="bregman"`` and ``beta = 1``.

    ``KL(p_{k-1} || p_y) - D^Renyi_{1-alpha}(p_{k-1} || p_y)``: ``-`` the minimum of the
    Eq. (7) objective, i.e. ``KL(q || y) + log(sum y^alpha q^(1-alpha)) / alpha``.
    Zero in the limit ``alpha -> 0``, ``KL(q || y)`` at ``alpha = 1``, and independent of
    the chunk's actual output ``p_k``.
    """
    a = check_alpha(alpha)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    y = np.broadcast_to(as_simplex(p_y, "p_y", strictly_positive=True), q.shape)
    return _kl(q, y) - renyi_divergence(q, y, 1.0 - a)


def eq13_residual(p_k: ArrayLike, p_prev: ArrayLike, p_y: ArrayLike, alpha: float,
                  kind: LossKind = "kl") -> FloatArray:
    """``alpha <g, p_k - p*> - [delta + D(p*, q) - D(p_k, q)]`` with ``p*`` the Lemma 1 step.

    Eq. (13) of the paper; zero (to rounding) for any ``p_k`` because the
    negative-entropy prox step satisfies its KKT condition exactly.
    """
    a = check_alpha(alpha)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    p = as_simplex(p_k, "p_k", strictly_positive=True)
    g = global_loss_grad(q, p_y, kind)
    star = prox_step_closed_form(q, g, a)
    lhs = a * np.sum(g * (p - star), axis=-1)
    rhs = _kl(p, star) + _kl(star, q) - _kl(p, q)
    return lhs - rhs


def _as_chain(ps: ArrayLike, p_y: ArrayLike, kind: str = "kl") -> tuple[FloatArray, FloatArray]:
    arr = np.asarray(ps, dtype=float)
    if arr.ndim == 2:
        arr = arr[:, None, :]
    if arr.ndim != 3:
        raise ValueError(f"ps must have shape [K+1, V] or [K+1, T, V], got {np.shape(ps)}")
    if arr.shape[0] < 2:
        raise ValueError("need at least two points p_0, p_1")
    arr = as_simplex(arr, "ps", strictly_positive=True)
    y = as_simplex(p_y, "p_y", strictly_positive=_check_kind(kind) == "bregman")
    if y.ndim == 1:
        y = np.broadcast_to(y, arr.shape[1:])
    if y.shape != arr.shape[1:]:
        raise ValueError(f"p_y has shape {y.shape}, expected {arr.shape[1:]} or [V]")
    return arr, np.asarray(y)


def estimate_beta(
    ps: ArrayLike,
    p_y: ArrayLike,
    *,
    pairs: PairMode = "all",
    n_random: int = 0,
    rng: Optional[np.random.Generator] = None,
    kind: LossKind = "kl",
) -> float:
    """Empirical relative-smoothness constant ``max D_L(u, v) / D(u, v)`` over sampled pairs.

    Args:
        ps: points ``[K+1, V]`` or ``[K+1, T, V]``.
        p_y: labels ``[V]`` or ``[T, V]``.
        pairs: ``"all"`` ordered pairs ``(p_i, p_j)``, ``i != j`` (per token), or
            ``"consecutive"`` pairs ``(p_k, p_{k-1})`` -- the only ones the
            proof of Eq. (11) needs.
        n_random: additionally sample this many random convex combinations of
            the points (per token) and include all pairs among them.
        rng: generator for the random combinations.
        kind: the global loss (``"bregman"`` gives 1 up to rounding: ``D_L = D``).

    Returns:
        The smallest ``beta`` satisfying Assumption 1 on those pairs (0 if all
        pairs coincide). An estimate, not a certificate for unseen points.
    """
    arr, y = _as_chain(ps, p_y, kind)
    pts = arr
    if n_random > 0:
        rng = np.random.default_rng(0) if rng is None else rng
        w = rng.dirichlet(np.ones(arr.shape[0]), size=(n_random, arr.shape[1]))  # [R, T, K+1]
        extra = np.einsum("rtk,ktv->rtv", w, arr)
        pts = np.concatenate([arr, extra], axis=0)
    n = pts.shape[0]
    if pairs == "all":
        idx = [(i, j) for i in range(n) for j in range(n) if i != j]
    elif pairs == "consecutive":
        idx = [(k, k - 1) for k in range(1, arr.shape[0])]
    else:
        raise ValueError(f"unknown pairs mode {pairs!r}")
    u = np.stack([pts[i] for i, _ in idx])
    v = np.stack([pts[j] for _, j in idx])
    d_psi = _kl(u, v)
    d_l = loss_bregman(u, v, np.broadcast_to(y, u.shape), kind)
    mask = d_psi > 1e-13
    if not np.any(mask):
        return 0.0
    return float(np.max(d_l[mask] / d_psi[mask]))


@dataclass(frozen=True)
class Prop1Result:
    """Both sides of Eq. (11) and the pieces they are made of (token-averaged).

    Attributes:
        lhs: ``L(p_K)``.
        rhs: ``L(p_0) - (1/alpha - beta) sum D(p_k, p_{k-1}) + (1/alpha) sum delta_k``.
        slack: ``rhs - lhs``; the bound holds iff ``slack >= 0`` (up to ``tol``).
        holds: ``slack >= -tol``.
        alpha, beta: the constants used.
        step_condition: ``alpha < 1/beta`` (the paper's hypothesis).
        loss_initial: ``L(p_0)``.
        distances: ``D(p_k, p_{k-1})`` for ``k = 1..K``.
        deltas: ``delta_k = D(p_k, p_k*)``.
        smoothness_slack: ``sum_k [beta D(p_k, p_{k-1}) - D_L(p_k, p_{k-1})]``
            (negative iff ``beta`` is invalid on the trajectory).
        prox_slack: ``sum_k [-<g, p_k* - p_{k-1}> - (1/alpha) D(p_k*, p_{k-1})] >= 0``.
        p_star: the Lemma 1 targets ``p_k*``, shape ``[K, T, V]``.
    """

    lhs: float
    rhs: float
    slack: float
    holds: bool
    alpha: float
    beta: float
    step_condition: bool
    loss_initial: float
    distances: FloatArray
    deltas: FloatArray
    smoothness_slack: float
    prox_slack: float
    p_star: FloatArray

    @property
    def descent(self) -> bool:
        """Whether the loss actually decreased along the chain: ``L(p_K) <= L(p_0)``."""
        return self.lhs <= self.loss_initial


def proposition1_bound(
    ps: ArrayLike,
    p_y: ArrayLike,
    alpha: float,
    beta: Optional[float] = None,
    *,
    kind: LossKind = "kl",
    tol: float = 1e-9,
) -> Prop1Result:
    """Evaluate Eq. (11) on a chain of readouts.

    Args:
        ps: ``[K+1, V]`` or ``[K+1, T, V]`` strictly positive distributions.
        p_y: labels ``[V]`` or ``[T, V]`` (one-hot allowed: ``L`` is ``KL(p_y || p)``).
        alpha: blend weight / step size in ``(0, 1]``.
        beta: relative-smoothness constant; ``None`` -> :func:`estimate_beta`
            over all ordered pairs of the given points.
        kind: ``"kl"`` or ``"ce"`` (same slack, different loss values), or
            ``"bregman"`` (``L = KL(p || p_y)``, full-support ``p_y``; ``beta = 1``).
        tol: relative tolerance for :attr:`Prop1Result.holds`.

    Raises:
        ValueError: bad shapes, non-simplex input, ``alpha`` outside ``(0, 1]``
            or negative ``beta``.
    """
    a = check_alpha(alpha)
    arr, y = _as_chain(ps, p_y, kind)
    b = estimate_beta(arr, y, kind=kind) if beta is None else float(beta)
    if not np.isfinite(b) or b < 0:
        raise ValueError(f"beta must be a finite non-negative number, got {beta!r}")
    prev, cur = arr[:-1], arr[1:]                      # [K, T, V]
    yk = np.broadcast_to(y, cur.shape)
    g = global_loss_grad(prev, yk, kind)
    log_star = log_prox_step(prev, g, a)               # log space: finite even for huge |g|
    star = np.exp(log_star)
    dist = _kl(cur, prev).mean(axis=-1)                # [K]
    deltas = np.sum(cur * (np.log(cur) - log_star), axis=-1).mean(axis=-1)
    loss0 = float(np.mean(global_loss(arr[0], y, kind)))
    lhs = float(np.mean(global_loss(arr[-1], y, kind)))
    rhs = loss0 - (1.0 / a - b) * float(dist.sum()) + float(deltas.sum()) / a
    smooth = float(np.sum((b * _kl(cur, prev) - loss_bregman(cur, prev, yk, kind)).mean(axis=-1)))
    prox = float(np.sum((-np.sum(g * (star - prev), axis=-1) - _kl(star, prev) / a).mean(axis=-1)))
    slack = rhs - lhs
    scale = 1.0 + abs(lhs) + abs(rhs)
    return Prop1Result(
        lhs=lhs, rhs=rhs, slack=slack, holds=bool(slack >= -tol * scale),
        alpha=a, beta=b, step_condition=bool(a * b < 1.0), loss_initial=loss0,
        distances=dist, deltas=deltas, smoothness_slack=smooth, prox_slack=prox, p_star=star,
    )


@dataclass(frozen=True)
class Prop1Instance:
    """A synthetic chain for Eq. (11): readouts ``ps`` ``[K+1, T, V]``, labels ``p_y`` ``[T, V]``."""

    ps: FloatArray
    p_y: FloatArray
    alpha: float
    beta: float


def _chain(seed: int, p0: FloatArray, y: FloatArray, K: int, alpha: float, noise: float,
           kind: str = "kl") -> FloatArray:
    rng = np.random.default_rng(seed)
    out = [p0]
    for _ in range(K):
        q = out[-1]
        star = prox_step_closed_form(q, global_loss_grad(q, y, kind), alpha)
        with np.errstate(divide="ignore"):
            logits = np.maximum(np.log(star), -700.0)
        p = softmax(logits + noise * rng.standard_normal(q.shape))
        # Keep the chain strictly inside the simplex (huge steps can underflow to 0).
        p = np.maximum(p, 1e-12)
        out.append(p / p.sum(axis=-1, keepdims=True))
    return np.stack(out)


def random_instance(
    rng: np.random.Generator,
    vocab: int,
    K: int,
    *,
    tokens: int = 1,
    alpha: Optional[float] = None,
    smoothing: float = 0.1,
    noise: float = 0.05,
    concentration: float = 1.0,
    floor: float = 0.05,
    enforce_step_condition: bool = True,
    max_tries: int = 60,
    kind: LossKind = "kl",
) -> Prop1Instance:
    """Build a chain satisfying the assumptions of Proposition 1.

    Labels are random classes, label-smoothed by ``smoothing``; ``p_0`` is
    Dirichlet(``concentration``) mixed with ``floor`` of the uniform; each
    ``p_k`` is the exact Lemma 1 step from ``p_{k-1}`` perturbed in logit
    space by ``noise * N(0, 1)`` (so ``delta_k > 0`` models finite capacity).
    ``beta`` is estimated over all pairs of the resulting points.

    With ``enforce_step_condition`` the step size is halved (same noise
    draws) until ``alpha < 1/beta`` holds for the final chain; otherwise
    ``alpha`` (default 0.5) is used as given. ``kind`` picks the global loss
    whose Lemma 1 steps make the chain (``"bregman"``: geometric targets,
    ``beta = 1``, which needs ``smoothing > 0``). (Halving rather than jumping to
    ``0.5/beta`` matters: with cross-entropy, too large a mirror step
    overshoots, drives some probability towards 0, and the estimated ``beta``
    of that exploded chain is astronomically large.)

    Raises:
        ValueError: bad sizes or parameters.
        RuntimeError: if the step condition cannot be met in ``max_tries``.
    """
    if vocab < 2 or K < 1 or tokens < 1:
        raise ValueError("need vocab >= 2, K >= 1, tokens >= 1")
    if noise < 0:
        raise ValueError("noise must be >= 0")
    a = check_alpha(0.5 if alpha is None else alpha)
    _check_kind(kind)
    if kind == "bregman" and smoothing <= 0:
        raise ValueError("kind='bregman' needs smoothing > 0 (KL(p || p_y) is +inf for a one-hot p_y)")
    labels = rng.integers(vocab, size=tokens)
    y = label_smooth(np.eye(vocab)[labels], smoothing)
    p0 = random_simplex(rng, vocab, size=tokens, concentration=concentration, floor=floor)
    seed = int(rng.integers(2**62))
    for _ in range(max_tries):
        ps = _chain(seed, p0, y, K, a, noise, kind)
        beta = estimate_beta(ps, y, kind=kind)
        if not enforce_step_condition or a * beta < 1.0:
            return Prop1Instance(ps=ps, p_y=y, alpha=a, beta=beta)
        a = a / 2.0
    raise RuntimeError("could not satisfy alpha < 1/beta")
