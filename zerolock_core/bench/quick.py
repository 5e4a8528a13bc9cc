"""`zerolock bench quick`: the four pipeline methods back to back on one config, one table.

Measured side by side in one invocation on the same machine; ratios are relative to GPipe.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ..artifacts import write_json_atomic
from ..config import DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig
from ..runtime.launch import train_pipeline
from .machine import machine_line, oversubscribed

METHODS = ("gpipe", "1f1b", "pipedream", "zerolock")


def run_quick(
    *,
    out: Path,
    model: str,
    stages: int,
    batch: int,
    microbatches: int,
    steps: int,
    seq_len: int,
    threads: int,
    methods=METHODS,
) -> dict[str, Any]:
    results = {}
    for method in methods:
        cfg = RunConfig(
            model=ModelConfig(model=model),
            data=DataConfig(seq_len=seq_len, eval_size=64),
            objective=ObjectiveConfig(alpha=(0.5,)),
            train=TrainConfig(
                runtime="pipeline",
                method=method,
                stages=stages,
                batch=batch,
                microbatches=microbatches,
                steps=steps,
                threads=threads,
            ),
            out=str(out / method),
        )
        m = train_pipeline(cfg, progress=False, overwrite=True)  # a benchmark owns its results directory
        peaks = [s["peak_activation_bytes"] for s in m["per_stage"]]
        results[method] = {
            "throughput_samples_per_s": m["throughput_samples_per_s"],
            "mean_peak_activation_bytes": sum(peaks) / len(peaks),
            "max_peak_activation_bytes": max(peaks),
            "active_fraction": [s["active_fraction"] for s in m["per_stage"]],
            "peak_inflight": [s["peak_inflight_microbatches"] for s in m["per_stage"]],
            "bubble_fraction": m["bubble_fraction"],
        }
    report = {
        "machine": machine_line(),
        "config": {
            "model": model,
            "stages": stages,
            "batch": batch,
            "microbatches": microbatches,
            "steps": steps,
            "seq_len": seq_len,
            "threads_per_stage": threads,
        },
        "oversubscribed": oversubscribed(stages=stages, threads=threads),
        "results": results,
    }
    write_json_atomic(out / "quick.json", report)
    return report


def format_table(report: dict[str, Any]) -> str:
    r = report["results"]
    base = r.get("gpipe")
    lines = [
        f"machine: {report['machine']}",
        "config: "
        + ", ".join(f"{k}={v}" for k, v in report["config"].items())
        + ("  (more stage threads than cores: oversubscribed)" if report["oversubscribed"] else ""),
        f"{'method':<10} {'samples/s':>10} {'vs gpipe':>9} {'mean act MiB':>13} {'vs gpipe':>9} "
        f"{'max act MiB':>12} {'in-flight':>10} {'active fraction':>18}",
    ]
    for method, x in r.items():
        rel_t = f"{x['throughput_samples_per_s'] / base['throughput_samples_per_s'] - 1:+.1%}" if base else ""
        rel_m = f"{x['mean_peak_activation_bytes'] / base['mean_peak_activation_bytes'] - 1:+.1%}" if base else ""
        lines.append(
            f"{method:<10} {x['throughput_samples_per_s']:>10.1f} {rel_t:>9} "
            f"{x['mean_peak_activation_bytes'] / 2**20:>13.2f} {rel_m:>9} "
            f"{x['max_peak_activation_bytes'] / 2**20:>12.2f} {str(x['peak_inflight']):>10} "
            f"{' '.join(f'{a:.2f}' for a in x['active_fraction']):>18}"
        )
    return "\n".join(lines)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="tiny")
    p.add_argument("--stages", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--threads", type=int, default=0, help="threads per stage (0 = cores // stages)")
    p.add_argument("--out", default=None, help="results directory (default results/quick-TIMESTAMP)")

    def run(a: argparse.Namespace) -> int:
        out = Path(a.out or f"results/quick-{time.strftime('%Y%m%d-%H%M%S')}")
        report = run_quick(
            out=out,
            model=a.model,
            stages=a.stages,
            batch=a.batch,
            microbatches=a.microbatches,
            steps=a.steps,
            seq_len=a.seq_len,
            threads=a.threads,
        )
        print(format_table(report))
        print(f"wrote {out}/quick.json")
        return 0

    p.set_defaults(func=run)
