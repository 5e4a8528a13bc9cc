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
# # 3 · Lemma 1: a chunk's local loss is one proximal (mirror-descent) step
#
# **What this notebook shows.** ZeroLock trains chunk $k$ on
# $L_k(p) = \alpha\,L_{\text{Task}}(p) + (1-\alpha)\,D_\psi(p, \mathrm{sg}(p_{k-1}))$ (paper Eq. 3). Lemma 1
# (Eq. 7) claims that its minimiser is
#
# $$p_k^\star = \arg\min_{p\in\mathcal P}\;\big\langle\nabla\mathcal L(p_{k-1}),\,p-p_{k-1}\big\rangle + \frac1\alpha D_\psi(p, p_{k-1}),$$
#
# one proximal-gradient step on the global loss from the previous chunk's output, with step size $\alpha$.
# Here we
#
# 1. fix the sign of the task term (Eq. 4 as printed has a minus that would make it a *maximisation*);
# 2. prove $L_k(p) = \alpha\cdot[\text{Eq. 7 objective}] + \text{const}$ **exactly**, for any potential $\psi$,
#    and show which weightings break it;
# 3. derive the closed form $p^\star = p_{k-1}\odot e^{-\alpha\nabla\mathcal L}/Z$ from the KKT conditions;
# 4. check it against a generic constrained optimiser for vocabularies of 3 to 2048 words;
# 5. **draw it on the 3-simplex** (a vocabulary of three words): the loss landscape, the step, and a
#    chain of $K$ chunks, each one step further along a curved (mirror-descent) path to the label;
# 6. show where Lemma 1 stops being exact: the engine's cross-entropy task term.
#
# All checks are `assert`s.

# %%
import os
import pathlib

root = pathlib.Path.cwd().resolve()
while not (root / "pyproject.toml").exists() and root != root.parent:
    root = root.parent
os.chdir(root)

import numpy as np
import plotly.graph_objects as go
import sympy as sp

from theory import lemma1 as L1
from theory import lemma2 as L2
from theory import task_loss as TL
from theory.bregman import kl
from theory.simplex import label_smooth, one_hot, random_simplex

rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The sign of the task term (Eq. 4)
#
# As printed, $L_{\text{Task}}(p) = -\frac{1}{|\Omega|}\sum_i D_\psi(p_i, p_y)$. A divergence is $\ge 0$ and
# vanishes only at $p = p_y$, so *minimising* minus a divergence pushes the prediction **away** from
# the label — to the vertex of the least likely class. The minus belongs inside the cross-entropy
# ($-\sum_l p_y(l)\log p(l)$), not in front of a divergence; the implementation (Algorithm 1, line 5)
# minimises ordinary cross-entropy, and Lemma 1 needs $+D_\psi(p, p_y)$. Check:

# %%
y = label_smooth(one_hot(0, 3), 0.2)                 # label = word 0, smoothed: (0.867, 0.067, 0.067)
worst = TL.printed_loss_minimiser(y)
print("label p_y:", np.round(y, 3))
print("minimiser of Eq. (4) as printed:", worst, "-> predicts a word that is NOT the label")
print(f"printed loss at the label: {abs(TL.printed_task_loss(y, y)):.3f}   at that vertex: "
      f"{TL.printed_task_loss(worst, y):.3f}")
assert np.argmax(worst) != 0
assert TL.printed_task_loss(worst, y) < TL.printed_task_loss(y, y)      # printed: worse is "better"
assert TL.task_loss(y, y) == 0 and TL.task_loss(worst, y) > 0           # with +: the label wins

# %% [markdown]
# From here on the task term is $+D_\psi(p, p_y)$ with the prediction first. With negative entropy
# that is $\mathrm{KL}(p\Vert p_y)$, which is finite only if $p_y$ gives every word some mass: we
# **label-smooth** $p_y$. (The engine's cross-entropy is $\mathrm{KL}(p_y\Vert p)$ — the *other*
# argument order. Section 6 and notebook 4 come back to that.)
#
# ## 2. The local loss *is* α times the proximal objective
#
# Expand $D(p, p_y)$ around $q = p_{k-1}$ with the three-point identity (notebook 2):
# $D(p, p_y) = D(q, p_y) + \langle\nabla\mathcal L(q), p - q\rangle + D(p, q)$. Then
#
# $$\alpha D(p,p_y) + (1-\alpha) D(p,q) = \alpha\Big[\langle\nabla\mathcal L(q), p-q\rangle + \tfrac1\alpha D(p,q)\Big] + \alpha D(q,p_y).$$
#
# The $\alpha$ from the expansion and the $(1-\alpha)$ of the consistency term add up to exactly
# $1 = \alpha\cdot\frac1\alpha$, so the step size is $\alpha$ — no rescaling. With other weights
# $a\,D(p,p_y) + b\,D(p,q)$ the step is $a/(a+b)$. SymPy checks the identity for a general
# potential $\psi$ (an undefined function) and the table shows which variants must fail:

# %%
a_ = sp.Symbol("alpha", positive=True)
cases = [
    ("weights (α, 1-α), step α  [the paper]", None, None, True),
    ("weights (α, 1),   step α", 1, a_, False),
    ("weights (α, 1),   step α/(1+α)", 1, a_ / (1 + a_), True),
    ("weights (α, 1-α), step 1", None, 1, False),
    ("weights (α, 1-α), step α/2", None, a_ / 2, False),
]
for name, weight, step, want in cases:
    check = L1.prove_local_loss_is_scaled_prox(3, consistency_weight=weight, step=step)
    print(f"{name:<42} symbolic zero: {str(check.symbolic_zero):<5}  max |residual|: {check.numeric_max_abs:.2e}")
    assert check.holds is want and check.symbolic_zero is want

# %% [markdown]
# ## 3. The closed form, from the KKT conditions
#
# With negative entropy the Lagrangian of Eq. (7) is
# $\sum_i g_i p_i + \frac1\alpha\sum_i p_i\log\frac{p_i}{q_i} + \lambda(\sum_i p_i - 1)$. Setting its derivative to zero
# gives $p_i = q_i\,e^{-\alpha g_i}\cdot c$ with one common constant $c$, and the constraint fixes
# $c = 1/\sum_j q_j e^{-\alpha g_j}$:
#
# $$p^\star = \frac{q\odot e^{-\alpha g}}{Z},\qquad Z = \sum_j q_j e^{-\alpha g_j}.$$
#
# This is the *exponentiated-gradient* (multiplicative-weights) update: gradient descent in the
# logits, $\log p^\star = \log q - \alpha g + \text{const}$. SymPy solves the KKT system and compares:

# %%
for check in L1.prove_prox_closed_form_kkt(3):
    print(check.name, "| symbolic zero:", check.symbolic_zero, "| numeric:", f"{check.numeric_max_abs:.1e}")
    assert check.symbolic_zero and check.holds
stat = L1.prove_kkt_stationarity(3)
assert stat.holds

# %% [markdown]
# With $g = \nabla\mathcal L(q) = \log(q/p_y) + 1$ the step becomes
# $q\odot (p_y/q)^\alpha / Z = p_y^{\alpha}\,q^{1-\alpha}/Z$ — the **geometric target** of Lemma 2
# (notebook 4).
#
# ## 4. Numbers: the local loss minimiser = the prox step, from 3 to 2048 words
#
# Three independent computations: (a) minimise the local loss with L-BFGS over softmax logits
# (no formula used), (b) the closed-form prox step, (c) the geometric target.

# %%
print(f"{'V':>5} {'alpha':>6} {'|numeric - prox|':>17} {'|prox - geometric|':>19}")
for V, alpha in [(3, 0.3), (10, 0.5), (50, 0.8), (2048, 0.5)]:
    yv = label_smooth(one_hot(int(rng.integers(V)), V), 0.1)
    qv = random_simplex(rng, V, floor=0.05)
    numeric = L1.local_minimiser_numeric(yv, qv, alpha)
    prox = L1.prox_step_closed_form(qv, L1.task_gradient(qv, yv), alpha)
    geo = L2.geometric_target(yv, qv, alpha)
    e1, e2 = np.max(np.abs(numeric - prox)), np.max(np.abs(prox - geo))
    print(f"{V:>5} {alpha:>6} {e1:>17.2e} {e2:>19.2e}")
    assert e1 < 1e-6 and e2 < 1e-12
    # The prox step beats nearby distributions on the local loss itself:
    for _ in range(3):
        other = np.exp(np.log(prox) + 0.05 * rng.standard_normal(V))
        other /= other.sum()
        assert L1.local_loss(other, yv, qv, alpha) > L1.local_loss(prox, yv, qv, alpha)

# %% [markdown]
# ## 5. The picture on the 3-simplex
#
# With three words every distribution is a point of a triangle (plotly's ternary plot: each corner
# is one word with probability 1). The colour is the local loss $L_k(p)$ for a label on word **A**
# and a previous chunk $q = p_{k-1}$ that gives word A almost nothing. Marked:
#
# * the label $p_y$ (smoothed) and the previous output $q$;
# * the minimiser $p^\star$ found numerically (ring) and the closed-form prox step (star) — they coincide;
# * the path of $p^\star(\alpha)$ for $\alpha\in(0,1]$ — the **KL-geodesic** from $q$ to $p_y$ (black). It is
#   curved: Bregman geometry is not Euclidean. The straight line $\alpha p_y + (1-\alpha) q$ (the
#   *arithmetic* mixture, dotted red) joins the same two points, but the same $\alpha$ lands elsewhere on
#   it (compare the marked $\alpha = .25, .5, .75$): the geometric step stays much closer to $q$ on the
#   word that $q$ rules out.

# %%
y3 = label_smooth(one_hot(0, 3), 0.15)
q3 = np.array([0.03, 0.42, 0.55])
alpha = 0.4

n = 70
grid = np.array([(i, j, n - i - j) for i in range(n + 1) for j in range(n + 1 - i)], dtype=float) / n
grid = 0.995 * grid + 0.005 / 3                              # stay inside the open simplex
loss = np.array([L1.local_loss(p, y3, q3, alpha) for p in grid])

p_star = L1.prox_step_closed_form(q3, L1.task_gradient(q3, y3), alpha)
p_num = L1.local_minimiser_numeric(y3, q3, alpha, method="slsqp")
alphas = np.linspace(0.001, 1.0, 60)
geo_path = np.array([L2.geometric_target(y3, q3, a) for a in alphas])
ari_path = np.array([L2.arithmetic_target(y3, q3, a) for a in alphas])


def tern(points, **kw):
    points = np.atleast_2d(points)
    return go.Scatterternary(a=points[:, 0], b=points[:, 1], c=points[:, 2], **kw)


fig = go.Figure([
    tern(grid, mode="markers", name="local loss L_k(p)", showlegend=False,
         marker=dict(color=np.log(loss - loss.min() + 1e-3), colorscale="Viridis", size=5, symbol="triangle-up",
                     colorbar=dict(title="log(L_k − min)"))),
    tern(geo_path, mode="lines", name="p*(α), α∈(0,1]: KL-geodesic (geometric)", line=dict(color="black", width=3)),
    tern(ari_path, mode="lines", name="αp_y + (1−α)q (arithmetic)", line=dict(color="crimson", dash="dot", width=3)),
    tern(np.array([L2.geometric_target(y3, q3, a) for a in (0.25, 0.5, 0.75)]), mode="markers+text",
         text=["α=.25", "α=.5", "α=.75"], textposition="middle left", marker=dict(color="black", size=7),
         showlegend=False),
    tern(np.array([L2.arithmetic_target(y3, q3, a) for a in (0.25, 0.5, 0.75)]), mode="markers+text",
         text=["α=.25", "α=.5", "α=.75"], textposition="middle right", marker=dict(color="crimson", size=7),
         showlegend=False),
    tern(y3, mode="markers", name="label p_y (smoothed)", marker=dict(size=12, color="red")),
    tern(q3, mode="markers", name="previous chunk q = p_{k-1}", marker=dict(size=12, color="orange")),
    tern(p_num, mode="markers", name="numeric argmin", marker=dict(size=18, color="rgba(0,0,0,0)",
                                                                    line=dict(color="black", width=2))),
    tern(p_star, mode="markers", name=f"prox step, α={alpha}", marker=dict(size=12, symbol="star", color="black")),
])
fig.update_layout(title="Lemma 1 on the 3-simplex: the local loss's minimiser is one mirror-descent step",
                  ternary=dict(aaxis_title="word A (label)", baxis_title="word B", caxis_title="word C"),
                  height=640, legend=dict(orientation="h", y=-0.12), margin=dict(b=140))
fig.show()

print("prox step:", np.round(p_star, 4), " numeric argmin:", np.round(p_num, 4))
assert np.max(np.abs(p_star - p_num)) < 1e-5
assert abs(loss.min() - L1.local_loss(p_star, y3, q3, alpha)) < 0.05 and loss.min() >= \
    L1.local_loss(p_star, y3, q3, alpha) - 1e-12          # no grid point beats p*
assert np.max(np.abs(geo_path[len(alphas) // 2] - ari_path[len(alphas) // 2])) > 0.02   # different paths

# %% [markdown]
# ### A chain of chunks is a run of mirror descent
#
# If chunk $k$ hit its local optimum exactly, $p_k = p_k^\star$, then chunk after chunk the chain
# would take one multiplicative step each: $p_k \propto p_y^{\,1-(1-\alpha)^k}\,p_0^{\,(1-\alpha)^k}$.
# Eight "perfect chunks" starting from $p_0$ at word C:

# %%
p0 = np.array([0.1, 0.2, 0.7])
chain = [p0]
for _ in range(8):
    chain.append(L1.prox_step_closed_form(chain[-1], L1.task_gradient(chain[-1], y3), alpha))
chain = np.array(chain)
closed = np.array([L2.geometric_target(y3, p0, 1 - (1 - alpha) ** k) if k else p0 for k in range(9)])
losses = [kl(p, y3) for p in chain]
fig = go.Figure([
    tern(chain, mode="lines+markers+text", text=[f"p_{k}" if k < 4 else "" for k in range(9)],
         textposition="middle left",
         name="p_k, k = 0..8"),
    tern(y3, mode="markers", marker=dict(size=12, color="red"), name="label p_y"),
])
fig.update_layout(title="K perfect chunks = K mirror-descent steps towards the label", height=480,
                  ternary=dict(aaxis_title="word A (label)", baxis_title="word B", caxis_title="word C"))
fig.show()
print("global loss KL(p_k || p_y) along the chain:", np.round(losses, 4))
assert np.allclose(chain, closed, atol=1e-12)
assert all(b < a for a, b in zip(losses, losses[1:]))                 # monotone descent

# %% [markdown]
# ## 6. Where Lemma 1 stops being exact: the engine's cross-entropy
#
# The engine minimises cross-entropy, $\mathrm{CE}(p_y, p) = \mathrm{KL}(p_y\Vert p) + \text{const}$: the
# **label first**. Its gradient is $-p_y/p$. Lemma 1's proof expanded $p\mapsto D(p, p_y)$, the
# prediction first, and the three-point identity does not hold for the reversed order (notebook 2,
# `reversed_arguments`). So with the engine's task term the prox step with $g = -p_y/q$ is **not** the
# local minimiser — it is only its first-order (linearised) version:

# %%
alpha = 0.5
print(f"{'seed':>4} {'|argmin(αCE + (1-α)KL(p||q)) − prox step with −p_y/q|':>56}")
for seed in range(4):
    r = np.random.default_rng(seed)
    yv = label_smooth(one_hot(0, 5), 0.1)
    qv = random_simplex(r, 5, floor=0.1)
    local_min = L2.reverse_target_numeric(yv, qv, alpha)         # what the engine's loss is minimised by
    prox = L1.prox_step_closed_form(qv, -yv / qv, alpha)         # Eq. (7) with grad CE
    gap = np.max(np.abs(local_min - prox))
    print(f"{seed:>4} {gap:>56.3f}")
    assert gap > 1e-3

# %% [markdown]
# **Summary.** With the task term written as $+\mathrm{KL}(p\Vert p_y)$ (smoothed label) and the
# consistency term as $\mathrm{KL}(p\Vert p_{k-1})$ — both with the prediction first — Lemma 1 is an exact
# identity and the local optimum is the exponentiated-gradient step $p_y^\alpha p_{k-1}^{1-\alpha}/Z$.
# The engine's cross-entropy is a different function with a different minimiser; notebook 4 works
# out what each variant actually optimises.

# %% [markdown]
# ## Exercises
#
# Try each exercise before you look at its solution: the code cell under it is collapsed to its first
# line (click the three dots, or the bar on its left, to show it). The solutions run with the rest of
# the notebook and `assert` their answers, so they are checked like everything above.
#
# ### Exercise 1 · Turn the α knob
#
# In section 5's picture, $p^\star(\alpha)$ runs from $q$ ($\alpha \to 0$) to the label ($\alpha = 1$).
# **Predict** how the two distances $\mathrm{KL}(p^\star(\alpha)\Vert p_y)$ (to the label) and
# $\mathrm{KL}(p^\star(\alpha)\Vert q)$ (to the previous chunk) change as α grows. Check on section 5's `y3`,
# `q3` for 50 values of α in $(0, 1]$. Where does the step land at $\alpha = 1$?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# p*(alpha) is proportional to y^alpha q^(1-alpha): an exponential family in alpha, along which
# KL(p* || y) falls and KL(p* || q) rises monotonically (their derivatives are -/+ alpha-weighted variances).
grid_alpha = np.linspace(0.02, 1.0, 50)
steps = [L2.geometric_target(y3, q3, a) for a in grid_alpha]
to_label = np.array([kl(p, y3) for p in steps])
to_prev = np.array([kl(p, q3) for p in steps])
print("KL(p*||p_y):", np.round(to_label[::10], 4), " KL(p*||q):", np.round(to_prev[::10], 4))
assert np.all(np.diff(to_label) < 0) and np.all(np.diff(to_prev) > 0)
assert np.allclose(steps[-1], y3, atol=1e-12)           # alpha = 1: the step jumps onto the label

# %% [markdown]
# ### Exercise 2 · More chunks or a bigger α?
#
# The chain of section 5 says $K$ perfect chunks with step α land on the geometric target with the
# *effective* step $1 - (1-\alpha)^K$. **Predict**: where do two chunks with $\alpha = 0.5$ land? How many
# chunks with $\alpha = 0.2$ does it take to get at least as far as one chunk with $\alpha = 0.5$?
# Check both with `L1.prox_step_closed_form`, chunk after chunk.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
def run_chain(p, alpha, chunks):
    for _ in range(chunks):
        p = L1.prox_step_closed_form(p, L1.task_gradient(p, y3), alpha)
    return p


two_halves = run_chain(p0, 0.5, 2)
assert np.allclose(two_halves, L2.geometric_target(y3, p0, 0.75), atol=1e-12)     # 1 - 0.5^2 = 0.75
needed = int(np.ceil(np.log(1 - 0.5) / np.log(1 - 0.2)))                            # 0.8^K <= 0.5
print(f"two chunks at alpha=0.5 = one at alpha=0.75;  chunks at alpha=0.2 to pass one at 0.5: {needed}")
assert needed == 4 and 1 - 0.8**3 < 0.5 <= 1 - 0.8**4
assert np.allclose(run_chain(p0, 0.2, needed), L2.geometric_target(y3, p0, 1 - 0.8**needed), atol=1e-12)
assert kl(run_chain(p0, 0.2, needed), y3) < kl(run_chain(p0, 0.5, 1), y3) < kl(run_chain(p0, 0.2, needed - 1), y3)

# %% [markdown]
# ### Exercise 3 · Other weights
#
# Section 2 showed that weights $a\,D(p, p_y) + b\,D(p, q)$ give the step $a/(a+b)$. Take $a = 0.3$ and
# $b = 1$ (a consistency term that does not shrink when α does). **Predict** the effective step, then
# check: minimise the weighted loss numerically (`L1.local_minimiser_numeric(..., consistency_weight=b)`)
# and compare it with the geometric target at your predicted step — and at the naive step $0.3$.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
a_w, b_w = 0.3, 1.0
step = L1.effective_step_size(a_w, b_w)                                    # 0.3 / 1.3
yv5 = label_smooth(one_hot(1, 5), 0.1)
qv5 = random_simplex(rng, 5, floor=0.05)
weighted = L1.local_minimiser_numeric(yv5, qv5, a_w, consistency_weight=b_w)
print(f"effective step {step:.4f}; |argmin - geometric(step)| = "
      f"{np.max(np.abs(weighted - L2.geometric_target(yv5, qv5, step))):.1e}, "
      f"|argmin - geometric(0.3)| = {np.max(np.abs(weighted - L2.geometric_target(yv5, qv5, a_w))):.3f}")
assert abs(step - 0.3 / 1.3) < 1e-15
assert np.max(np.abs(weighted - L2.geometric_target(yv5, qv5, step))) < 1e-6
assert np.max(np.abs(weighted - L2.geometric_target(yv5, qv5, a_w))) > 1e-3
