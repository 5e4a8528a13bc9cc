"""`zerolock bench depth`: how the gap to backprop grows with K, and what closes it.

For every K and arm, `seeds` single-process reference runs (`zerolock train --runtime reference`, one
thread each, `--jobs` of them side by side), each evaluated every `--eval-every` steps: label accuracy
and NLL of every chunk's own readout over the steps. After training, on the final weights: δ_k per chunk
(Proposition 1's chunk suboptimality on the eval readouts, the estimator of notebook 05), the cosine
between each chunk's local-loss gradient and the BP gradient on its LoRA (gradient_alignment.py), and
the arm's cost: trainable parameters, bytes per micro-batch across a boundary, seconds per step.

Arms (one definition, `ARMS`): BP; terminal (only the last chunk trains); ZeroLock with the frozen head
at α = 1 and 0.5; with an affine readout; through the model's top N layers (`top:N`) and with LoRA on
them (`top-lora:N`), for every N of `--top-layers`; and the fair BP controls — BP given the affine
readout on its last chunk, and BP with its LoRA rank raised until it trains at least as many parameters
as `top-lora:N`.

The study is resumable: a run whose `metrics.json` says finished with the same config is not run again,
and each run's analysis is kept beside it (`analysis.json`), so the command can be stopped and rerun.
"""
from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zerolock_core.config.arg_types import ints_arg
from zerolock_core.rundir.atomic_files import read_json, write_json_atomic
from zerolock_core.config.run_config import DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig, replace
from zerolock_core.config.config_file import write_config_toml
from zerolock_core.viz.palette import dash, marker, method_colour
from zerolock_core.rundir.run_dir import RunDir

from .common import plots, study_runs
from .common.experiment import Experiment
from .common.presets import resolve_bench_model
from .common.settings import BenchSettings, report_header
from .common.table import markdown_table, preamble

TOP = "{N}"  # an arm's readout with the top readouts' N still to fill in
ANALYSIS_FIELDS = {"delta_k", "gradient_cosine", "trainable_params", "bytes_per_microbatch", "seconds_per_step",
                   "stage_weight_bytes", "stage_activation_bytes"}
CKPT_EVERY = 30  # a reference run's checkpoint interval when the study evaluates only at the end
LAST = "last"  # --top-layers last: N = the last chunk's layers at each K (the whole downstream of chunk K-2)


def top_layers_arg(text: str) -> tuple[int | str, ...]:
    """"1,2,last" -> (1, 2, "last")."""
    items = tuple(t.strip() for t in text.split(",") if t.strip())
    if not items or not all(t == LAST or t.isdigit() for t in items):
        raise argparse.ArgumentTypeError(f"expected comma-separated layer counts or {LAST!r}, got {text!r}")
    return tuple(t if t == LAST else int(t) for t in items)


def resolved_top(n: int | str, *, model: str, stages: int) -> int:
    """N itself, or for `last` the number of layers of the last chunk at K = `stages`."""
    if n != LAST:
        return int(n)
    from zerolock_core.method.chunks import chunk_bounds
    from zerolock_core.train.preflight import model_layers

    layers = model_layers(model)
    if layers is None:
        raise ValueError(f"--top-layers {LAST}: the number of layers of {model} is unknown")
    first, end = chunk_bounds(layers, stages)[-1]
    return end - first


@dataclass(kw_only=True, frozen=True)
class Arm:
    method: str
    alpha: float = 1.0
    readout: str = "head"
    rank_matched: bool = False  # BP with its LoRA rank raised to train as much as `top-lora:N`
    # --frozen-stages N of a BP schedule, on the memory-halving layout with the largest rank within BP's
    # parameters (common/frozen_layout.py)
    frozen_stages: int = 0


ARMS: dict[str, Arm] = {
    "bp": Arm(method="bp"),
    "terminal": Arm(method="terminal"),
    "zerolock a=1": Arm(method="zerolock"),
    "zerolock a=0.5": Arm(method="zerolock", alpha=0.5),
    "zerolock a=1 affine": Arm(method="zerolock", readout="affine"),
    f"zerolock a=1 top:{TOP}": Arm(method="zerolock", readout=f"top:{TOP}"),
    f"zerolock a=1 top-lora:{TOP}": Arm(method="zerolock", readout=f"top-lora:{TOP}"),
    "bp affine": Arm(method="bp", readout="affine"),
    f"bp rank-matched to top-lora:{TOP}": Arm(method="bp", rank_matched=True),
}
DEFAULT_ARMS = tuple(ARMS)
DECISIVE_ARMS = ("bp", "zerolock a=1", f"zerolock a=1 top:{TOP}", f"zerolock a=1 top-lora:{TOP}",
                 f"bp rank-matched to top-lora:{TOP}")
# the long-range task at K = 3 (--needle): BP, terminal and the two top readouts
NEEDLE_ARMS = ("bp", "terminal", f"zerolock a=1 top:{TOP}", f"zerolock a=1 top-lora:{TOP}")


def arm_name(arm: str, top: int) -> str:
    return arm.replace(TOP, str(top))


def lora_params_per_layer(model_config: Any, targets: tuple[str, ...], rank: int) -> int:
    """Trainable parameters LoRA of `rank` puts on one decoder layer of a Llama-style model."""
    d, heads = model_config.hidden_size, model_config.num_attention_heads
    kv = getattr(model_config, "num_key_value_heads", heads) * (d // heads)
    inter = model_config.intermediate_size
    shapes = {"q_proj": (d, d), "k_proj": (d, kv), "v_proj": (d, kv), "o_proj": (d, d),
              "gate_proj": (d, inter), "up_proj": (d, inter), "down_proj": (inter, d)}
    return sum(rank * (i + o) for i, o in (shapes[t] for t in targets))


def matched_rank(model_config: Any, *, stages: int, top: int, rank: int, targets: tuple[str, ...]) -> int:
    """The smallest LoRA rank with which BP trains at least the parameters of ZeroLock with `top-lora:top`:
    its LoRA on every layer plus each chunk but the last's LoRA on its copy of the top layers."""
    layers = model_config.num_hidden_layers
    zerolock = lora_params_per_layer(model_config, targets, rank) * (layers + (stages - 1) * top)
    return math.ceil(zerolock / lora_params_per_layer(model_config, targets, 1) / layers)


def run_config(settings: BenchSettings, arm: Arm, *, stages: int, top: int, seed: int, batch: int,
               microbatches: int, eval_every: int, eval_size: int, rank: int, dataset: str, out: Path) -> RunConfig:
    from zerolock_core.models.loading import resolve_model

    model = resolve_bench_model(settings.model)
    targets = ("q_proj", "v_proj")
    if arm.rank_matched:
        from transformers import AutoConfig

        rank = matched_rank(AutoConfig.from_pretrained(resolve_model(model)), stages=stages, top=top, rank=rank,
                            targets=targets)
    boundaries = None
    if arm.frozen_stages:
        from zerolock_core.train.model_shape import model_layers

        from .common.frozen_layout import boundaries_of, matched_rank as frozen_rank, memory_halving_layout

        layers = model_layers(model)
        if layers is None:
            raise ValueError(f"a frozen-prefix arm needs the number of layers of {model}, which is unknown")
        layout = memory_halving_layout(layers, stages=stages, frozen=arm.frozen_stages)
        boundaries = boundaries_of(layout)
        rank = frozen_rank(rank, layers=layers, trained_layers=sum(layout[arm.frozen_stages:]))
    return RunConfig(
        model=ModelConfig(model=model, readout=arm.readout.replace(TOP, str(top)), lora_rank=rank,
                          lora_alpha=4.0 * rank, lora_targets=targets,  # scale α/r = 4 in every arm
                          boundaries=boundaries),
        data=DataConfig(dataset=dataset, seq_len=settings.seq_len, eval_size=eval_size),
        objective=ObjectiveConfig(alpha=(arm.alpha,)),
        train=TrainConfig(runtime="reference", method=arm.method, stages=stages, batch=batch,
                          microbatches=microbatches, steps=settings.steps, lr=settings.lr, seed=seed,
                          eval_every=eval_every, threads=1, device=settings.device, frozen_stages=arm.frozen_stages),
        out=str(out))


def _finished_with(cfg: RunConfig) -> bool:
    """A finished run of `cfg` is there (wherever it was first written: a study's runs may be moved)."""
    rd = RunDir(cfg.out)
    if not rd.metrics.exists():
        return False
    m = rd.read_metrics()
    return m.state == "finished" and _same_run(RunConfig.from_dict(m.config), cfg)


def _same_run(a: RunConfig, b: RunConfig) -> bool:
    """`a` and `b` train the same run. Their `ckpt_every` is left out: how often a run checkpoints does not
    change what it computes (a resumed run equals an unstopped one bit for bit), and the runs a study made
    before it checkpointed (`ckpt_every` 0) still count as finished."""
    return replace(a, train={"ckpt_every": 0}, out=b.out) == replace(b, train={"ckpt_every": 0})


def with_checkpoints(cfg: RunConfig) -> RunConfig:
    """`cfg` as `_train` writes it: a reference run checkpoints every `eval_every` steps (the study's eval
    interval; CKPT_EVERY without one), so that a run stopped at a session's end resumes instead of starting
    over. A pipeline arm is left as it is (PipeDream's cannot be resumed)."""
    if cfg.train.runtime != "reference":
        return cfg
    return replace(cfg, train={"ckpt_every": cfg.train.eval_every or CKPT_EVERY})


def _resumable_step(cfg: RunConfig) -> int | None:
    """The step a stopped (or killed) run of exactly `cfg` in `cfg.out` resumes from, or a run of `cfg` with
    fewer steps (finished or not) is trained on from (`_extended`); None: start it over."""
    from zerolock_core.rundir.checkpoints import newest_common_step

    rd = RunDir(cfg.out)
    if cfg.train.ckpt_every <= 0 or not rd.config_json.exists():
        return None
    if _extended(cfg):
        return newest_common_step(rd, stages=cfg.train.stages)
    m = rd.read_metrics()
    if (m is not None and m.state == "finished") or replace(rd.saved_config(), out=cfg.out) != cfg:
        return None  # `--resume` continues a run with its own config only, `ckpt_every` included
    return newest_common_step(rd, stages=cfg.train.stages)


def _extended(cfg: RunConfig) -> bool:
    """`cfg.out` holds a run of `cfg` with fewer steps that `zerolock train --resume DIR --steps N` can train
    on (run_extension.py): a study given a longer horizon pays only for the steps it adds."""
    from zerolock_core.config.field_words import ConfigError
    from zerolock_core.rundir.run_extension import check_extendable, extends

    rd = RunDir(cfg.out)
    if not rd.config_json.exists():
        return False
    saved = rd.saved_config()
    if not extends({**saved.to_dict(), "out": None}, {**cfg.to_dict(), "out": None}):
        return False
    try:
        check_extendable(rd.path, saved_steps=saved.train.steps, cfg=cfg)
    except ConfigError:
        return False
    return True


def beside(out: str | Path, suffix: str) -> Path:
    """A file next to run directory `out`, named after it: `with_suffix` would take an arm's "a0.5-seed0" for
    a suffix, and the seeds of α = 0.5 — run side by side — would share one config file."""
    return Path(f"{out}{suffix}")


STUDY_LOCK = ".study-lock"  # beside a run directory: the study invocation training that run holds it


def _train(cfg: RunConfig, log: Path) -> bool:
    """One run in a process of its own (one thread): two of them side by side share the two cores. A stopped
    run of the same config with a checkpoint is resumed (its log continued), else the run starts over.
    False, and nothing touched (its config, its log), when another process trains it right now (another
    study invocation on the same `--out`, which holds its STUDY_LOCK, or a `zerolock train` of its own) or
    has finished it since this invocation planned it."""
    from zerolock_core.rundir.run_dir import RunInUse, RunLock

    try:
        claim = RunLock(beside(cfg.out, STUDY_LOCK))
    except RunInUse:
        print(f"  left {Path(cfg.out).name} to {RunLock.holder(beside(cfg.out, STUDY_LOCK)) or 'another study'}",
              flush=True)
        return False
    with claim:
        holder = RunDir(cfg.out).holder()
        if holder is not None:
            print(f"  left {Path(cfg.out).name} to {holder}", flush=True)
            return False
        if _finished_with(cfg):  # another invocation finished it after this one planned it: never train again
            print(f"  {Path(cfg.out).name} was finished meanwhile (another invocation)", flush=True)
            return False
        cfg = with_checkpoints(cfg)
        toml = beside(cfg.out, ".toml")
        write_config_toml(cfg, toml)
        step, longer = _resumable_step(cfg), _extended(cfg)
        if step is not None:
            print(f"  {'training' if longer else 'resuming'} {Path(cfg.out).name} "
                  f"{f'on to step {cfg.train.steps} from' if longer else 'at'} step {step}", flush=True)
        how = ["--resume", str(cfg.out), *(["--steps", str(cfg.train.steps)] if longer else [])] if step is not None \
            else ["--config", str(toml), "--out", str(cfg.out), "--overwrite"]
        with open(log, "w" if step is None else "a") as f:
            code = study_runs.call([sys.executable, "-m", "zerolock_core", "train", *how, "--quiet"], stdout=f)
    if code != 0:
        raise RuntimeError(f"{cfg.out}: zerolock train exited {code} (log: {log})")
    return True


def cached_analysis(cfg: RunConfig) -> dict[str, Any]:
    """`analyse(cfg)` of the finished run in `cfg.out`, kept beside it (`analysis.json`, with the step of the
    weights it read) so that a report run again reads it; made again when it lacks a field (an older one) or
    read the weights of another step (the run was trained on to more steps since)."""
    cached, steps = Path(cfg.out) / "analysis.json", RunDir(cfg.out).read_metrics().steps_done
    analysis = read_json(cached) if cached.exists() else None
    # one without its step was made before a run could be trained on: it read the run's final weights
    if analysis is None or not ANALYSIS_FIELDS <= analysis.keys() or analysis.get("steps_done", steps) != steps:
        analysis = {**analyse(cfg), "steps_done": steps}
        write_json_atomic(cached, analysis)
    return analysis


READOUT_ROWS = 256  # answer rows the readout analysis reads: each is a float64 row over the vocabulary, per chunk


def _bounded_examples(split: Any, examples: int, rows: int = READOUT_ROWS) -> int:
    """The first `examples` eval examples, fewer where their answer rows would pass `rows`: a class label is a
    token or two, but a prompt -> response task (Alpaca) has dozens per example, and 64 of them read out at
    every chunk in float64 over SmolLM2's 49,152 tokens took more than this box's 23 GiB."""
    per_example = (split.labels[:examples] != -100).sum(dim=1).cumsum(0)
    return max(1, int((per_example <= rows).sum()))


def analyse(cfg: RunConfig, *, examples: int = 64, cosine_batches: int = 2) -> dict[str, Any]:
    """What the final weights say, beyond the eval: δ_k and the gradient cosines per chunk, the cost."""
    import torch

    from theory import readouts as R
    from zerolock_core.rundir.artifacts import load_trained_weights
    from zerolock_core.analysis.gradient_alignment import gradient_cosines
    from zerolock_core.train.run_setup import build_run_setup
    from zerolock_core.methods import LOCAL_METHODS
    from zerolock_core.analysis.stage_memory import stage_memory
    from zerolock_core.train.stage_worker import StageWorker, answer_positions

    torch.set_num_threads(1)
    setup = build_run_setup(cfg)
    load_trained_weights(setup.chunks, cfg.out)
    ro = R.chunk_readouts(setup.chunks, R.eval_batch(setup.eval, _bounded_examples(setup.eval, examples)))
    bound = R.proposition1_on_readouts(ro, cfg.objective.alpha[0] if cfg.train.method == "zerolock" else 1.0,
                                       geometry="bregman", smoothing=0.1)
    workers = [StageWorker.of_run(c, cfg) for c in setup.chunks]
    memory = stage_memory(workers, setup.microbatches(0)[0], backprop=cfg.train.method not in LOCAL_METHODS)
    # what the arm trains (terminal: the last chunk's alone)
    trainable = [sum(t.numel() for t in c.trainable_state().values()) if w.trains else 0
                 for c, w in zip(setup.chunks, workers)]
    if cfg.train.method != "zerolock":  # the cosine of ZeroLock's local loss at these weights, for every arm
        for w in workers:
            w.trains, w.agrees_with_upstream = True, True
    batches = setup.microbatches(0)[:cosine_batches]
    cosines = [gradient_cosines(workers, mb) for mb in batches]
    mb = setup.microbatches(0)[0]
    hidden = mb["input_ids"].numel() * setup.chunks[0].config.hidden_size * 4
    rows = int(answer_positions(mb)[0].sum()) * setup.chunks[0].config.hidden_size * 4
    metrics = RunDir(cfg.out).read_metrics()
    return {
        "delta_k": [float(x) for x in bound.result.deltas],
        "gradient_cosine": [statistics.fmean(c[k] for c in cosines) for k in range(len(setup.chunks))],
        "trainable_params": trainable,
        "bytes_per_microbatch": [hidden + (rows if c.ships_readout else 0) for c in setup.chunks[:-1]],
        "seconds_per_step": metrics.wall_s / max(1, metrics.steps_done),
        "stage_weight_bytes": [m.weight_bytes for m in memory],
        "stage_activation_bytes": [m.activation_bytes for m in memory],
    }


def _summary(cfg: RunConfig, analysis: dict[str, Any]) -> dict[str, Any]:
    m = RunDir(cfg.out).read_metrics()
    history = m.eval_history
    return {
        "seed": cfg.train.seed,
        "step": [h["step"] for h in history],
        "label_accuracy": [[c["label_accuracy"] for c in h["per_chunk"]] for h in history],
        "nll": [[c["nll"] for c in h["per_chunk"]] for h in history],
        "final": {k: m.eval[k] for k in ("accuracy", "label_accuracy", "nll")},
        "run_s": m.total_s,  # the run's whole time on its one thread: setup, training, evals
        **analysis,
    }


def _mean_sd(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


SAME_STUDY = ("model", "dataset", "seq_len", "steps", "lr", "seed")  # settings two merged studies must share


def merge_reports(settings: BenchSettings, reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Studies of the same settings (e.g. K=3 with every arm and 3 seeds; K=2,4,6 with fewer) as one
    report: their results side by side, each K's config kept (`parts`)."""
    first = reports[0]
    for r in reports[1:]:
        differs = [k for k in SAME_STUDY if r["settings"][k] != first["settings"][k]]
        if differs or r["config"]["steps"] != first["config"]["steps"]:
            raise ValueError(f"cannot merge studies that differ in {', '.join(differs) or 'steps'}")
        clash = set(r["results"]) & set(first["results"])
        if clash:
            raise ValueError(f"both studies hold {', '.join(sorted(clash))}: merge different K or tasks")
    results = {key: value for r in reports for key, value in r["results"].items()}
    order = sorted(results, key=lambda key: (not key.startswith("topics"), int(key.rpartition("=")[2]), key))
    merged_settings = {**first["settings"], "seed": settings.seed}
    return {
        **report_header("depth", settings), "settings": merged_settings,
        "config": {**first["config"], "stages": sorted({k for r in reports for k in r["config"]["stages"]}),
                   "jobs": max(r["config"]["jobs"] for r in reports)},
        "parts": [{"command": r["command"], "config": r["config"], "wall_s": r["wall_s"], "machine": r["machine"]}
                  for r in reports],
        "wall_s": round(sum(r["wall_s"] for r in reports), 1),
        "results": {key: results[key] for key in order},
    }


def run_depth(settings: BenchSettings, *, out: Path, stages: tuple[int, ...], arms: tuple[str, ...],
              top: tuple[int | str, ...],
              seeds: tuple[int, ...], decisive_seeds: tuple[int, ...], batch: int, microbatches: int,
              eval_every: int, eval_size: int, rank: int, jobs: int, needle: bool,
              merge: tuple[Path, ...] = (), finished_only: bool = False) -> dict[str, Any]:
    if merge:
        return merge_reports(settings, [read_json(p) for p in merge])
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise ValueError(f"unknown depth arm(s) {unknown}; choose from {', '.join(ARMS)}")
    plan: list[tuple[str, int, str, int, int]] = []  # (dataset, K, arm, N, seed)
    for k in stages:
        for arm in arms:
            tops = [resolved_top(n, model=resolve_bench_model(settings.model), stages=k) for n in top]
            for n in (dict.fromkeys(tops) if TOP in arm else tops[:1]):  # an arm without N runs once
                for seed in (decisive_seeds if arm in DECISIVE_ARMS else seeds):
                    plan.append((settings.dataset, k, arm, n, seed))
    if needle:  # the long-range task at K = 3: BP, terminal and the top readouts (top:N trains BP's own
        # parameters, no more; top-lora:N is the one the study recommends)
        needle_top = max(resolved_top(n, model=resolve_bench_model(settings.model), stages=3) for n in top)
        plan += [("needle", 3, arm, needle_top, seed) for arm in NEEDLE_ARMS for seed in seeds]
    configs = {key: run_config(settings, ARMS[key[2]], stages=key[1], top=key[3], seed=key[4], batch=batch,
                               microbatches=microbatches, eval_every=eval_every, eval_size=eval_size, rank=rank,
                               dataset=key[0], out=out / "runs" / _slug(*key)) for key in plan}
    todo = [] if finished_only else [cfg for cfg in configs.values() if not _finished_with(cfg)]
    started = time.perf_counter()
    print(f"  {len(configs)} runs, {sum(map(_finished_with, configs.values()))} already finished; {jobs} side by side",
          flush=True)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    for cfg, trained in study_runs.side_by_side(lambda c: _train(c, beside(c.out, ".log")), todo, jobs=jobs):
        if trained:
            print(f"  finished {Path(cfg.out).name} ({time.perf_counter() - started:.0f} s so far)", flush=True)
    # a study cut short (--finished-only) reports what it has, each arm with the seeds that finished; a run
    # another process was training, once it has finished (by the next invocation)
    configs = {key: cfg for key, cfg in configs.items() if _finished_with(cfg)}
    if not configs:
        raise ValueError(f"no run of this plan has finished under {out / 'runs'}")
    results: dict[str, dict[str, Any]] = {}
    for (dataset, k, arm, n, seed), cfg in configs.items():
        analysis = cached_analysis(cfg)
        key = f"{dataset} K={k}"
        entry = results.setdefault(key, {}).setdefault(arm_name(arm, n), {
            "arm": arm_name(arm, n), "method": ARMS[arm].method, "stages": k, "dataset": dataset,
            "readout": cfg.model.readout, "alpha": cfg.objective.alpha[0], "lora_rank": cfg.model.lora_rank,
            "runs": []})
        entry["runs"].append(_summary(cfg, analysis))
    for per_k in results.values():
        for entry in per_k.values():
            runs = entry["runs"]
            entry["final"] = {m: _mean_sd([r["final"][m] for r in runs]) for m in ("label_accuracy", "nll")}
            entry["seeds"] = [r["seed"] for r in runs]
    return {
        **report_header("depth", settings),
        "config": {"stages": list(stages), "top_layers": list(top), "batch": batch, "microbatches": microbatches,
                   "steps": settings.steps, "eval_every": eval_every, "eval_size": eval_size, "seeds": list(seeds),
                   "decisive_seeds": list(decisive_seeds), "lora_rank": rank, "jobs": jobs, "threads_per_run": 1},
        "wall_s": round(time.perf_counter() - started, 1),
        "results": results,
    }


def _slug(dataset: str, k: int, arm: str, top: int, seed: int) -> str:
    name = arm_name(arm, top).replace(" ", "_").replace("=", "").replace(":", "")
    return f"{dataset}-K{k}-{name}-seed{seed}"


def format_report(report: dict[str, Any]) -> str:
    c, s = report["config"], report["settings"]
    lines = preamble(report, f"model {s['model']}, K in {c['stages']}, b={c['batch']}, m={c['microbatches']}, "
                             f"{c['steps']} steps, lr {s['lr']}, LoRA r={c['lora_rank']}, eval on {c['eval_size']} examples, "
                             f"runs {c['jobs']} at a time, one thread each")
    heads = ["task · K", "arm", "seeds", "label accuracy", "NLL", "label acc. per chunk", "δ_k", "cos(local, BP)",
             "trainable", "bytes / micro-batch", "largest stage MB (weights + act.)", "s / step"]
    rows = []
    for key, per_k in report["results"].items():
        for name, e in per_k.items():
            runs = e["runs"]
            mean_of = lambda field: [statistics.fmean(r[field][i] for r in runs)  # noqa: E731
                                     for i in range(len(runs[0][field]))]
            per_chunk = [statistics.fmean(r["label_accuracy"][-1][i] for r in runs)
                         for i in range(len(runs[0]["label_accuracy"][-1]))]
            rows.append([key, name, len(runs), f"{e['final']['label_accuracy']['mean']:.3f} ± "
                         f"{e['final']['label_accuracy']['sd']:.3f}", f"{e['final']['nll']['mean']:.2f}",
                         " / ".join(f"{x:.2f}" for x in per_chunk), " / ".join(f"{x:.2f}" for x in mean_of("delta_k")),
                         " / ".join(f"{x:.2f}" for x in mean_of("gradient_cosine")),
                         f"{sum(runs[0]['trainable_params']):,}",
                         f"{max(runs[0]['bytes_per_microbatch'], default=0):,}", _largest_stage(runs[0]),
                         f"{statistics.fmean(r['seconds_per_step'] for r in runs):.2f}"])
    return "\n".join([*lines, markdown_table(heads, rows)])


VERDICT_ARMS = ("bp", "terminal", "zerolock a=1", "zerolock a=1 top:last", "zerolock a=1 top-lora:last",
                "bp rank-matched to top-lora:last")  # the README's columns, by arm family
# seconds per step side by side (one study, the same load)
SPEED_ARMS = ("bp", "zerolock a=1", "zerolock a=1 top:last", "zerolock a=1 top-lora:last")


def format_verdict(reports: list[dict[str, Any]]) -> str:
    """The README's table: final label accuracy (last chunk) per K and arm family, mean ± sd (seeds), and
    the seconds per step of the head and top-lora readouts side by side (measured in the same study)."""
    report = reports[0]
    heads = ["task · K", *VERDICT_ARMS, "s / step: " + " / ".join(a.rpartition(" ")[2] for a in SPEED_ARMS)]
    rows = []
    for key, per_k in report["results"].items():
        by_family = {arm_family(name): e for name, e in per_k.items()}
        cells = []
        for arm in VERDICT_ARMS:
            e = by_family.get(arm)
            acc = None if e is None else e["final"]["label_accuracy"]
            cells.append("–" if e is None else f"{acc['mean']:.3f} ± {acc['sd']:.3f} ({len(e['runs'])})")
        speed = [f"{statistics.fmean(r['seconds_per_step'] for r in by_family[a]['runs']):.1f}" if a in by_family
                 else "–" for a in SPEED_ARMS]
        rows.append([key, *cells, " / ".join(speed)])
    c, s = report["config"], report["settings"]
    runs = [r for per_k in report["results"].values() for e in per_k.values() for r in e["runs"]]
    hours = sum(r.get("run_s", 0.0) for r in runs) / 3600
    return "\n".join([
        f"label accuracy of the last chunk after {c['steps']} steps, {s['model']}, mean ± sd (number of seeds); "
        f"{len(runs)} runs, {hours:.1f} CPU-hours of training and evaluation ({c['jobs']} runs side by side, "
        "one thread each)", "",
        markdown_table(heads, rows)])


def _largest_stage(run: dict[str, Any]) -> str:
    if "stage_weight_bytes" not in run:  # a result written before the memory was measured
        return "–"
    w, a = max(zip(run["stage_weight_bytes"], run["stage_activation_bytes"]), key=sum)
    return f"{w / 2**20:.0f} + {a / 2**20:.1f}"


def figures(report: dict[str, Any]):
    """Per K, the last chunk's label accuracy over the steps, every arm (mean over its seeds)."""
    keys = list(report["results"])
    fig = plots.panels(tuple(keys), shared_yaxes=True)
    style, shown = arm_styles(report), set()
    for col, key in enumerate(keys, start=1):
        for name, e in report["results"][key].items():
            runs = e["runs"]
            steps = runs[0]["step"]
            mean = [statistics.fmean(r["label_accuracy"][i][-1] for r in runs) for i in range(len(steps))]
            family = arm_family(name)
            fig.add_trace(plots.curve(family, steps, mean, legendgroup=family, showlegend=family not in shown,
                                      **style[family]), row=1, col=col)
            shown.add(family)
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="label accuracy (last chunk)", col=1)
    fig.update_layout(title="Label accuracy over training per K: where the local objectives track backprop",
                      template="plotly_white")
    return {"depth_curves": fig, "depth_by_k": by_k_figure(report)}


def arm_family(name: str) -> str:
    """An arm across K: `top-lora:10` at K=3 and `top-lora:5` at K=6 are both the last chunk's layers."""
    return re.sub(r"(top(?:-lora)?):\d+", r"\1:last", name)


def arm_styles(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each arm family's `plots.curve` style: its method's colour, and its own dash and marker among that
    method's arms (two cues: two dashed lines of one colour that run together still differ by marker)."""
    styles: dict[str, dict[str, Any]] = {}
    per_method: dict[str, int] = {}
    for per_k in report["results"].values():
        for name, e in per_k.items():
            family = arm_family(name)
            if family not in styles:
                n = per_method.get(e["method"], 0)
                per_method[e["method"]] = n + 1
                styles[family] = {"color": method_colour(e["method"]), "line": {"dash": dash(n)},
                                  "marker": {"symbol": marker(n), "size": 8}}
    return styles


DODGE_K = 0.05  # how far apart, in K, neighbouring arms' points stand in the figure against K


def by_k_figure(report: dict[str, Any]):
    """The final label accuracy (last chunk) against K, one line per arm (mean ± sd over its seeds): the
    gap to BP as the pipeline deepens. A method's arms share its colour and differ by dash."""
    families: dict[str, dict[int, dict[str, Any]]] = {}
    for key, per_k in report["results"].items():
        if not key.startswith("topics"):
            continue
        for name, e in per_k.items():
            families.setdefault(arm_family(name), {})[e["stages"]] = e
    fig = plots.figure(title="Label accuracy after training against K (mean ± sd over seeds)",
                       xaxis_title="stages K", yaxis_title="label accuracy (last chunk)", template="plotly_white")
    style = arm_styles(report)
    for i, (family, by_k) in enumerate(families.items()):
        ks = sorted(by_k)
        offset = (i - (len(families) - 1) / 2) * DODGE_K  # arms side by side at each K: error bars apart
        fig.add_trace(plots.curve(family, [k + offset for k in ks],
                                  [by_k[k]["final"]["label_accuracy"]["mean"] for k in ks],
                                  error_y={"type": "data", "array": [by_k[k]["final"]["label_accuracy"]["sd"]
                                                                     for k in ks], "visible": True},
                                  customdata=ks, hovertemplate=f"{family}<br>K=%{{customdata}}: %{{y:.3f}}"
                                                               "<extra></extra>", **style[family]))
    fig.update_xaxes(tickvals=sorted({k for by_k in families.values() for k in by_k}))
    return fig


def _arguments(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    arms = tuple(x.strip() for x in a.arms.split(",") if x.strip())
    return dict(stages=a.stages, arms=arms, top=a.top_layers, seeds=a.seeds, decisive_seeds=a.decisive_seeds,
                batch=a.batch, microbatches=a.microbatches, eval_every=a.eval_every or max(1, a.steps // 4),
                eval_size=a.eval_size, rank=a.lora_rank, jobs=a.jobs, needle=a.needle,
                merge=tuple(Path(p) for p in a.merge.split(",") if p) if a.merge else (),
                finished_only=a.finished_only)


EXPERIMENT = Experiment(name="depth", run=run_depth, figures=figures, format_report=format_report,
                        arguments=_arguments, steps=60, seq_len=64, defaults={"lr": 5e-4, "model": "smollm2-135m"},
                        shape=None, runs=False, repeats=False, out=True)


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--stages", type=ints_arg, default=(2, 3, 4, 6), help="comma-separated K values")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS), help=f"comma-separated, from: {', '.join(ARMS)}")
    p.add_argument("--top-layers", type=top_layers_arg, default=(LAST,),
                   help=f"N of the top:N / top-lora:N arms, comma-separated (each N its own arms); {LAST}: the "
                        f"last chunk's layers at each K (the K=3 pilot: smaller N does not help)")
    p.add_argument("--seeds", type=ints_arg, default=(0, 1))
    p.add_argument("--decisive-seeds", type=ints_arg, default=(0, 1, 2),
                   help=f"seeds of the decisive arms ({', '.join(DECISIVE_ARMS)})")
    p.add_argument("--eval-every", type=int, default=0, help="0 = steps // 4")
    p.add_argument("--eval-size", type=int, default=128)
    p.add_argument("--lora-rank", type=int, default=4)
    p.add_argument("--jobs", type=int, default=2, help="runs side by side (one thread each)")
    p.add_argument("--needle", action="store_true",
                   help="add the needle task at K=3: BP, terminal, top:N, top-lora:N")
    p.add_argument("--finished-only", action="store_true",
                   help="train nothing: report the plan's runs that have finished (a study cut short)")
    p.add_argument("--merge", default="", metavar="JSON,JSON",
                   help="run nothing: merge these studies' depth.json files (same settings, different K) into one "
                        "report with the figures over every K")
