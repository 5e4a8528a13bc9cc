r"""Proposition 1 on the *actual* chunk readouts of a model split by the engine.

The synthetic chains of :mod:`theory.proposition1` are built to satisfy the
assumptions. Here the chain is the real one: an eval batch goes through the
chunks of a (trained or freshly built) ZeroLock model and, at every answer
position ``i in Omega``, we read

* ``p_0``: the frozen head applied to the embedding output ``h_0 = E(x)``
  (``Norm(h_0) W_lm^T``, exactly what chunk 1 would recompute as its
  "previous chunk" if there were a chunk before it);
* ``p_k``, ``k = 1..K``: chunk ``k``'s own readout ``softmax(Norm(h_k) W_lm^T)``.

(The engine indexes chunks from 0, so ``p_k`` here is engine chunk ``k - 1``.)

Two geometries, because the paper uses two different task losses:

``geometry="bregman"`` (the proofs' form)
    ``L(p) = D_psi(p, p_y) = KL(p || p_y)`` with a label-smoothed ``p_y``.
    Then ``beta = 1`` exactly, the Lemma 1 step is the geometric target
    ``p_y^alpha p_{k-1}^(1-alpha) / Z``, ``delta_k = KL(p_k || p_k*)``, and the
    bound's slack has a closed form that does not depend on how well the
    chunks were trained (:func:`theory.proposition1.bregman_step_slack`):
    ``sum_k KL(p_{k-1} || p_y) - D^Renyi_{1-alpha}(p_{k-1} || p_y)``. Tight for
    small ``alpha``, loose by ``sum_k KL(p_{k-1} || p_y)`` at ``alpha = 1``.

``geometry="ce"`` (what the engine trains: the task term is cross-entropy)
    ``L(p) = CE(p_y, p)``, ``grad L = -p_y / p``. On real readouts the label
    often has tiny probability under ``p_{k-1}`` (``p_0`` is close to the
    embedding's unigram guess), so ``grad L`` has entries of size ``1/p`` and
    the Eq. (7) step from ``p_{k-1}`` lands (to double precision) on the label
    vertex; ``delta_k`` is then of order ``alpha / p_{k-1}(label)`` and the
    empirical ``beta`` is in the hundreds. The bound holds -- it always does
    with a ``beta`` estimated on the trajectory -- but it is vacuous.

Verdicts (:attr:`ReadoutBound.verdict`), with ``slack = rhs - lhs`` and the
scale ``L(p_0)``:

* ``violated``: ``slack < 0`` (only possible with a ``beta`` passed in that is
  below the trajectory's relative-smoothness constant);
* ``tight``: ``slack <= tight * L(p_0)`` (default ``tight = 0.1``);
* ``loose``: not tight, but ``rhs < L(p_0)`` -- it still certifies that the
  last chunk improved on ``p_0``;
* ``vacuous``: ``rhs >= L(p_0)``: true, but certifies nothing.

Torch and the engine are imported lazily, so ``import theory`` stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional, Sequence

import numpy as np

from .lemma2 import arithmetic_target, forward_objective, reverse_objective, reverse_target_numeric
from .proposition1 import (
    Prop1Result,
    bregman_step_slack,
    estimate_beta,
    global_loss,
    proposition1_bound,
)
from .simplex import FloatArray, check_alpha, label_smooth

if TYPE_CHECKING:  # pragma: no cover
    import torch

Geometry = Literal["bregman", "ce"]
GEOMETRIES: tuple[str, ...] = ("bregman", "ce")


# ---------------------------------------------------------------------------
# Reading the chunks
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ChunkReadouts:
    """Per-token readouts of a chain of chunks at the answer positions of one batch.

    Attributes:
        ps: ``[K+1, T, V]`` float64 distributions; ``ps[0]`` is the frozen head on the
            embedding output, ``ps[k]`` chunk ``k``'s readout (engine chunk ``k - 1``).
        targets: ``[T]`` label token ids (one per answer position).
        layer_ranges: ``[(first, end)]`` decoder layers of each chunk.
    """

    ps: FloatArray
    targets: np.ndarray
    layer_ranges: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        ps = np.asarray(self.ps)
        if ps.ndim != 3 or ps.shape[0] < 2:
            raise ValueError(f"ps must have shape [K+1 >= 2, T, V], got {ps.shape}")
        if np.shape(self.targets) != (ps.shape[1],):
            raise ValueError(f"targets must have shape [{ps.shape[1]}], got {np.shape(self.targets)}")
        if np.any(self.targets < 0) or np.any(self.targets >= ps.shape[2]):
            raise ValueError("targets must be token ids in [0, V)")

    @property
    def chunks(self) -> int:
        return self.ps.shape[0] - 1

    @property
    def tokens(self) -> int:
        return self.ps.shape[1]

    @property
    def vocab(self) -> int:
        return self.ps.shape[2]

    def labels(self, smoothing: float = 0.0) -> FloatArray:
        """``[T, V]`` one-hot labels, label-smoothed by ``smoothing`` (``(1-eps) e_y + eps/V``)."""
        y = np.zeros((self.tokens, self.vocab))
        y[np.arange(self.tokens), self.targets] = 1.0
        return label_smooth(y, smoothing) if smoothing > 0 else y

    def cross_entropy(self) -> FloatArray:
        """``[K+1]`` mean cross-entropy (NLL) of each readout at the answer tokens."""
        picked = self.ps[:, np.arange(self.tokens), self.targets]
        return -np.log(picked).mean(axis=-1)

    def label_mass(self) -> FloatArray:
        """``[K+1]`` mean probability each readout gives the label token."""
        return self.ps[:, np.arange(self.tokens), self.targets].mean(axis=-1)


def eval_batch(split: Any, examples: int = 64, start: int = 0) -> dict[str, "torch.Tensor"]:
    """Rows ``start .. start+examples`` of an engine ``EncodedSplit`` as a micro-batch dict."""
    n = split.input_ids.shape[0]
    if examples < 1 or start < 0 or start >= n:
        raise ValueError(f"need examples >= 1 and 0 <= start < {n}")
    sl = slice(start, min(n, start + examples))
    return {"input_ids": split.input_ids[sl], "attention_mask": split.attention_mask[sl],
            "labels": split.labels[sl], "label_index": split.label_index[sl]}


def chunk_readouts(chunks: Sequence[Any], batch: dict[str, "torch.Tensor"]) -> ChunkReadouts:
    """Run ``batch`` through ``chunks`` and read every chunk out at the answer positions.

    ``p_0`` is the frozen head (no readout adapter) on the embedding output, computed
    by ``chunks[0].upstream_readout(E(x), Omega)`` -- the same code a stage uses for
    ``p_{k-1}``. Softmax is taken in float64 so no probability underflows to 0.
    """
    import torch

    from zerolock_core.train.stage_worker import answer_positions

    if not chunks or getattr(chunks[0], "embed", None) is None:
        raise ValueError("chunks must start with the first chunk (the one holding the embedding)")
    omega, targets = answer_positions(batch)
    if int(omega.sum()) == 0:
        raise ValueError("the batch has no answer positions (labels are all -100)")
    logits = []
    with torch.no_grad():
        first = chunks[0]
        h0 = first.embed(batch["input_ids"])
        logits.append(first.upstream_readout(h0, omega))
        x = batch["input_ids"]
        for chunk in chunks:
            x = chunk(x, batch["attention_mask"])
            logits.append(chunk.readout(x, omega, batch["attention_mask"]))
    ps = torch.stack([torch.log_softmax(z.double(), dim=-1).exp() for z in logits]).numpy()
    ps = ps / ps.sum(axis=-1, keepdims=True)
    return ChunkReadouts(ps=ps, targets=targets.numpy().astype(np.int64),
                         layer_ranges=tuple(tuple(c.layer_range) for c in chunks))


def run_config(run_dir: str | Path) -> Any:
    """The ``RunConfig`` a run was made with (its run directory's config, or its record's)."""
    from zerolock_core.config.field_words import ConfigError
    from zerolock_core.rundir.run_dir import RunDir

    try:
        return RunDir(run_dir).saved_config()
    except ConfigError as err:
        raise FileNotFoundError(str(err)) from None


def load_run_weights(chunks: Sequence[Any], run_dir: str | Path) -> None:
    """Load a run's ``final/chunk{k}.safetensors`` into ``chunks`` (every trainable tensor must be
    there, every saved one must belong; see ``zerolock_core.rundir.artifacts.load_trained_weights``)."""
    from zerolock_core.rundir.artifacts import load_trained_weights

    load_trained_weights(chunks, run_dir)


def readouts_of_run(
    run_dir: str | Path | None = None,
    *,
    cfg: Any = None,
    setup: Any = None,
    examples: int = 64,
    start: int = 0,
) -> ChunkReadouts:
    """Readouts of a trained run (``run_dir``) or of freshly built chunks (``cfg``/``setup``).

    Args:
        run_dir: a run's output directory; its config is read from it unless ``cfg`` or
            ``setup`` is given, and its final weights are loaded into the chunks.
        cfg: a ``RunConfig`` to build a run setup from (ignored if ``setup`` is given).
        setup: an existing ``RunSetup`` (its chunks are modified if ``run_dir`` is given).
        examples, start: which eval examples to read (one answer token per example on
            the embedded datasets).
    """
    if setup is None:
        from zerolock_core.train.run_setup import build_run_setup

        if cfg is None:
            if run_dir is None:
                raise ValueError("give run_dir, cfg or setup")
            cfg = run_config(run_dir)
        setup = build_run_setup(cfg)
    if run_dir is not None:
        load_run_weights(setup.chunks, run_dir)
    return chunk_readouts(setup.chunks, eval_batch(setup.eval, examples, start))


# ---------------------------------------------------------------------------
# Eq. (11) on the readouts
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ReadoutBound:
    """Eq. (11) evaluated on real readouts, with a verdict.

    Attributes:
        geometry: ``"bregman"`` or ``"ce"`` (see the module docstring).
        alpha, smoothing: the step size and the label smoothing used.
        result: the full :class:`~theory.proposition1.Prop1Result` (lhs, rhs, beta,
            distances ``D(p_k, p_{k-1})``, deltas ``D(p_k, p_k*)``, slacks).
        chunk_losses: ``[K+1]`` token-mean ``L(p_k)``.
        relative_slack: ``slack / L(p_0)``.
        verdict: ``tight`` / ``loose`` / ``vacuous`` / ``violated``.
        closed_form_slack: ``[K]`` per-step closed-form slack (``bregman`` with ``beta = 1``
            only; their sum equals ``result.slack``), else ``None``.
    """

    geometry: str
    alpha: float
    smoothing: float
    result: Prop1Result
    chunk_losses: FloatArray
    relative_slack: float
    verdict: str
    closed_form_slack: Optional[FloatArray] = field(default=None)

    @property
    def lhs(self) -> float:
        return self.result.lhs

    @property
    def rhs(self) -> float:
        return self.result.rhs

    @property
    def beta(self) -> float:
        return self.result.beta

    @property
    def holds(self) -> bool:
        return self.result.holds

    def summary(self) -> dict[str, Any]:
        """Plain numbers (JSON-friendly) for tables and reports."""
        r = self.result
        return {
            "geometry": self.geometry, "alpha": self.alpha, "smoothing": self.smoothing,
            "beta": r.beta, "alpha_lt_1_over_beta": r.step_condition,
            "L(p_0)": r.loss_initial, "L(p_K)": r.lhs, "rhs": r.rhs, "slack": r.slack,
            "relative_slack": self.relative_slack, "verdict": self.verdict, "holds": r.holds,
            "sum_D(p_k,p_k-1)": float(np.sum(r.distances)), "sum_delta": float(np.sum(r.deltas)),
            "deltas": [float(d) for d in r.deltas], "distances": [float(d) for d in r.distances],
            "chunk_losses": [float(x) for x in self.chunk_losses],
        }


def classify(slack: float, rhs: float, loss_initial: float, *, tight: float = 0.1,
             tol: float = 1e-9) -> str:
    """``violated`` / ``tight`` / ``loose`` / ``vacuous`` (see the module docstring)."""
    if not tight > 0:
        raise ValueError("tight must be positive")
    scale = max(abs(loss_initial), 1e-12)
    if slack < -tol * (1.0 + abs(rhs)):
        return "violated"
    if slack <= tight * scale:
        return "tight"
    if rhs < loss_initial:
        return "loose"
    return "vacuous"


def proposition1_on_readouts(
    readouts: ChunkReadouts,
    alpha: float,
    *,
    geometry: Geometry = "bregman",
    smoothing: float = 0.1,
    beta: Optional[float] = None,
    tight: float = 0.1,
) -> ReadoutBound:
    """Evaluate both sides of Eq. (11) on ``readouts``.

    Args:
        readouts: from :func:`chunk_readouts` / :func:`readouts_of_run`.
        alpha: step size / blend weight in ``(0, 1]``.
        geometry: ``"bregman"`` (``L = KL(p || p_y)``, needs ``smoothing > 0``) or
            ``"ce"`` (``L = CE(p_y, p)``, any smoothing in ``[0, 1)``).
        smoothing: label smoothing of ``p_y``.
        beta: relative-smoothness constant; ``None`` estimates it over all ordered
            pairs of the ``K+1`` readouts, token by token (``"bregman"``: exactly 1).
        tight: relative-slack threshold of the ``tight`` verdict.

    Raises:
        ValueError: unknown geometry, ``smoothing`` out of range (or 0 for
            ``"bregman"``), bad ``alpha`` / ``beta``.
    """
    a = check_alpha(alpha)
    if geometry not in GEOMETRIES:
        raise ValueError(f"unknown geometry {geometry!r}; expected one of {', '.join(GEOMETRIES)}")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    if geometry == "bregman" and smoothing <= 0:
        raise ValueError("geometry 'bregman' needs smoothing > 0: KL(p || p_y) is +inf for a one-hot p_y")
    y = readouts.labels(smoothing)
    b = estimate_beta(readouts.ps, y, kind=geometry) if beta is None else float(beta)
    res = proposition1_bound(readouts.ps, y, a, b, kind=geometry)
    losses = global_loss(readouts.ps, y, geometry).mean(axis=-1)
    closed = None
    if geometry == "bregman" and b == 1.0:
        closed = bregman_step_slack(readouts.ps[:-1], y, a).mean(axis=-1)
    rel = res.slack / max(abs(res.loss_initial), 1e-12)
    return ReadoutBound(geometry=geometry, alpha=a, smoothing=float(smoothing), result=res,
                        chunk_losses=losses, relative_slack=float(rel),
                        verdict=classify(res.slack, res.rhs, res.loss_initial, tight=tight),
                        closed_form_slack=closed)


def alpha_sweep(readouts: ChunkReadouts, alphas: Sequence[float], **kwargs: Any) -> list[ReadoutBound]:
    """:func:`proposition1_on_readouts` for each ``alpha`` (same geometry, smoothing, beta)."""
    return [proposition1_on_readouts(readouts, a, **kwargs) for a in alphas]


def format_bounds(bounds: Sequence[ReadoutBound]) -> str:
    """A fixed-width table of :class:`ReadoutBound` rows."""
    head = (f"{'geometry':<8} {'alpha':>7} {'beta':>9} {'L(p_0)':>8} {'L(p_K)':>8} {'rhs':>11} "
            f"{'slack':>10} {'sum D':>7} {'sum delta':>10}  verdict")
    rows = [head]
    for bd in bounds:
        r = bd.result
        rows.append(f"{bd.geometry:<8} {bd.alpha:>7.3g} {r.beta:>9.4g} {r.loss_initial:>8.3f} {r.lhs:>8.3f} "
                    f"{r.rhs:>11.4g} {r.slack:>10.4g} {np.sum(r.distances):>7.3f} {np.sum(r.deltas):>10.4g}  "
                    f"{bd.verdict}")
    return "\n".join(rows)


# ---------------------------------------------------------------------------
# How far each chunk is from the optimum of the objective the engine trains
# ---------------------------------------------------------------------------

def engine_objective_gaps(
    readouts: ChunkReadouts,
    alpha: float,
    direction: Literal["reverse", "forward"] = "reverse",
    *,
    max_tokens: Optional[int] = None,
) -> FloatArray:
    """``[K]`` token-mean suboptimality of each chunk's readout for the engine's local loss.

    Engine chunk 0 (``p_1``) trains on cross-entropy alone (its optimum is the label,
    gap = its CE); chunk ``k >= 1`` on ``alpha CE(y, p) + (1-alpha) KL(.)`` with
    ``KL(p || p_{k-1})`` (``reverse``, optimum found numerically) or
    ``KL(p_{k-1} || p)`` (``forward``, optimum the arithmetic mixture). The gap is
    ``objective(p_k) - objective(optimum) >= 0`` -- a finite measure of how far a
    chunk is from *its own* local optimum (``delta_k`` of Eq. (11) measures the
    distance to the Lemma 1 step instead, which is a different point).
    """
    a = check_alpha(alpha)
    if direction not in ("reverse", "forward"):
        raise ValueError(f"direction must be 'reverse' or 'forward', got {direction!r}")
    y = readouts.labels(0.0)
    T = readouts.tokens if max_tokens is None else min(int(max_tokens), readouts.tokens)
    if T < 1:
        raise ValueError("max_tokens must be >= 1")
    gaps = np.zeros(readouts.chunks)
    ce = -np.log(readouts.ps[1, np.arange(T), readouts.targets[:T]])
    gaps[0] = float(ce.mean())
    for k in range(2, readouts.chunks + 1):
        vals = []
        for t in range(T):
            p, q, yt = readouts.ps[k, t], readouts.ps[k - 1, t], y[t]
            if direction == "forward":
                star = arithmetic_target(yt, q, a)
                vals.append(forward_objective(p, yt, q, a) - forward_objective(star, yt, q, a))
            else:
                star = reverse_target_numeric(yt, q, a)
                vals.append(reverse_objective(p, yt, q, a) - reverse_objective(star, yt, q, a))
        gaps[k - 1] = float(np.mean(vals))
    return gaps
