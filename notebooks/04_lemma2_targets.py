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
# # 4 · Lemma 2: geometric vs arithmetic targets — and what the engine actually optimises
#
# **What this notebook shows.** Lemma 2 (Eq. 15) says a chunk's local loss equals
# $\mathrm{KL}(p\Vert p_k^\star) - \log Z$ with the *geometric* target
# $p_k^\star \propto p_y^{\alpha}\,p_{k-1}^{1-\alpha}$. Whether that is true depends on which way round
# each KL is written. Three objectives are in play, and each has a different minimiser:
#
# | name | local loss | who uses it | minimiser |
# |---|---|---|---|
# | **geometric** | $\alpha\,\mathrm{KL}(p\Vert p_y) + (1-\alpha)\,\mathrm{KL}(p\Vert p_{k-1})$ | the paper's proofs (Lemmas 1–2) | $p_y^\alpha p_{k-1}^{1-\alpha}/Z$ — needs a smoothed $p_y$ |
# | **forward** | $\alpha\,\mathrm{CE}(p_y, p) + (1-\alpha)\,\mathrm{KL}(p_{k-1}\Vert p)$ | the authors' public code; engine `--consistency forward` | the arithmetic mixture $\alpha p_y + (1-\alpha)p_{k-1}$ |
# | **reverse** | $\alpha\,\mathrm{CE}(p_y, p) + (1-\alpha)\,\mathrm{KL}(p\Vert p_{k-1})$ | the paper's Eq. (5) as printed; engine default `--consistency reverse` | **neither mixture**: the root of $-\alpha\frac{y_l}{p_l} + (1-\alpha)\big(\log\frac{p_l}{q_l}+1\big) + \lambda = 0$, found numerically |
#
# The engine's task term is always cross-entropy $\mathrm{CE}(p_y, p) = \mathrm{KL}(p_y\Vert p) + \text{const}$ —
# the label *first* — so **the engine never trains towards the geometric target of Lemma 2**. We
#
# 1. prove each row (SymPy for two words and the general Lagrangian; numbers for up to 2048 words);
# 2. show the geometric target degenerating for an exactly one-hot label;
# 3. draw the three targets on the 3-simplex;
# 4. minimise **the engine's own loss function** (`zerolock_core.method.objectives.local_loss`) over free
#    logits and confirm it lands on the arithmetic (forward) and the numerically-found (reverse) targets.
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
import torch

from theory import lemma2 as L2
from theory.optimize import minimize_on_simplex
from theory.simplex import label_smooth, one_hot, random_simplex
from zerolock_core.method.objectives import local_loss as engine_local_loss

torch.set_num_threads(1)
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The geometric target (Lemma 2, Eq. 15)
#
# Write both terms with the prediction first and collect the logs:
#
# $$\alpha\sum_l p_l\log\frac{p_l}{y_l} + (1-\alpha)\sum_l p_l\log\frac{p_l}{q_l}
#   = \sum_l p_l \log\frac{p_l}{y_l^\alpha q_l^{1-\alpha}}
#   = \mathrm{KL}\big(p\,\Vert\,p^\star\big) - \log Z,\qquad p^\star = \frac{y^\alpha q^{1-\alpha}}{Z}.$$
#
# A KL is minimised (at 0) when its arguments agree, so $p^\star$ is the minimiser. Checks: SymPy (the
# derivative along the 1-D simplex of two words vanishes at $p^\star$), the identity at random points,
# and a generic optimiser on 30 words.

# %%
check = L2.prove_two_point_target("geometric")
print(check.name, "| symbolic zero:", check.symbolic_zero, "| numeric:", f"{check.numeric_max_abs:.1e}")
assert check.symbolic_zero and check.holds

V, alpha = 30, 0.4
y = label_smooth(one_hot(1, V), 0.1)
q = random_simplex(rng, V)
geo = L2.geometric_target(y, q, alpha)
worst_identity = max(abs(L2.geometric_identity_residual(random_simplex(rng, V), y, q, alpha)) for _ in range(20))
numeric = minimize_on_simplex(lambda p: L2.geometric_objective(p, y, q, alpha),
                              lambda p: alpha * (np.log(p / y) + 1) + (1 - alpha) * (np.log(p / q) + 1), q)
print(f"objective - [KL(p||p*) - log Z] at random p: max {worst_identity:.1e};  "
      f"|generic argmin - p*| = {np.max(np.abs(numeric - geo)):.1e}")
assert worst_identity < 1e-12 and np.max(np.abs(numeric - geo)) < 1e-6

# %% [markdown]
# ### With an exactly one-hot label it degenerates
#
# $\mathrm{KL}(p\Vert e_c) = +\infty$ for every $p \ne e_c$, so the objective is infinite everywhere except
# at the label, and the formula agrees: $0^\alpha = 0$ off the label, so $p^\star = e_c$ **for every α** —
# the consistency term has no effect at all. Smoothing with $\varepsilon$ repairs it; as $\varepsilon\to0$ the
# off-label mass of $p^\star$ shrinks like $\varepsilon^{\alpha}$.

# %%
hard = one_hot(1, V)
for a in (0.1, 0.5, 0.9):
    collapsed = L2.geometric_target(hard, q, a, allow_degenerate=True)
    assert np.array_equal(collapsed, hard)
print("one-hot label: p* = e_c for alpha in {0.1, 0.5, 0.9}")
print(f"{'eps':>8} {'off-label mass of p* (alpha=0.5)':>34}")
masses = []
for eps in (1e-1, 1e-2, 1e-4, 1e-6, 1e-8):
    m = 1 - L2.geometric_target(label_smooth(hard, eps), q, 0.5)[1]
    masses.append(m)
    print(f"{eps:>8.0e} {m:>34.3e}")
assert all(a > b for a, b in zip(masses, masses[1:]))
assert masses[-1] < 1e-3
try:
    L2.geometric_target(hard, q, 0.5)
    raise AssertionError("a one-hot label must be refused without allow_degenerate")
except ValueError as err:
    print("refused as expected:", str(err)[:80], "...")

# %% [markdown]
# ## 2. Forward consistency: the arithmetic mixture
#
# $\alpha\,\mathrm{CE}(y, p) + (1-\alpha)\,\mathrm{KL}(q\Vert p) = -\sum_l m_l\log p_l + \text{const}$ with
# $m = \alpha y + (1-\alpha) q$: a cross-entropy against the mixture $m$, minimised (Gibbs' inequality) at
# $p = m$. Works for one-hot labels. SymPy (two words) and a generic optimiser (20 words, one-hot):

# %%
check = L2.prove_two_point_target("arithmetic")
assert check.symbolic_zero and check.holds
V2 = 20
yh, q2 = one_hot(3, V2), random_simplex(rng, V2)
ari = L2.arithmetic_target(yh, q2, 0.6)
numeric = minimize_on_simplex(lambda p: L2.forward_objective(p, yh, q2, 0.6),
                              lambda p: -(0.6 * yh + 0.4 * q2) / p, q2)
print(f"{check.name}: symbolic zero {check.symbolic_zero};  |generic argmin - mixture| = "
      f"{np.max(np.abs(numeric - ari)):.1e}")
assert np.max(np.abs(numeric - ari)) < 1e-6

# %% [markdown]
# ## 3. Reverse consistency (the paper's Eq. 5): neither mixture
#
# $\alpha\,\mathrm{CE}(y, p) + (1-\alpha)\,\mathrm{KL}(p\Vert q)$ mixes $-\log p$ (from CE) with $p\log p$ (from
# the reversed KL). With a multiplier $\lambda$ for $\sum p = 1$, stationarity reads, for every word $l$,
#
# $$-\alpha\frac{y_l}{p_l} + (1-\alpha)\Big(\log\frac{p_l}{q_l} + 1\Big) + \lambda = 0 .$$
#
# $1/p$ and $\log p$ together: no closed form. For fixed $\lambda$ each equation is monotone in $p_l$, so
# `reverse_target_numeric` bisects per word and root-finds $\lambda$. SymPy checks the stationarity
# condition itself (general $n$), and that **neither mixture satisfies it** (two words):

# %%
stat = L2.prove_reverse_stationarity(3)
assert stat.symbolic_zero and stat.holds
for case in ("reverse_vs_arithmetic", "reverse_vs_geometric"):
    c = L2.prove_two_point_target(case)
    print(f"{c.name}: derivative at the mixture, max |.| = {c.numeric_max_abs:.3f}  (must NOT be 0)")
    assert not c.holds and c.numeric_max_abs > 1e-3

print(f"\n{'V':>5} {'label':>8} {'|rev - generic|':>16} {'stationarity':>13} {'|rev - arith|':>14} {'|rev - geo|':>12}")
for V3, is_hard in [(5, False), (50, False), (50, True), (2048, True)]:
    r = np.random.default_rng(V3)
    y3 = one_hot(0, V3) if is_hard else label_smooth(one_hot(0, V3), 0.1)
    q3 = random_simplex(r, V3, floor=0.05)
    rev = L2.reverse_target_numeric(y3, q3, 0.5)
    gen = L2.reverse_target_numeric(y3, q3, 0.5, method="logits") if V3 <= 50 else rev
    res = np.max(np.abs(L2.reverse_stationarity_residual(rev, y3, q3, 0.5)))
    d_ari = np.max(np.abs(rev - L2.arithmetic_target(y3, q3, 0.5)))
    d_geo = np.nan if is_hard else np.max(np.abs(rev - L2.geometric_target(y3, q3, 0.5)))
    print(f"{V3:>5} {'one-hot' if is_hard else 'smooth':>8} {np.max(np.abs(rev - gen)):>16.1e} {res:>13.1e} "
          f"{d_ari:>14.3e} {d_geo:>12.3e}")
    assert np.max(np.abs(rev - gen)) < 1e-6 and res < 1e-9 and d_ari > 1e-4
    assert is_hard or d_geo > 1e-4

# %% [markdown]
# ## 4. The three targets on the 3-simplex
#
# For a label on word A (smoothed with ε = 0.15 so that the geometric target exists) and a previous
# chunk $q$, each curve is the target as $\alpha$ goes from 0 ($q$) to 1 (the label). Same end points,
# three different roads; at a given $\alpha$ they are three different distributions.

# %%
y_t = label_smooth(one_hot(0, 3), 0.15)
q_t = np.array([0.05, 0.35, 0.60])
alphas = np.linspace(0.0, 1.0, 41)[1:]
paths = {
    "geometric (Lemma 2)": np.array([L2.geometric_target(y_t, q_t, a) for a in alphas]),
    "arithmetic (forward)": np.array([L2.arithmetic_target(y_t, q_t, a) for a in alphas]),
    "reverse (Eq. 5)": np.array([L2.reverse_target_numeric(y_t, q_t, a) for a in alphas]),
}
half = {name: L2.geometric_target(y_t, q_t, .5) if name.startswith("geo") else
        L2.arithmetic_target(y_t, q_t, .5) if name.startswith("ari") else L2.reverse_target_numeric(y_t, q_t, .5)
        for name in paths}
colours = {"geometric (Lemma 2)": "black", "arithmetic (forward)": "crimson", "reverse (Eq. 5)": "royalblue"}
traces = []
for name, pts in paths.items():
    traces.append(go.Scatterternary(a=np.r_[q_t[0], pts[:, 0]], b=np.r_[q_t[1], pts[:, 1]], c=np.r_[q_t[2], pts[:, 2]],
                                    mode="lines", name=name, line=dict(color=colours[name], width=3)))
    h = half[name]
    traces.append(go.Scatterternary(a=[h[0]], b=[h[1]], c=[h[2]], mode="markers", showlegend=False,
                                    marker=dict(color=colours[name], size=11, symbol="diamond")))
traces.append(go.Scatterternary(a=[y_t[0]], b=[y_t[1]], c=[y_t[2]], mode="markers", name="label p_y",
                                marker=dict(color="red", size=13)))
traces.append(go.Scatterternary(a=[q_t[0]], b=[q_t[1]], c=[q_t[2]], mode="markers", name="previous chunk q",
                                marker=dict(color="orange", size=13)))
fig = go.Figure(traces)
fig.update_layout(title="Targets of the three local losses as α goes 0 → 1 (diamonds: α = 0.5)", height=560,
                  ternary=dict(aaxis_title="word A (label)", baxis_title="word B", caxis_title="word C"),
                  legend=dict(orientation="h", y=-0.1), margin=dict(b=120))
fig.show()
for name, h in half.items():
    print(f"{name:<22} at alpha = 0.5: {np.round(h, 4)}")
pts = list(half.values())
assert min(np.max(np.abs(a - b)) for i, a in enumerate(pts) for b in pts[i + 1:]) > 0.01

# %% [markdown]
# ## 5. What the engine optimises — checked on the engine's own code
#
# `zerolock_core.method.objectives.local_loss` is what every stage backpropagates. Treat the logits at a few
# answer positions as free variables, minimise the engine's loss with L-BFGS (float64), and compare
# $\mathrm{softmax}(z^\star)$ with the targets above. The label is one-hot (as in training), the
# previous chunk's logits are random.

# %%
def minimise_engine_loss(targets, prev_logits, alpha, direction):
    z = prev_logits.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([z], lr=1, max_iter=500, tolerance_grad=1e-14, tolerance_change=1e-16,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = engine_local_loss(logits=z, targets=targets, prev_logits=prev_logits, alpha=alpha,
                                 direction=direction).total
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
    return torch.softmax(z.detach(), -1).numpy()


torch.manual_seed(0)
T, V5, alpha = 3, 50, 0.5
targets = torch.tensor([4, 17, 30])
prev_logits = torch.randn(T, V5, dtype=torch.float64) * 2
q5 = torch.softmax(prev_logits, -1).numpy()
y5 = np.eye(V5)[targets.numpy()]

print(f"{'direction':<9} {'token':>5} {'|engine argmin - arithmetic|':>29} {'|engine argmin - reverse target|':>33}")
for direction in ("forward", "reverse"):
    p_eng = minimise_engine_loss(targets, prev_logits, alpha, direction)
    for t in range(T):
        d_ari = np.max(np.abs(p_eng[t] - L2.arithmetic_target(y5[t], q5[t], alpha)))
        d_rev = np.max(np.abs(p_eng[t] - L2.reverse_target_numeric(y5[t], q5[t], alpha)))
        print(f"{direction:<9} {t:>5} {d_ari:>29.2e} {d_rev:>33.2e}")
        if direction == "forward":
            assert d_ari < 1e-5 and d_rev > 1e-3
        else:
            assert d_rev < 1e-5 and d_ari > 1e-3

# %% [markdown]
# One more engine fact worth knowing: **the first chunk has no consistency term** (nothing upstream to
# agree with), so its local loss is plain cross-entropy whatever α is — its target is the label itself.

# %%
z0 = torch.randn(T, V5, dtype=torch.float64)
first = engine_local_loss(logits=z0, targets=targets, prev_logits=None, alpha=0.3, direction="reverse")
assert first.consistency is None
assert torch.allclose(first.total, torch.nn.functional.cross_entropy(z0, targets))

# %% [markdown]
# ## Plainly
#
# * **Lemma 2's geometric target** $p_y^\alpha p_{k-1}^{1-\alpha}/Z$ is the minimiser of
#   $\alpha\mathrm{KL}(p\Vert p_y) + (1-\alpha)\mathrm{KL}(p\Vert p_{k-1})$ with a **smoothed** label. With a one-hot
#   label it collapses to the label for every α. The engine does not optimise this objective.
# * **`--consistency forward`** (the authors' code): the engine minimises
#   $\alpha\mathrm{CE}(p_y,p) + (1-\alpha)\mathrm{KL}(p_{k-1}\Vert p)$, whose minimiser is the **arithmetic** mixture
#   $\alpha p_y + (1-\alpha)p_{k-1}$.
# * **`--consistency reverse`** (the paper's Eq. 5, the engine's default): the minimiser is **neither**
#   mixture; it solves $-\alpha y_l/p_l + (1-\alpha)(\log(p_l/q_l)+1) + \lambda = 0$ and is found numerically.
#   Off the label it stays proportional to $p_{k-1}$.
# * So Lemmas 1–2, and Proposition 1 built on them, describe the *Bregman-form* objective; they are a
#   model of what the engine does, not a description of it. Notebook 5 measures how the bound fares
#   on the engine's real chunk readouts in both geometries.

# %% [markdown]
# ## Exercises
#
# Try each exercise before you look at its solution: the code cell under it is collapsed to its first
# line (click the three dots, or the bar on its left, to show it). The solutions run with the rest of
# the notebook and `assert` their answers, so they are checked like everything above.
#
# ### Exercise 1 · How much does α move the label's mass?
#
# Take a one-hot label (as in training) on word $c$ and a previous chunk $q$ that gives it
# $q_c = 0.05$. **Predict** the label's mass in the forward (arithmetic) target as a formula in α, and
# whether the reverse target's label mass also grows with α. Check both for 20 values of α in
# $(0, 1)$ with `L2.arithmetic_target` and `L2.reverse_target_numeric`.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# Forward: alpha + (1 - alpha) q_c, a straight line. Reverse: the label's stationarity condition
# (1 - alpha) log(p_c (1 - q_c) / ((1 - p_c) q_c)) = alpha / p_c has a root that rises with alpha.
V6, c6 = 40, 7
q6 = np.insert(0.95 * random_simplex(np.random.default_rng(6), V6 - 1, floor=0.01), c6, 0.05)   # q_c = 0.05
y6 = one_hot(c6, V6)
grid_alpha = np.linspace(0.05, 0.95, 20)
mass_fwd = np.array([L2.arithmetic_target(y6, q6, a)[c6] for a in grid_alpha])
mass_rev = np.array([L2.reverse_target_numeric(y6, q6, a)[c6] for a in grid_alpha])
for a, f, r in list(zip(grid_alpha, mass_fwd, mass_rev))[::4]:
    print(f"alpha {a:.2f}: label mass forward {f:.3f}, reverse {r:.3f}")
assert np.allclose(mass_fwd, grid_alpha + (1 - grid_alpha) * 0.05, atol=1e-12)
assert np.all(np.diff(mass_rev) > 0) and np.all((mass_rev > 0.05) & (mass_rev < 1))

# %% [markdown]
# ### Exercise 2 · What happens to the wrong words?
#
# The label has one word; the previous chunk $q$ has an opinion about all the others. **Predict**, for
# each target, how its mass on a wrong word $l \ne c$ relates to $q_l$: the forward target with a one-hot
# label, the reverse target with a one-hot label, the geometric target with a smoothed label. Which ones
# keep $q$'s *ratios* between wrong words, and which only keep their *order*? Check with α = 0.4.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# forward: p_l = (1 - alpha) q_l;  reverse: p_l = kappa q_l (same kappa for every l != c, from the
# stationarity condition with y_l = 0);  geometric: p_l proportional to q_l^(1 - alpha) (y_l is the same
# small number for every l != c), which flattens q's ratios but keeps their order.
a4 = 0.4
off = np.arange(V6) != c6
ratio_fwd = L2.arithmetic_target(y6, q6, a4)[off] / q6[off]
ratio_rev = L2.reverse_target_numeric(y6, q6, a4)[off] / q6[off]
geo6 = L2.geometric_target(label_smooth(y6, 0.1), q6, a4)
ratio_geo = geo6[off] / q6[off] ** (1 - a4)
print(f"p_l / q_l over the wrong words: forward {ratio_fwd.min():.6f}..{ratio_fwd.max():.6f}, "
      f"reverse {ratio_rev.min():.6f}..{ratio_rev.max():.6f};  geometric p_l / q_l^(1-alpha): "
      f"{ratio_geo.min():.6f}..{ratio_geo.max():.6f}")
assert np.allclose(ratio_fwd, 1 - a4, rtol=1e-12)
assert np.ptp(ratio_rev) < 1e-9 * ratio_rev.mean()
assert np.ptp(ratio_geo) < 1e-9 * ratio_geo.mean()
assert np.ptp(geo6[off] / q6[off]) > 0.1 * (geo6[off] / q6[off]).mean()              # ratios not kept
assert np.array_equal(np.argsort(geo6[off], kind="stable"), np.argsort(q6[off], kind="stable"))  # order kept

# %% [markdown]
# ### Exercise 3 · Pick α for a target — and switch the consistency direction
#
# With `--consistency forward`, which α makes a chunk's local optimum give the label **exactly half** of
# its mass, for a previous chunk that gives it $q_c$? Work it out from Exercise 1, then confirm it on the
# engine's own loss with section 5's `minimise_engine_loss` (one token, $V = 50$). Now switch the same
# chunk to `--consistency reverse` at the same α: more or less than half?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# alpha + (1 - alpha) q_c = 1/2  =>  alpha = (1/2 - q_c) / (1 - q_c)
token, c5 = targets[:1], int(targets[0])                     # section 5's first answer token
qc = float(q5[0, c5])
alpha_half = (0.5 - qc) / (1 - qc)
p_fwd = minimise_engine_loss(token, prev_logits[:1], alpha_half, "forward")[0, c5]
p_rev = minimise_engine_loss(token, prev_logits[:1], alpha_half, "reverse")[0, c5]
print(f"q_c = {qc:.4f} -> alpha = {alpha_half:.4f}: engine optimum gives the label {p_fwd:.6f} (forward), "
      f"{p_rev:.4f} (reverse)")
assert abs(p_fwd - 0.5) < 1e-5
assert abs(p_rev - L2.reverse_target_numeric(y5[0], q5[0], alpha_half)[c5]) < 1e-5
# Less than half: KL(p || q) makes every unit of mass moved onto a word that q rules out expensive
# (p log(p / q) with a tiny q_c), and the cross-entropy term does not pay for it at this alpha.
assert p_rev < 0.5 - 1e-3                     # the direction changes the optimum, not only the loss value
