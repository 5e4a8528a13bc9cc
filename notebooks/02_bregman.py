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
# # 2 · Bregman divergences and the three-point identity
#
# **What this notebook shows.** The whole convergence story of ZeroLock (paper §II-B, review §3) is
# written in *Bregman geometry*. If you know gradient descent you already know one Bregman
# divergence: the squared distance. This notebook
#
# 1. rewrites a gradient-descent step as a *proximal step* with the squared distance;
# 2. defines the Bregman divergence $D_\psi(u, v)$ of a convex "potential" $\psi$ and draws it;
# 3. proves (SymPy) that negative entropy gives the KL divergence — **only on the simplex**, and
#    shows the extra term off it — and that the squared norm gives the squared distance;
# 4. shows that $D_\psi$ is not symmetric;
# 5. proves the **three-point identity** (the paper's Eq. 9) for an *arbitrary* potential, and shows
#    which look-alike variants are false.
#
# Every symbolic identity is also checked numerically at random points (SymPy's `simplify` can fail
# to prove that something is zero; numbers cannot be fooled that way). Every check is an `assert`:
# if a claim here were wrong, the notebook — and the test suite that runs it — would fail.

# %%
import os
import pathlib

root = pathlib.Path.cwd().resolve()
while not (root / "pyproject.toml").exists() and root != root.parent:
    root = root.parent
os.chdir(root)

import numpy as np
import plotly.graph_objects as go
from scipy.optimize import minimize

from theory import bregman as B
from theory import three_point as TP
from theory.simplex import random_simplex

rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. A gradient step is a proximal step
#
# Gradient descent moves from $q$ to $q - \eta g$. The same point is the minimiser of
#
# $$\langle g, p\rangle + \frac{1}{2\eta}\lVert p - q\rVert^2 ,$$
#
# "go downhill along the linearised loss, but pay for moving away from $q$". The penalty is the
# squared distance; $\eta$ (the step size) says how cheap moving is. Check it with a generic optimiser:

# %%
q = rng.standard_normal(5)
g = rng.standard_normal(5)
eta = 0.3
res = minimize(lambda p: g @ p + np.sum((p - q) ** 2) / (2 * eta), np.zeros(5), method="BFGS",
               options={"gtol": 1e-12})
print("argmin of the proximal objective:", np.round(res.x, 6))
print("gradient step q - eta * g:       ", np.round(q - eta * g, 6))
assert np.allclose(res.x, q - eta * g, atol=1e-6)

# %% [markdown]
# ZeroLock's Lemma 1 says that each chunk's local loss is minimised by *exactly such a step* — with
# the squared distance replaced by another "distance" that suits probability distributions. That
# other distance is a Bregman divergence.
#
# ## 2. The Bregman divergence
#
# Take a strictly convex, differentiable function $\psi$. Its tangent plane at $v$ lies below its
# graph. The **Bregman divergence** is the height of the graph above the tangent plane, at $u$:
#
# $$D_\psi(u, v) = \psi(u) - \psi(v) - \langle \nabla\psi(v), u - v\rangle \;\ge 0,\qquad = 0 \iff u = v.$$
#
# On the probability simplex the natural potential is the **negative entropy**
# $\psi(x) = \sum_i x_i \log x_i$. With two outcomes a distribution is $(x, 1-x)$, so we can draw it:

# %%
def psi2(x):
    return x * np.log(x) + (1 - x) * np.log(1 - x)


def dpsi2(x):
    return np.log(x) - np.log(1 - x)


v, u = 0.3, 0.8
xs = np.linspace(0.005, 0.995, 300)
tangent = psi2(v) + dpsi2(v) * (xs - v)
gap = psi2(u) - (psi2(v) + dpsi2(v) * (u - v))
fig = go.Figure([
    go.Scatter(x=xs, y=psi2(xs), name="ψ(x) = x log x + (1-x) log(1-x)"),
    go.Scatter(x=xs, y=tangent, name="tangent at v", line=dict(dash="dash")),
    go.Scatter(x=[u, u], y=[psi2(v) + dpsi2(v) * (u - v), psi2(u)], mode="lines+markers",
               name=f"D_ψ(u, v) = {gap:.3f}", line=dict(width=4)),
])
fig.update_layout(title="A Bregman divergence is the gap between ψ and its tangent",
                  xaxis_title="x  (the distribution (x, 1-x))", yaxis_title="ψ", height=380)
fig.show()

kl_uv = u * np.log(u / v) + (1 - u) * np.log((1 - u) / (1 - v))
print(f"gap = {gap:.6f},  KL((u,1-u) || (v,1-v)) = {kl_uv:.6f}")
assert abs(gap - kl_uv) < 1e-12
assert np.all(psi2(xs) - (psi2(v) + dpsi2(v) * (xs - v)) >= -1e-12)   # tangent below the graph

# %% [markdown]
# The gap is the KL divergence. That is no accident, as the next section proves.
#
# ## 3. Two potentials, two divergences
#
# **Squared norm.** $\psi(x) = \tfrac12\lVert x\rVert^2$ gives $D_\psi(u,v) = \tfrac12\lVert u-v\rVert^2$,
# everywhere — so section 1's proximal step *was* a Bregman proximal step.

# %%
sq = B.prove_squared_norm_is_distance(3)
print(sq.name, "| symbolic zero:", sq.symbolic_zero, "| max |residual| at random points:", sq.numeric_max_abs)
assert sq.symbolic_zero and sq.holds

# %% [markdown]
# **Negative entropy.** With $\nabla\psi(v)_i = \log v_i + 1$,
#
# $$D_\psi(u, v) = \sum_i u_i\log\frac{u_i}{v_i} \;-\; \sum_i u_i + \sum_i v_i .$$
#
# The last two sums cancel **only when both vectors sum to one** — then $D_\psi = \mathrm{KL}(u\Vert v)$.
# The proof below imposes the simplex explicitly ($u_n = 1 - \sum_{i<n} u_i$, same for $v$); off
# the simplex the residual is exactly $\sum v - \sum u$, and numbers confirm that it is *not* zero there.

# %%
proof = B.prove_negentropy_is_kl(3)
print("D_negentropy - KL for free positive u, v simplifies to:", proof.off_simplex_residual)
print("on the simplex, simplified residual:", proof.on_simplex.simplified,
      "| numeric max:", proof.on_simplex.numeric_max_abs)
print("off the simplex, max |D - KL| at random positive points:", round(proof.off_simplex_nonzero_max, 3))
assert proof.on_simplex.symbolic_zero and proof.on_simplex.holds
assert proof.off_simplex_matches.holds                    # residual == sum v - sum u
assert proof.off_simplex_nonzero_max > 0.1                # ... which is not 0 off the simplex

# %% [markdown]
# ## 4. Not a distance: $D_\psi$ is not symmetric
#
# $\mathrm{KL}(u\Vert v) \ne \mathrm{KL}(v\Vert u)$ in general. The squared norm is the exception,
# which is why Euclidean intuition can mislead here: in the paper *which argument comes first*
# changes which function is being minimised (notebook 4 is about exactly that).

# %%
rows = []
for _ in range(4):
    a, b = random_simplex(rng, 4), random_simplex(rng, 4)
    rows.append((B.kl(a, b), B.kl(b, a), 0.5 * np.sum((a - b) ** 2), 0.5 * np.sum((b - a) ** 2)))
print(f"{'KL(u||v)':>10} {'KL(v||u)':>10} {'½|u-v|²':>10} {'½|v-u|²':>10}")
for r in rows:
    print(" ".join(f"{x:>10.4f}" for x in r))
assert all(abs(r[0] - r[1]) > 1e-4 for r in rows)
assert all(abs(r[2] - r[3]) < 1e-15 for r in rows)

# %% [markdown]
# ## 5. The three-point identity (Eq. 9)
#
# For any potential and any three points $p$ (a chunk's new output), $q = p_{k-1}$ (the previous
# chunk's output) and $y = p_y$ (the label):
#
# $$D_\psi(p, y) = D_\psi(q, y) + \big\langle \nabla_p D_\psi(p, y)\big|_{p=q},\; p - q\big\rangle + D_\psi(p, q).$$
#
# Read it as a Taylor expansion of $p \mapsto D_\psi(p, y)$ around $q$ that is **exact**: the
# remainder is not "$O(\lVert p-q\rVert^2)$" but precisely $D_\psi(p, q)$. Proof in one line:
# $\nabla_p D_\psi(p,y) = \nabla\psi(p) - \nabla\psi(y)$; substitute and the right side collapses
# to $\psi(p) - \psi(y) - \langle\nabla\psi(y), p - y\rangle$.
#
# SymPy can check it for a **completely arbitrary** $\psi$ (an undefined function
# $\psi(x_1, x_2, x_3)$ about which it knows nothing but calculus):

# %%
general = TP.prove_three_point(3)          # psi = undefined function; numbers use negative entropy
print(general.name, "| symbolic zero:", general.symbolic_zero, "| numeric max:", general.numeric_max_abs)
assert general.symbolic_zero and general.holds

# %% [markdown]
# Plausible-looking variants are **false**. Each row below is checked for a general potential or for
# a concrete one; "holds" is the numeric verdict at 200 random points.
#
# * `swapped_last`: remainder $D(q, p)$ instead of $D(p, q)$;
# * `reversed_arguments`: every $D(a, b)$ replaced by $D(b, a)$ (expanding $p\mapsto D(y, p)$, the
#   *cross-entropy* direction for KL);
# * `gradient_at_p`: the gradient taken at $p$ instead of $q$.
#
# The first two survive for the squared norm — because its divergence is symmetric — and fail for
# negative entropy. The last fails even in Euclidean geometry.

# %%
potentials = {"general ψ": None, "negative entropy": B.negative_entropy, "squared norm": B.squared_norm}
expected = {
    ("general ψ", "correct"): True, ("negative entropy", "correct"): True, ("squared norm", "correct"): True,
    ("general ψ", "swapped_last"): False, ("negative entropy", "swapped_last"): False,
    ("squared norm", "swapped_last"): True,
    ("negative entropy", "reversed_arguments"): False, ("squared norm", "reversed_arguments"): True,
    ("negative entropy", "gradient_at_p"): False, ("squared norm", "gradient_at_p"): False,
}
print(f"{'potential':<18} {'variant':<20} {'holds':>6} {'max |residual|':>15}")
for (pot, variant), want in expected.items():
    check = TP.prove_three_point(3, potentials[pot], variant=variant)
    print(f"{pot:<18} {variant:<20} {str(check.holds):>6} {check.numeric_max_abs:>15.3g}")
    assert check.holds is want, (pot, variant)

# %% [markdown]
# Finally the same identity with plain NumPy on a 50-word vocabulary (no SymPy involved), and the
# `swapped_last` variant failing on the same points:

# %%
worst, worst_swapped = 0.0, np.inf
for _ in range(20):
    p, q_, y = (random_simplex(rng, 50, floor=0.01) for _ in range(3))
    worst = max(worst, abs(TP.three_point_numeric(B.negative_entropy_numeric, B.negative_entropy_grad_numeric,
                                                  p, q_, y)))
    swapped = B.kl(p, y) - B.kl(q_, y) - np.dot(np.log(q_) - np.log(y), p - q_) - B.kl(q_, p)
    worst_swapped = min(worst_swapped, abs(swapped))
print(f"Eq. (9): max |residual| = {worst:.2e};  swapped remainder: min |residual| = {worst_swapped:.2e}")
assert worst < 1e-12 and worst_swapped > 1e-6

# %% [markdown]
# ## Why this matters for ZeroLock
#
# Put $p$ = chunk $k$'s prediction, $q = p_{k-1}$ and $y = p_y$ into Eq. (9) and the local loss
# $\alpha D(p, p_y) + (1-\alpha) D(p, p_{k-1})$ becomes "a linearised global loss plus $1/\alpha$ times a
# Bregman penalty for moving away from $p_{k-1}$" — a proximal step, exactly like section 1 but in
# KL geometry. That is Lemma 1, the subject of **notebook 3**.

# %% [markdown]
# ## Exercises
#
# Try each exercise before you look at its solution: the code cell under it is collapsed to its first
# line (click the three dots, or the bar on its left, to show it). The solutions run with the rest of
# the notebook and `assert` their answers, so they are checked like everything above.
#
# ### Exercise 1 · A third potential
#
# Take the **Burg entropy** $\psi(x) = -\sum_i \log x_i$ on positive vectors (not only the simplex).
# Work out $D_\psi(u, v)$ by hand from the definition in section 2, then check your formula with
# `B.bregman_numeric` at random positive points. Is it symmetric? And what happens when you scale both
# points by the same $c > 0$: compare $D_\psi(cu, cv)$ with $D_\psi(u, v)$ for the Burg entropy, the
# negative entropy and the squared norm.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# grad psi(v) = -1/v, so D(u, v) = sum(u/v - log(u/v) - 1): the Itakura-Saito divergence.
def burg(x):
    return -np.sum(np.log(x), axis=-1)


def burg_grad(x):
    return -1.0 / np.asarray(x)


def itakura_saito(u, v):
    return float(np.sum(u / v - np.log(u / v) - 1.0))


potentials_numeric = {"Burg entropy": (burg, burg_grad),
                      "negative entropy": (B.negative_entropy_numeric, B.negative_entropy_grad_numeric),
                      "squared norm": (B.squared_norm_numeric, B.squared_norm_grad_numeric)}
u_, v_, c = rng.uniform(0.1, 2.0, 6), rng.uniform(0.1, 2.0, 6), 3.0
d_burg = B.bregman_numeric(burg, burg_grad, u_, v_)
print(f"Burg: D(u,v) = {d_burg:.6f}, Itakura-Saito formula {itakura_saito(u_, v_):.6f}, "
      f"D(v,u) = {B.bregman_numeric(burg, burg_grad, v_, u_):.6f}")
assert abs(d_burg - itakura_saito(u_, v_)) < 1e-12 and d_burg > 0
assert abs(d_burg - B.bregman_numeric(burg, burg_grad, v_, u_)) > 1e-3          # not symmetric
scaling = {name: B.bregman_numeric(f, g, c * u_, c * v_) / B.bregman_numeric(f, g, u_, v_)
           for name, (f, g) in potentials_numeric.items()}
print(f"D(cu, cv) / D(u, v) with c = {c}: " + ", ".join(f"{k} {x:.6f}" for k, x in scaling.items()))
assert abs(scaling["Burg entropy"] - 1) < 1e-9           # scale-free: only ratios u/v matter
assert abs(scaling["negative entropy"] - c) < 1e-9       # grows like c
assert abs(scaling["squared norm"] - c**2) < 1e-9        # grows like c^2

# %% [markdown]
# ### Exercise 2 · Eq. (9) for your potential
#
# Section 5 proved the three-point identity for *any* potential. Predict whether it holds for the Burg
# entropy, then check it with `TP.three_point_numeric` at 20 random triples of positive vectors. Does the
# `swapped_last` variant (remainder $D(q, p)$ instead of $D(p, q)$) fail for it too?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
worst_burg, best_swapped = 0.0, np.inf
for _ in range(20):
    p, q_, y = (rng.uniform(0.1, 2.0, 8) for _ in range(3))
    worst_burg = max(worst_burg, abs(TP.three_point_numeric(burg, burg_grad, p, q_, y)))
    swapped = (B.bregman_numeric(burg, burg_grad, p, y) - B.bregman_numeric(burg, burg_grad, q_, y)
               - np.dot(burg_grad(q_) - burg_grad(y), p - q_) - B.bregman_numeric(burg, burg_grad, q_, p))
    best_swapped = min(best_swapped, abs(swapped))
print(f"Burg entropy: Eq. (9) max |residual| {worst_burg:.1e};  swapped remainder min |residual| {best_swapped:.2e}")
assert worst_burg < 1e-10 and best_swapped > 1e-6

# %% [markdown]
# ### Exercise 3 · Potentials that give the same divergence
#
# Change the potential without changing the geometry: add a linear function and a constant,
# $\psi(x) + \langle a, x\rangle + b$, or multiply it by $c > 0$. **Predict** what happens to $D_\psi$ in
# each case (the tangent plane is the hint), then check with the negative entropy on the simplex.
# Why does this mean the step size $\eta$ of section 1 and a rescaled potential are the same knob?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
a_vec, b_const, c = rng.standard_normal(5), 1.7, 2.5
psi, grad = B.negative_entropy_numeric, B.negative_entropy_grad_numeric
shifted = (lambda x: psi(x) + np.dot(x, a_vec) + b_const, lambda x: grad(x) + a_vec)
scaled = (lambda x: c * psi(x), lambda x: c * grad(x))
for _ in range(5):
    u5, v5 = random_simplex(rng, 5), random_simplex(rng, 5)
    d = B.bregman_numeric(psi, grad, u5, v5)
    assert abs(B.bregman_numeric(*shifted, u5, v5) - d) < 1e-12    # the tangent moves with psi: same gap
    assert abs(B.bregman_numeric(*scaled, u5, v5) - c * d) < 1e-12  # every height scales by c
print("psi + <a, x> + b: the same divergence;  c * psi: c times it.  So (1/eta) D_psi = D_{psi/eta}: "
      "choosing a step size is choosing a rescaled potential")
