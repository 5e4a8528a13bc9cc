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
# the same on a real pretrained model (docs/results.md says what it found). Every check is an `assert`.

# %%
import torch

from zerolock_core.config import DataConfig, RunConfig, TrainConfig
from zerolock_core.evaluation import evaluate_chunks
from zerolock_core.readability import (TranslatorFit, fit_translators, lens_scores, majority_rate,
                                       readability_summary, suggest_boundaries)
from zerolock_core.readability_figures import readability_figures
from zerolock_core.run_setup import build_run_setup

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
