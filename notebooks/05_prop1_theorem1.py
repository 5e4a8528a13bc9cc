# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 5 · Proposition 1 on real chunk readouts, and Theorem 1 on a small run
#
# **What this notebook shows.** The paper's two quantitative results, measured on the engine's own
# model (the embedded 8-layer tiny Llama, split into $K = 3$ chunks) instead of on paper:
#
# * **Proposition 1 (Eq. 11)** bounds the last chunk's loss by the first one's, minus a contraction
#   term, plus the chunks' imperfections $\delta_k = D(p_k, p_k^\star)$:
#   $$\mathcal L(p_K) \le \mathcal L(p_0) - \Big(\frac1\alpha - \beta\Big)\sum_{k=1}^K D(p_k, p_{k-1}) + \frac1\alpha\sum_{k=1}^K\delta_k .$$
#   We train a short ZeroLock run (≈ 20 s), read every chunk out at the answer positions of an eval
#   batch, estimate $\beta$, evaluate both sides, and say when the bound is **tight** or **loose** — in
#   the proofs' geometry and in the engine's.
# * **Theorem 1 (Eq. 23)**: with $\eta_t = \eta_0/\sqrt{t+\gamma}$, the average squared gradient norm of
#   the surrogate $R^t$ decays like $\tilde O(1/\sqrt T)$. We check Lemma 3 (the $K$ local gradients are
#   one gradient of $R^t$), run plain SGD on the LoRA parameters with that schedule, and plot the
#   running average against $T$ beside a $1/\sqrt T$ line.
#
# Everything runs on CPU in about a minute; every check is an `assert`.

# %%
import os
import pathlib
import tempfile
import time
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")   # tqdm's notebook-widget hint
root = pathlib.Path.cwd().resolve()
while not (root / "pyproject.toml").exists() and root != root.parent:
    root = root.parent
os.chdir(root)

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from theory import proposition1 as P1
from theory import readouts as R
from theory import surrogate as S
from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
from zerolock_core.train.reference_trainer import train_reference
from zerolock_core.train.run_setup import build_run_setup

torch.set_num_threads(1)
t_start = time.perf_counter()
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. What Proposition 1 says, and what its proof really uses
#
# * $\beta$ is a *relative smoothness* constant: $\mathcal L(u) \le \mathcal L(v) + \langle\nabla\mathcal L(v), u-v\rangle + \beta D(u, v)$.
# * $p_k^\star$ is the Lemma 1 step from $p_{k-1}$ (notebook 3) and $\delta_k = D(p_k, p_k^\star)$ says how far
#   the real chunk falls short of it.
#
# Writing out the proof shows that, *exactly*,
# $\text{rhs} - \text{lhs} = \sum_k\big[\beta D(p_k,p_{k-1}) - D_{\mathcal L}(p_k,p_{k-1})\big] + \sum_k\big[\text{prox slack}_k \ge 0\big]$.
# The first bracket is $\ge 0$ whenever $\beta$ is valid on the chain. So:
#
# * with a valid $\beta$ the bound **cannot fail, for any $\alpha$** — also $\alpha \ge 1/\beta$. The hypothesis
#   $\alpha < 1/\beta$ only makes $(1/\alpha - \beta)$ positive, i.e. turns the bound into a *descent*
#   guarantee;
# * what *can* break it is an **underestimated** $\beta$ (column C: with $\beta = 0$ some chains fail).
#
# A quick table on synthetic chains (built by `random_instance` to satisfy the assumptions):

# %%
rows = []
for seed in range(6):
    # A: alpha halved until alpha < 1/beta (the paper's hypothesis)
    a_ok = P1.random_instance(np.random.default_rng(seed), 8, 3, tokens=2)
    ok = P1.proposition1_bound(a_ok.ps, a_ok.p_y, a_ok.alpha)
    # B: alpha = 0.5 kept even though alpha * beta >= 1; exact prox steps (delta = 0)
    b_inst = P1.random_instance(np.random.default_rng(seed), 6, 2, alpha=0.5, noise=0.0,
                                enforce_step_condition=False)
    big = P1.proposition1_bound(b_inst.ps, b_inst.p_y, 0.5)
    # C: the chain of A with beta underestimated as 0
    under = P1.proposition1_bound(a_ok.ps, a_ok.p_y, a_ok.alpha, beta=0.0)
    rows.append((seed, ok.alpha * ok.beta, ok.holds, big.alpha * big.beta, big.holds, big.descent, under.holds))
print(f"{'':>4} | {'A: α<1/β':^17} | {'B: α=0.5, α·β≥1':^27} | {'C: β=0':^8}")
print(f"{'seed':>4} | {'α·β':>7} {'holds':>8} | {'α·β':>8} {'holds':>8} {'L(p_K)≤L(p_0)':>9} | {'holds':>8}")
for r in rows:
    print(f"{r[0]:>4} | {r[1]:>7.3f} {str(r[2]):>8} | {r[3]:>8.3g} {str(r[4]):>8} {str(r[5]):>13} | {str(r[6]):>8}")
assert all(r[1] < 1 and r[2] for r in rows)          # A: holds under the assumptions
assert all(r[3] >= 1 and r[4] for r in rows)         # B: still holds with alpha >= 1/beta ...
assert not all(r[5] for r in rows)                   #    ... but exact steps can make the loss go UP
assert not all(r[6] for r in rows)                   # C: an underestimated beta can break it

# %% [markdown]
# ### Two geometries
#
# The paper uses two task losses (notebooks 3–4). We evaluate Eq. (11) in both:
#
# * **`bregman`** — the proofs' loss $\mathcal L(p) = \mathrm{KL}(p\Vert p_y)$, label smoothed ($\varepsilon = 0.1$). Its own
#   Bregman divergence is exactly the KL, so $\beta = 1$ everywhere, $\alpha < 1/\beta$ for every $\alpha < 1$,
#   $p_k^\star = p_y^\alpha p_{k-1}^{1-\alpha}/Z$ and the slack has a closed form:
#   $\sum_k \mathrm{KL}(p_{k-1}\Vert p_y) - D^{\text{Rényi}}_{1-\alpha}(p_{k-1}\Vert p_y)$ — independent of what the
#   chunks actually output; it tends to 0 as $\alpha\to0$ and to $\sum_k\mathrm{KL}(p_{k-1}\Vert p_y)$ at $\alpha = 1$.
# * **`ce`** — the engine's task loss, cross-entropy $\mathcal L(p) = \mathrm{CE}(p_y, p)$ with the one-hot label;
#   $\nabla\mathcal L = -p_y/p$, $\beta$ estimated from the readouts.
#
# ## 2. Train a short ZeroLock run and read every chunk out
#
# 120 steps of the reference (single-process) ZeroLock trainer, $\alpha = 0.5$, reverse consistency,
# AdamW with lr $5\cdot10^{-3}$, batch 8 in 2 micro-batches. Then 64 eval examples (one answer token each) go
# through the chunks. $p_0$ is the frozen head applied to the embedding output $h_0 = E(x)$.

# %%
run_dir = pathlib.Path(tempfile.mkdtemp(prefix="zerolock_nb5_")) / "run"
cfg = RunConfig(data=DataConfig(seq_len=64, eval_size=64),
                train=TrainConfig(runtime="reference", method="zerolock", stages=3, batch=8, microbatches=2,
                                  steps=120, lr=5e-3, threads=1),
                out=str(run_dir))
setup = build_run_setup(cfg)                                  # fresh chunks: LoRA at its initialisation
init_state = [{n: p.detach().clone() for n, p in c.trainable_state().items()} for c in setup.chunks]
ro_init = R.readouts_of_run(setup=setup, examples=64)

t0 = time.perf_counter()
metrics = train_reference(cfg, progress=False)
print(f"trained 120 steps in {time.perf_counter() - t0:.1f} s; eval label accuracy per chunk:",
      [round(c["label_accuracy"], 3) for c in metrics.eval["per_chunk"]])
ro = R.readouts_of_run(run_dir, setup=setup, examples=64)    # same chunks, trained weights loaded

print(f"readouts: {ro.chunks + 1} distributions x {ro.tokens} answer tokens x {ro.vocab} words")
print(f"{'':>9}" + "".join(f"{'p_' + str(k):>9}" for k in range(ro.chunks + 1)))
print(f"{'CE init':>9}" + "".join(f"{x:>9.3f}" for x in ro_init.cross_entropy()))
print(f"{'CE':>9}" + "".join(f"{x:>9.3f}" for x in ro.cross_entropy()))
print(f"{'p(label)':>9}" + "".join(f"{x:>9.4f}" for x in ro.label_mass()))
assert ro.ps.shape == (4, 64, 2048) and np.allclose(ro.ps.sum(-1), 1)
assert np.array_equal(ro.ps[0], ro_init.ps[0])                # p_0 has nothing trainable
assert ro.cross_entropy()[-1] < ro_init.cross_entropy()[-1] - 1.0   # training helped the last chunk
assert ro.label_mass()[-1] > ro_init.label_mass()[-1]

# %% [markdown]
# ## 3. Eq. (11) on the real readouts

# %%
alpha = 0.5                                                   # the training alpha
bounds = {
    "bregman, trained": R.proposition1_on_readouts(ro, alpha, geometry="bregman", smoothing=0.1),
    "bregman, at init": R.proposition1_on_readouts(ro_init, alpha, geometry="bregman", smoothing=0.1),
    "ce, trained": R.proposition1_on_readouts(ro, alpha, geometry="ce", smoothing=0.0),
    "ce, at init": R.proposition1_on_readouts(ro_init, alpha, geometry="ce", smoothing=0.0),
}
print(R.format_bounds(bounds.values()))
for name, b in bounds.items():
    print(f"{name:<17} deltas {np.round(b.result.deltas, 3)}   D(p_k,p_k-1) {np.round(b.result.distances, 3)}")

breg, ce = bounds["bregman, trained"], bounds["ce, trained"]
assert all(b.holds for b in bounds.values())                  # a valid beta: Eq. (11) cannot fail
assert breg.beta == 1.0 and breg.result.step_condition        # proofs' geometry: beta = 1 exactly
assert breg.closed_form_slack is not None and abs(breg.closed_form_slack.sum() - breg.result.slack) < 1e-8
assert ce.beta > 1.0 / alpha and not ce.result.step_condition # engine geometry: alpha = 0.5 >= 1/beta

grad_max = float(np.max(ro.labels(0.0) / ro.ps[:-1]))         # largest |grad CE| = p_y / p_{k-1}
print(f"\nengine geometry: rhs = {ce.rhs:.4g} for L(p_K) = {ce.lhs:.3f} -> {ce.verdict}; "
      f"alpha * beta = {alpha * ce.beta:.3g}; largest |grad L(p_k-1)| = {grad_max:.3g}; "
      f"sum delta / alpha = {ce.result.deltas.sum() / alpha:.4g}")
print(f"proofs' geometry: rhs = {breg.rhs:.4g} for L(p_K) = {breg.lhs:.3f} -> {breg.verdict}; "
      f"closed-form slack per chunk = {np.round(breg.closed_form_slack, 3)}; "
      f"the chain {'descends' if breg.lhs < breg.result.loss_initial else 'does NOT descend'} "
      f"in KL(p || p_y): {breg.result.loss_initial:.3f} -> {breg.lhs:.3f}")

# %% [markdown]
# **Reading the table** (the numbers are printed above; they depend on the embedded model).
#
# * **Engine geometry (`ce`)**: the bound holds — it must, with $\beta$ estimated on the chain — but it
#   says little. The readouts give the label small mass ($p_0$, the embedding read through the head,
#   gives it almost none), so $\nabla\mathcal L = -p_y/p_{k-1}$ has huge entries; the Lemma 1 step from
#   $p_{k-1}$ then jumps almost onto the label vertex and $\delta_k$, hence $\frac1\alpha\sum_k\delta_k$, is
#   enormous. And the empirical $\beta$ is large, so $\alpha = 0.5$ violates $\alpha < 1/\beta$: the middle
#   term is a penalty, not a contraction.
# * **Proofs' geometry (`bregman`)**: $\beta = 1$ exactly, the hypothesis holds for every $\alpha < 1$, and
#   the slack is the closed-form Rényi gap $\sum_k \mathrm{KL}(p_{k-1}\Vert p_y) - D^{\text{Rényi}}_{1-\alpha}(p_{k-1}\Vert p_y)$ —
#   a property of $\alpha$ and of how far the $p_{k-1}$ are from $p_y$, **not of how well the chunks were
#   trained** (it does not involve $p_K$ at all). Whether the chain descends in $\mathrm{KL}(p\Vert p_y)$
#   is another matter: the engine never optimised that loss.
#
# ### When is it tight? Sweep α

# %%
alphas = np.array([1e-3, 3e-3, 0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0])
sweep = R.alpha_sweep(ro, alphas, geometry="bregman", smoothing=0.1)
sweep_ce = R.alpha_sweep(ro, alphas, geometry="ce", smoothing=0.0)
print(R.format_bounds(sweep))

fig = make_subplots(rows=1, cols=2, subplot_titles=("proofs' geometry: L = KL(p‖p_y), β = 1",
                                                    "engine geometry: L = CE(p_y, p), β estimated"))
for col, sw in ((1, sweep), (2, sweep_ce)):
    fig.add_trace(go.Scatter(x=alphas, y=[b.rhs for b in sw], mode="lines+markers", name="rhs of Eq. (11)",
                             showlegend=col == 1, line=dict(color="crimson")), row=1, col=col)
    fig.add_trace(go.Scatter(x=alphas, y=[b.lhs for b in sw], mode="lines", name="lhs L(p_K)",
                             showlegend=col == 1, line=dict(color="black")), row=1, col=col)
    fig.add_trace(go.Scatter(x=alphas, y=[b.result.loss_initial for b in sw], mode="lines", name="L(p_0)",
                             showlegend=col == 1, line=dict(color="grey", dash="dot")), row=1, col=col)
    fig.update_xaxes(type="log", title_text="α", row=1, col=col)
    fig.update_yaxes(type="log", row=1, col=col)
fig.update_layout(height=420, title="Both sides of Eq. (11) on the tiny model's real chunk readouts")
fig.show()

slacks = [b.result.slack for b in sweep]
assert all(b.holds for b in sweep + sweep_ce)
assert all(a < b for a, b in zip(slacks, slacks[1:]))                 # looser as alpha grows
assert sweep[0].verdict == "tight"                                     # slack -> 0 as alpha -> 0
assert sweep[-1].verdict != "tight"          # at alpha = 1 the slack is sum_k KL(p_k-1||p_y) >= L(p_0)
print("engine geometry, verdict per alpha:", [f"{a:g}: {b.verdict}" for a, b in zip(alphas, sweep_ce)])
tight_upto = max(a for a, b in zip(alphas, sweep) if b.verdict == "tight")
print(f"bregman geometry: tight (slack <= 10% of L(p_0)) for alpha <= {tight_upto}; "
      f"slack at alpha=1 = {slacks[-1]:.3f} = sum_k KL(p_k-1 || p_y) = "
      f"{P1.global_loss(ro.ps[:-1], ro.labels(0.1), 'bregman').mean(-1).sum():.3f}")

# %% [markdown]
# ### An underestimated β breaks it
#
# The one way Eq. (11) can fail: a $\beta$ below the true relative-smoothness constant of the chain.

# %%
wrong = R.proposition1_on_readouts(ro, 0.01, geometry="bregman", smoothing=0.1, beta=0.5)
print(f"beta = 0.5 (true value 1): slack = {wrong.result.slack:.4f}, verdict = {wrong.verdict}")
assert not wrong.holds and wrong.verdict == "violated"

# %% [markdown]
# ### How far is each chunk from the optimum of the loss it was *trained* on?
#
# $\delta_k$ measures the distance to the Lemma 1 step — a point the engine never aimed at. The
# engine's own local optimum (notebook 4) is the label for chunk 1 (cross-entropy only) and the
# reverse-consistency target for the others. The gap $\text{objective}(p_k) - \text{objective}(\text{optimum})$
# is a finite, honest measure of a chunk's imperfection:

# %%
gaps = R.engine_objective_gaps(ro, alpha, "reverse", max_tokens=32)
gaps_init = R.engine_objective_gaps(ro_init, alpha, "reverse", max_tokens=32)
print("local-objective suboptimality per chunk, trained:", np.round(gaps, 3), "  at init:", np.round(gaps_init, 3))
assert np.all(gaps >= -1e-9) and np.all(gaps < gaps_init)

# %% [markdown]
# ## 4. Theorem 1 on a small run
#
# ### Lemma 3 first: $K$ local gradients = one gradient of $R^t$
#
# $R^t(\omega) = \sum_k L_k^t(\omega_k)$ with every target $p_{k-1}^t$ frozen. Because the chunk boundaries are
# detached, $\omega_k$ reaches only $L_k$, and the gradient of the sum is the concatenation of the local
# gradients. Check on the engine's chunks: one backward through $\sum_k L_k$ gives exactly what each
# stage computes alone; **without** the stop-gradient (backprop through the boundaries) it does not.

# %%
for c, st in zip(setup.chunks, init_state):                   # back to the initial LoRA weights
    c.load_state_dict(st, strict=False)
res3 = S.lemma3_residuals(setup.chunks, R.eval_batch(setup.eval, 8), alpha, "reverse")
print("max |grad_k R - grad L_k| per chunk, detached boundaries:", res3["detached"])
print("                          backprop through boundaries:  ", np.round(res3["through_boundaries"], 4))
assert res3["detached"] == [0.0, 0.0, 0.0]
assert res3["through_boundaries"][0] > 0 and res3["through_boundaries"][1] > 0

# %% [markdown]
# In the Bregman form the gradient in the logits is $J^\top e$, $e = \log p - \log p^\star$ (Eq. 20). The
# engine's cross-entropy objective has no such fixed $p^\star$:

# %%
z = rng.standard_normal(8)
y8 = P1.label_smooth(np.eye(8)[2], 0.1)
q8 = P1.random_simplex(rng, 8, floor=0.05)
e_breg = S.logit_gradient_residual(z, y8, q8, 0.5, objective="bregman")
e_rev = S.logit_gradient_residual(z, y8, q8, 0.5, objective="reverse")
print(f"|J^T e - finite differences|: Bregman form {e_breg:.1e}, engine (CE + reverse KL) {e_rev:.3f}")
assert e_breg < 1e-7 and e_rev > 1e-3

# %% [markdown]
# ### Plain SGD with $\eta_t = \eta_0/\sqrt{t+\gamma}$
#
# The theorem is about SGD (the engine itself uses AdamW), so we run exactly its update rule on all
# LoRA parameters: $\omega^{t+1} = \omega^t - \eta_t\nabla R^t(\omega^t)$, with $\eta_0 = 0.3$, $\gamma = 1$, for
# $T = 60$ steps on the engine's training mini-batches (8 examples). At each step we record
# $\lVert\nabla R^t(\omega^t)\rVert^2 = \sum_k\lVert\nabla L_k^t\rVert^2$ on the step's own mini-batch and on a fixed
# probe batch of 12 eval examples (the same batch every step, so less noisy). Neither is exactly the
# theorem's $\mathbb E\lVert\nabla R^t\rVert^2$ (a population quantity), but both track it. The theorem needs
# $\eta_t \le 1/\beta_R$, an unknown constant; $\eta_0 = 0.3$ is simply a value at which this run stays stable
# (at 0.5 the loss already jumps back up once in the first steps).

# %%
probe = R.eval_batch(setup.eval, 12, start=500)
trace = S.run_surrogate_sgd(setup, steps=60, eta0=0.3, gamma=1.0, probe=probe)
T = trace.horizons
avg_train, avg_probe = trace.running_average("train"), trace.running_average("probe")
c_train, c_probe = trace.exponent("train", start=5), trace.exponent("probe", start=5)
c_late = trace.exponent("probe", start=20)
print(f"{trace.T} SGD steps in {trace.seconds:.1f} s;  R^t on the probe batch: "
      f"{trace.probe_surrogate[0]:.3f} -> {trace.probe_surrogate[-1]:.3f}")
print(f"fitted exponent of the running average (T >= 5): train {c_train:.3f}, probe {c_probe:.3f}; "
      f"probe, T >= 20: {c_late:.3f}   (1/sqrt(T) is -0.5)")

fig = make_subplots(rows=1, cols=2, subplot_titles=("(1/T) Σ_t ‖∇R^t‖²  vs  T", "R^t and the step size"))
fig.add_trace(go.Scatter(x=T, y=avg_train, name=f"running avg, train batch (slope {c_train:.2f})"), 1, 1)
fig.add_trace(go.Scatter(x=T, y=avg_probe, name=f"running avg, probe batch (slope {c_probe:.2f})"), 1, 1)
fig.add_trace(go.Scatter(x=T, y=trace.reference("probe", anchor=5), name="C/√T (through the probe curve at T=5)",
                         line=dict(dash="dash", color="black")), 1, 1)
fig.add_trace(go.Scatter(x=T, y=trace.grad_sq, name="‖∇R^t‖² per step, train batch", mode="markers",
                         marker=dict(size=4, color="lightgrey")), 1, 1)
fig.add_trace(go.Scatter(x=T, y=trace.probe_grad_sq, name="‖∇R^t‖² per step, probe batch", mode="markers",
                         marker=dict(size=4, color="lightsalmon")), 1, 1)
fig.add_trace(go.Scatter(x=T, y=trace.probe_surrogate, name="R^t on the probe batch"), 1, 2)
fig.add_trace(go.Scatter(x=T, y=trace.eta * 20, name="20 · η_t", line=dict(dash="dot")), 1, 2)
fig.update_xaxes(type="log", title_text="T", row=1, col=1)
fig.update_yaxes(type="log", row=1, col=1)
fig.update_xaxes(title_text="t", row=1, col=2)
fig.update_layout(height=430, title="Theorem 1 on the tiny model: ZeroLock local SGD = SGD on the surrogate R^t")
fig.show()

assert np.allclose(trace.eta, 0.3 / np.sqrt(np.arange(60) + 1.0))
assert trace.probe_surrogate[-1] < 0.6 * trace.probe_surrogate[0]           # R^t went down
assert c_probe < -0.4 and c_train < -0.4          # decays at least about as fast as 1/sqrt(T)
assert np.all(avg_probe[4:] <= trace.reference("probe", anchor=5)[4:] * 1.05)   # stays under the line

# %% [markdown]
# **Reading the plot.** The running average falls *faster* than $1/\sqrt T$ over these 60 steps — most
# of it is the large gradients of the first few steps, while $R^t$ drops steeply from its initial value
# (right panel: the untrained chunks are confidently wrong about the answer token), being averaged
# away. A slope near $-1$ is the signature of such a transient (a sum that has stopped growing), not a
# measurement of the asymptotic rate. That is consistent with the
# theorem, which is an upper bound ($\tilde O(1/\sqrt T)$ with unknown constants); a short run cannot confirm
# the rate, only fail to contradict it. The per-step $\lVert\nabla R^t\rVert^2$ on the training batch (grey) is
# noisy: its expectation is $\lVert\nabla R^t\rVert^2$ plus the sampling variance, which is why the theorem's
# bound carries a $\sigma^2\sum_t\eta_t^2$ term and the decaying step size.

# %%
elapsed = time.perf_counter() - t_start
print(f"notebook body ran in {elapsed:.0f} s")

# %% [markdown]
# ## Exercises
#
# Try each exercise before you look at its solution: the code cell under it is collapsed to its first
# line (click the three dots, or the bar on its left, to show it). The solutions reuse the readouts and
# chunks above (nothing is trained again), run with the rest of the notebook and `assert` their
# answers.
#
# ### Exercise 1 · The slack at another α, by hand
#
# In the proofs' geometry the slack of step $k$ is $\mathrm{KL}(p_{k-1}\Vert p_y) + \frac1\alpha\log Z_k$, where
# $Z_k = \sum_l p_y(l)^\alpha\,p_{k-1}(l)^{1-\alpha}$ is the normaliser of Lemma 2's geometric target
# (notebook 4). Compute it at $\alpha = 0.2$ with plain NumPy from `ro.ps` and `ro.labels(0.1)`
# (averaged over the tokens) and compare with `closed_form_slack`. Then **predict**: if the last chunk
# were perfect — replace $p_K$ by the label itself — would the bound get tighter?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
import dataclasses

from scipy.special import logsumexp, rel_entr

a_ex, y_s, q_prev = 0.2, ro.labels(0.1), ro.ps[:-1]            # q_prev: p_0 .. p_{K-1}
with np.errstate(divide="ignore"):                              # log 0 = -inf is fine inside logsumexp
    log_z = logsumexp(a_ex * np.log(y_s) + (1 - a_ex) * np.log(q_prev), axis=-1)
by_hand = (rel_entr(q_prev, y_s).sum(-1) + log_z / a_ex).mean(-1)
at_02 = R.proposition1_on_readouts(ro, a_ex, geometry="bregman", smoothing=0.1)
print("slack per chunk by hand:", np.round(by_hand, 5), "  closed_form_slack:", np.round(at_02.closed_form_slack, 5))
assert np.allclose(by_hand, at_02.closed_form_slack, rtol=1e-9, atol=1e-12) and np.all(by_hand >= 0)
# No: the slack of step k involves only p_{k-1}, so p_K never enters it. A perfect last chunk lowers
# L(p_K) and the right-hand side by the same amount.
perfect = dataclasses.replace(ro, ps=np.concatenate([ro.ps[:-1], ro.labels(0.1)[None]]))
at_02_perfect = R.proposition1_on_readouts(perfect, a_ex, geometry="bregman", smoothing=0.1)
print(f"L(p_K): {at_02.lhs:.4f} -> {at_02_perfect.lhs:.4f};  slack: {at_02.result.slack:.6f} -> "
      f"{at_02_perfect.result.slack:.6f}")
assert at_02_perfect.lhs < 1e-12 < at_02.lhs
assert abs(at_02_perfect.result.slack - at_02.result.slack) < 1e-8

# %% [markdown]
# ### Exercise 2 · Overestimate β
#
# An *under*estimated β breaks Eq. (11) (section 3). What does an *over*estimated one do? **Predict** how the
# right-hand side changes when β goes from its true value 1 to $\beta'$ in the proofs' geometry (α = 0.5),
# as a formula in the distances $D(p_k, p_{k-1})$. Check for $\beta' \in \{1.5, 2, 5\}$. Does the bound still
# hold, and does it still promise descent ($\alpha < 1/\beta$)?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# rhs = L(p_0) - (1/alpha - beta) sum_k D(p_k, p_k-1) + (1/alpha) sum_k delta_k: linear in beta, slope sum_k D.
true_beta = R.proposition1_on_readouts(ro, 0.5, geometry="bregman", smoothing=0.1)
for beta_over in (1.5, 2.0, 5.0):
    over = R.proposition1_on_readouts(ro, 0.5, geometry="bregman", smoothing=0.1, beta=beta_over)
    growth = (beta_over - 1.0) * true_beta.result.distances.sum()
    print(f"beta = {beta_over}: rhs {true_beta.rhs:.4f} -> {over.rhs:.4f} (predicted +{growth:.4f}); "
          f"holds {over.holds}; alpha < 1/beta: {over.result.step_condition}; verdict {over.verdict}")
    assert over.holds and abs(over.rhs - true_beta.rhs - growth) < 1e-9 * (1 + abs(over.rhs))
    assert over.result.step_condition == (0.5 < 1 / beta_over)

# %% [markdown]
# ### Exercise 3 · Lemma 3 for another α and the other consistency direction
#
# Section 4 checked Lemma 3 with α = 0.5 and reverse consistency. **Predict** whether it still holds with
# `--consistency forward` and a different α per chunk (0.2, 0.5, 0.9, as an α ramp would set), and which
# chunk's gradient stays the same even when gradients *do* flow through the boundaries.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# Lemma 3 only needs the stop-gradient at the boundaries: any alpha, any direction. Without it, only
# the last chunk is unaffected (nothing downstream can send it a gradient).
res_ramp = S.lemma3_residuals(setup.chunks, R.eval_batch(setup.eval, 8), [0.2, 0.5, 0.9], "forward")
print("detached:", res_ramp["detached"], "  through boundaries:", np.round(res_ramp["through_boundaries"], 5))
assert res_ramp["detached"] == [0.0, 0.0, 0.0]
assert res_ramp["through_boundaries"][0] > 0 and res_ramp["through_boundaries"][1] > 0
assert res_ramp["through_boundaries"][2] == 0.0
