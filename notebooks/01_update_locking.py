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
# # 1 · Update locking, and what ZeroLock removes (the paper's Fig. 1)
#
# **What this notebook shows.** With backpropagation (BP), stage $s$ of a pipeline cannot update —
# cannot even run its backward pass — before every stage after it has run forward *and* backward:
# that is **update locking**, and it costs idle time (bubbles) and memory (activations kept alive
# while waiting). ZeroLock gives every stage its own local loss, so a stage's backward needs nothing
# from downstream. We rebuild the paper's Fig. 1 from the project's schedule simulator:
#
# * (a)/(b) per-stage **timelines** of BP (GPipe and 1F1B) and ZeroLock, $K = 3$ stages, 3 micro-batches;
# * (c)/(d) the **activations held** per stage over time;
# * the dependency that makes BP wait, checked action by action; the textbook bubble formula; and the
#   in-flight counts the design notes predict (GPipe $m$, 1F1B $K - s$, ZeroLock 1).
#
# The schedules are plain data (`zerolock_core.schedule`): the same objects the multi-process runtime
# executes. Time here is *modelled* (a forward costs 1 unit), not measured — notebook 6 runs the real
# thing. Figures use the dashboard's own builders (`app.figures`). Every check is an `assert`.

# %%
import os
import pathlib
import re

root = pathlib.Path.cwd().resolve()
while not (root / "pyproject.toml").exists() and root != root.parent:
    root = root.parent
os.chdir(root)

import plotly.graph_objects as go

from app.figures import METHOD_COLOURS, memory_figure, simulated_events, timeline_figure
from zerolock_core.schedule import Costs, LinkProfile, build_schedule, inflight_peak, simulate, textbook_bubble

K, M = 3, 3
UNITS_AXIS = "modelled time (units: one forward = 1)"


def in_units(fig: go.Figure) -> go.Figure:
    """Relabel a figure builder's time axis and tooltips for modelled time.

    The builders draw measured runs: seconds since the run started, durations in ms. Here time is
    the simulator's cost units, so the axis shows plain units and the tooltips say "units"."""
    for axis in fig.select_xaxes(selector=dict(ticksuffix=" s")):   # the time axes, not the peak bars'
        axis.ticksuffix = None
        if axis.title.text:
            axis.title.text = UNITS_AXIS
    for trace in fig.data:
        if trace.hovertemplate:
            text = re.sub(r"%\{customdata\[2\][^}]*\} ms", "%{x:.2f} units", trace.hovertemplate)  # bar width
            trace.hovertemplate = re.sub(r"(%\{[^}]*\}) s\b", r"\1 units", text)
    return fig

# %% [markdown]
# ## 1. Schedules are data
#
# Each stage gets a list of actions: `F` forward, `SF`/`RF` send/receive a hidden state, `B` backward,
# `SB`/`RB` send/receive a gradient, `L` ZeroLock's local step (frozen-head readout + local loss + local
# backward), `STEP` the optimizer step. `"1F2"` means "stage 1, forward, micro-batch 2". Here is the
# order in which each stage *could* run them if every action took one tick:

# %%
schedules = {m: build_schedule(m, stages=K, microbatches=M) for m in ("gpipe", "1f1b", "zerolock")}
print("GPipe\n" + schedules["gpipe"].grid())
print("\nZeroLock\n" + schedules["zerolock"].grid())
assert "L" not in {a.kind.value for row in schedules["gpipe"].actions for a in row}
assert not {"B", "SB", "RB"} & {a.kind.value for row in schedules["zerolock"].actions for a in row}

# %% [markdown]
# Look at stage 0 under GPipe: after `0F2` it has nothing to do until `0RB0` — the gradient of
# micro-batch 0 has to come all the way back from stage 2. Under ZeroLock stage 0 runs `0L0` right after
# sending `0SF0` (*early forwarding*: the hidden state leaves **before** the local step) and never waits.
#
# ## 2. Costed timelines: Fig. 1 (a) and (b)
#
# Costs: forward 1 unit, backward 2 units (the usual ≈ 2× rule), ZeroLock's local step 2.2 units
# (its backward plus the readout head and local loss — a little *more* work than BP's backward, to be
# fair to BP). A "local" 1 Gb/s link with a 64 KiB hidden state (negligible here).

# %%
costs = Costs(forward=1.0, backward=2.0, local=2.2, hidden_bytes=64 * 1024, grad_bytes=64 * 1024)
link = LinkProfile.profile("local")
results = {m: simulate(s, costs=costs, link=link) for m, s in schedules.items()}
events = {m: simulated_events(s, costs, link) for m, s in schedules.items()}

for m in ("gpipe", "1f1b", "zerolock"):
    r = results[m]
    print(f"{m:<9} makespan {r.makespan_s:5.2f} units   bubble {r.bubble_fraction:5.1%}   "
          f"activations held at peak per stage {r.inflight_peak}")

titles = {"gpipe": "(a) BP with GPipe", "1f1b": "(a') BP with 1F1B", "zerolock": "(b) ZeroLock"}
for m in ("gpipe", "1f1b", "zerolock"):
    fig = in_units(timeline_figure(events[m], stages=K, title=f"{titles[m]}: K={K} stages, m={M} micro-batches"))
    fig.show()
assert fig.layout.xaxis.title.text == UNITS_AXIS and not fig.layout.xaxis.ticksuffix
assert not any(" ms" in t.hovertemplate or " s<" in t.hovertemplate for t in fig.data if t.hovertemplate)

# %% [markdown]
# (The time axis is in the simulator's cost units: a forward takes 1. The figure builders were made
# for measured runs, whose axis is seconds since the run started; `in_units` relabels it here.)
# Under BP the long pink bars are stages *waiting for a gradient*;
# under ZeroLock there are none — each stage's only waits are for its input at the very start.
#
# ## 3. The dependency that makes BP wait, checked
#
# Under BP, stage 0's backward of micro-batch 0 can only start after stage 2 has finished **its**
# backward of micro-batch 0 (and stage 1 after it). Under ZeroLock, stage 0's local step of micro-batch 0
# starts as soon as its own forward is done — before stage 2 has even *received* micro-batch 0.

# %%
for m in ("gpipe", "1f1b"):
    r = results[m]
    b0 = {s: r.record_of(f"{s}B0") for s in range(K)}
    print(f"{m}: 2B0 ends {b0[2].end_s:.1f}, 1B0 runs {b0[1].start_s:.1f}-{b0[1].end_s:.1f}, 0B0 starts {b0[0].start_s:.1f}")
    assert b0[0].start_s >= b0[1].end_s >= b0[1].start_s >= b0[2].end_s       # the chain rule, in time
z = results["zerolock"]
print(f"zerolock: 0F0 ends {z.record_of('0F0').end_s:.1f}, 0L0 starts {z.record_of('0L0').start_s:.1f}, "
      f"2RF0 completes {z.record_of('2RF0').end_s:.1f}")
assert z.record_of("0L0").start_s == z.record_of("0F0").end_s                   # no wait at all
assert z.record_of("0L0").start_s < z.record_of("2RF0").end_s                   # ... not even for stage 2

# %% [markdown]
# ## 4. Activations held: Fig. 1 (c) and (d)
#
# A stage must keep a micro-batch's activations from the start of its forward until its backward
# (BP) or local step (ZeroLock) consumes them. Under BP stage 0 keeps **all three** micro-batches alive
# at once ($A_1$–$A_3$ in the paper's figure) because their backwards are stuck behind the downstream
# stages; under ZeroLock each one is freed by the stage's own local step, so it holds **one**.

# %%
for m in ("gpipe", "1f1b", "zerolock"):
    in_units(memory_figure(events[m], stages=K, measure="inflight",
                           title=f"{titles[m]}: micro-batches of activations held")).show()

expected = {"gpipe": (M,) * K, "1f1b": tuple(K - s for s in range(K)), "zerolock": (1,) * K}
for m, want in expected.items():
    assert results[m].inflight_peak == want, (m, results[m].inflight_peak)
    assert tuple(inflight_peak(schedules[m], s) for s in range(K)) == want      # static analysis agrees
    peaks = [max(e["inflight"] for e in events[m] if e["stage"] == s) for s in range(K)]
    assert tuple(peaks) == want                                                   # ... and so do the events

# %% [markdown]
# ## 5. The bubble, and why no schedule removes it
#
# With equal stages, GPipe's idle fraction is the textbook $(K-1)/(m+K-1)$; 1F1B only reorders the
# same work (its bubble is the same here; what it saves is memory). ZeroLock's remaining idle time is
# pipeline fill/drain only. More micro-batches shrink BP's bubble but never remove it, because the
# dependency — not the order — is the bottleneck.

# %%
uniform = Costs(forward=1.0, backward=2.0, local=2.0)
rows = []
for m_ in (3, 6, 12, 24):
    r = {meth: simulate(build_schedule(meth, stages=K, microbatches=m_), costs=uniform, link=LinkProfile.profile("ideal"))
         for meth in ("gpipe", "1f1b", "zerolock")}
    rows.append((m_, r["gpipe"].bubble_fraction, textbook_bubble("gpipe", K, m_), r["1f1b"].bubble_fraction,
                 r["zerolock"].bubble_fraction, r["gpipe"].makespan_s / r["zerolock"].makespan_s))
print(f"{'m':>3} {'GPipe bubble':>13} {'(K-1)/(m+K-1)':>14} {'1F1B':>7} {'ZeroLock':>9} {'BP/ZeroLock time':>17}")
for m_, g, tb, o, zl, ratio in rows:
    print(f"{m_:>3} {g:>13.3f} {tb:>14.3f} {o:>7.3f} {zl:>9.3f} {ratio:>17.2f}")
    assert abs(g - tb) < 1e-12                       # the simulator reproduces the textbook formula
    assert zl < o <= g + 1e-12
fig = go.Figure([go.Scatter(x=[r[0] for r in rows], y=[r[i] for r in rows], mode="lines+markers", name=name,
                            line=dict(color=colour, dash=dash))   # 1F1B dashed: it lies on GPipe's line
                 for i, name, colour, dash in ((1, "GPipe", METHOD_COLOURS["gpipe"], "solid"),
                                               (3, "1F1B", METHOD_COLOURS["1f1b"], "dash"),
                                               (4, "ZeroLock", METHOD_COLOURS["zerolock"], "solid"))])
# A log axis labels only 1, 2, 5, 10, 20, … and writes 20 as "2": put the ticks at the m we simulated.
fig.update_layout(title="Idle fraction vs micro-batches per update (K = 3, equal stages)", height=360,
                  xaxis=dict(title="m (micro-batches per update)", type="log", tickvals=[r[0] for r in rows]),
                  yaxis_title="bubble fraction", template="plotly_white")
fig.show()

# %% [markdown]
# **Takeaway.** BP's pipeline schedules trade bubbles for memory but cannot escape the chain rule:
# a stage's update waits on everything downstream. ZeroLock's local losses cut that dependency: each
# stage forwards, sends, and immediately takes its own local step, holding one micro-batch of
# activations. Whether that is *allowed* — whether the decoupled chunks still optimise the right thing —
# is the theory of notebooks 2–5. Notebook 6 runs a real multi-process pipeline and draws its measured
# telemetry with the same figure builders.

# %% [markdown]
# ## Exercises
#
# Try each exercise before you look at its solution: the code cell under it is collapsed to its first
# line (click the three dots, or the bar on its left, to show it). The solutions run with the rest of
# the notebook and `assert` their answers, so they are checked like everything above.
#
# ### Exercise 1 · More micro-batches
#
# Keep $K = 3$ and the equal-stage costs of section 5 (`uniform`), but split each update into $m = 8$
# micro-batches. **Predict first**: GPipe's bubble, and how many micro-batches of activations each
# stage holds at its peak under GPipe, 1F1B and ZeroLock. Then check with `build_schedule` and
# `simulate`. Which method's memory grows with $m$?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
m8 = 8
ideal = LinkProfile.profile("ideal")
sims = {meth: simulate(build_schedule(meth, stages=K, microbatches=m8), costs=uniform, link=ideal)
        for meth in ("gpipe", "1f1b", "zerolock")}
print(f"GPipe bubble {sims['gpipe'].bubble_fraction:.3f};  (K-1)/(m+K-1) = {(K - 1) / (m8 + K - 1):.3f}")
for meth, r in sims.items():
    print(f"{meth:<9} activations held at the peak, per stage: {r.inflight_peak}")
assert abs(sims["gpipe"].bubble_fraction - (K - 1) / (m8 + K - 1)) < 1e-12
assert sims["gpipe"].inflight_peak == (m8,) * K       # GPipe holds every micro-batch: memory grows with m
assert sims["1f1b"].inflight_peak == (3, 2, 1)        # 1F1B: K - s, whatever m is
assert sims["zerolock"].inflight_peak == (1,) * K     # ZeroLock: one

# %% [markdown]
# ### Exercise 2 · ZeroLock's own bubble
#
# ZeroLock is not bubble-free (section 5's table): stage $s$ waits $s$ forwards for its first input,
# and once the last stage has started, it never waits again. With a forward costing $F$ and a local
# step $L$ (equal stages, ideal link), **derive ZeroLock's idle fraction** as a formula in $K$, $m$, $F$
# and $L$. Check it against `simulate` for $K \in \{2, 3, 6\}$ and $m \in \{1, 3, 12\}$. Which knob
# shrinks it, and how does it compare with GPipe's $(K-1)/(m+K-1)$?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# Every stage does m (F + L) of work; the last one starts after K - 1 forwards, so the run takes
# (K - 1) F + m (F + L), and each stage idles (K - 1) F of it (s forwards at the start, K - 1 - s at the end).
F, L = uniform.forward, uniform.local
for k in (2, 3, 6):
    for m_ in (1, 3, 12):
        r = simulate(build_schedule("zerolock", stages=k, microbatches=m_), costs=uniform,
                     link=LinkProfile.profile("ideal"))
        formula = (k - 1) * F / ((k - 1) * F + m_ * (F + L))
        print(f"K={k} m={m_:>2}: simulated {r.bubble_fraction:.4f}   formula {formula:.4f}   "
              f"GPipe {textbook_bubble('gpipe', k, m_):.4f}")
        assert abs(r.bubble_fraction - formula) < 1e-12
        assert r.makespan_s == (k - 1) * F + m_ * (F + L)

# %% [markdown]
# ### Exercise 3 · A slow link
#
# Go back to section 2's costs, but swap the `"local"` link for `"constrained"` (50 Mb/s and 30 ms latency,
# with the link's seconds counted as units) and make the hidden state (and its gradient) 8 MiB, as a long
# sequence would. Let $t$ = `link.transfer_s(bytes)` be the time one message takes over one hop.
# **Predict**: does any method now hold more activations? What is ZeroLock's makespan, as a formula in
# $K$, $m$, $F$, $L$ and $t$? Compared with an ideal (instant) link, who pays more for the slow one, BP or
# ZeroLock, and why?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
big = 8 * 2**20
slow_costs = Costs(forward=costs.forward, backward=costs.backward, local=costs.local, hidden_bytes=big, grad_bytes=big)
slow_link = LinkProfile.profile("constrained")
t = slow_link.transfer_s(big)
fast = {m: simulate(s, costs=costs, link=LinkProfile.profile("ideal")) for m, s in schedules.items()}
slow = {m: simulate(s, costs=slow_costs, link=slow_link) for m, s in schedules.items()}
print(f"one hop takes t = {t:.3f} units")
for m in schedules:
    print(f"{m:<9} makespan {fast[m].makespan_s:6.2f} -> {slow[m].makespan_s:6.2f} units "
          f"(+{slow[m].makespan_s - fast[m].makespan_s:.2f});  activations held {slow[m].inflight_peak}")
    assert slow[m].inflight_peak == expected[m]       # memory depends on the order of actions, not on time
# ZeroLock: the first micro-batch crosses K - 1 hops once; after that the sends overlap with local steps
# (they do while t <= F + L: the link carries one message per F + L).
assert t <= costs.forward + costs.local
assert abs(slow["zerolock"].makespan_s - ((K - 1) * (costs.forward + t) + M * (costs.forward + costs.local))) < 1e-9
# BP: the hidden state goes down K - 1 hops AND the gradient comes back up K - 1 hops before stage 0 can finish.
for m in ("gpipe", "1f1b"):
    assert slow[m].makespan_s - fast[m].makespan_s >= 2 * (K - 1) * t
