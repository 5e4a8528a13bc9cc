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
# # 8 · Local objectives at depth: what a frozen head can read, what a target can carry, what the top layers change
#
# **What this notebook shows.** ZeroLock trains chunk $k$ on
# $\alpha\,\mathrm{CE} + (1-\alpha)\,\mathrm{KL}(\cdot\,\Vert\,p_{k-1})$, both read out through the *frozen* final
# norm + LM head. Three questions decide whether that can train an early chunk the way backprop (BP) would:
#
# 1. **Can the frozen head read an early chunk?** The head was trained on the *last* layer's output. An early
#    chunk's hidden state lives in a different basis, so on SmolLM2-135M it reads at chance (notebook 7's
#    readability numbers, from the committed results).
# 2. **What can a consistency target carry?** Lemma 2's target is the label tilted towards the previous
#    chunk's readout $p_{k-1}$. Whatever $p_{k-1}$ does not know, the target cannot pass on — checked exactly on
#    real readouts, for all three targets of notebook 4.
# 3. **Does the local gradient point where BP's does?** We measure, per chunk, the cosine between the
#    gradient of its local loss and the BP gradient *on the same LoRA weights* (`gradient_alignment.py`):
#    near 0 through the head on SmolLM2, and exactly 1 when chunk $k$ reads through an exact copy of the
#    layers after it (`--readout top:N` / `top-lora:N`) — at a price in memory, compute and bytes on the wire.
#
# Last, the **terminal** control (only the last chunk trains) asks whether the early chunks' local losses
# add anything at all.
#
# The mechanics run on the embedded tiny model (K = 3: layers 0–2, 3–5, 6–7; about half a minute on
# one core); the evidence on a real model is read from the committed SmolLM2-135M results
# (`zerolock bench depth`, [docs/results-depth.md](../docs/results-depth.md#local-objectives-at-depth-the-pilot)).
# Chunks are numbered from 0, as the engine does. Every check is an `assert`.

# %%
import json
import os
import pathlib
import statistics
import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore", message="IProgress not found")   # tqdm's notebook-widget hint
root = pathlib.Path.cwd().resolve()
while not (root / "pyproject.toml").exists() and root != root.parent:
    root = root.parent
os.chdir(root)

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from theory import lemma2 as L2
from theory import readouts as R
from theory.simplex import label_smooth
from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.method.chunks import chunk_bounds
from zerolock_core.config.run_config import DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig
from zerolock_core.train.evaluation import evaluate_chunks
from zerolock_core.analysis.gradient_alignment import gradient_cosines
from zerolock_core.viz.palette import NEUTRAL, method_colour, with_alpha
from zerolock_core.config.readout_spec import HEAD, ReadoutSpec
from zerolock_core.train.reference_trainer import make_workers, train_reference
from zerolock_core.train.run_setup import build_run_setup
from zerolock_core.analysis.stage_memory import stage_memory
from zerolock_core.train.stage_worker import answer_positions

# The committed SmolLM2-135M results this notebook reads: the depth study (`zerolock bench depth`, merged over K).
RESULTS = Path("docs/results/depth-study.json")
READABILITY = Path("docs/results/readability-smollm2.json")

torch.manual_seed(0)
torch.set_num_threads(1)
t_start = time.perf_counter()
K, EXAMPLES = 3, 64


def tiny_config(readout="head", method="zerolock", steps=40, out=None):
    """The tiny model at K = 3, α = 1 (local CE only), as the depth study's ZeroLock arms."""
    return RunConfig(model=ModelConfig(readout=readout), data=DataConfig(seq_len=48, eval_size=EXAMPLES),
                     objective=ObjectiveConfig(alpha=(1.0,)),
                     train=TrainConfig(runtime="reference", method=method, stages=K, batch=8, microbatches=2,
                                       steps=steps, lr=1e-2, threads=1),
                     out=out)


# %% [markdown]
# ## 1. The frozen head reads the last layer
#
# The LM head $W$ turns a hidden state into logits, $\mathrm{Norm}(h)\,W^\top$. Pretraining fitted $W$ to one
# particular $h$: the **last** layer's output, where the residual stream has been rotated into "next token"
# coordinates. After layer 10 of 30 the stream holds the same input in another basis — the information can
# be there and still point nowhere the head looks. So the first question is empirical: read each layer
# through the frozen head (the *logit lens*, notebook 7) and through a small fitted translator $h + Ah + b$
# (the *tuned lens*), which tells us whether the information is there at all.
#
# SmolLM2-135M, topics, 128 eval examples, the chunk ends of K = 3 (from `READABILITY`):

# %%
readability = json.loads(READABILITY.read_text())
ends = [e for _, e in chunk_bounds(readability["layers"], readability["stages"])]
chance = readability["chance"]
print(f"majority class {chance:.3f}; label accuracy at the chunk ends {ends}\n")
print(f"{'condition':<11} {'readout':<22}" + "".join(f"{'layer ' + str(e):>10}" for e in ends))
for name, cond in readability["conditions"].items():
    kinds = [k for k in ("lens", "tuned", "top") if k in cond]
    at = {kind: {r["layer"]: r["label_accuracy"] for r in cond[kind]} for kind in kinds}
    for kind, label in (("lens", "frozen head"), ("tuned", "fitted translator"), ("top", "the model's top layers")):
        if kind in at:  # the top lens stops where it would rerun layers already applied
            print(f"{name:<11} {label:<22}" + "".join(f"{at[kind][e]:>10.3f}" if e in at[kind] else f"{'–':>10}"
                                                      for e in ends))
    for e in ends[:-1]:  # the early chunk ends: the head reads at chance, the information is there
        assert at["lens"][e] < chance + 0.05 and at["tuned"][e] > at["lens"][e] + 0.2, (name, e)

# %% [markdown]
# Before fine-tuning, after 20 BP steps and after 20 ZeroLock steps alike, the head reads chunks 0 and 1
# (layers 10 and 20) **at chance**, while a fitted translator reads the same hidden states at 0.63–0.74.
# Read through the model's own top 10 layers (the last row of each condition: what `--readout top:last`
# gives chunk 1), layer 20 reads 0.56–0.74 — but layer 10 stays at chance: the top layers expect layer 20's
# output, not layer 10's.
# An early chunk trained on "CE through the frozen head" is asked to make its own hidden state readable
# in the last layer's basis — a different job from the one BP gives it (feed the layers after it).
#
# The embedded tiny model is kinder: only 8 narrow layers, and after a short fine-tune the head reads it
# from layer 3 on (docs/results-quality.md). It is where we run the mechanics, not where the failure shows. We
# train it briefly with BP (40 steps), to have weights that a real run could reach:

# %%
bp_dir = pathlib.Path(tempfile.mkdtemp(prefix="zerolock_nb8_")) / "bp"
bp_metrics = train_reference(tiny_config(method="bp", out=str(bp_dir)), progress=False)
bp_weights = load_final_weights(bp_dir)                      # {chunk: {name: tensor}}


def load(setup, weights):
    """Set the chunks' own LoRA to `weights` (a readout's copied layers keep theirs)."""
    for c in setup.chunks:
        assert not c.load_state_dict(weights[c.index], strict=False).unexpected_keys


head = build_run_setup(tiny_config("head"))                  # fresh: the pretrained tiny model
before = evaluate_chunks(head.chunks, head.eval, head.label_first_tokens, limit=EXAMPLES)
load(head, bp_weights)
after = evaluate_chunks(head.chunks, head.eval, head.label_first_tokens, limit=EXAMPLES)
print("chunks (layers):", [c.layer_range for c in head.chunks])
print("label accuracy through the frozen head, per chunk:")
print("  pretrained    ", [round(r["label_accuracy"], 3) for r in before])
print("  40 BP steps   ", [round(r["label_accuracy"], 3) for r in after])
assert [round(r["label_accuracy"], 6) for r in after] == \
       [round(r["label_accuracy"], 6) for r in bp_metrics.eval["per_chunk"]]   # the same weights, the same scores
assert all(0.0 <= r["label_accuracy"] <= 1.0 for r in before + after)

# %% [markdown]
# ## 2. What a consistency target can carry (Lemma 2)
#
# Notebook 4 showed the minimiser of each local objective. Written per word $l$ that is not the label:
#
# | target | off the label |
# |---|---|
# | geometric (Lemma 2) $p_y^\alpha p_{k-1}^{1-\alpha}/Z$ | $\propto p_{k-1,l}^{\,1-\alpha}$ |
# | arithmetic (`--consistency forward`) $\alpha p_y + (1-\alpha)p_{k-1}$ | $\propto p_{k-1,l}$ |
# | reverse (`--consistency reverse`, Eq. 5) | $\propto p_{k-1,l}$ (from its stationarity condition) |
#
# So every target is *the label, plus the previous chunk's readout*. The consistency term passes on
# exactly what $p_{k-1}$ knows, and nothing else: if chunk $k-1$'s readout is at chance, the term pulls
# chunk $k$ towards a chance-level guess. It cannot carry what the head cannot read, nor anything about
# *how chunk $k$'s weights should move* for the layers after it. Checked on the tiny model's real readouts
# (chunk 1's targets, built from chunk 0's readout $p_{k-1}$):

# %%
ro = R.chunk_readouts(head.chunks, R.eval_batch(head.eval, EXAMPLES))   # ps[0] = p_0 (embedding), ps[k+1] = chunk k
prev, targets = ro.ps[1], ro.targets                         # chunk 0's readout: the previous chunk of chunk 1
alpha, eps, V = 0.5, 0.1, ro.vocab
smooth, hard = ro.labels(eps), ro.labels(0.0)                # label-smoothed (geometric) and one-hot labels
worst = {}
for t in range(6):
    off = np.arange(V) != targets[t]
    q = prev[t]
    found = {"geometric": (L2.geometric_target(smooth[t], q, alpha), 1 - alpha),
             "arithmetic": (L2.arithmetic_target(hard[t], q, alpha), 1.0),
             "reverse": (L2.reverse_target_numeric(hard[t], q, alpha), 1.0)}
    for name, (p_star, power) in found.items():
        ratio = np.log(p_star[off]) - power * np.log(q[off])  # constant over the off-label words
        worst[name] = max(worst.get(name, 0.0), float(ratio.max() - ratio.min()))
for name, w in worst.items():
    print(f"{name:<10}: log p*_l - power * log p_k-1,l varies by {w:.1e} over the {V - 1} off-label words")
    assert w < 1e-6

# %% [markdown]
# Among the answer words (the four topics), what does the geometric target rank first? With a smoothed label
# ($\varepsilon = 0.1$) the label wins by a factor $\big((1-\varepsilon+\varepsilon/V)/(\varepsilon/V)\big)^\alpha$, the previous
# chunk's odds $(q_c/q_l)^{1-\alpha}$ can overturn it. The smaller $\alpha$, the more the target is $p_{k-1}$'s
# guess — right or wrong. The log-odds are linear in $\alpha$, so the number of overturned examples can
# only fall as $\alpha$ grows, and is 0 at $\alpha = 1$ (no consistency term).

# %%
answers = head.label_first_tokens.numpy()
rows = np.isin(targets, answers)
label_of = {int(tok): i for i, tok in enumerate(answers)}
truth = np.array([label_of[int(tok)] for tok in targets[rows]])
prev_acc = float(np.mean(prev[rows][:, answers].argmax(-1) == truth))
print(f"chunk 0's readout picks the right answer word for {prev_acc:.3f} of {rows.sum()} examples "
      f"(majority class {np.bincount(truth).max() / len(truth):.3f})")
overturned = []
for a in (0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
    p_star = L2.geometric_target(smooth[rows], prev[rows], a)
    overturned.append(float(np.mean(p_star[:, answers].argmax(-1) != truth)))
    print(f"alpha = {a:<5}: the geometric target ranks a wrong answer first for {overturned[-1]:.3f} of them")
assert all(x >= y for x, y in zip(overturned, overturned[1:])) and overturned[-1] == 0.0

# %% [markdown]
# ## 3. Does the local gradient point where BP's does?
#
# The direct test: on one micro-batch, compute chunk $k$'s local-loss gradient and the BP gradient of the
# task loss, both on chunk $k$'s own LoRA weights, and take their cosine
# (`zerolock_core.analysis.gradient_alignment.gradient_cosines`). Two cases are exact:
#
# * the **last chunk at α = 1**: its local loss *is* the task loss — cosine 1;
# * a chunk that reads through an **exact copy of everything after it**: then its readout is the model's own
#   output and its local loss at α = 1 is again the task loss — cosine 1.
#
# `--readout top:N` gives chunk $k < K-1$ a frozen copy of the model's top $N$ layers (taken before any LoRA
# goes on); `top-lora:N` the same copy with LoRA of the chunk's own. At K = 3 on the tiny model the last chunk
# holds 2 layers, so `top:2` (= `top:last`) reads chunk 1 through a copy of *all* of chunk 2; chunk 0 reads
# through it too, but skips chunk 1's layers. `top:0` is the plain head.

# %%
top = build_run_setup(tiny_config("top:2"))                  # fresh: every LoRA B is still zero
bounds = chunk_bounds(8, K)
assert ReadoutSpec.of_model("top:last", bounds) == ReadoutSpec(kind="top", layers=2)
assert all(ReadoutSpec.parse("top:0").of_chunk(k, K, every_chunk_trains=True) == HEAD for k in range(K))
assert [c.ships_readout for c in top.chunks] == [True, True, False]   # the last chunk reads through the head
ro_top = R.chunk_readouts(top.chunks, R.eval_batch(top.eval, EXAMPLES))
gap = float(np.abs(ro_top.ps[2] - ro_top.ps[3]).max())
print(f"at initialisation, chunk 1's top:2 readout vs the model's own output: max |difference| = {gap:.1e}")
assert gap < 1e-6                                            # the copy IS the downstream (LoRA B = 0)

load(top, bp_weights)                                        # now the BP-trained weights, as `head`
cos = {}
for name, s in (("head", head), ("top:2", top)):
    workers = make_workers(s)
    cos[name] = np.mean([gradient_cosines(workers, mb) for mb in s.microbatches(0)], axis=0)
    print(f"cos(local, BP) per chunk, {name:<6} readout, at the BP-trained weights: {np.round(cos[name], 3)}")
for c in cos.values():
    assert np.all(np.abs(c) <= 1 + 1e-9) and abs(c[-1] - 1) < 1e-9     # last chunk, α = 1: the task loss
assert cos["head"][0] < 0.999 and cos["head"][1] < 0.999    # an early chunk's head-readout loss is not the task loss
assert cos["top:2"][0] < 0.999                               # chunk 0's copy skips chunk 1's layers

# %% [markdown]
# At the BP-trained weights chunk 2's LoRA has moved, so the frozen copy is no longer the real downstream
# and chunk 1's cosine under `top:2` is no longer 1. How fast does it fall? Scale chunk 2's LoRA $B$ from 0
# (the downstream = the pretrained copy) to its trained value, and measure chunk 1's cosine under both readouts:

# %%
lora_b = {n: p.detach().clone() for n, p in head.chunks[-1].named_parameters() if "lora_B" in n}
scales = [0.0, 0.25, 0.5, 0.75, 1.0]
drift = {"head": [], "top:2": []}
for scale in scales:
    for name, s in (("head", head), ("top:2", top)):
        with torch.no_grad():
            for n, p in s.chunks[-1].named_parameters():
                if n in lora_b:
                    p.copy_(scale * lora_b[n])
        workers = make_workers(s)
        drift[name].append(float(np.mean([gradient_cosines(workers, mb)[1] for mb in s.microbatches(0)])))
    print(f"chunk 2's LoRA x {scale:<4}: chunk 1's cos(local, BP)  head {drift['head'][-1]:+.3f}   "
          f"top:2 {drift['top:2'][-1]:+.3f}")
assert abs(drift["top:2"][0] - 1) < 1e-6                     # an exact copy of the downstream: BP's direction
assert all(c < 1 - 1e-6 for c in drift["top:2"][1:])         # a moved downstream: not exactly any more
assert all(c < 0.999 for c in drift["head"])

fig = go.Figure([go.Scatter(x=scales, y=drift["head"], name="head (the paper's)", mode="lines+markers",
                            line=dict(color=method_colour("zerolock"))),
                 go.Scatter(x=scales, y=drift["top:2"], name="top:2 (a frozen copy of chunk 2)",
                            mode="lines+markers", line=dict(color=with_alpha(method_colour("zerolock"), 0.5)))])
fig.add_hline(y=1.0, line=dict(color=NEUTRAL["chance"], dash="dot"))
fig.update_layout(title="Tiny model, K = 3: chunk 1's local gradient vs BP's, as chunk 2 trains away from its copy",
                  xaxis_title="chunk 2's LoRA B (× its value after 40 BP steps)", yaxis_title="cos(local, BP), chunk 1",
                  height=400, legend=dict(orientation="h", y=-0.25))
fig.show()

# %% [markdown]
# **Reading it.** The BP gradient of chunk 1 depends on the layers after it; the head-readout loss does not
# see them at all. On this tiny model (only two layers after chunk 1) the two still agree partly while
# chunk 2 is at its pretrained weights, and drift apart as chunk 2 trains. On SmolLM2 (below) the early
# chunks' head-readout gradients are almost orthogonal to BP's, as the paper authors' notes say of their
# KL term. Through an exact copy of the downstream the local gradient *is* BP's, with no gradient crossing
# a stage. A frozen copy is exact only while the real downstream stays at the pretrained weights; the more
# chunk 2's LoRA moves (40 steps at lr $10^{-2}$ is a lot for this tiny model), the further the copy is from
# it. `top-lora:N` lets each chunk train its own copy on its own loss — a different downstream again, not
# the real one.
#
# ## 4. What a top readout costs
#
# Every chunk before the last now holds $N$ more layers, runs them forward and backward for every
# micro-batch, and — because the next chunk cannot recompute that readout from $h$ alone — ships its rows
# at the answer positions $\Omega$ with its hidden state. Measured per stage on one micro-batch
# (`stage_memory`) and per boundary (the packed message, `boundary.py`):

# %%
lora_top = build_run_setup(tiny_config("top-lora:2"))
load(lora_top, bp_weights)
mb = head.microbatches(0)[0]
d = head.chunks[0].config.hidden_size
omega_rows = int(answer_positions(mb)[0].sum())
copy_bytes = sum(p.numel() * p.element_size() for i in ("6", "7") for n, p in
                 head.chunks[-1].layers[i].named_parameters() if "lora_" not in n)
print(f"{'readout':<11} {'weights per stage (KiB)':>30} {'activations per stage (KiB)':>32} "
      f"{'trainable per stage':>24} {'message elements':>22}")
memory = {}
for name, s in (("head", head), ("top:2", top), ("top-lora:2", lora_top)):
    workers = make_workers(s)
    memory[name] = stage_memory(workers, mb, backprop=False)
    h = workers[0].forward(mb, mb["input_ids"]).detach()
    message = workers[0].outgoing(mb, h)
    trainable = [sum(t.numel() for t in c.trainable_state().values()) for c in s.chunks]
    print(f"{name:<11} {' / '.join(str(m.weight_bytes // 1024) for m in memory[name]):>30} "
          f"{' / '.join(str(m.activation_bytes // 1024) for m in memory[name]):>32} "
          f"{' / '.join(map(str, trainable)):>24} {message.numel():>22,}")
    assert message.numel() == h.numel() + (omega_rows * d if s.chunks[0].ships_readout else 0)
extra = [t.weight_bytes - h_.weight_bytes for t, h_ in zip(memory["top:2"], memory["head"])]
print(f"\ntop:2 adds {extra} bytes of weights per stage; the 2 copied layers hold {copy_bytes}")
assert extra == [copy_bytes, copy_bytes, 0]                  # chunks 0 and 1 hold a copy of layers 6-7
assert all(t.activation_bytes > h_.activation_bytes for t, h_ in zip(memory["top:2"][:2], memory["head"][:2]))
assert memory["top:2"][-1] == memory["head"][-1]              # the last chunk is unchanged

# %% [markdown]
# The rows are few ($|\Omega| \cdot d$ numbers against $h$'s $b/m \cdot S \cdot d$: one answer token per example here),
# the copy is not: each early stage holds and runs the last chunk's layers a second time. On SmolLM2 at
# K = 3 that is 10 more layers per early stage.
#
# ## 5. SmolLM2-135M, K = 3: the committed numbers
#
# `zerolock bench depth` trains each arm with the single-process reference trainer (topics, 60 steps, b = 8,
# m = 4, LoRA r = 4 on q, v, α = 1 for the ZeroLock arms, 2–3 seeds) and, at the final weights, measures
# what we measured above. The arms: `bp`; `terminal` (only the last chunk trains — the control);
# `zerolock a=1` (the frozen head); `top:N` and `top-lora:N` (N = 10: the whole last chunk); and BP given
# as many trainable parameters as `top-lora:N` (rank-matched: the fair control). `RESULTS` names the file;
# its other tasks and K are listed here, and in the README's verdict.

# %%
report = json.loads(RESULTS.read_text())
study = report["results"]
task = "topics K=3" if "topics K=3" in study else next(k for k in study if k.endswith("K=3"))
arms = study[task]
print(f"{RESULTS}: {report.get('command', '')[:120]}...")
print(f"tasks: {list(study)}; reading {task!r}: {len(arms)} arms")


def top_n(entry, kind):
    """N of a `kind:N` readout (kind: top or top-lora), else -1."""
    try:
        spec = ReadoutSpec.parse(entry.get("readout", "head"))
    except ValueError:
        return -1
    return spec.layers if spec.kind == kind and spec.is_top else -1


def find_arm(name, matches):
    """The arm called `name`, else the first whose fields match (None if there is none)."""
    if name in arms:
        return name
    return next((n for n, e in arms.items() if matches(e)), None)


def widest(kind):
    """The `kind` (top / top-lora) ZeroLock arm with the largest N: the whole downstream of chunk K-2."""
    found = [(top_n(e, kind), n) for n, e in arms.items() if e.get("method") == "zerolock" and top_n(e, kind) > 0]
    return max(found)[1] if found else None


chosen = {
    "bp": find_arm("bp", lambda e: e.get("method") == "bp" and e.get("readout") == "head"
                   and not str(e.get("arm", "")).startswith("bp rank")),
    "terminal": find_arm("terminal", lambda e: e.get("method") == "terminal"),
    "head": find_arm("zerolock a=1", lambda e: e.get("method") == "zerolock" and e.get("readout") == "head"
                     and e.get("alpha") == 1.0),
    "top": widest("top"),
    "top-lora": widest("top-lora"),
    "bp rank-matched": next((n for n in arms if n.startswith("bp rank-matched")), None),   # the study adds it
}
needed = ("bp", "terminal", "head", "top", "top-lora")
assert all(chosen[k] is not None for k in needed), chosen
print("arms shown:", {k: v for k, v in chosen.items() if v is not None})


def mean_over_runs(entry, field, index=None):
    runs = entry["runs"]
    values = [r[field] if index is None else r[field][index] for r in runs]
    return [statistics.fmean(v[i] for v in values) for i in range(len(values[0]))] if isinstance(values[0], list) \
        else statistics.fmean(values)


head_speed = mean_over_runs(arms[chosen["head"]], "seconds_per_step")
print(f"\n{'arm':<26} {'label acc.':>14} {'label acc. per chunk':>22} {'cos(local, BP) per chunk':>26} "
      f"{'trainable':>10} {'bytes / mb':>11} {'s / step':>16}")
for name, e in arms.items():
    runs = e["runs"]
    per_chunk = mean_over_runs(e, "label_accuracy", index=-1)   # the last eval step, per chunk
    cosine = mean_over_runs(e, "gradient_cosine")
    speed = mean_over_runs(e, "seconds_per_step")
    final = e["final"]["label_accuracy"]
    assert len(cosine) == len(per_chunk) == e["stages"] and all(abs(c) <= 1 + 1e-9 for c in cosine), name
    if e.get("alpha") == 1.0:                                 # the last chunk's local loss is the task loss
        assert abs(cosine[-1] - 1) < 1e-6, name
    print(f"{name:<26} {final['mean']:>7.3f} ± {final['sd']:.3f} {' / '.join(f'{x:.2f}' for x in per_chunk):>22} "
          f"{' / '.join(f'{x:+.2f}' for x in cosine):>26} {sum(runs[0]['trainable_params']):>10,} "
          f"{max(runs[0]['bytes_per_microbatch'], default=0):>11,} {speed:>7.2f} ({speed / head_speed:.2f}×)")

# %%
shown = {"bp": "BP", "terminal": "terminal", "head": "ZeroLock, head",
         "top": f"ZeroLock, {arms[chosen['top']]['readout']}", "top-lora": f"ZeroLock, {arms[chosen['top-lora']]['readout']}",
         "bp rank-matched": "BP, rank-matched"}
colours = {"bp": method_colour("bp"), "terminal": NEUTRAL["muted"], "head": method_colour("zerolock"),
           "top": with_alpha(method_colour("zerolock"), 0.6), "top-lora": with_alpha(method_colour("zerolock"), 0.35),
           "bp rank-matched": with_alpha(method_colour("bp"), 0.5)}
fig = make_subplots(rows=1, cols=2, subplot_titles=("cos(local gradient, BP gradient) on the chunk's LoRA",
                                                    "label accuracy of the chunk's own readout"))
chunk_names = [f"chunk {k}" for k in range(arms[chosen["head"]]["stages"])]
for key, arm in chosen.items():
    if arm is None:
        continue
    e = arms[arm]
    for col, values in ((1, mean_over_runs(e, "gradient_cosine")), (2, mean_over_runs(e, "label_accuracy", index=-1))):
        fig.add_trace(go.Bar(x=chunk_names, y=values, name=shown[key], marker_color=colours[key], legendgroup=key,
                             showlegend=col == 1), row=1, col=col)
same_eval = report.get("config", {}).get("eval_size") == readability["eval_size"]   # the same topics eval rows
if same_eval:
    fig.add_hline(y=readability["chance"], line=dict(color=NEUTRAL["chance"], dash="dot"), row=1, col=2)
fig.update_yaxes(range=[-0.2, 1.05], row=1, col=1)
fig.update_yaxes(range=[0, 1], row=1, col=2)
fig.update_layout(barmode="group", height=430, legend=dict(orientation="h", y=-0.15),
                  title=f"SmolLM2-135M, {task}, after {report.get('config', {}).get('steps', '?')} steps ({RESULTS.name}"
                        f"{'; dotted: majority class' if same_eval else ''})")
fig.show()

# %%
h, t, tl = (arms[chosen[k]] for k in ("head", "top", "top-lora"))
c_h, c_t, c_tl = (mean_over_runs(e, "gradient_cosine") for e in (h, t, tl))
a_h, a_t, a_tl = (mean_over_runs(e, "label_accuracy", index=-1) for e in (h, t, tl))
s_h, s_t, s_tl = (mean_over_runs(e, "seconds_per_step") for e in (h, t, tl))
b_h, b_t = max(h["runs"][0]["bytes_per_microbatch"]), max(t["runs"][0]["bytes_per_microbatch"])
print(f"chunk 1, frozen head -> {chosen['top']} / {chosen['top-lora']}:")
print(f"  cos(local, BP)        {c_h[1]:.2f} -> {c_t[1]:.2f} / {c_tl[1]:.2f}")
print(f"  its own readout       {a_h[1]:.2f} -> {a_t[1]:.2f} / {a_tl[1]:.2f}   (last chunk {a_h[-1]:.2f} -> "
      f"{a_t[-1]:.2f} / {a_tl[-1]:.2f})")
print(f"  seconds per step      {s_h:.2f} -> {s_t:.2f} / {s_tl:.2f}  ({s_t / s_h:.1f}× / {s_tl / s_h:.1f}×)")
print(f"  bytes per micro-batch {b_h:,} -> {b_t:,} (+{b_t - b_h:,}: the readout rows)")
print(f"chunk 0 still reads through layers that skip chunk 1: cos {c_t[0]:.2f} / {c_tl[0]:.2f}")
assert b_t > b_h                                              # a top readout's rows travel with h
assert sum(tl["runs"][0]["trainable_params"]) > sum(h["runs"][0]["trainable_params"])   # the copies' LoRA

# %% [markdown]
# **What the numbers say** (printed above from `RESULTS`; quoted here from the committed study, K = 3):
#
# * Through the **frozen head** the early chunks' readouts stay at chance and their local gradients are
#   nearly orthogonal to BP's (chunk 1 ≈ 0.2, chunk 0 ≈ 0). The local CE trains them in a direction BP
#   does not care about, and the model ends below BP (0.75 against 0.80).
# * Reading chunk 1 **through the model's own top 10 layers** — the whole last chunk — turns its cosine to
#   ≈ 0.9 (frozen copy) / ≈ 1.0 (`top-lora`), its own readout from chance to ≈ 0.8, and the model's final
#   accuracy to BP's (0.815 / 0.80 against 0.80; at K = 6 only the LoRA copy holds: see the README). The one-seed pilot found that fewer layers (1, 2, 4) do
#   not help: layer 20's output is not what layers 26–29 expect.
# * **It is a win of the objective only for the frozen copy**: `top:N` trains exactly BP's parameters;
#   `top-lora:N` trains 1.7 times as many, and BP given as many (rank-matched) does better still (0.83).
# * **The price**: each early stage holds N more layers and runs them forward and backward for every
#   micro-batch (about 1.5 times the stage memory; more seconds per step), and the readout rows travel
#   with $h$ (a few KiB per micro-batch). Chunk 0 reads through layers that skip chunk 1, so it stays
#   poorly aligned.
#
# ## 6. The terminal control
#
# `--method terminal` trains **only the last chunk**, on the task loss; the others run forward only. It
# is the question "do the early chunks' local losses add anything?" made into an arm:

# %%
term = arms[chosen["terminal"]]
assert all(n == 0 for n in term["runs"][0]["trainable_params"][:-1])    # only the last chunk trains
for key in ("terminal", "head", "bp"):
    f = arms[chosen[key]]["final"]["label_accuracy"]
    print(f"{chosen[key]:<14} final label accuracy {f['mean']:.3f} ± {f['sd']:.3f} "
          f"({len(arms[chosen[key]]['runs'])} seed(s))")

# %% [markdown]
# At K = 3 on SmolLM2 the terminal control matches ZeroLock with the frozen head (0.75 and 0.75 after 60
# steps; in the 30-step pilot it was ahead, 0.68 against 0.61): training chunks 0 and 1 on their local
# losses through the frozen head added nothing measurable to the last chunk. That is what a near-zero
# gradient cosine predicts.
#
# ## Plainly
#
# * The frozen head reads the **last** layer's basis. An early chunk's hidden state holds the information
#   (a fitted translator reads it) but not where the head looks, so its head readout sits at chance.
# * A consistency target — geometric, arithmetic or reverse — is **the label plus the previous chunk's readout**.
#   It passes on what $p_{k-1}$ already carries and nothing more: behind an unreadable chunk, nothing.
# * Measured directly, an early chunk's local gradient through the head is **nearly orthogonal** to the BP
#   gradient on the same weights. Reading through an exact copy of the layers after it makes the local loss
#   the task loss and the cosine 1; a frozen copy stays close while the real downstream moves little.
# * The top readouts buy that alignment with **memory and compute** (N more layers held and run per early
#   stage) and a few extra bytes per micro-batch; and the `terminal` control is the bar every local objective
#   has to clear.

# %%
elapsed = time.perf_counter() - t_start
print(f"notebook body ran in {elapsed:.0f} s")

# %% [markdown]
# ## Exercises
#
# ### Exercise 1 · Which readouts travel?
# With `--readout affine` at K = 3, which chunks ship their readout rows with $h$, and why can the next chunk
# not recompute them? And what does `top:last` mean at K = 4 on the tiny model (8 layers)? Build the chunks
# and check.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
affine = build_run_setup(tiny_config("affine"))
print("affine ships:", [c.ships_readout for c in affine.chunks[:-1]])  # a trained translator lives on its own stage
assert [c.ships_readout for c in affine.chunks[:-1]] == [True, True]
assert affine.chunks[-1].readout_adapter is not None                 # the last chunk has one too (and no next chunk)
assert ReadoutSpec.of_model("top:last", chunk_bounds(8, 4)) == ReadoutSpec(kind="top", layers=2)   # K=4: 2 + 2 + 2 + 2

# %% [markdown]
# ### Exercise 2 · The two ends of Lemma 2
# What does the geometric target become at α = 1, and as α → 0 (α must stay above 0)? Predict, then check on
# chunk 0's readouts.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
at_one = L2.geometric_target(smooth[:4], prev[:4], 1.0)
at_zero = L2.geometric_target(smooth[:4], prev[:4], 1e-9)                 # α must be > 0: the limit
assert np.allclose(at_one, smooth[:4] / smooth[:4].sum(-1, keepdims=True))   # the (smoothed) label alone
assert np.allclose(at_zero, prev[:4] / prev[:4].sum(-1, keepdims=True))      # the previous chunk's guess alone
print("α = 1: the label; α = 0: p_{k-1} — the consistency term can only pass on what chunk k-1 reads")

# %% [markdown]
# ### Exercise 3 · A win of the objective, or of capacity?
# From `RESULTS`: how many parameters does each arm train, and by how much does BP with as many as
# `top-lora:N` beat `top-lora:N`? Which top readout trains exactly BP's parameters?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
trained = {k: sum(arms[v]["runs"][0]["trainable_params"]) for k, v in chosen.items() if v is not None}
print(trained)
assert trained["top"] == trained["bp"] < trained["top-lora"]          # the frozen copy adds no trainable weight
if chosen["bp rank-matched"] is not None:
    assert trained["bp rank-matched"] >= trained["top-lora"]          # the fair control: at least as many
    gain = arms[chosen["bp rank-matched"]]["final"]["label_accuracy"]["mean"] - tl["final"]["label_accuracy"]["mean"]
    print(f"rank-matched BP - top-lora: {gain:+.3f} label accuracy")
