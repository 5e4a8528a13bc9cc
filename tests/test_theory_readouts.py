"""Tests for Eq. (11) in the Bregman geometry, on real chunk readouts, and for the Theorem 1 surrogate.

Tables of cases, including the ones where an identity must NOT hold.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from theory import lemma1 as L1
from theory import lemma2 as L2
from theory import proposition1 as P1
from theory import readouts as R
from theory import surrogate as S
from theory.bregman import kl
from theory.simplex import label_smooth, one_hot, random_simplex, softmax


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------
# proposition1: the "bregman" loss kind, Renyi divergences, log-space prox
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["kl", "ce", "bregman"])
def test_loss_bregman_matches_definition_for_every_kind(kind):
    r = rng(1)
    y = label_smooth(one_hot(2, 6), 0.1)
    for _ in range(10):
        u, v = random_simplex(r, 6), random_simplex(r, 6)
        direct = (P1.global_loss(u, y, kind) - P1.global_loss(v, y, kind)
                  - np.dot(P1.global_loss_grad(v, y, kind), u - v))
        assert P1.loss_bregman(u, v, y, kind) == pytest.approx(direct, abs=1e-12)
        if kind == "bregman":  # L = psi + linear: its Bregman divergence is KL itself
            assert P1.loss_bregman(u, v, y, kind) == pytest.approx(kl(u, v), abs=1e-12)
        else:                  # ... which it is NOT for the cross-entropy
            assert abs(P1.loss_bregman(u, v, y, kind) - kl(u, v)) > 1e-6


def test_bregman_kind_has_beta_exactly_one():
    for seed in range(4):
        inst = P1.random_instance(rng(seed), 7, 3, tokens=2, kind="bregman", alpha=0.6)
        assert inst.beta == pytest.approx(1.0, abs=1e-9)
        assert inst.alpha == 0.6                              # alpha < 1/beta = 1: no halving needed
        assert P1.estimate_beta(inst.ps, inst.p_y, kind="bregman", n_random=5) == pytest.approx(1.0, abs=1e-9)
        assert P1.estimate_beta(inst.ps, inst.p_y, kind="kl") != pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("alpha", [1e-4, 0.01, 0.1, 0.3, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bregman_slack_has_closed_form(alpha, seed):
    inst = P1.random_instance(rng(seed), 8, 4, tokens=3, kind="bregman", alpha=0.5, noise=0.1)
    res = P1.proposition1_bound(inst.ps, inst.p_y, alpha, beta=1.0, kind="bregman")
    closed = P1.bregman_step_slack(inst.ps[:-1], inst.p_y, alpha).mean(axis=-1)
    assert res.holds
    assert abs(res.smoothness_slack) < 1e-12                   # beta = 1 is exact: no smoothness slack
    scale = 1e-13 * (1.0 + abs(res.rhs) + float(np.sum(res.deltas)) / alpha)   # rhs - lhs cancels
    assert res.slack == pytest.approx(closed.sum(), rel=1e-9, abs=scale)
    assert np.all(closed >= -1e-15)
    # Identity form: L(p_K) = rhs - sum of closed-form slacks, whatever the chunks did.
    assert res.lhs == pytest.approx(res.rhs - closed.sum(), rel=1e-9, abs=scale)


def test_bregman_slack_limits_in_alpha():
    inst = P1.random_instance(rng(5), 6, 3, tokens=2, kind="bregman")
    q = inst.ps[:-1]
    kl_qy = P1.global_loss(q, inst.p_y, "bregman")
    slacks = [P1.bregman_step_slack(q, inst.p_y, a).sum() for a in (1e-6, 1e-3, 0.1, 0.5, 0.9, 1.0)]
    assert slacks[0] < 1e-5                                      # tight as alpha -> 0
    assert all(a < b for a, b in zip(slacks, slacks[1:]))        # grows with alpha
    assert slacks[-1] == pytest.approx(kl_qy.sum(), rel=1e-12)   # loose by KL(q || y) at alpha = 1


@pytest.mark.parametrize(
    "kind, beta, holds",
    [
        ("bregman", 1.0, True),
        ("bregman", 1.5, True),       # a larger beta is still valid, just looser
        ("bregman", 0.5, False),      # underestimated beta: must NOT hold (at small alpha)
        ("bregman", 0.0, False),
    ],
)
def test_bregman_bound_fails_only_with_underestimated_beta(kind, beta, holds):
    inst = P1.random_instance(rng(3), 8, 4, tokens=2, kind="bregman", noise=0.2)
    res = P1.proposition1_bound(inst.ps, inst.p_y, 0.01, beta=beta, kind=kind)
    assert res.holds is holds
    if not holds:
        assert res.smoothness_slack < 0


def test_cross_entropy_slack_is_not_the_bregman_closed_form():
    inst = P1.random_instance(rng(2), 6, 3, tokens=2, kind="bregman", noise=0.05)
    closed = P1.bregman_step_slack(inst.ps[:-1], inst.p_y, 0.5).mean(axis=-1).sum()
    res_kl = P1.proposition1_bound(inst.ps, inst.p_y, 0.5, kind="kl")
    assert res_kl.holds
    assert abs(res_kl.slack - closed) > 1e-3


@pytest.mark.parametrize("order", [0.0, 0.3, 0.5, 0.999, 1.0, 2.0])
def test_renyi_divergence_basics(order):
    r = rng(7)
    p, q = random_simplex(r, 5, floor=0.05), random_simplex(r, 5, floor=0.05)
    d = P1.renyi_divergence(p, q, order)
    assert d >= -1e-15
    assert P1.renyi_divergence(p, p, order) == pytest.approx(0.0, abs=1e-12)
    if order == 1.0:
        assert d == pytest.approx(kl(p, q))
    if order == 0.999:
        assert d == pytest.approx(kl(p, q), rel=1e-2)
    if order == 0.0:
        assert d == pytest.approx(0.0, abs=1e-12)                # full support: -log 1


def test_renyi_is_monotone_in_order_and_skew_symmetric():
    r = rng(8)
    p, q = random_simplex(r, 6), random_simplex(r, 6)
    orders = [0.0, 0.1, 0.4, 0.7, 1.0, 1.5]
    vals = [P1.renyi_divergence(p, q, a) for a in orders]
    assert all(a <= b + 1e-14 for a, b in zip(vals, vals[1:]))
    for a in (0.2, 0.5, 0.8):   # (1-a) D_a(p||q) = a D_{1-a}(q||p)
        assert (1 - a) * P1.renyi_divergence(p, q, a) == pytest.approx(a * P1.renyi_divergence(q, p, 1 - a))
    p0 = np.array([0.5, 0.5, 0.0])
    assert P1.renyi_divergence(p0, np.array([0.25, 0.25, 0.5]), 0.0) == pytest.approx(-math.log(0.5))
    with pytest.raises(ValueError):
        P1.renyi_divergence(p, q, -0.5)


def test_log_prox_step_matches_and_survives_huge_gradients():
    r = rng(9)
    q = random_simplex(r, 6)
    g = r.standard_normal(6)
    assert np.allclose(np.exp(P1.log_prox_step(q, g, 0.4)), L1.prox_step_closed_form(q, g, 0.4), atol=1e-15)
    # A cross-entropy gradient -y/q with q(label) = 1e-9: exp() underflows, log space does not.
    q = np.array([1e-9, 0.5, 0.5 - 1e-9])
    y = one_hot(0, 3)
    g = P1.global_loss_grad(q, y, "ce")
    log_star = P1.log_prox_step(q, g, 0.5)
    assert np.all(np.isfinite(log_star))
    assert L1.prox_step_closed_form(q, g, 0.5)[1] == 0.0           # underflow in probability space
    res = P1.proposition1_bound(np.stack([q, np.array([0.2, 0.4, 0.4])]), y, 0.5, kind="ce")
    assert np.all(np.isfinite(res.deltas)) and res.deltas[0] > 1e6 and res.holds
    with pytest.raises(ValueError):
        P1.log_prox_step(q, np.array([np.inf, 0, 0]), 0.5)


@pytest.mark.parametrize(
    "call",
    [
        lambda inst: P1.global_loss(inst.ps[0], one_hot(0, 6), "bregman"),       # one-hot: KL(p||e) = inf
        lambda inst: P1.proposition1_bound(inst.ps, np.eye(6)[[0, 1]], 0.5, kind="bregman"),
        lambda inst: P1.global_loss_grad(inst.ps[0], inst.p_y, "mse"),
        lambda inst: P1.random_instance(rng(0), 6, 2, kind="bregman", smoothing=0.0),
        lambda inst: P1.bregman_step_slack(inst.ps[0], one_hot(0, 6), 0.5),
        lambda inst: P1.bregman_step_slack(inst.ps[0], inst.p_y, 0.0),
    ],
)
def test_bregman_kind_rejects_bad_input(call):
    inst = P1.random_instance(rng(0), 6, 2, tokens=2, kind="bregman")
    with pytest.raises(ValueError):
        call(inst)


# ---------------------------------------------------------------------------
# readouts: pure-NumPy parts
# ---------------------------------------------------------------------------

def synthetic_readouts(seed: int = 0, V: int = 12, K: int = 3, T: int = 4, noise: float = 0.1) -> R.ChunkReadouts:
    inst = P1.random_instance(rng(seed), V, K, tokens=T, kind="bregman", noise=noise)
    return R.ChunkReadouts(ps=inst.ps, targets=np.argmax(inst.p_y, axis=-1))


@pytest.mark.parametrize(
    "slack, rhs, loss0, verdict",
    [
        (-1.0, 1.0, 2.0, "violated"),
        (0.0, 2.0, 2.0, "tight"),
        (0.1, 1.9, 2.0, "tight"),        # slack <= 0.1 * L(p_0)
        (0.5, 1.5, 2.0, "loose"),        # still certifies L(p_K) < L(p_0)
        (0.5, 2.5, 2.0, "vacuous"),      # rhs >= L(p_0): certifies nothing
        (1e4, 1e4, 8.0, "vacuous"),
    ],
)
def test_classify_table(slack, rhs, loss0, verdict):
    assert R.classify(slack, rhs, loss0) == verdict


def test_chunk_readouts_container():
    ro = synthetic_readouts()
    assert (ro.chunks, ro.tokens, ro.vocab) == (3, 4, 12)
    y = ro.labels()
    assert np.array_equal(y.argmax(-1), ro.targets) and np.all(y.sum(-1) == 1)
    ys = ro.labels(0.1)
    assert np.all(ys > 0) and np.allclose(ys.sum(-1), 1)
    ce = ro.cross_entropy()
    assert ce.shape == (4,)
    assert ce[0] == pytest.approx(np.mean(-np.log(ro.ps[0][np.arange(4), ro.targets])))
    assert np.all(ro.label_mass() > 0)
    with pytest.raises(ValueError):
        R.ChunkReadouts(ps=ro.ps[:1], targets=ro.targets)
    with pytest.raises(ValueError):
        R.ChunkReadouts(ps=ro.ps, targets=ro.targets[:2])
    with pytest.raises(ValueError):
        R.ChunkReadouts(ps=ro.ps, targets=ro.targets + 100)


@pytest.mark.parametrize("alpha", [0.01, 0.2, 0.5, 1.0])
def test_proposition1_on_readouts_bregman_geometry(alpha):
    ro = synthetic_readouts(1)
    bound = R.proposition1_on_readouts(ro, alpha, geometry="bregman", smoothing=0.1)
    assert bound.beta == pytest.approx(1.0, abs=1e-9)
    # beta is estimated: the code takes the closed-form path only for beta == 1.0 exactly
    exact = R.proposition1_on_readouts(ro, alpha, geometry="bregman", smoothing=0.1, beta=1.0)
    assert exact.closed_form_slack is not None
    assert exact.closed_form_slack.sum() == pytest.approx(exact.result.slack, rel=1e-9, abs=1e-12)
    assert bound.holds and bound.verdict != "violated"
    assert bound.chunk_losses.shape == (ro.chunks + 1,)
    assert bound.chunk_losses[0] == pytest.approx(bound.result.loss_initial)
    assert bound.chunk_losses[-1] == pytest.approx(bound.lhs)
    s = bound.summary()
    assert s["geometry"] == "bregman" and len(s["deltas"]) == ro.chunks and s["holds"]


def test_proposition1_on_readouts_tightens_as_alpha_shrinks():
    ro = synthetic_readouts(2)
    sweep = R.alpha_sweep(ro, [1.0, 0.5, 0.1, 0.01, 0.001], geometry="bregman", beta=1.0)
    slacks = [b.result.slack for b in sweep]
    assert all(a > b for a, b in zip(slacks, slacks[1:]))
    assert sweep[-1].verdict == "tight"
    table = R.format_bounds(sweep)
    assert table.count("\n") == len(sweep) and "verdict" in table


def test_proposition1_on_readouts_ce_geometry_and_wrong_beta():
    ro = synthetic_readouts(3)
    ce = R.proposition1_on_readouts(ro, 0.5, geometry="ce", smoothing=0.0)
    assert ce.holds and ce.beta > 1.0
    bad = R.proposition1_on_readouts(ro, 0.01, geometry="bregman", beta=0.2)
    assert not bad.holds and bad.verdict == "violated"


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(geometry="euclid"),
        dict(geometry="bregman", smoothing=0.0),
        dict(smoothing=1.0),
        dict(smoothing=-0.1),
        dict(alpha=0.0),
        dict(tight=0.0),
    ],
)
def test_proposition1_on_readouts_rejects(kwargs):
    ro = synthetic_readouts()
    alpha = kwargs.pop("alpha", 0.5)
    with pytest.raises(ValueError):
        R.proposition1_on_readouts(ro, alpha, **kwargs)


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_engine_objective_gaps_are_zero_at_the_engine_optimum(direction):
    r = rng(4)
    V, T, alpha = 10, 3, 0.5
    targets = np.array([1, 4, 7])
    y = np.eye(V)[targets]
    p0 = random_simplex(r, V, size=T, floor=0.1)
    p1 = random_simplex(r, V, size=T, floor=0.1)
    if direction == "forward":
        p2 = np.stack([L2.arithmetic_target(y[t], p1[t], alpha) for t in range(T)])
    else:
        p2 = np.stack([L2.reverse_target_numeric(y[t], p1[t], alpha) for t in range(T)])
    ro = R.ChunkReadouts(ps=np.stack([p0, p1, p2]), targets=targets)
    gaps = R.engine_objective_gaps(ro, alpha, direction)
    assert gaps.shape == (2,)
    assert gaps[0] == pytest.approx(ro.cross_entropy()[1])      # first chunk: CE only, optimum = label
    assert abs(gaps[1]) < 1e-9                                   # p2 IS the optimum
    # ... and a chunk that is not at its optimum has a positive gap
    ro2 = R.ChunkReadouts(ps=np.stack([p0, p1, p1]), targets=targets)
    assert R.engine_objective_gaps(ro2, alpha, direction)[1] > 1e-3
    with pytest.raises(ValueError):
        R.engine_objective_gaps(ro, alpha, "sideways")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# surrogate: pure-NumPy parts
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "objective, holds",
    [("bregman", True), ("reverse", False)],   # J^T e is the gradient of the Bregman form only
)
@pytest.mark.parametrize("seed", [0, 1])
def test_geometric_logit_gradient(objective, holds, seed):
    r = rng(seed)
    V = 6
    z = r.standard_normal(V)
    y = label_smooth(one_hot(int(r.integers(V)), V), 0.1)
    q = random_simplex(r, V, floor=0.05)
    err = S.logit_gradient_residual(z, y, q, 0.4, objective=objective)
    assert (err < 1e-6) is holds
    if not holds:
        assert err > 1e-3


def test_geometric_logit_gradient_vanishes_at_target_and_batches():
    r = rng(3)
    y = label_smooth(one_hot(0, 5), 0.1)
    q = random_simplex(r, 5)
    star = L2.geometric_target(y, q, 0.3)
    assert np.max(np.abs(S.geometric_logit_gradient(np.log(star), y, q, 0.3))) < 1e-14
    zs = r.standard_normal((4, 5))
    batched = S.geometric_logit_gradient(zs, y, q, 0.3)
    for i in range(4):
        assert np.allclose(batched[i], S.geometric_logit_gradient(zs[i], y, q, 0.3))
    assert S.bregman_local_loss_of_logits(np.log(star), y, q, 0.3) == pytest.approx(
        L1.local_loss(softmax(np.log(star)), y, q, 0.3))
    with pytest.raises(ValueError):
        S.logit_gradient_residual(zs, y, q, 0.3)
    with pytest.raises(ValueError):
        S.logit_gradient_residual(zs[0], y, q, 0.3, objective="mse")


def fake_trace(grad_sq, probe=None) -> S.SurrogateTrace:
    g = np.asarray(grad_sq, dtype=float)
    return S.SurrogateTrace(eta=np.ones_like(g), grad_sq=g, grad_sq_chunks=g[:, None], surrogate=g,
                            probe_grad_sq=None if probe is None else np.asarray(probe, float), probe_surrogate=None,
                            eta0=1.0, gamma=1.0, alpha=(0.5,), direction="reverse", seconds=0.0)


@pytest.mark.parametrize("c", [-0.9, -0.5, -0.25])
def test_trace_exponent_and_reference(c):
    T = np.arange(1, 201, dtype=float)
    # running average of x_t equal to T^c exactly: x_T = T^(c+1) - (T-1)^(c+1)
    x = T ** (c + 1) - (T - 1) ** (c + 1)
    tr = fake_trace(x)
    assert np.allclose(tr.running_average(), T ** c)
    assert tr.exponent() == pytest.approx(c, abs=1e-9)
    ref = tr.reference(anchor=50)
    assert ref[49] == pytest.approx(tr.running_average()[49])
    assert S.fit_rate_exponent(T, ref) == pytest.approx(-0.5)
    with pytest.raises(ValueError):
        tr.series("probe")
    with pytest.raises(ValueError):
        tr.exponent(start=200)
    with pytest.raises(ValueError):
        tr.reference(anchor=0)


# ---------------------------------------------------------------------------
# Engine-backed: real chunks of a small random Llama (from conftest)
# ---------------------------------------------------------------------------

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def small_cfg(tiny_random_model_dir):
    from zerolock_core.config.run_config import DataConfig, ModelConfig, RunConfig, TrainConfig

    return RunConfig(model=ModelConfig(model=tiny_random_model_dir),
                     data=DataConfig(seq_len=32, eval_size=16),
                     train=TrainConfig(runtime="reference", method="zerolock", stages=2, batch=4, microbatches=2,
                                       steps=2, lr=1e-2, threads=1))


@pytest.fixture(scope="module")
def small_setup(small_cfg):
    from zerolock_core.train.run_setup import build_run_setup

    return build_run_setup(small_cfg)


def test_chunk_readouts_on_engine_chunks(small_setup):
    from zerolock_core.train.evaluation import evaluate_chunks

    setup = small_setup
    batch = R.eval_batch(setup.eval, 8)
    ro = R.chunk_readouts(setup.chunks, batch)
    assert ro.ps.shape[0] == len(setup.chunks) + 1
    assert ro.ps.shape[2] == setup.chunks[0].lm_head.out_features
    assert np.allclose(ro.ps.sum(-1), 1.0) and np.all(ro.ps > 0)
    assert ro.layer_ranges == tuple(tuple(c.layer_range) for c in setup.chunks)
    # p_0: the frozen head on the embedding output, by hand
    omega = batch["labels"] != -100
    with torch.no_grad():
        h0 = setup.chunks[0].embed(batch["input_ids"])[omega]
        p0 = torch.softmax(setup.chunks[0].lm_head(setup.chunks[0].norm(h0)).double(), -1).numpy()
    assert np.allclose(ro.ps[0], p0, atol=1e-6)
    # every chunk's CE equals the engine's own evaluation NLL on the same examples
    ev = evaluate_chunks(setup.chunks, setup.eval, setup.label_first_tokens, limit=8)
    for k, metrics in enumerate(ev):
        assert ro.cross_entropy()[k + 1] == pytest.approx(metrics["nll"], rel=1e-5)
    with pytest.raises(ValueError):
        R.chunk_readouts(setup.chunks[1:], batch)
    with pytest.raises(ValueError):
        R.eval_batch(setup.eval, 0)


@pytest.mark.slow
def test_readouts_of_a_trained_run_load_its_weights(small_cfg, tmp_path):
    from zerolock_core.config.run_config import replace
    from zerolock_core.train.reference_trainer import train_reference
    from zerolock_core.train.run_setup import build_run_setup

    cfg = replace(small_cfg, out=str(tmp_path / "run"))
    train_reference(cfg, progress=False)
    fresh = R.readouts_of_run(cfg=small_cfg, examples=6)
    trained = R.readouts_of_run(tmp_path / "run", examples=6)        # config read from the run
    assert fresh.ps.shape == trained.ps.shape
    assert np.array_equal(fresh.ps[0], trained.ps[0])                # p_0 has no trainable part
    assert np.max(np.abs(fresh.ps[1:] - trained.ps[1:])) > 1e-6
    assert isinstance(R.run_config(tmp_path / "run"), type(small_cfg))
    bound = R.proposition1_on_readouts(trained, 0.5)
    assert bound.holds
    # a 3-chunk model cannot take a 2-chunk run's weights
    other = build_run_setup(replace(small_cfg, train={"stages": 3}))
    with pytest.raises((ValueError, FileNotFoundError)):
        R.load_run_weights(other.chunks, tmp_path / "run")
    with pytest.raises(FileNotFoundError):
        R.run_config(tmp_path)


@pytest.mark.parametrize("direction", ["reverse", "forward"])
def test_lemma3_on_engine_chunks(small_setup, direction):
    batch = R.eval_batch(small_setup.eval, 4)
    res = S.lemma3_residuals(small_setup.chunks, batch, 0.5, direction)
    assert res["detached"] == [0.0] * len(small_setup.chunks)          # Lemma 3: exact
    assert res["through_boundaries"][-1] == 0.0                          # nothing downstream of the last
    assert all(r > 0 for r in res["through_boundaries"][:-1])           # without sg: must NOT hold


def test_run_surrogate_sgd_takes_the_theorem_steps(small_cfg):
    from zerolock_core.train.run_setup import build_run_setup

    setup = build_run_setup(small_cfg)
    params = [p for c in setup.chunks for p in c.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    mb = S._merge_microbatches(setup.microbatches(0))
    _, grads = S.local_gradients(setup.chunks, mb, 0.5)
    flat = [g for gs in grads for g in gs]
    tr = S.run_surrogate_sgd(setup, steps=1, eta0=0.3, gamma=4.0, alpha=0.5)
    assert tr.eta == pytest.approx([0.3 / 2.0])
    for p, b, g in zip(params, before, flat):                            # omega <- omega - eta_0/sqrt(gamma) g
        assert torch.allclose(p.detach(), b - 0.15 * g, atol=1e-7)
    assert tr.grad_sq[0] == pytest.approx(sum(float(g.double().pow(2).sum()) for g in flat), rel=1e-9)

    probe = R.eval_batch(setup.eval, 4)
    tr = S.run_surrogate_sgd(setup, steps=4, eta0=0.3, gamma=1.0, probe=probe)
    assert tr.T == 4 and tr.grad_sq_chunks.shape == (4, len(setup.chunks))
    assert np.allclose(tr.grad_sq, tr.grad_sq_chunks.sum(axis=1))
    assert tr.probe_grad_sq.shape == (4,) and np.all(tr.probe_grad_sq > 0)
    assert tr.eta == pytest.approx(0.3 / np.sqrt(np.arange(4) + 1.0))
    assert tr.alpha == (0.5, 0.5) and tr.direction == "reverse"
    with pytest.raises(ValueError):
        S.run_surrogate_sgd(setup, steps=2, eta0=0.3, gamma=0.0)
    with pytest.raises(ValueError):
        S.run_surrogate_sgd(setup, steps=2, eta0=0.3, gamma=1.0, alpha=[0.5])
