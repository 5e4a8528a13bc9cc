"""`zerolock bench frontier` (issue 41): accuracy, time and memory on one frontier — every way to train
without update locking against the best backprop schedules, per task and K.

Built from the parts the other benchmarks have (nothing here is written again):

* training: depth.py's runs — `zerolock train --runtime reference` subprocesses, one thread each, at most
  two side by side (`--jobs`), evaluated every `--eval-every` steps, resumable (a run whose metrics.json
  says finished with the same config is not run again) — and its per-run analysis (trainable parameters,
  bytes per micro-batch, each stage's activation bytes for one micro-batch, measured by the engine's meter);
* across sessions: every run's record in the result (its config, curve and analysis) is all the study
  needs of a finished run, so `--carry RESULT.json` (a committed result of the same plan) counts its runs
  as finished where this checkout has no run directory for them: a fresh checkout goes on where the
  last session stopped, and the runs it adds land in the next result beside the carried ones;
* time per step as a K-stage pipeline: at K = 2 measured by a short pipeline run of the arm (as many
  stages as this box has cores); at every K simulated with the arm's own probed action costs (probe.py,
  readout copies included: the probe builds the arm's own chunks) by the simulator (prediction.py), m = 2K
  micro-batches of the run's micro-batch size as `bench schedulers` does; DualPipe-V as schedulers.py's
  `dualpipe_v_row`. Every time records its source; a ratio is only taken between times of one source,
  and a simulated one between two simulations of one probe (each arm's probe also times BP's actions, so
  1F1B is simulated beside the arm: `paced_step_s`; DualPipe-V's 2K-way probe merged two chunks a stage);
* peak activation bytes per stage: measured in the K = 2 pipeline run; simulated elsewhere (one
  micro-batch's measured bytes × the most micro-batches the schedule holds on that stage).

Arms (`ARMS`): the exact-gradient schedules share the BP reference's accuracy and differ in time and
memory (1F1B, ZB-H1, GPipe; DualPipe-V simulated); PipeDream, its accuracy measured in the pipeline runtime
(its stages save their weights every `--eval-every` steps, scored after training: a run from before that
has a one-point curve); ZeroLock with the frozen head (α = 1), terminal, `top-lora:last`; any readout the
engine validates (`--readouts`); and a BP control given the trainable parameters of every arm that trains
more than BP (its LoRA rank raised, depth.py's `lora_params_per_layer`), timed as 1F1B.

From them, per task × K × arm (`summary`): the final accuracy over seeds, whether the mean curve reaches
BP's (the target: BP's mean final accuracy − one BP seed sd; on a prompt -> response task its response NLL
+ one sd, `Measure`), the time to get there against 1F1B's, the
peak activation memory against 1F1B's and the trainable parameters against BP's.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from zerolock_core.config.arg_types import ints_arg
from zerolock_core.config.run_config import LinkConfig, RunConfig, replace
from zerolock_core.methods import LOCAL_METHODS, REFERENCE, method as method_entry, schedule_of
from zerolock_core.analysis.frontier_arms import (BASELINE_ARM as BASELINE, CONTROL_ARM, PIPEDREAM_ARM,
                                                 READOUT_ARM, RECOMPUTE_ARM, readout_arm_name)
from zerolock_core.analysis.frontier_goal import CRITERIA, GOAL, Goal
from zerolock_core.rundir.atomic_files import read_json, write_json_atomic
from zerolock_core.rundir.file_digest import file_sha256
from zerolock_core.rundir.run_dir import RunDir
from zerolock_core.viz.palette import NEUTRAL, dash, marker, method_colour

from . import depth
from .common import plots, study_runs
from .common.experiment import Experiment
from .common.presets import resolve_bench_model
from .common.settings import BenchSettings, report_header
from .common.table import markdown_table, mib, preamble

BP = "bp"  # the reference run whose accuracy the exact-gradient schedules share
DUALPIPE_V = "dualpipe-v"
MEASURED_AT = 2  # the K measured as a real pipeline (this box's cores); every other K is simulated
MAX_JOBS = 2
MICROBATCHES_PER_STAGE = 2  # the simulated m = 2K, as `bench schedulers`
SIM_WINDOWS = 6  # simulated optimizer steps (what a stage holds, its bubble); the step: 6 more (steady state)


@dataclass(kw_only=True, frozen=True)
class FrontierArm:
    trains: depth.Arm | None  # the run that measures its accuracy; None: `accuracy_of`'s
    schedule: str  # the pipeline method that times it (and, at K = 2, runs it)
    locking: bool  # update locking: the exact-gradient schedules
    runtime: str = "reference"  # where its accuracy is measured
    # an arm that trains nothing of its own takes the accuracy of this arm's runs: the same gradients bit for
    # bit (BP's for the exact-gradient schedules; PipeDream's for PipeDream with --recompute)
    accuracy_of: str = BP
    # --recompute on the fewest layers that keep every stage under half of 1F1B's peak
    # (zerolock_core/method/recompute_layout.py); times and memory from the arm's own probe
    recompute: bool = False


def _bp_schedule(schedule: str) -> FrontierArm:
    return FrontierArm(trains=None, schedule=schedule, locking=True)


ARMS: dict[str, FrontierArm] = {
    BASELINE: _bp_schedule(BASELINE),
    "zb-h1": _bp_schedule("zb-h1"),
    "gpipe": _bp_schedule("gpipe"),
    DUALPIPE_V: _bp_schedule(DUALPIPE_V),  # simulated only: two chunks per device
    PIPEDREAM_ARM: FrontierArm(trains=depth.Arm(method="pipedream"), schedule="pipedream", locking=False,
                               runtime="pipeline"),
    "zerolock": FrontierArm(trains=depth.Arm(method="zerolock"), schedule="zerolock", locking=False),
    "terminal": FrontierArm(trains=depth.Arm(method="terminal"), schedule="terminal", locking=False),
    readout_arm_name("top-lora:last"): FrontierArm(trains=depth.Arm(method="zerolock", readout="top-lora:last"),
                                                   schedule="zerolock", locking=False),
}
DEFAULT_ARMS = tuple(ARMS)
# the tracking copy (issue 41's own suggestion), trained as a real pipeline: it equals the reference bit for
# bit (tests/test_tracking_readout.py) at a fifth of the reference's hours on this box, and its pushes go
# through the coordinator's store as they would in production; like PipeDream its curve is its final point
ARMS["zerolock track:2 (pipeline)"] = FrontierArm(trains=depth.Arm(method="zerolock", readout="track:2"),
                                                   schedule="zerolock", locking=False, runtime="pipeline")
# PipeDream with its first N stages frozen (--frozen-stages): no update locking, the trained suffix holding
# under half of 1F1B's peak (common/frozen_layout.py), LoRA at the largest rank within BP's parameters; its
# accuracy measured in the pipeline runtime, like PipeDream's
ARMS.update({f"pipedream frozen:{n}": FrontierArm(trains=depth.Arm(method=PIPEDREAM_ARM, frozen_stages=n),
                                                  schedule=PIPEDREAM_ARM, locking=False, runtime="pipeline")
             for n in (1, 2)})
# activation recompute (--recompute) trades a forward of some layers for their activations; it changes no
# gradient (tests/test_recompute.py: bit for bit, PipeDream's weight versions included), so PipeDream's runs
# are its accuracy, and 1F1B with the same recompute is the exact-gradient schedule it must beat
RECOMPUTE = RECOMPUTE_ARM
ARMS[PIPEDREAM_ARM + RECOMPUTE] = FrontierArm(trains=None, accuracy_of=PIPEDREAM_ARM, schedule=PIPEDREAM_ARM,
                                              locking=False, runtime="pipeline", recompute=True)
ARMS[BASELINE + RECOMPUTE] = FrontierArm(trains=None, schedule=BASELINE, locking=True, recompute=True)


def readout_arm(readout: str) -> FrontierArm:
    """ZeroLock at α = 1 with any readout the engine validates (checked when its config is built)."""
    return FrontierArm(trains=depth.Arm(method="zerolock", readout=readout), schedule="zerolock", locking=False)


CONTROL = FrontierArm(trains=depth.Arm(method="bp"), schedule=BASELINE, locking=True)  # its rank set per arm


def _slug(name: str) -> str:
    return name.replace(" ", "_").replace(":", "").replace("=", "").replace("/", "_").replace("(", "").replace(")", "")


# ---- pure functions ------------------------------------------------------------------------------


@dataclass(kw_only=True, frozen=True)
class Measure:
    """What "BP's accuracy" is on a task: a classification task's label accuracy (higher is better), a
    prompt -> response task's response NLL (lower is better; the goal asks for it within 2 %)."""

    key: str  # the field of a run record's curve and final eval
    higher_is_better: bool
    words: str

    def reached(self, value: float, target: float) -> bool:
        return value >= target if self.higher_is_better else value <= target


ACCURACY, RESPONSE_NLL = (Measure(key="accuracy", higher_is_better=True, words="accuracy"),
                          Measure(key="nll", higher_is_better=False, words="response NLL"))


def measure_of(report: dict[str, Any], task: str) -> Measure:
    return RESPONSE_NLL if report["tasks"][task].get("pairs", False) else ACCURACY


def time_to_accuracy(curve: Sequence[tuple[int, float]], target: float, step_s: float | None,
                     measure: Measure = ACCURACY) -> float | None:
    """Seconds to the first eval that reaches `target` (at or above it; an NLL at or below): its step × the
    seconds per step; None if never (or no time)."""
    if step_s is None:
        return None
    for step, value in curve:
        if measure.reached(value, target):
            return step * step_s
    return None


def bp_target(finals: Sequence[float], measure: Measure = ACCURACY) -> float:
    """BP's level to reach: its mean final value less one seed standard deviation (an NLL: plus one; 0 with one
    seed)."""
    sd = statistics.stdev(finals) if len(finals) > 1 else 0.0
    return statistics.fmean(finals) + (-sd if measure.higher_is_better else sd)


def mean_curve(runs: Sequence[dict[str, Any]], measure: Measure = ACCURACY) -> list[tuple[int, float]]:
    """The curve of `measure` averaged over seeds, at the steps every seed evaluated."""
    common = set(runs[0]["step"]).intersection(*(r["step"] for r in runs[1:]))
    return [(s, statistics.fmean(r[measure.key][r["step"].index(s)] for r in runs)) for s in sorted(common)]


def _ratio(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else value / base


def paced_step_s(e: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    """`e`'s seconds per step by source, a simulated one at the pace of 1F1B's own probe: × 1F1B's simulated
    step over 1F1B simulated from `e`'s probe. The probes ran one after another on a shared box (one
    session's 1F1B step took 1.2 s, another's 1.9 s); this ratio of two simulations of one probe is what
    a time against 1F1B's means. A result without the paired simulation keeps its raw step."""
    out = dict(e["step_s"])
    paired = e.get("simulated", {}).get("paired_1f1b_samples_per_s")
    if "simulated" in out and "simulated" in base["step_s"] and paired:
        out["simulated"] = base["step_s"]["simulated"] * paired / e["simulated"]["samples_per_s"]
    return out


def summary(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per task × K × arm: accuracy over seeds, whether it reaches BP's, the time to it, the time
    per step and the peak activation memory against 1F1B's (times of one source only), trainable parameters
    against BP's."""
    rows = []
    for task, per_k in report["results"].items():
        pairs = report["tasks"][task].get("pairs", False)
        for k_key, arms in per_k.items():
            bp, measure = arms[BP], measure_of(report, task)
            target = bp_target([r["final"][measure.key] for r in bp["runs"]], measure)
            base = arms[BASELINE]
            base_peak = max(base["activation_bytes"])

            def time_to(e: dict[str, Any]) -> dict[str, float | None]:
                curve = mean_curve(e["runs"], measure)
                return {src: time_to_accuracy(curve, target, s, measure) for src, s in paced_step_s(e, base).items()}

            base_time = time_to(base)
            for name, e in arms.items():
                if name == BP:
                    continue
                finals = [r["final"]["accuracy"] for r in e["runs"]]
                mine = time_to(e)
                source = next((s for s in ("measured", "simulated") if base_time.get(s) is not None
                               and s in mine), None)
                reaches = any(v is not None for v in mine.values())
                step_source = next((s for s in ("measured", "simulated") if s in base["step_s"] and s in e["step_s"]),
                                   None)
                row = {"task": task, "K": int(k_key), "arm": name, "seeds": len(e["runs"]),
                       "steps": report["config"]["steps"], "locking": e["locking"],
                       "accuracy_mean": statistics.fmean(finals),
                       "accuracy_sd": statistics.stdev(finals) if len(finals) > 1 else 0.0}
                if pairs:
                    row["nll_mean"] = statistics.fmean(r["final"]["nll"] for r in e["runs"])
                row |= {"reaches_bp": reaches,
                        "time_to_bp_vs_1f1b": _ratio(mine.get(source), base_time.get(source)) if source else None,
                        "step_time_vs_1f1b": _ratio(paced_step_s(e, base)[step_source], base["step_s"][step_source])
                        if step_source else None,
                        "activation_peak_vs_1f1b": _ratio(max(e["activation_bytes"]), base_peak),
                        "trainable_vs_bp": _ratio(e["trainable_params"], bp["trainable_params"])}
                rows.append(row)
    return rows




def goal_rows(report: dict[str, Any], goal: Goal = GOAL) -> list[dict[str, Any]]:
    """Per task × K × arm without update locking (BP controls aside): which of the goal's criteria it
    meets (`CRITERIA`, None where the study lacks what decides it) and whether it meets them all."""
    out = []
    by_cell: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in report["summary"]:
        by_cell.setdefault((r["task"], r["K"]), []).append(r)
    for (task, k), rows in by_cell.items():
        bp_runs = report["results"][task][str(k)][BP]["runs"]
        bp_acc = statistics.fmean(r["final"]["accuracy"] for r in bp_runs)
        bp_nll = statistics.fmean(r["final"]["nll"] for r in bp_runs)
        pairs = report["tasks"][task].get("pairs", False)
        schedules = [r["time_to_bp_vs_1f1b"] for r in rows if r["locking"] and r["arm"] != BASELINE
                     and not r["arm"].startswith(CONTROL_ARM)]
        by_arm = {r["arm"]: r for r in rows}
        for r in rows:
            if r["locking"]:
                continue
            t = r["time_to_bp_vs_1f1b"]
            met: dict[str, bool | None] = {
                "accuracy": r["accuracy_mean"] >= bp_acc - goal.accuracy_within - 1e-12
                and (not pairs or r["nll_mean"] <= bp_nll * (1 + goal.nll_within)),
                "seeds": r["seeds"] >= goal.seeds,
                "time": t is not None and t <= goal.time_vs_1f1b,
                "ahead of schedules": t is not None and all(o is None or t < o for o in schedules),
                "memory": r["activation_peak_vs_1f1b"] is not None
                and r["activation_peak_vs_1f1b"] <= goal.activation_vs_1f1b,
                "control": None}
            control = by_arm.get(CONTROL_ARM + r["arm"])
            if r["trainable_vs_bp"] is not None and r["trainable_vs_bp"] <= 1.0:
                met["control"] = True  # no more parameters than BP: BP itself is its control
            elif control is not None:
                met["control"] = (control["accuracy_mean"] - r["accuracy_mean"]
                                  <= max(control["accuracy_sd"], r["accuracy_sd"]))
            out.append({"task": task, "K": k, "arm": r["arm"], "accuracy_vs_bp": r["accuracy_mean"] - bp_acc,
                        "met": met, "goal": all(v is True for v in met.values())})
    return out


def verdict_lines(report: dict[str, Any]) -> list[str]:
    """One plain sentence per task × K: the configuration that meets the goal, or the closest and what it
    misses (criteria the study cannot decide yet are named as open)."""
    lines = []
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for g in report.get("goal", []):
        cells.setdefault((g["task"], g["K"]), []).append(g)
    for (task, k), rows in cells.items():
        winners = [g["arm"] for g in rows if g["goal"]]
        if winners:
            lines.append(f"{task} K={k}: {', '.join(winners)} meets the goal (BP's accuracy, ≤ {GOAL.time_vs_1f1b}× "
                         f"1F1B's time and ahead of every exact-gradient schedule, ≤ {GOAL.activation_vs_1f1b}× its "
                         "activation memory).")
            continue
        best = max(rows, key=lambda g: (sum(v is True for v in g["met"].values()), g["accuracy_vs_bp"]))
        line = (f"{task} K={k}: no configuration without update locking meets the goal; the closest, "
                f"{_misses(best)}")
        most_accurate = max(rows, key=lambda g: g["accuracy_vs_bp"])
        if most_accurate["accuracy_vs_bp"] > best["accuracy_vs_bp"]:  # fewer criteria met, but nearer BP
            line += f"; the most accurate, {_misses(most_accurate)}"
        lines.append(line + ".")
    return lines


def _misses(g: dict[str, Any]) -> str:
    """'ARM (accuracy -0.012 against BP), misses time, memory; open: control' for one goal row."""
    misses = [c for c in CRITERIA if g["met"][c] is False]
    open_ = [c for c in CRITERIA if g["met"][c] is None]
    return (f"{g['arm']} (accuracy {g['accuracy_vs_bp']:+.3f} against BP), "
            f"misses {', '.join(misses) or 'nothing decided'}" + (f"; open: {', '.join(open_)}" if open_ else ""))


# ---- tasks -----------------------------------------------------------------------------------------


def task_arg(text: str) -> tuple[str, str]:
    """"trec6=csv:PATH" -> ("trec6", "csv:PATH"); "topics" -> ("topics", "topics")."""
    name, _, spec = text.partition("=")
    name, spec = name.strip(), (spec or name).strip()
    if not name or not spec:
        raise argparse.ArgumentTypeError(f"--task: expected NAME=csv:PATH, NAME=jsonl:PATH or a built-in, got {text!r}")
    return name, spec


def describe_task(spec: str) -> dict[str, Any]:
    """What a result names of its data: the spec, and for a file its path and sha256."""
    kind, sep, path = spec.partition(":")
    if not sep:
        return {"dataset": spec, "pairs": False}
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--task {spec}: no such file {path}")
    # the path as given (a result names no place on this machine), the file's name and its content's hash
    return {"dataset": spec, "path": path, "file": p.name, "sha256": file_sha256(p), "pairs": kind == "jsonl"}


# ---- runs ------------------------------------------------------------------------------------------


@dataclass(kw_only=True, frozen=True)
class ArmSettings(BenchSettings):
    """The benchmark settings of one arm: its dataset, readout and LoRA in every config they build, so the
    probe (probe.py) times the arm's own chunks — a readout copy included."""

    readout: str = "head"
    lora_rank: int = 4
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    skip_bad_rows: bool = False  # the task's (--skip-bad-rows): the probe reads the same rows the runs train on
    boundaries: tuple[int, ...] | None = None  # the arm's split (a frozen prefix's): the probe times its chunks
    frozen_stages: int = 0  # simulated without their backward (the probe times every chunk both ways)
    recompute: tuple[int, ...] = ()  # --recompute per stage: the probe times B with it and without

    def pipeline(self, **kw: Any) -> RunConfig:
        cfg = super().pipeline(**kw)
        return replace(cfg, model={"readout": self.readout, "lora_rank": self.lora_rank,
                                   "lora_alpha": 4.0 * self.lora_rank, "lora_targets": self.lora_targets,
                                   "boundaries": self.boundaries, "recompute": self.recompute},
                       data={"skip_bad_rows": self.skip_bad_rows})

    def key(self) -> dict[str, Any]:
        """What names its probe: every setting (those a frozen prefix or a recompute adds only when set, so
        that the probes of every other arm keep their names)."""
        d = dataclasses.asdict(self)
        for name, default in (("boundaries", None), ("frozen_stages", 0), ("recompute", ())):
            if d[name] == default:
                del d[name]
        return d


def _key(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


class Launches:
    """What this invocation ran (a rerun of a finished study runs nothing): training subprocesses,
    pipeline timing runs and cost probes."""

    def __init__(self) -> None:
        self.counts = {"train": 0, "timing": 0, "probe": 0}

    def add(self, kind: str) -> None:
        self.counts[kind] += 1


def _cached(path: Path, launches: Launches, kind: str, compute) -> Any:
    if path.exists():
        return read_json(path)
    value = compute()
    launches.add(kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, value)
    return value


def trainable_count(cfg: RunConfig) -> int:
    """The trainable parameters of `cfg`'s chunks (terminal: the last chunk's alone; none of the first
    --frozen-stages)."""
    from zerolock_core.methods import chunk_trains
    from zerolock_core.train.run_setup import build_run_setup

    setup = build_run_setup(replace(cfg, out=None))
    t = cfg.train
    chunks = [c for c in setup.chunks
              if chunk_trains(t.method, last=c.is_last, index=c.index, frozen_stages=t.frozen_stages)]
    return sum(t.numel() for c in chunks for t in c.trainable_state().values())


def matched_rank_for(params: int, *, model: str, targets: tuple[str, ...]) -> int:
    """The smallest LoRA rank with which BP trains at least `params` parameters (depth.py's count)."""
    from transformers import AutoConfig

    from zerolock_core.models.loading import resolve_model

    mc = AutoConfig.from_pretrained(resolve_model(model))
    return math.ceil(params / depth.lora_params_per_layer(mc, targets, 1) / mc.num_hidden_layers)


def recompute_of(cfg: RunConfig) -> tuple[int, ...]:
    """--recompute per stage for `cfg`'s split (zerolock_core/train/model_recompute.py)."""
    from zerolock_core.train.model_recompute import memory_halving_recompute_for

    return memory_halving_recompute_for(cfg.model.model, cfg.train.stages, cfg.model.boundaries)


def _probe(settings: ArmSettings, *, stages: int, batch: int, microbatches: int) -> dict[str, Any]:
    from .common.probe import probe_costs

    p = probe_costs(settings, stages=stages, batch=batch, microbatches=microbatches)
    out = {"per_stage": {str(s): c for s, c in p.per_stage.items()}, "hidden_bytes": p.hidden_bytes,
           "layers": p.layers}
    if settings.recompute:  # the memory it buys, measured on the same chunks
        from .common.probe import stage_activations

        out["activations"] = stage_activations(settings, stages=stages, batch=batch, microbatches=microbatches)
    return out


def _probed(d: dict[str, Any]):
    from .common.probe import ProbedCosts

    return ProbedCosts(per_stage={int(s): c for s, c in d["per_stage"].items()}, hidden_bytes=d["hidden_bytes"],
                       layers=d["layers"])


def simulate(settings: ArmSettings, *, schedule: str, stages: int, microbatch_size: int, out: Path,
             launches: Launches) -> dict[str, Any]:
    """Seconds per sample and the most micro-batches held per stage of `schedule` at K = `stages`, m = 2K,
    costed with the arm's own probed actions (DualPipe-V: on the 2K-way split); or why it cannot run."""
    from zerolock_core.runtime.link_emulation import link_for

    from .common.measure import skip_windows
    from .common.prediction import predict, steady_step_s
    from .common.probe import PROBED, ProbedCosts, merged_adjacent

    chunks = 2 * stages if schedule == DUALPIPE_V else stages
    m = MICROBATCHES_PER_STAGE * stages
    geometry = dict(stages=chunks, batch=m * microbatch_size, microbatches=m)

    def probe(s: ArmSettings) -> dict[str, Any]:
        cost_key = _key(s.key(), geometry, PROBED)  # a probe that timed fewer actions is not it
        return _cached(out / "probes" / f"{cost_key}.json", launches, "probe", lambda: _probe(s, **geometry))

    try:
        probed = probe(settings)
        # an uneven split (a frozen prefix's) is paired with 1F1B on the even one, probed beside it
        even = probe(dataclasses.replace(settings, boundaries=None, frozen_stages=0)) \
            if settings.boundaries is not None else probed
    except ValueError as err:  # fewer layers than chunks
        return {"skipped": f"{chunks} chunks: {err}"}

    def run(method: str, costs: ProbedCosts, frozen: int = 0) -> tuple[Any, float]:
        """The prediction over SIM_WINDOWS windows (what it holds and idles) and the samples per second of a
        long run (steady state: a study run fills its pipeline once in hundreds of steps)."""
        # terminal runs ZeroLock's schedule with its own costs: its chunks before the last train nothing
        common = dict(method=schedule_of(method), stages=stages, microbatches=m,
                      costs=costs.costs(method, frozen_stages=frozen), frozen_stages=frozen,
                      link=link_for(LinkConfig()), inflight_limit=settings.inflight_depth)
        pred = predict(**common, batch=m * microbatch_size, windows=SIM_WINDOWS, skip_windows=skip_windows(SIM_WINDOWS))
        return pred, m * microbatch_size / steady_step_s(**common, windows=SIM_WINDOWS)

    costs = _probed(probed)
    pred, samples_per_s = run(schedule, costs, settings.frozen_stages)
    # 1F1B on the same probe: a probe taken while the shared box was quieter makes every action cheaper, so
    # only a ratio of two simulations of one probe compares arms (`paced_step_s`); a recompute's probe timed
    # plain 1F1B's F and B in the same rounds
    plain = schedule == BASELINE and settings.boundaries is None and not settings.recompute
    paired = samples_per_s if plain else run(
        BASELINE, merged_adjacent(costs) if schedule == DUALPIPE_V else _probed(even).without_recompute())[1]
    held = [n / 2 for n in pred.inflight_peak] if schedule == DUALPIPE_V else list(pred.inflight_peak)
    out = {"samples_per_s": samples_per_s, "peak_inflight": held, "bubble_fraction": pred.bubble_fraction,
           "microbatches": m, "paired_1f1b_samples_per_s": paired, "rate": "steady state"}
    if settings.recompute:
        out |= {"recompute": list(settings.recompute), **probed["activations"]}
    return out


def measure_k2(cfg: RunConfig, *, schedule: str, steps: int, out: Path, launches: Launches) -> dict[str, Any]:
    """A short real pipeline run of the arm at K = 2: samples/s after the first window, its activation peaks
    per stage and bytes sent (measure.py's `measured`)."""
    from .common.measure import measured
    from .common.pipeline_runs import PipelineRuns

    timing = replace(cfg, train={"runtime": "pipeline", "method": schedule, "steps": steps, "eval_every": 0,
                                 "threads": 1}, data={"eval_size": 1})

    def run() -> dict[str, Any]:
        runs = PipelineRuns(out / "timing", verbose=False)
        return measured(runs.run(timing), batch=cfg.train.batch, microbatches=cfg.train.microbatches, steps=steps)

    return _cached(out / "timing" / f"{_key(timing.to_dict() | {'out': None})}.json", launches, "timing", run)


def _curve_run(cfg: RunConfig, analysis: dict[str, Any]) -> dict[str, Any]:
    """A finished run as the result keeps it: enough to report it again without its run directory."""
    m = RunDir(cfg.out).read_metrics()

    def acc(e: dict[str, Any]) -> float:
        return e["label_accuracy"] if e.get("label_accuracy") is not None else e["token_accuracy"]

    history = [h for h in m.eval_history if h["step"] < m.steps_done] + [{**m.eval, "step": m.steps_done}]
    return {"seed": cfg.train.seed, "step": [h["step"] for h in history], "accuracy": [acc(h) for h in history],
            "nll": [h["nll"] for h in history], "final": {"accuracy": acc(m.eval), "nll": m.eval["nll"]},
            "run_s": m.total_s, "seconds_per_step_reference": analysis["seconds_per_step"],
            "run": Path(cfg.out).name, "config": cfg.to_dict(), "analysis": analysis}


def carried_runs(paths: Sequence[Path], *, model: str = "", model_path: str = "",
                 tasks: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """The finished runs recorded in earlier results (`--carry`), by run name: a record without its config
    and analysis (a result written before they were kept) cannot stand for a run and is skipped. A result
    from another machine names its model's folder and its data files where they were there: a run that read
    the same `--model` (`model`, found here at `model_path`) and a task file with the same sha256 as this
    invocation's task of that name (`tasks`, as `describe_task` records them) is read with this machine's
    folder and path, so it stands for the run this invocation would train."""
    runs: dict[str, dict[str, Any]] = {}
    for path in paths:
        report = read_json(path)
        if report.get("bench") != "frontier":
            raise ValueError(f"--carry {path}: not a frontier result (bench {report.get('bench')!r})")
        same_model = bool(model) and report.get("settings", {}).get("model") == model
        datasets = {info["dataset"]: here["dataset"] for name, info in report.get("tasks", {}).items()
                    if (here := (tasks or {}).get(name)) and here.get("sha256") == info.get("sha256")
                    and (here.get("sha256") is not None or here["dataset"] == info["dataset"])}
        for per_k in report["results"].values():
            for entries in per_k.values():
                for entry in entries.values():
                    for r in entry["runs"]:
                        if {"run", "config", "analysis"} <= r.keys():
                            runs[r["run"]] = {**r, "config": _here(r["config"], model_path if same_model else "",
                                                                  datasets)}
    return runs


def _here(config: dict[str, Any], model_path: str, datasets: dict[str, str]) -> dict[str, Any]:
    """A recorded run config with this machine's model folder (when given) and data spec (when mapped)."""
    model, data = dict(config["model"]), dict(config["data"])
    if model_path:
        model["model"] = model_path
    data["dataset"] = datasets.get(data["dataset"], data["dataset"])
    return {**config, "model": model, "data": data}


def carried_for(cfg: RunConfig, carried: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """`cfg`'s run as an earlier result recorded it, if that result trained this very config."""
    record = carried.get(Path(cfg.out).name)
    return record if record and depth._same_run(RunConfig.from_dict(record["config"]), cfg) else None


def run_frontier(settings: BenchSettings, *, out: Path, tasks: tuple[tuple[str, str], ...], stages: tuple[int, ...],
                 arms: tuple[str, ...], readouts: tuple[str, ...], seeds: tuple[int, ...],
                 decisive_seeds: tuple[int, ...], decisive: tuple[str, ...], batch: int, microbatches: int,
                 eval_every: int, eval_size: int, rank: int, jobs: int, time_steps: int,
                 controls: bool = True, finished_only: bool = False,
                 carry: Sequence[Path] = (), skip_bad_rows: bool = False) -> dict[str, Any]:
    if not 1 <= jobs <= MAX_JOBS:
        raise ValueError(f"--jobs must be 1 or {MAX_JOBS} (runs side by side, one thread each), got {jobs}")
    if batch % microbatches:
        raise ValueError(f"--batch ({batch}) must be a multiple of --microbatches ({microbatches})")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise ValueError(f"unknown frontier arm(s) {unknown}; choose from {', '.join(ARMS)} (or --readouts)")
    table = {BASELINE: ARMS[BASELINE], **{a: ARMS[a] for a in arms},
             **{READOUT_ARM + r: readout_arm(r) for r in readouts}}
    borrowed = [(a, ARMS[a].accuracy_of) for a in arms if ARMS[a].trains is None and ARMS[a].accuracy_of != BP
                and ARMS[a].accuracy_of not in table]
    if borrowed:
        a, of = borrowed[0]
        raise ValueError(f"frontier arm {a!r} takes its accuracy from {of!r}'s runs (the same gradients bit for "
                         f"bit): add {of!r} to --arms")
    launches, started = Launches(), time.perf_counter()
    model = resolve_bench_model(settings.model)
    targets = ("q_proj", "v_proj")
    task_info = {name: describe_task(spec) for name, spec in tasks}
    carried = carried_runs(carry, model=settings.model, model_path=model, tasks=task_info)

    def finished(cfg: RunConfig) -> bool:
        return depth._finished_with(cfg) or carried_for(cfg, carried) is not None

    def config(arm: depth.Arm, *, task: str, k: int, seed: int, name: str, lora: int, runtime: str) -> RunConfig:
        # depth's config is the reference runtime's: a pipeline-only method (PipeDream) is set after it
        reference_too = REFERENCE in method_entry(arm.method).runtimes
        cfg = depth.run_config(settings, arm if reference_too else dataclasses.replace(arm, method=BP),
                               stages=k, top=0, seed=seed, batch=batch, microbatches=microbatches,
                               eval_every=eval_every, eval_size=eval_size, rank=lora, dataset=dict(tasks)[task],
                               out=out / "runs" / f"{_slug(task)}-K{k}-{_slug(name)}-seed{seed}")
        if skip_bad_rows:  # a file with a few rows the loader refuses (the studies' Alpaca: two empty responses)
            cfg = replace(cfg, data={"skip_bad_rows": True})
        return cfg if runtime == "reference" else replace(cfg, train={"runtime": runtime, "method": arm.method})

    # the plan: per task × K, the arms that train (BP always: its accuracy is the target), then the controls
    plan: dict[tuple[str, int, str], dict[str, Any]] = {}
    for task, _ in tasks:
        for k in stages:
            entries = {BP: {"arm": CONTROL, "rank": rank}}
            entries |= {name: {"arm": a, "rank": rank} for name, a in table.items()}
            if controls:
                bp_params = None
                for name, a in list(entries.items()):
                    if a["arm"].trains is None or a["arm"].trains.method == "bp":
                        continue
                    if bp_params is None:
                        bp_params = trainable_count(config(depth.Arm(method="bp"), task=task, k=k, seed=0,
                                                           name=BP, lora=rank, runtime="reference"))
                    params = trainable_count(config(a["arm"].trains, task=task, k=k, seed=0, name=name, lora=rank,
                                                    runtime=a["arm"].runtime))
                    if params > bp_params:
                        entries[CONTROL_ARM + name] = {"arm": CONTROL, "rank": matched_rank_for(
                            params, model=model, targets=targets), "matches": name}
            for name, e in entries.items():
                plan[(task, k, name)] = e
    configs: dict[tuple[str, int, str, int], RunConfig] = {}
    for (task, k, name), e in plan.items():
        a = e["arm"]
        if a.trains is None:
            continue
        for seed in (decisive_seeds if name in decisive or name == BP else seeds):
            configs[(task, k, name, seed)] = config(a.trains, task=task, k=k, seed=seed, name=name, lora=e["rank"],
                                                    runtime=a.runtime)
    todo = [] if finished_only else [cfg for cfg in configs.values() if not finished(cfg)]
    print(f"  {len(configs)} runs, {sum(finished(c) for c in configs.values())} already finished "
          f"({sum(carried_for(c, carried) is not None and not depth._finished_with(c) for c in configs.values())} "
          f"of them carried from an earlier result); {jobs} side by side", flush=True)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    for cfg, trained in study_runs.side_by_side(lambda c: depth._train(c, depth.beside(c.out, ".log")), todo,
                                                jobs=jobs):
        if trained:
            launches.add("train")
            print(f"  finished {Path(cfg.out).name} ({time.perf_counter() - started:.0f} s so far)", flush=True)
    # a study cut short (--finished-only), or one some of whose runs another invocation was training, reports
    # what has finished and names what it still lacks
    missing = sorted(Path(cfg.out).name for cfg in configs.values() if not finished(cfg))
    if missing:
        configs = {key: cfg for key, cfg in configs.items() if finished(cfg)}
        if not configs:
            raise ValueError(f"no run of this plan has finished under {out / 'runs'}")
        trained_arms = {(t, k, n) for t, k, n, _ in configs}
        # an arm none of whose runs finished is left out; without BP's runs a task × K has no target
        plan = {key: e for key, e in plan.items() if (key[0], key[1], BP) in trained_arms
                and (key if e["arm"].trains is not None else (key[0], key[1], e["arm"].accuracy_of)) in trained_arms}

    results: dict[str, dict[str, dict[str, Any]]] = {}
    for (task, k, name), e in plan.items():
        a = e["arm"]
        source = name if a.trains is not None else a.accuracy_of
        runs_of = {seed: cfg for (t, kk, n, seed), cfg in configs.items() if (t, kk, n) == (task, k, source)}
        cfg0 = next(iter(runs_of.values()))
        per_run = []
        for cfg in runs_of.values():
            if not depth._finished_with(cfg):  # carried: the earlier result's record stands for the run
                record = carried_for(cfg, carried)
                assert record is not None, cfg.out
                per_run.append((cfg, record["analysis"], record))
                continue
            analysis = depth.cached_analysis(cfg)
            per_run.append((cfg, analysis, _curve_run(cfg, analysis)))
        analysis = per_run[0][1]
        lora = cfg0.model.lora_rank
        recompute = recompute_of(cfg0) if a.recompute else ()
        arm_settings = ArmSettings(**{**dataclasses.asdict(settings), "dataset": dict(tasks)[task],
                                      "alpha": cfg0.objective.alpha[0], "threads": 1},
                                   readout=cfg0.model.readout, lora_rank=lora, lora_targets=cfg0.model.lora_targets,
                                   skip_bad_rows=cfg0.data.skip_bad_rows, boundaries=cfg0.model.boundaries,
                                   frozen_stages=cfg0.train.frozen_stages, recompute=recompute)
        sim = simulate(arm_settings, schedule=a.schedule, stages=k, microbatch_size=batch // microbatches, out=out,
                       launches=launches)
        step_s: dict[str, float] = {}
        if "samples_per_s" in sim:
            step_s["simulated"] = batch / sim["samples_per_s"]
        one_mb = analysis["stage_activation_bytes"]
        activation, activation_source = one_mb, "one micro-batch (no schedule simulated)"
        if a.schedule == DUALPIPE_V:
            activation, activation_source = [], "n/a"
            if "peak_inflight" in sim:  # a stage's micro-batch of the K-way split, held as DualPipe-V holds it
                activation = [b * n for b, n in zip(one_mb, sim["peak_inflight"])]
                activation_source = "simulated"
        elif recompute and "peak_inflight" in sim:
            activation = [b * n + r for b, n, r in zip(sim["kept_bytes"], sim["peak_inflight"], sim["recompute_bytes"])]
            activation_source = ("simulated: what one micro-batch keeps with --recompute, measured, × micro-batches "
                                 "held (m = 2K), + one recomputed layer's activations (measured)")
        elif "peak_inflight" in sim:
            activation = [b * n for b, n in zip(one_mb, sim["peak_inflight"])]
            activation_source = "simulated: one micro-batch measured × micro-batches held (m = 2K)"
        measured = None
        if k == MEASURED_AT and a.schedule != DUALPIPE_V:
            timed_cfg = replace(cfg0, model={"recompute": recompute}) if recompute else cfg0
            measured = measure_k2(timed_cfg, schedule=a.schedule, steps=time_steps, out=out, launches=launches)
            step_s["measured"] = batch / measured["samples_per_s"]
            activation, activation_source = measured["peak_activation_bytes"], "measured (pipeline run)"
            if recompute:  # the runtime's meter sees what is kept; a recomputed layer's backward adds one back
                activation = [b + r for b, r in zip(activation, sim.get("recompute_bytes", [0] * k))]
                activation_source += " + one recomputed layer's activations (measured)"
        # forward: each boundary's hidden state (and readout rows); backprop sends as many gradient bytes back
        wire = sum(analysis["bytes_per_microbatch"]) * microbatches * (1 if cfg0.train.method in LOCAL_METHODS else 2)
        entry = {"arm": name, "method": cfg0.train.method, "schedule": a.schedule, "runtime": cfg0.train.runtime,
                 "readout": cfg0.model.readout, "alpha": cfg0.objective.alpha[0], "lora_rank": lora,
                 **({"recompute": list(recompute)} if recompute else {}),
                 "locking": a.locking, "accuracy_from": source, "seeds": sorted(runs_of),
                 "runs": [record for _, _, record in per_run],
                 "step_s": step_s, "time_source": "measured" if "measured" in step_s else
                 ("simulated" if step_s else "n/a"), "simulated": sim, "measured": measured,
                 "activation_bytes": activation or [0], "activation_source": activation_source,
                 "trainable_params": sum(analysis["trainable_params"]),
                 "bytes_per_microbatch": analysis["bytes_per_microbatch"], "wire_bytes_per_step": wire}
        if "matches" in e:
            entry["matches"] = e["matches"]
        results.setdefault(task, {}).setdefault(str(k), {})[name] = entry
    report = {
        **report_header("frontier", settings),
        "tasks": task_info,
        "config": {"stages": list(stages), "arms": list(table), "readouts": list(readouts), "batch": batch,
                   "microbatches": microbatches, "steps": settings.steps, "eval_every": eval_every,
                   "eval_size": eval_size, "seeds": list(seeds), "decisive_seeds": list(decisive_seeds),
                   "decisive": list(decisive), "lora_rank": rank, "jobs": jobs, "threads_per_run": 1,
                   "time_steps": time_steps, "measured_at": MEASURED_AT, "skip_bad_rows": skip_bad_rows,
                   "simulated_microbatches": f"{MICROBATCHES_PER_STAGE}K"},
        "launched": launches.counts,
        "wall_s": round(time.perf_counter() - started, 1),
        "missing": missing,
        "carried": sorted({Path(c.out).name for c in configs.values()
                           if not depth._finished_with(c) and carried_for(c, carried) is not None}),
        "results": results,
    }
    report["summary"] = summary(report)
    report["goal"] = goal_rows(report)
    return report


# ---- the report ------------------------------------------------------------------------------------


def _cell(value: float | None, spec: str = ".2f") -> str:
    return "never" if value is None else format(value, spec)


def _pairing(report: dict[str, Any]) -> str:
    """How its simulated steps were set against 1F1B's: a result from before `paced_step_s` divided each by
    1F1B's from another probe."""
    arms = [e for per_k in report["results"].values() for k_arms in per_k.values() for e in k_arms.values()]
    paired = all("paired_1f1b_samples_per_s" in e.get("simulated", {}) for e in arms if "samples_per_s" in
                 e.get("simulated", {}))
    steady = all(e.get("simulated", {}).get("rate") == "steady state" for e in arms
                 if "samples_per_s" in e.get("simulated", {}))
    return (", against 1F1B simulated from the same probe" if paired else
            ", against 1F1B's step from another probe, taken at another moment") + \
        (", at steady state" if steady else ", over 5 windows from the first stage's start, its fill included")


def format_report(report: dict[str, Any]) -> str:
    c, s = report["config"], report["settings"]
    lines = preamble(report, f"model {s['model']}, K in {c['stages']}, b={c['batch']}, m={c['microbatches']}, "
                             f"{c['steps']} steps, eval every {c['eval_every']}, LoRA r={c['lora_rank']}; time per "
                             f"step measured at K={c['measured_at']}, simulated (m = {c['simulated_microbatches']}, "
                             f"the arm's own probed costs{_pairing(report)}) elsewhere")
    for name, t in report["tasks"].items():
        lines.append(f"task {name}: {t['dataset']}" + (f" (sha256 {t['sha256']})" if "sha256" in t else ""))
    source = {(task, k, arm): e["time_source"] for task, per_k in report["results"].items()
              for k, arms in per_k.items() for arm, e in arms.items()}
    heads = ["task · K", "arm", "locking", "seeds", "accuracy", "reaches BP", "time to BP vs 1F1B", "step vs 1F1B",
             "time from", "act. peak vs 1F1B", "trainable vs BP"]
    rows = [[f"{r['task']} K={r['K']}", r["arm"], "yes" if r["locking"] else "no", r["seeds"],
             f"{r['accuracy_mean']:.3f} ± {r['accuracy_sd']:.3f}" + (f" (NLL {r['nll_mean']:.2f})" if "nll_mean" in r
                                                                      else ""),
             "yes" if r["reaches_bp"] else "no", _cell(r["time_to_bp_vs_1f1b"]), _cell(r.get("step_time_vs_1f1b")),
             source[(r["task"], str(r["K"]), r["arm"])], _cell(r["activation_peak_vs_1f1b"]),
             _cell(r["trainable_vs_bp"])] for r in report["summary"]]
    lines.append(markdown_table(heads, rows))
    if report.get("goal"):
        lines.append("the goal (" + ", ".join(CRITERIA) + "): " + "; ".join(
            f"{g['task']} K={g['K']} {g['arm']} "
            + "".join({True: "✓", False: "✗", None: "?"}[g["met"][c]] for c in CRITERIA) for g in report["goal"]))
        lines += verdict_lines(report)
    if report.get("missing"):
        lines.append(f"not finished yet ({len(report['missing'])} runs): " + ", ".join(report["missing"]))
    lines.append("runs launched by this invocation: " + ", ".join(f"{k} {v}" for k, v in report["launched"].items()))
    lines.append("largest stage's activation peak, MiB: " + "; ".join(
        f"{task} K={k} {arm} {mib(max(e['activation_bytes']))}" for task, per_k in report["results"].items()
        for k, arms in per_k.items() for arm, e in arms.items() if arm == BASELINE))
    return "\n".join(lines)


def trained_runs(report: dict[str, Any], task: str | None = None, k: int | None = None) -> list[dict[str, Any]]:
    """The runs a report trained (BP's schedules share BP's runs: each run counted once), of one task × K or all."""
    return [run for t, per_k in report["results"].items() if task in (None, t)
            for kk, arms in per_k.items() if k in (None, int(kk))
            for name, e in arms.items() if name == BP or e.get("accuracy_from") == name for run in e["runs"]]


def format_verdict(reports: list[dict[str, Any]]) -> str:
    """The README's frontier table, one row per task × K × arm (BP's controls aside): accuracy over seeds,
    the time to BP's accuracy and the peak activation memory against 1F1B, trainable parameters against
    BP's, the goal's criteria met (✓ / ✗ / ? undecided), then the verdict lines and what is still missing."""
    lines = []
    for report in reports:
        c = report["config"]
        goal = {(g["task"], g["K"], g["arm"]): g for g in report.get("goal", [])}
        heads = ["task · K", "arm", "locking", "accuracy (seeds)", "time to BP vs 1F1B", "step vs 1F1B",
                 "act. peak vs 1F1B", "trainable vs BP", "goal: " + " · ".join(CRITERIA)]
        rows = []
        for r in report["summary"]:
            if r["arm"].startswith(CONTROL_ARM):
                continue
            g = goal.get((r["task"], r["K"], r["arm"]))
            marks = "–" if g is None else \
                " ".join({True: "✓", False: "✗", None: "?"}[g["met"][x]] for x in CRITERIA)
            rows.append([f"{r['task']} K={r['K']}", r["arm"], "yes" if r["locking"] else "no",
                         f"{r['accuracy_mean']:.3f} ± {r['accuracy_sd']:.3f} ({r['seeds']})"
                         + (f", NLL {r['nll_mean']:.3f}" if "nll_mean" in r else ""),
                         _cell(r["time_to_bp_vs_1f1b"]), _cell(r.get("step_time_vs_1f1b")),
                         _cell(r["activation_peak_vs_1f1b"]), _cell(r["trainable_vs_bp"]), marks])
        runs = trained_runs(report)
        hours = sum(run.get("run_s") or 0.0 for run in runs) / 3600
        lines += [f"{report['settings']['model']}, {c['steps']} steps, b={c['batch']}, m={c['microbatches']}, "
                  f"accuracy mean ± sd over seeds (BP's schedules share BP's runs); time per step simulated as a "
                  f"K-stage pipeline with each arm's probed costs{_pairing(report)} "
                  f"(m = {c['simulated_microbatches']}); "
                  f"{len(runs)} runs, {hours:.1f} hours of training (their wall times added)", "",
                  markdown_table(heads, rows), ""]
        lines += [f"- {line}" for line in verdict_lines(report)]
        if report.get("missing"):
            lines.append(f"- still to run ({len(report['missing'])}): " + ", ".join(report["missing"]))
    return "\n".join(lines).rstrip()


NEVER_EDGE = 1.15  # "never reached": drawn at this fraction past the largest finite ratio


def frontier_figure(report: dict[str, Any], task: str, k: int):
    """x: time to BP's accuracy against 1F1B's, y: peak activation memory against 1F1B's; one marker per
    arm, an arm that never reaches BP's accuracy on the right edge (open marker)."""
    import plotly.graph_objects as go

    rows = [r for r in report["summary"] if r["task"] == task and r["K"] == k]
    arms = report["results"][task][str(k)]
    finite = [r["time_to_bp_vs_1f1b"] for r in rows if r["time_to_bp_vs_1f1b"] is not None]
    edge = NEVER_EDGE * max([1.0, *finite])
    measure = measure_of(report, task)
    fig = plots.figure(title=f"{task}, K={k}: time to BP's {measure.words} and activation memory against 1F1B",
                       xaxis_title=f"time to BP's {measure.words} ÷ 1F1B's (right edge: never)",
                       yaxis_title="peak activation per stage ÷ 1F1B's", template="plotly_white")
    per_colour: dict[str, int] = {}
    points = [(edge if r["time_to_bp_vs_1f1b"] is None else r["time_to_bp_vs_1f1b"], r["activation_peak_vs_1f1b"])
              for r in rows]
    anchors = []  # where each label's right end sits: the x axis starts early enough for the longest
    ys = [y for _, y in points]
    # labels of markers on one spot (1F1B and ZB-H1; the "never" column) stacked, not overprinted
    right = edge + 0.06 * (edge - min(x for x, _ in points) + 0.1)
    # each label's width in x: the axis as wide as the labels beside their markers need (a moved one only widens
    # it, so the widths are if anything overestimated)
    span = right - plots.left_edge_for_labels([(x, r["arm"]) for r, (x, _) in zip(rows, points)], right)
    widths = [plots.label_px(r["arm"]) / plots.PLOT_PX * span for r in rows]
    label_y = plots.spread_labels(points, x_near=0.03 * edge, gap=0.06 * (max(ys) - min(ys) or 1.0), widths=widths)
    for r, (x, y), ly in zip(rows, points, label_y):
        e = arms[r["arm"]]
        colour = method_colour(BP if "matches" in e else e["schedule"])  # a BP control in BP's colour
        n = per_colour.get(colour, 0)
        per_colour[colour] = n + 1
        never = r["time_to_bp_vs_1f1b"] is None
        fig.add_trace(go.Scatter(name=r["arm"] + (" (never)" if never else ""), mode="markers", x=[x], y=[y],
                                 marker={"symbol": marker(n) + ("-open" if never else ""), "size": 12,
                                         "color": colour}))
        anchors.append((x if ly == y else x - 0.03 * edge, r["arm"]))
        if ly == y:  # the label beside its marker
            fig.add_annotation(x=x, y=y, text=r["arm"], showarrow=False, xanchor="right", xshift=-10,
                               font={"color": colour})
        else:  # moved up its column: a thin line back to the marker
            fig.add_annotation(x=x, y=y, ax=x - 0.03 * edge, ay=ly, axref="x", ayref="y", text=r["arm"],
                               xanchor="right", font={"color": colour}, arrowcolor=NEUTRAL["boundary"],
                               arrowwidth=1, arrowhead=0, standoff=7)
    fig.add_vline(x=edge, line={"dash": "dot", "color": NEUTRAL["ink"]}, annotation_text="never reached",
                  annotation_position="top left")
    fig.update_xaxes(range=[plots.left_edge_for_labels(anchors, right), right])
    return fig


def curves_figure(report: dict[str, Any], task: str, k: int):
    """Accuracy against the seconds a K-stage pipeline of each arm takes to get there (eval step × the arm's
    step time at 1F1B's probe pace, `paced_step_s`, one source for all), mean over seeds; the exact-gradient
    schedules share BP's curve, each at its own pace. The dotted line is BP's target."""
    import plotly.graph_objects as go

    arms, measure = report["results"][task][str(k)], measure_of(report, task)
    bp_runs = arms[BP]["runs"]
    target = bp_target([r["final"][measure.key] for r in bp_runs], measure)
    sources = [s for s in ("measured", "simulated") if s in arms[BASELINE]["step_s"]]
    source = sources[0] if sources else None
    fig = plots.figure(title=f"{task}, K={k}: {measure.words} against a {k}-stage pipeline's seconds "
                             f"({source or 'no'} step times)",
                       xaxis_title="seconds of training (eval step × seconds per step, at 1F1B's probe pace)",
                       yaxis_title=f"{measure.words} (mean over seeds" +
                                   ("" if measure.higher_is_better else "; lower is better") + ")",
                       template="plotly_white")
    per_colour: dict[str, int] = {}
    for name, e in arms.items():
        step_s = paced_step_s(e, arms[BASELINE]).get(source) if source else None
        if name == BP or step_s is None:
            continue
        colour = method_colour(BP if "matches" in e else e["schedule"])
        n = per_colour.get(colour, 0)
        per_colour[colour] = n + 1
        curve = mean_curve(e["runs"], measure)
        final_only = len(curve) == 1  # a pipeline run from before its --eval-every snapshots: one larger marker
        seeds = f"{len(e['runs'])} seed" + ("s" if len(e["runs"]) != 1 else "")
        fig.add_trace(go.Scatter(name=f"{name} ({seeds}" + (", final only)" if final_only else ")"),
                                 mode="lines+markers", x=[step * step_s for step, _ in curve], y=[a for _, a in curve],
                                 line={"color": colour, "dash": dash(n)},
                                 marker={"symbol": marker(n), "color": colour, "size": 12 if final_only else 6}))
    fig.add_hline(y=target, line={"dash": "dot", "color": NEUTRAL["ink"]})
    ys = [y for trace in fig.data for y in trace.y]
    log = not measure.higher_is_better and bool(ys)
    if log:  # an NLL that blows up (the frozen head on Alpaca) flattens the rest
        fig.update_yaxes(type="log", range=[math.log10(0.9 * min(ys + [target])), math.log10(1.05 * max(ys))])
    # its own annotation: on a log axis plotly places an annotation at log10(y), and add_hline's label does not
    fig.add_annotation(x=1, xref="paper", y=math.log10(target) if log else target, yref="y", showarrow=False,
                       xanchor="right", yanchor="top" if log else "bottom", bgcolor=NEUTRAL["panel"],
                       text=f"BP's target {target:.3f} (mean {'−' if measure.higher_is_better else '+'} 1 sd)")
    return fig


def figures(report: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for task, per_k in report["results"].items():
        for k in per_k:
            out[f"frontier-{task}-K{k}"] = frontier_figure(report, task, int(k))
            out[f"curves-{task}-K{k}"] = curves_figure(report, task, int(k))
    return out


def _arguments(a: argparse.Namespace, out: Path) -> dict[str, Any]:
    def names(text: str) -> tuple[str, ...]:
        return tuple(x.strip() for x in text.split(",") if x.strip())

    return dict(tasks=tuple(a.task) if a.task else ((a.dataset, a.dataset),), stages=a.stages, arms=names(a.arms),
                readouts=names(a.readouts), seeds=a.seeds, decisive_seeds=a.decisive_seeds,
                decisive=names(a.decisive), batch=a.batch, microbatches=a.microbatches,
                eval_every=a.eval_every or max(1, a.steps // 8), eval_size=a.eval_size, rank=a.lora_rank, jobs=a.jobs,
                time_steps=a.time_steps, controls=not a.no_controls, finished_only=a.finished_only,
                carry=tuple(a.carry or ()), skip_bad_rows=a.skip_bad_rows)


EXPERIMENT = Experiment(name="frontier", run=run_frontier, figures=figures, format_report=format_report,
                        arguments=_arguments, steps=240, seq_len=64, defaults={"lr": 5e-4, "model": "smollm2-135m"},
                        shape=None, runs=False, repeats=False, out=True)


def register(p: argparse.ArgumentParser) -> None:
    EXPERIMENT.register(p)
    p.add_argument("--task", action="append", type=task_arg, metavar="NAME=SPEC",
                   help="a task, repeatable: topics (built in), NAME=csv:PATH or NAME=jsonl:PATH (a result names "
                        "the file and its sha256); default: --dataset")
    p.add_argument("--stages", type=ints_arg, default=(3, 4), help="comma-separated K values (K=2 is measured)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS), help=f"comma-separated, from: {', '.join(ARMS)} "
                   f"(1F1B always runs: every ratio is against it)")
    p.add_argument("--readouts", default="", metavar="SPEC,SPEC",
                   help="more ZeroLock arms, one per readout the engine validates (e.g. sample-lora:4)")
    p.add_argument("--no-controls", action="store_true",
                   help="no BP control with matched trainable parameters for the arms that train more than BP")
    p.add_argument("--seeds", type=ints_arg, default=(0, 1))
    p.add_argument("--decisive-seeds", type=ints_arg, default=(0, 1, 2), help="seeds of BP and the --decisive arms")
    p.add_argument("--decisive", default="zerolock top-lora:last", help="comma-separated arm names")
    p.add_argument("--eval-every", type=int, default=0, help="0 = steps // 8")
    p.add_argument("--eval-size", type=int, default=200)
    p.add_argument("--lora-rank", type=int, default=4)
    p.add_argument("--jobs", type=int, default=2, help=f"runs side by side, one thread each (at most {MAX_JOBS})")
    p.add_argument("--time-steps", type=int, default=10, help="steps of each K=2 timing run of the pipeline")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="every task leaves out the rows its loader would refuse (the run's --skip-bad-rows)")
    p.add_argument("--carry", action="append", type=Path, metavar="RESULT.json",
                   help="an earlier result of this plan (repeatable): its runs count as finished where this "
                        "checkout has no run directory for them, so a study goes on across sessions")
    p.add_argument("--finished-only", action="store_true",
                   help="train nothing: report the runs of this plan that have finished and list the missing ones")
