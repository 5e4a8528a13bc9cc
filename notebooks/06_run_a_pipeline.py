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
# # 6 · Run a real pipeline from the notebook and plot its telemetry
#
# **What this notebook shows.** Notebook 1 *simulated* update locking. Here the engine runs it: one
# operating-system process per stage, hidden states sent over `torch.distributed` (gloo), every
# action timed and its live activation memory *measured* (bytes of tensors saved for backward). We
#
# 1. start a tiny ZeroLock pipeline with `zerolock_core.jobs.pipeline_job.Run(cfg).start()`, poll
#    `.status()` and tail `.events()` while it runs, then `.wait()` for its metrics;
# 2. draw its per-stage timeline and measured activation memory with the dashboard's own figure
#    builders (`app.figures.timeline_figure`, `memory_figure`);
# 3. check what ZeroLock promises on the real run: no gradient crosses a stage boundary, each stage
#    holds one micro-batch of activations, the hidden state is sent *before* the local step;
# 4. run GPipe on the same configuration and compare measured memory (the paper's Fig. 1 (c)/(d), for real);
# 5. check that the multi-process run trained **exactly** the weights the single-process reference
#    trainer does (bitwise).
#
# Configuration: the embedded tiny model, $K = 2$ stages, 4 optimizer steps, batch 4 in 4
# micro-batches, sequence length 32, one thread per stage. About a minute on 2 CPU cores, most of it
# process start-up. Every check is an `assert`.

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

import torch

from app.figures import memory_figure, timeline_figure
from zerolock_core.rundir.artifacts import load_final_weights
from zerolock_core.config.run_config import DataConfig, RunConfig, TrainConfig, replace
from zerolock_core.train.reference_trainer import train_reference
from zerolock_core.jobs.pipeline_job import Run

workdir = pathlib.Path(tempfile.mkdtemp(prefix="zerolock_nb6_"))
K, M, STEPS = 2, 4, 4
cfg = RunConfig(data=DataConfig(seq_len=32, eval_size=16),
                train=TrainConfig(runtime="pipeline", method="zerolock", stages=K, batch=4, microbatches=M,
                                  steps=STEPS, threads=1),
                out=str(workdir / "zerolock"))
print(cfg.train)

# %% [markdown]
# ## 1. Start, watch, wait
#
# `Run.start()` returns at once: the coordinator (in this process) owns the rendezvous store and
# spawns the stage processes. `status()` reads their progress from the store; `events(cursor)` returns
# the telemetry lines written since `cursor` (the dashboard tails the same files the same way).

# %%
def run_and_watch(cfg, *, poll_s=0.5, timeout_s=300):
    run = Run(cfg).start()
    t0, cursor, seen, last_state = time.perf_counter(), None, [], None
    while not run.done:
        st = run.status()
        if st.state != last_state:
            print(f"{time.perf_counter() - t0:6.1f} s  {st.state:<10} steps per stage {st.stage_steps}")
            last_state = st.state
        new, cursor = run.events(cursor)
        seen += new
        if time.perf_counter() - t0 > timeout_s:
            run.stop()
            raise TimeoutError("the pipeline did not finish in time")
        time.sleep(poll_s)
    metrics = run.wait()
    new, cursor = run.events(cursor)
    seen += new
    print(f"{time.perf_counter() - t0:6.1f} s  {run.state:<10} ({len(seen)} events)")
    return run, metrics, seen


run, metrics, events = run_and_watch(cfg)
assert run.state == "finished" and metrics.state == "finished", metrics.errors
assert events == run.events()[0]                   # tailing in pieces saw every line exactly once

# %% [markdown]
# ## 2. Its telemetry, drawn by the dashboard's builders
#
# Each bar is one action the stage actually executed (`F` forward, `SF` send hidden state, `RF` wait
# for one, `L` the local step, `STEP` the optimizer). Times are wall-clock, so the very first actions
# include warm-up. On 2 shared CPU cores the *durations* are noisy; the *structure* is not.

# %%
timeline_figure(events, stages=K, title=f"ZeroLock pipeline, K={K}, {STEPS} steps × {M} micro-batches (measured)").show()
peaks = [s["peak_activation_bytes"] for s in metrics.per_stage]
memory_figure(events, stages=K, measure="act_bytes", peak_bytes=peaks,
              title="ZeroLock: measured activation memory per stage").show()

print(f"{'stage':>5} {'layers':>8} {'peak act. KiB':>14} {'peak in-flight':>15} {'busy s':>7} {'sent KiB':>9} {'recv KiB':>9}")
for s in metrics.per_stage:
    print(f"{s['stage']:>5} {str(s['layers']):>8} {s['peak_activation_bytes'] / 1024:>14.1f} "
          f"{s['peak_inflight_microbatches']:>15} {s['busy_s']:>7.3f} {s['bytes_sent'] / 1024:>9.1f} "
          f"{s['bytes_received'] / 1024:>9.1f}")

# %% [markdown]
# ## 3. What ZeroLock promises, checked on the real run

# %%
kinds = {e["kind"] for e in events}
per_stage = {s: [e for e in events if e["stage"] == s] for s in range(K)}

# No gradient ever crosses a stage boundary: no backward, no gradient send/receive.
assert not kinds & {"B", "SB", "RB"}, kinds
# Every stage ran one forward and one local step per micro-batch, and one optimizer step per window.
for s, evs in per_stage.items():
    count = {k: sum(e["kind"] == k for e in evs) for k in ("F", "L", "STEP")}
    assert count == {"F": STEPS * M, "L": STEPS * M, "STEP": STEPS}, (s, count)
# One micro-batch of activations at a time, on every stage.
assert all(s["peak_inflight_microbatches"] == 1 for s in metrics.per_stage)
assert max(e["inflight"] for e in events) == 1
# Early forwarding: stage 0 sends micro-batch i downstream BEFORE its local step on i begins.
sf = {(e["step"], e["mb"]): e for e in per_stage[0] if e["kind"] == "SF"}
lo = {(e["step"], e["mb"]): e for e in per_stage[0] if e["kind"] == "L"}
assert sf.keys() == lo.keys()
assert all(sf[k]["t0"] <= lo[k]["t0"] for k in sf)
# State-only exchange: stage 0 sends hidden states and receives nothing.
hidden_bytes = 1 * cfg.data.seq_len * 128 * 4            # one example per micro-batch x S x d x fp32
assert metrics.per_stage[0]["bytes_sent"] == STEPS * M * hidden_bytes
assert metrics.per_stage[0]["bytes_received"] == 0
print("all ZeroLock invariants hold on the measured run")

# %% [markdown]
# ## 4. The same configuration with backprop (GPipe)
#
# GPipe runs all forwards of a window, then all backwards: stage 0 keeps every micro-batch's
# activations until the gradients come back, and gradients travel upstream over the same link.

# %%
cfg_bp = replace(cfg, train={"method": "gpipe"}, out=str(workdir / "gpipe"))
run_bp, metrics_bp, events_bp = run_and_watch(cfg_bp)
assert run_bp.state == "finished", metrics_bp.errors
timeline_figure(events_bp, stages=K, title="GPipe pipeline, same configuration (measured)").show()
memory_figure(events_bp, stages=K, measure="act_bytes",
              peak_bytes=[s["peak_activation_bytes"] for s in metrics_bp.per_stage],
              title="GPipe: measured activation memory per stage").show()

print(f"{'':>22} {'ZeroLock':>10} {'GPipe':>10}")
for s in range(K):
    z, g = metrics.per_stage[s], metrics_bp.per_stage[s]
    print(f"stage {s} peak act. KiB {z['peak_activation_bytes'] / 1024:>10.1f} {g['peak_activation_bytes'] / 1024:>10.1f}")
    print(f"stage {s} peak in-flight {z['peak_inflight_microbatches']:>10} {g['peak_inflight_microbatches']:>10}")
print(f"stage 0 bytes received  {metrics.per_stage[0]['bytes_received']:>10} {metrics_bp.per_stage[0]['bytes_received']:>10}")

assert metrics_bp.per_stage[0]["peak_inflight_microbatches"] == M
assert metrics_bp.per_stage[0]["peak_activation_bytes"] > 2 * metrics.per_stage[0]["peak_activation_bytes"]
assert metrics_bp.per_stage[0]["bytes_received"] == STEPS * M * hidden_bytes   # gradients come back
assert {"B", "SB", "RB"} <= {e["kind"] for e in events_bp}

# %% [markdown]
# Throughput is deliberately *not* compared here: with tiny chunks, process start-up and 2 shared
# cores, wall-clock numbers from a 4-step run say nothing (the design notes explain why; the simulator
# in notebook 1 and `zerolock bench` are the places for that). Memory is measured, not timed, so it is
# meaningful even here.
#
# ## 5. The pipeline computes exactly what the single-process reference computes
#
# The reference trainer runs the chunks one after another in one process, detaching at the
# boundaries. On CPU with fixed seeds the multi-process run must end with bit-identical LoRA weights.

# %%
cfg_ref = replace(cfg, train={"runtime": "reference"}, out=str(workdir / "reference"))
train_reference(cfg_ref, progress=False)
ref, got = load_final_weights(cfg_ref.out), load_final_weights(cfg.out)
assert ref.keys() == got.keys() == set(range(K))
n = 0
for k in ref:
    assert ref[k].keys() == got[k].keys()
    for name in ref[k]:
        assert torch.equal(ref[k][name], got[k][name]), (k, name)
        n += 1
print(f"{n} LoRA tensors in {K} chunks: pipeline == reference, bit for bit")

# %% [markdown]
# ## Exercises
#
# Try each exercise before you look at its solution: the code cell under it is collapsed to its first
# line (click the three dots, or the bar on its left, to show it). The solutions reuse the two runs
# above (no new pipeline is started), run with the rest of the notebook and `assert` their answers.
#
# ### Exercise 1 · The simulator's prediction, checked on the real runs
#
# Notebook 1 *predicted* how many micro-batches of activations each stage holds, from the schedule alone
# (`inflight_peak`). Check its prediction against what the two runs above measured, for both stages and
# both methods. Then **predict** stage 0's peak for each method if the window had $M = 8$ micro-batches —
# from the schedule, without running anything.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
from zerolock_core.schedule import build_schedule, inflight_peak

for method, measured in (("zerolock", metrics), ("gpipe", metrics_bp)):
    predicted = tuple(inflight_peak(build_schedule(method, stages=K, microbatches=M), s) for s in range(K))
    got = tuple(s["peak_inflight_microbatches"] for s in measured.per_stage)
    at_8 = inflight_peak(build_schedule(method, stages=K, microbatches=8), 0)
    print(f"{method:<8} predicted {predicted}, measured {got};  stage 0 with M = 8: {at_8}")
    assert predicted == got
    assert at_8 == (1 if method == "zerolock" else 8)

# %% [markdown]
# ### Exercise 2 · The runtime executes the schedule, action by action
#
# Notebook 1 said schedules are *data*: "the same objects the multi-process runtime executes". Check it
# on both runs: for each stage, the kinds and micro-batches of the measured events, in the order the stage
# ran them, must be `build_schedule(method, stages=K, microbatches=M, windows=STEPS).for_stage(s)`
# (micro-batches are numbered across the whole run). **Predict** first what ZeroLock's last stage does
# right after each forward — and what it never does.

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# ZeroLock's last stage has nobody to send to: F is followed directly by its local step L, no SF.
for method, evs in (("zerolock", events), ("gpipe", events_bp)):
    schedule = build_schedule(method, stages=K, microbatches=M, windows=STEPS)
    for s in range(K):
        planned = [(a.kind.value, a.microbatch) for a in schedule.for_stage(s)]
        ran = [(e["kind"], e["mb"]) for e in evs if e["stage"] == s and e["kind"] in {k for k, _ in planned}]
        print(f"{method:<8} stage {s}: " + " ".join(f"{k}{'' if mb is None else mb}" for k, mb in ran[:13]) + " ...")
        assert ran == planned, (method, s)
last = [(e["kind"], e["mb"]) for e in per_stage[K - 1]]
assert "SF" not in {k for k, _ in last}
assert all(last[i + 1] == ("L", mb) for i, (k, mb) in enumerate(last) if k == "F")

# %% [markdown]
# ### Exercise 3 · Bytes on the wire
#
# One micro-batch here is one example of `seq_len` tokens, and the tiny model's hidden size is 128 (float32).
# **Predict**, for one optimizer step of each method, the bytes stage 0 sends and receives and the bytes
# the last stage sends. How would doubling `seq_len` change them?

# %% tags=["solution"] jupyter={"source_hidden": true}
# Solution
# Both methods send the same hidden states down; only BP sends gradients (the same shape) back up.
# Everything is proportional to seq_len: doubling it doubles every number.
per_step = M * hidden_bytes
for name, m_ in (("ZeroLock", metrics), ("GPipe", metrics_bp)):
    first, last = m_.per_stage[0], m_.per_stage[-1]
    print(f"{name:<8} per step: stage 0 sends {first['bytes_sent'] // STEPS:,} B, receives "
          f"{first['bytes_received'] // STEPS:,} B; the last stage sends {last['bytes_sent'] // STEPS:,} B")
assert metrics.per_stage[0]["bytes_sent"] == metrics_bp.per_stage[0]["bytes_sent"] == STEPS * per_step
assert metrics.per_stage[-1]["bytes_sent"] == 0 and metrics.per_stage[0]["bytes_received"] == 0
assert metrics_bp.per_stage[-1]["bytes_sent"] == metrics_bp.per_stage[0]["bytes_received"] == STEPS * per_step
print(f"with seq_len = {2 * cfg.data.seq_len}: {2 * per_step:,} B per step down (and, for BP, up)")
