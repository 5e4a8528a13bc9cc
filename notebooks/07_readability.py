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
# # 7 · Can the frozen head read an early chunk? (the logit lens)
#
# **What this notebook shows.** ZeroLock's local objective reads every chunk's hidden state out
# through the *frozen, shared* final norm + LM head. That only teaches chunk $k$ something if the
# head can read $h_k$ at all — the paper's central assumption. We measure it directly:
#
# * the **logit lens**: label accuracy and answer NLL after every layer, read through the frozen head,
#   scored exactly as the evaluator scores a chunk (checked below at every chunk end);
# * the **tuned lens**: the same through a small translator $h + A h + b$ (zero-initialised, so it
#   starts as the plain lens) fitted per layer with the model frozen;
# * where to cut $K$ chunks so every chunk ends where the head can read.
#
# On the embedded tiny model this is quick; `zerolock bench readability --model smollm2-135m` runs
# the same on a real pretrained model (docs/results-quality.md says what it found). Every check is an `assert`.

# %%
import torch

from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig
from zerolock_core.train.evaluation import evaluate_chunks
from zerolock_core.analysis.readability import (TranslatorFit, fit_translators, lens_scores, majority_rate,
                                       readability_summary, suggest_boundaries)
from zerolock_core.analysis.readability_figures import readability_figures
from zerolock_core.train.run_setup import build_run_setup

torch.manual_seed(0)
torch.set_num_threads(1)
EXAMPLES = 64
setup = build_run_setup(RunConfig(data=DataConfig(seq_len=48, eval_size=EXAMPLES), train=TrainConfig(stages=3)))
print("chunks:", [c.layer_range for c in setup.chunks])

# %% [markdown]
# ## The lens after every layer
# At each chunk's last layer the lens *is* the chunk's readout, so it must give the evaluator's numbers.

# %%
lens = lens_scores(setup.chunks, setup.eval, setup.label_first_tokens, limit=EXAMPLES)
per_chunk = evaluate_chunks(setup.chunks, setup.eval, setup.label_first_tokens, limit=EXAMPLES)
for chunk, ref in zip(setup.chunks, per_chunk):
    at_end = lens[chunk.layer_range[1] - 1]
    assert at_end["label_accuracy"] == ref["label_accuracy"]
    assert abs(at_end["nll"] - ref["nll"]) < 1e-5 * ref["nll"]
chance = majority_rate(setup.eval, EXAMPLES)
print(f"majority class: {chance:.3f}")
for row in lens:
    print(f"layer {row['layer']}: label accuracy {row['label_accuracy']:.3f}, NLL {row['nll']:.2f}")

# %% [markdown]
# ## A translator per layer (the tuned lens)
# Zero-initialised, a translator changes nothing; fitted on training rows it can only lower their loss.

# %%
answers = torch.unique(setup.train.labels[setup.train.labels != -100])
untrained = fit_translators(setup.chunks, setup.train, answers, TranslatorFit(steps=0, examples=32))
assert lens_scores(setup.chunks, setup.eval, setup.label_first_tokens, limit=EXAMPLES,
                   translators=untrained) == lens
translators = fit_translators(setup.chunks, setup.train, answers, TranslatorFit(steps=60, examples=64, lr=3e-3))
tuned = lens_scores(setup.chunks, setup.eval, setup.label_first_tokens, limit=EXAMPLES, translators=translators)
for a, b in zip(lens, tuned):
    print(f"layer {a['layer']}: frozen head {a['label_accuracy']:.3f}  ->  translator {b['label_accuracy']:.3f}")

# %% [markdown]
# ## Where to cut
# A layer is *readable* when its label accuracy covers half the way from chance to the last layer's.
# A chunk should end on a readable layer; if none but the last is readable, fine-tune first.

# %%
for name, curve in (("frozen head", lens), ("translator", tuned)):
    s = suggest_boundaries([r["label_accuracy"] for r in curve], stages=3, chance=chance)
    print(f"{name}: boundaries {s['boundaries']} ({s['why']})")
assert suggest_boundaries([0.9] * 8, stages=3, chance=0.25)["boundaries"] == [3, 6]  # all readable: even split

# %%
summary = readability_summary({"pretrained": {"lens": lens, "tuned": tuned, "chance": chance}}, stages=3,
                              boundaries=None)
readability_figures(summary, model="tiny", dataset="topics", stages=3)["readability_label_accuracy"]

# %% [markdown]
# ## Exercises
#
# Try each exercise before you look at its solution: the code cell under it is collapsed to its first
# line (click the three dots, or the bar on its left, to show it). The solutions reuse the lens curves
# above (Exercise 3 loads the tiny model once more), run with the rest of the notebook and `assert`
# their answers.
#
# ### Exercise 1 · More or fewer chunks
#
# Imagine a model whose head can read only layers 5–8: label accuracy `[0.25] * 4 + [0.9] * 4` with chance
# 0.25. An even split of 8 layers ends the chunks after layer 4 ($K = 2$), after 3 and 6 ($K = 3$), after
# 2, 4 and 6 ($K = 4$). **Predict** where `suggest_boundaries` cuts for $K = 2, 3, 4, 5$. Then ask it about
# the tiny model's own lens curve for $K = 2, 3, 4$: whatever it answers must be either `None` (no good
# cut) or $K - 1$ increasing cuts, each after a readable layer.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# Readable layers: 5, 6, 7 (the last layer is never a cut). Each cut goes to the readable layer nearest
# the even split's, leaving room for the cuts after it; K = 5 needs 4 cuts and only 3 layers qualify.
late = [0.25] * 4 + [0.9] * 4
answers = {k: suggest_boundaries(late, stages=k, chance=0.25)["boundaries"] for k in (2, 3, 4, 5)}
print("head reads layers 5-8 only:", answers)
assert answers == {2: [5], 3: [5, 6], 4: [5, 6, 7], 5: None}
accuracy = [r["label_accuracy"] for r in lens]
bar = chance + 0.5 * (accuracy[-1] - chance)
for k in (2, 3, 4):
    cuts = suggest_boundaries(accuracy, stages=k, chance=chance)["boundaries"]
    print(f"tiny model, K = {k}: {cuts}")
    assert cuts is None or (len(cuts) == k - 1 and cuts == sorted(set(cuts))
                            and all(1 <= c < len(accuracy) and accuracy[c - 1] >= bar for c in cuts))

# %% [markdown]
# ### Exercise 2 · A different readout: the model's own top layers
#
# Instead of the frozen head alone, a chunk can read out through a copy of the model's last $N$ layers
# (`--readout top:N`; `pretrained_top` and `top_lens_scores` give that lens for every layer up to $L - N$).
# With $N = 3$ on the 8-layer tiny model, **predict** what reading the hidden state after layer 5 through
# the top 3 layers gives — without running anything — and then check it.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# After layer 5, three more layers and the head: that is the model's own forward pass to the end, so the
# top:3 lens at layer 5 equals the plain lens at layer 8 (the LoRA of the chunks starts at zero).
from zerolock_core.analysis.readability import pretrained_top, top_lens_scores

top3 = pretrained_top(setup.cfg.model.model, layers=len(lens), top=3)
through_top = top_lens_scores(setup.chunks, setup.eval, setup.label_first_tokens, top3, limit=EXAMPLES)
print(f"top:3 lens at layer {through_top[-1]['layer']}: label accuracy {through_top[-1]['label_accuracy']:.3f}, "
      f"NLL {through_top[-1]['nll']:.4f};  plain lens at layer {lens[-1]['layer']}: "
      f"{lens[-1]['label_accuracy']:.3f}, NLL {lens[-1]['nll']:.4f}")
assert len(through_top) == len(lens) - 3
assert through_top[-1]["label_accuracy"] == lens[-1]["label_accuracy"]
assert abs(through_top[-1]["nll"] - lens[-1]["nll"]) < 1e-5 * lens[-1]["nll"]

# %% [markdown]
# ### Exercise 3 · Cut the same model into four chunks
#
# The evaluator scores each chunk by reading its *last* layer through the head. Split the same tiny model
# into $K = 4$ chunks instead of 3 (`TrainConfig(stages=4)`) and score them with `evaluate_chunks`.
# **Predict** each chunk's label accuracy and NLL from the lens curve above — without a new lens.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# The lens does not depend on where the model is cut (the chunks' LoRA starts at zero, so the layers
# compute what the pretrained model computes): chunk k's numbers are the lens at its last layer.
setup4 = build_run_setup(RunConfig(data=DataConfig(seq_len=48, eval_size=EXAMPLES), train=TrainConfig(stages=4)))
per_chunk4 = evaluate_chunks(setup4.chunks, setup4.eval, setup4.label_first_tokens, limit=EXAMPLES)
for chunk, ref in zip(setup4.chunks, per_chunk4):
    at_end = lens[chunk.layer_range[1] - 1]
    print(f"chunk {chunk.layer_range}: evaluator {ref['label_accuracy']:.3f} / NLL {ref['nll']:.3f};  "
          f"lens at layer {at_end['layer']}: {at_end['label_accuracy']:.3f} / {at_end['nll']:.3f}")
    assert at_end["label_accuracy"] == ref["label_accuracy"]
    assert abs(at_end["nll"] - ref["nll"]) < 1e-5 * ref["nll"]
assert [c.layer_range[1] for c in setup4.chunks] == [2, 4, 6, 8]
