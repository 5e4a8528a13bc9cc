"""`zerolock` command line: train | dashboard | bench | pretrain-tiny (`zerolock COMMAND --help`)."""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import sys
import time
from pathlib import Path

from .config import ConfigError, RunConfig
from .config_file import read_config_toml
from .preflight import preflight
from .run_fields import RUN_FIELDS, SECTIONS, RunField
from .setting import value_text


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every flag's help ends with its default, a tuple written as the flag takes it ("0.5", "q_proj,v_proj");
    switches and empty defaults (None, "": their help says what that means) show none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text, d = action.help or "", action.default
        if "%(default)" in text or not action.option_strings or d in (None, "", []) or d is argparse.SUPPRESS \
                or isinstance(d, bool):
            return text
        return f"{text} (default: {value_text(d).replace('%', '%%')})"


GIVEN = "given_run_flags"  # the namespace's set of the run flags the user gave (their fields' names)


class RunFlag(argparse.Action):
    """Stores a run flag's value and notes that the user gave it: over a --config file or a resumed run's
    config, the flags given count, argparse's defaults do not."""

    def __init__(self, option_strings: list[str], dest: str, *, repeat: bool = False, **kwargs) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.repeat = repeat

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if self.nargs == 0:  # a switch
            values = self.const
        elif self.repeat:
            values = [*getattr(namespace, self.dest), values]
        setattr(namespace, self.dest, values)
        setattr(namespace, GIVEN, {*getattr(namespace, GIVEN, ()), self.dest})


def _flag_arguments(f: RunField) -> dict:
    """add_argument's keywords for a field, from its setting (run_fields.py); the dest is the field's name."""
    s, d = f.setting, f.default
    kw: dict = dict(dest=f.key, action=RunFlag, help=s.help)
    if s.switch:
        return kw | dict(nargs=0, const=not d, default=d)
    parse = s.parse or (type(d) if type(d) in (int, float, str) else None)
    assert parse is not None or s.repeat, f"{f.key}: its setting needs parse="
    kw |= dict(type=parse, default=list(d) if s.repeat else d, repeat=s.repeat)
    if s.cli_choices:
        kw["choices"] = s.cli_choices
    else:
        kw["metavar"] = s.metavar or s.flag.removeprefix("--").upper().replace("-", "_")
    if s.const is not None:
        kw |= dict(nargs="?", const=s.const)
    return kw


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """The flags of every run field (run_fields.py), in one --help group per section; shared by every
    command that trains."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in RUN_FIELDS.values():
        if f.group not in groups:
            groups[f.group] = p.add_argument_group(f.group)
        groups[f.group].add_argument(f.setting.flag, **_flag_arguments(f))


def config_from_args(a: argparse.Namespace, *, out: str | None, base: RunConfig | None = None) -> RunConfig:
    """The run flags of `a` as a validated RunConfig. Over `base` (a --config file, a resumed run's
    config) only the flags the user gave; without one, every flag's value (their defaults are the
    config's)."""
    given = getattr(a, GIVEN, set())
    changes: dict[str, dict] = {name: {} for name in SECTIONS}
    for key, f in RUN_FIELDS.items():
        if base is None or key in given:
            value = getattr(a, key)
            changes[f.section][key] = tuple(value) if isinstance(value, list) else value
    if base is None:
        return RunConfig(**{name: cls(**changes[name]) for name, cls in SECTIONS.items()}, out=out)
    return RunConfig(**{name: dataclasses.replace(getattr(base, name), **changes[name]) for name in SECTIONS},
                     out=out)


EXIT_FAILED = 1  # the run ended failed (metrics.json says why)
EXIT_USAGE = 2  # a bad flag or directory: nothing was started
EXIT_STOPPED = 130  # stopped (Ctrl-C) before the last step: resume with --resume


def _resume_config(a: argparse.Namespace) -> "RunConfig":
    """`--resume DIR` alone: the saved config. With run flags too: the saved config with them, which the
    run then refuses unless they match it."""
    from .runtime.run_dir import saved_config

    return config_from_args(a, out=a.resume, base=saved_config(Path(a.resume)))


def cmd_train(a: argparse.Namespace) -> int:
    if a.resume and a.out and Path(a.out) != Path(a.resume):
        raise ConfigError(f"--resume {a.resume} and --out {a.out} name different directories; give one")
    if a.resume and a.overwrite:
        raise ConfigError("--resume keeps the run's checkpoints and --overwrite deletes them; give one")
    if a.resume and a.config:
        raise ConfigError("--resume continues a run with its own config and --config starts one from a file; "
                          "give one")
    if a.resume:
        out = a.resume
        cfg = _resume_config(a)  # out: the directory, wherever it moved
        if cfg.train.runtime != "pipeline":
            raise ConfigError("--resume is for --runtime pipeline runs")
    else:
        cfg = config_from_args(a, out=a.out, base=read_config_toml(a.config) if a.config else None)
        out = a.out or str(Path("runs") / f"{cfg.train.method}-{time.strftime('%Y%m%d-%H%M%S')}")
        cfg = dataclasses.replace(cfg, out=out)
    if cfg.train.runtime == "pipeline" and not (a.out or a.resume) and "TORCHELASTIC_RUN_ID" in os.environ:
        raise ConfigError("under torchrun, give --out (a directory every host shares)")
    preflight(cfg)  # model, layers, dataset: refused here, before a directory or a process exists
    if cfg.train.runtime == "reference":
        from .reference_trainer import train_reference
        metrics = train_reference(cfg, progress=not a.quiet)
    else:
        from .runtime.torchrun_entry import train_under_torchrun, under_torchrun

        if under_torchrun():  # one rank per stage; rank 0 reports
            from .runtime.stage_process import exit_now

            metrics = train_under_torchrun(cfg, overwrite=a.overwrite, resume=bool(a.resume))
            if metrics is None:
                exit_now(0)  # no destructors: a link torn down after its peer has gone can abort
            if metrics["state"] == "failed":
                print(f"zerolock: error: pipeline run failed: {metrics.get('reason')} (details: {out}/metrics.json)",
                      file=sys.stderr)
                exit_now(EXIT_FAILED)
            print(summary(metrics, out))
            exit_now(EXIT_STOPPED if metrics.get("state") == "stopped" else 0)
        else:
            from .runtime.launch import train_pipeline  # local: one spawned process per stage
            metrics = train_pipeline(cfg, progress=not a.quiet, overwrite=a.overwrite, resume=bool(a.resume))
    print(summary(metrics, out))
    return EXIT_STOPPED if metrics.get("state") == "stopped" else 0


def summary(metrics: dict, out: str) -> str:
    e = metrics["eval"]
    notes = [f"checkpoint skipped: stage {r['stage']}: {r['message']}" for r in metrics.get("checkpoint_rejections", [])]
    notes += [f"failure not injected: {f['failure']}: {f['reason']}" for f in metrics.get("failures_not_injected", [])]
    if metrics.get("state") == "stopped":
        return "\n".join(notes + [f"run stopped after {metrics.get('steps_done')} of "
                                  f"{metrics['config']['train']['steps']} steps "
                                  f"(final/ weights from steps {metrics.get('final_steps')}); "
                                  f"{metrics.get('eval_skipped', 'not evaluated')}; wrote {out}/metrics.json; "
                                  f"continue with `zerolock train --resume {out}`"])
    if e is None:
        return "\n".join(notes + [f"run {metrics.get('state')} after {metrics.get('steps_done')} steps; no eval; "
                                  f"wrote {out}/metrics.json"])
    lines = notes + [f"eval: accuracy {e['accuracy']:.3f}  label accuracy {e['label_accuracy']:.3f}  "
                     f"nll {e['nll']:.3f}  ({e['examples']} examples)"]
    for c in e["per_chunk"]:
        lines.append(f"  chunk {c['chunk']}: accuracy {c['accuracy']:.3f}  label accuracy "
                     f"{c['label_accuracy']:.3f}  nll {c['nll']:.3f}")
    lines += time_lines(metrics)
    for r in metrics.get("recovery", []):
        lines.append(f"recovered stage {r['stage']} ({r['mode']}, {r['kind']}): detect {r['detect_s']:.2f} s, "
                     f"restore {r['restore_s']:.2f} s, replay {r['replay_s']:.2f} s")
    files = ["metrics.json", *(["trace.json (open it at ui.perfetto.dev)"] if (Path(out) / "trace.json").exists()
                               else []), "final/"]
    lines.append(f"wrote {out}/: {', '.join(files)}")
    return "\n".join(lines)


def time_lines(metrics: dict) -> list[str]:
    """Wall time and where it went; throughput, bubble and peak activations per stage (pipeline runs)."""
    outage = metrics.get("downtime_s") or 0.0
    parts = [f"start-up {metrics.get('setup_s', 0.0):.1f} s",
             f"training {metrics['wall_s']:.1f} s" + (f" (outages {outage:.1f} s of it)" if outage else "")]
    if metrics.get("eval_s"):
        parts.append(f"final eval {metrics['eval_s']:.1f} s")
    total = metrics.get("total_s")
    lines = [(f"wall time {total:.1f} s: " if total else "time: ") + ", ".join(parts)]
    speed = f"{metrics['samples_per_s']:.1f} samples/s over the training"
    if metrics.get("bubble_fraction") is not None:
        speed += f", bubble {100 * metrics['bubble_fraction']:.1f} %"
    lines.append(speed)
    peaks = [p["peak_activation_bytes"] / 2**20 for p in metrics.get("per_stage") or []]
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
    p.add_argument("--out", default=None, help="run directory (default runs/METHOD-TIMESTAMP)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--overwrite", action="store_true",
                   help="delete a previous run in --out (its checkpoints included) and start again")
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="continue a crashed or stopped pipeline run from its newest verified checkpoints")
    p.add_argument("--config", metavar="FILE.toml", default=None,
                   help="start from a run config in TOML (configs/*.toml, a run's config.toml); the run flags "
                        "given beside it override its values")
    add_run_flags(p)
    p.set_defaults(func=cmd_train)

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


def _pipeline_failed() -> type[Exception]:
    from .runtime.launch import PipelineFailed
    return PipelineFailed


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
    args = parse(argv)
    try:
        return args.func(args)
    except (SystemExit, KeyboardInterrupt):  # first: the next clause imports torch to name its exception
        raise
    except _pipeline_failed() as err:
        if os.environ.get("ZEROLOCK_DEBUG"):
            raise
        print(f"zerolock: error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except (ConfigError, ValueError, FileNotFoundError) as err:
        if os.environ.get("ZEROLOCK_DEBUG"):
            raise
        print(f"zerolock: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("zerolock: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
