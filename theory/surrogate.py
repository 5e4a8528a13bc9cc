r"""Theorem 1 on a real (small) run: the surrogate ``R^t`` and its gradient norm.

Lemma 3 of the paper
--------------------
At iteration ``t`` every chunk ``k`` minimises its local loss ``L_k^t(omega_k)``,
whose target ``p_{k-1}^t`` is a stop-gradient constant. Stack all LoRA
parameters into ``omega = (omega_1, ..., omega_K)`` and define the surrogate::

    R^t(omega) = sum_k L_k^t(omega_k)           (targets frozen at time t).

Because ``L_j^t`` does not depend on ``omega_k`` for ``j != k`` (the only path
from ``omega_k`` to a later chunk's loss goes through the detached boundary),
``grad_omega R^t = (grad L_1^t, ..., grad L_K^t)``: the K independent local
gradients *are* one gradient of one function, and K independent SGD steps are
one SGD step on ``R^t`` (Eq. 20). So ``||grad R^t||^2 = sum_k ||grad L_k^t||^2``.
Without the stop-gradient (backprop through the chunk boundaries) this fails:
the gradient of ``sum_k L_k`` then also carries every later chunk's loss back
into ``omega_k`` (:func:`lemma3_residuals` shows both).

In the Bregman form (``alpha KL(p || p_y) + (1-alpha) KL(p || p_{k-1})``, smoothed
label) the local loss is ``KL(p || p*) - log Z`` (Lemma 2), so its gradient in the
logits ``z`` is ``J^T e`` with ``J = diag(p) - p p^T`` and ``e = log p - log p*``
(:func:`geometric_logit_gradient`) -- the ``(J^t)^T e^t`` of Eq. (20). For the
engine's cross-entropy task term that form does not hold (there is no fixed
``p*`` whose KL it is), but the surrogate and Lemma 3 are unaffected.

Theorem 1 (Eq. 23)
------------------
With ``eta_t = eta_0 / sqrt(t + gamma)`` and plain SGD (the theorem's update
rule; the engine itself uses AdamW), the running average
``(1/T) sum_{t<T} ||grad R^t(omega^t)||^2`` is ``O~(1/sqrt(T))``.
:func:`run_surrogate_sgd` runs exactly that on the engine's chunks and records
the squared gradient norm at every step, on the step's own mini-batch
(the stochastic gradient the update uses, whose mean is
``||grad R^t||^2 + variance``) and optionally on a fixed probe batch. The bound is
an *upper* bound: a running average that falls faster than ``T^-1/2`` is
consistent with it; one that falls slower for large ``T`` would contradict it
only if the constants were known.

Torch and the engine are imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp

from .simplex import FloatArray, as_simplex, check_alpha, softmax
from .theorem1 import fit_rate_exponent, lr_schedule, running_average

if TYPE_CHECKING:  # pragma: no cover
    import torch


# ---------------------------------------------------------------------------
# Lemma 3 in logit space (pure NumPy)
# ---------------------------------------------------------------------------

def geometric_logit_gradient(z: ArrayLike, p_y: ArrayLike, p_prev: ArrayLike, alpha: float) -> FloatArray:
    """``J^T e``: the gradient in the logits ``z`` of ``alpha KL(p||p_y) + (1-alpha) KL(p||p_prev)``.

    ``p = softmax(z)``, ``J = diag(p) - p p^T``, ``e = log p - log p*`` with ``p*`` the
    geometric target of Lemma 2; ``J^T e = p * (e - <p, e>)``. Needs full-support
    ``p_y`` and ``p_prev``. Works along the last axis.
    """
    a = check_alpha(alpha)
    z = np.asarray(z, dtype=float)
    y = as_simplex(p_y, "p_y", strictly_positive=True)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    log_p = z - logsumexp(z, axis=-1, keepdims=True)
    logw = a * np.log(y) + (1.0 - a) * np.log(q)
    log_star = logw - logsumexp(logw, axis=-1, keepdims=True)
    e = log_p - log_star
    p = np.exp(log_p)
    return p * (e - np.sum(p * e, axis=-1, keepdims=True))


def bregman_local_loss_of_logits(z: ArrayLike, p_y: ArrayLike, p_prev: ArrayLike, alpha: float) -> float:
    """``alpha KL(softmax(z) || p_y) + (1-alpha) KL(softmax(z) || p_prev)``, summed over leading axes."""
    a = check_alpha(alpha)
    z = np.asarray(z, dtype=float)
    log_p = z - logsumexp(z, axis=-1, keepdims=True)
    p = np.exp(log_p)
    y = as_simplex(p_y, "p_y", strictly_positive=True)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)
    return float(np.sum(p * (log_p - a * np.log(y) - (1.0 - a) * np.log(q))))


def logit_gradient_residual(z: ArrayLike, p_y: ArrayLike, p_prev: ArrayLike, alpha: float,
                            objective: str = "bregman", h: float = 1e-6) -> float:
    """Max ``|J^T e - finite-difference gradient|`` of a local objective in the logits.

    ``objective="bregman"``: ``alpha KL(p||p_y) + (1-alpha) KL(p||p_prev)`` -> 0 (Lemma 2/3).
    ``objective="reverse"``: ``alpha CE(p_y, p) + (1-alpha) KL(p||p_prev)`` (the engine's) ->
    not 0: its gradient is not ``J^T (log p - log p_geometric)``.
    """
    z = np.asarray(z, dtype=float)
    if z.ndim != 1:
        raise ValueError("z must be a single logit vector")
    a = check_alpha(alpha)
    y = as_simplex(p_y, "p_y", strictly_positive=True)
    q = as_simplex(p_prev, "p_prev", strictly_positive=True)

    def f(zz: FloatArray) -> float:
        if objective == "bregman":
            return bregman_local_loss_of_logits(zz, y, q, a)
        if objective == "reverse":
            p = softmax(zz)
            return float(-a * np.dot(y, np.log(p)) + (1.0 - a) * np.dot(p, np.log(p) - np.log(q)))
        raise ValueError(f"unknown objective {objective!r}")

    fd = np.array([(f(z + h * e) - f(z - h * e)) / (2 * h) for e in np.eye(z.size)])
    return float(np.max(np.abs(geometric_logit_gradient(z, y, q, a) - fd)))


# ---------------------------------------------------------------------------
# The surrogate on the engine's chunks (torch)
# ---------------------------------------------------------------------------

def _trainable(chunk: Any) -> list["torch.Tensor"]:
    return [p for p in chunk.parameters() if p.requires_grad]


def _alphas(chunks: Sequence[Any], alpha: float | Sequence[float]) -> list[float]:
    if isinstance(alpha, (int, float)):
        return [check_alpha(alpha)] * len(chunks)
    al = [check_alpha(a) for a in alpha]
    if len(al) != len(chunks):
        raise ValueError(f"need one alpha or one per chunk ({len(chunks)}), got {len(al)}")
    return al


def _local_losses(chunks: Sequence[Any], mb: dict[str, "torch.Tensor"], alphas: Sequence[float],
                  direction: str, *, detach: bool) -> list["torch.Tensor"]:
    """Each chunk's engine local loss on ``mb`` (``detach=False``: gradients cross boundaries)."""
    from zerolock_core.method.objectives import local_loss
    from zerolock_core.train.stage_worker import answer_positions

    omega, targets = answer_positions(mb)
    x, h_in, losses = mb["input_ids"], None, []
    for chunk, a in zip(chunks, alphas):
        h_out = chunk(x, mb["attention_mask"])
        prev = None if h_in is None else chunk.upstream_readout(h_in, omega)
        losses.append(local_loss(logits=chunk.readout(h_out, omega), targets=targets, prev_logits=prev,
                                 alpha=a, direction=direction).total)
        x = h_out.detach() if detach else h_out
        h_in = h_out.detach()
    return losses


def local_gradients(chunks: Sequence[Any], mb: dict[str, "torch.Tensor"], alpha: float | Sequence[float],
                    direction: str = "reverse") -> tuple[float, list[list["torch.Tensor"]]]:
    """``R^t`` on ``mb`` and each chunk's gradient of its *own* local loss (what a stage computes)."""
    import torch

    losses = _local_losses(chunks, mb, _alphas(chunks, alpha), direction, detach=True)
    grads = [list(torch.autograd.grad(loss, _trainable(c), retain_graph=True)) for c, loss in zip(chunks, losses)]
    return float(sum(float(loss.detach()) for loss in losses)), grads


def surrogate_gradient(chunks: Sequence[Any], mb: dict[str, "torch.Tensor"], alpha: float | Sequence[float],
                       direction: str = "reverse", *, detach: bool = True) -> list[list["torch.Tensor"]]:
    """Gradient of ``sum_k L_k`` w.r.t. all chunks' LoRA parameters in ONE backward.

    ``detach=True``: boundaries stop-gradient (ZeroLock) -- equals :func:`local_gradients`.
    ``detach=False``: backprop through the boundaries -- later chunks' losses leak into
    earlier chunks' gradients, so Lemma 3's equality fails.
    """
    import torch

    losses = _local_losses(chunks, mb, _alphas(chunks, alpha), direction, detach=detach)
    params = [_trainable(c) for c in chunks]
    flat = torch.autograd.grad(sum(losses), [p for ps in params for p in ps])
    out, i = [], 0
    for ps in params:
        out.append(list(flat[i:i + len(ps)]))
        i += len(ps)
    return out


def lemma3_residuals(chunks: Sequence[Any], mb: dict[str, "torch.Tensor"], alpha: float | Sequence[float],
                     direction: str = "reverse") -> dict[str, list[float]]:
    """Per chunk, max ``|grad_k R - grad L_k|`` with and without the stop-gradient.

    Returns ``{"detached": [...], "through_boundaries": [...]}``: the first is 0 for every
    chunk (Lemma 3); the second is 0 only for the last chunk (nothing downstream of it).
    """
    _, local = local_gradients(chunks, mb, alpha, direction)
    out: dict[str, list[float]] = {}
    for name, detach in (("detached", True), ("through_boundaries", False)):
        joint = surrogate_gradient(chunks, mb, alpha, direction, detach=detach)
        out[name] = [max(float((gj - gl).abs().max()) for gj, gl in zip(jk, lk)) for jk, lk in zip(joint, local)]
    return out


@dataclass(frozen=True)
class SurrogateTrace:
    """What :func:`run_surrogate_sgd` measured, one entry per iteration ``t = 0 .. T-1``.

    Attributes:
        eta: step sizes ``eta_0 / sqrt(t + gamma)``.
        grad_sq: ``||grad R^t(omega^t)||^2`` on the step's mini-batch (the gradient used).
        grad_sq_chunks: ``[T, K]`` its per-chunk parts ``||grad L_k^t||^2``.
        surrogate: ``R^t(omega^t) = sum_k L_k^t`` on the step's mini-batch.
        probe_grad_sq: ``||grad R^t(omega^t)||^2`` on a fixed probe batch, or ``None``.
        probe_surrogate: ``R^t`` on the probe batch, or ``None``.
        eta0, gamma, alpha, direction: the settings.
        seconds: wall time of the loop.
    """

    eta: FloatArray
    grad_sq: FloatArray
    grad_sq_chunks: FloatArray
    surrogate: FloatArray
    probe_grad_sq: Optional[FloatArray]
    probe_surrogate: Optional[FloatArray]
    eta0: float
    gamma: float
    alpha: tuple[float, ...]
    direction: str
    seconds: float

    @property
    def T(self) -> int:
        return int(self.grad_sq.size)

    @property
    def horizons(self) -> FloatArray:
        """``T = 1 .. len``."""
        return np.arange(1, self.T + 1, dtype=float)

    def series(self, which: str = "train") -> FloatArray:
        if which == "train":
            return self.grad_sq
        if which == "probe":
            if self.probe_grad_sq is None:
                raise ValueError("this run recorded no probe batch")
            return self.probe_grad_sq
        raise ValueError(f"which must be 'train' or 'probe', got {which!r}")

    def running_average(self, which: str = "train") -> FloatArray:
        """``(1/T) sum_{t<T} ||grad R^t||^2`` for every ``T``."""
        return running_average(self.series(which))

    def exponent(self, which: str = "train", *, start: int = 1) -> float:
        """Log-log slope of the running average over ``T = start .. len`` (Theorem 1: <= about -1/2)."""
        if not 1 <= start < self.T:
            raise ValueError(f"start must be in [1, {self.T - 1}]")
        return fit_rate_exponent(self.horizons[start - 1:], self.running_average(which)[start - 1:])

    def reference(self, which: str = "train", *, anchor: Optional[int] = None) -> FloatArray:
        """``C / sqrt(T)`` with ``C`` chosen so the line meets the running average at ``T = anchor``
        (default: the last ``T``), for plotting beside it."""
        avg = self.running_average(which)
        t_a = self.T if anchor is None else int(anchor)
        if not 1 <= t_a <= self.T:
            raise ValueError(f"anchor must be in [1, {self.T}]")
        return avg[t_a - 1] * np.sqrt(t_a) / np.sqrt(self.horizons)


def _merge_microbatches(mbs: Sequence[dict[str, "torch.Tensor"]]) -> dict[str, "torch.Tensor"]:
    import torch

    return {k: torch.cat([mb[k] for mb in mbs]) for k in mbs[0]}


def run_surrogate_sgd(
    setup: Any,
    *,
    steps: int,
    eta0: float,
    gamma: float,
    alpha: float | Sequence[float] | None = None,
    direction: Optional[str] = None,
    probe: Optional[dict[str, "torch.Tensor"]] = None,
) -> SurrogateTrace:
    """Plain SGD on all chunks' LoRA parameters with ``eta_t = eta0 / sqrt(t + gamma)``.

    At step ``t`` the mini-batch is the engine's ``setup.microbatches(t)`` joined into one
    batch; each chunk takes ``omega_k <- omega_k - eta_t grad L_k^t`` (= one SGD step on
    ``R^t``, Lemma 3). Modifies ``setup.chunks`` in place.

    Args:
        setup: a ``zerolock_core.train.run_setup.RunSetup``.
        steps: ``T``.
        eta0, gamma: the schedule (both > 0).
        alpha: one value or one per chunk; default the setup's config.
        direction: ``"reverse"`` / ``"forward"``; default the setup's config.
        probe: an optional fixed batch on which ``||grad R^t||^2`` is also measured
            (before the step, at the same ``omega^t``).
    """
    import time

    import torch

    cfg = setup.cfg
    chunks = setup.chunks
    alphas = _alphas(chunks, [cfg.objective.alpha_for(c.index) for c in chunks] if alpha is None else alpha)
    direction = cfg.objective.consistency if direction is None else direction
    etas = lr_schedule(eta0, gamma, steps)
    params = [_trainable(c) for c in chunks]
    K = len(chunks)
    g_sq = np.zeros(steps)
    g_chunks = np.zeros((steps, K))
    r_val = np.zeros(steps)
    p_sq = np.zeros(steps) if probe is not None else None
    p_val = np.zeros(steps) if probe is not None else None
    t0 = time.perf_counter()
    for t in range(steps):
        if probe is not None:
            val, grads = local_gradients(chunks, probe, alphas, direction)
            p_sq[t] = sum(float(g.double().pow(2).sum()) for gs in grads for g in gs)
            p_val[t] = val
        mb = _merge_microbatches(setup.microbatches(t))
        val, grads = local_gradients(chunks, mb, alphas, direction)
        r_val[t] = val
        for k, gs in enumerate(grads):
            g_chunks[t, k] = sum(float(g.double().pow(2).sum()) for g in gs)
        g_sq[t] = g_chunks[t].sum()
        if not np.isfinite(g_sq[t]):
            raise FloatingPointError(f"non-finite gradient at step {t}: eta0={eta0} is too large")
        with torch.no_grad():
            for ps, gs in zip(params, grads):
                for p, g in zip(ps, gs):
                    p.sub_(float(etas[t]) * g)
    return SurrogateTrace(eta=etas, grad_sq=g_sq, grad_sq_chunks=g_chunks, surrogate=r_val,
                          probe_grad_sq=p_sq, probe_surrogate=p_val, eta0=float(eta0), gamma=float(gamma),
                          alpha=tuple(alphas), direction=direction, seconds=time.perf_counter() - t0)
