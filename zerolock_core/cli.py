"""`zerolock` command line: train | eval | export | generate | dashboard | bench | pretrain-tiny (`zerolock COMMAND --help`)."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import os
import re
import sys
import threading
import time
from pathlib import Path
import typing
from typing import TYPE_CHECKING

from .config.field_words import ConfigError
from .config.run_config import RunConfig
from .config.config_file import read_config_toml
from .train.preflight import preflight
from .runtime.recovery_phases import phases_text
from .rundir.run_dir import RunDir
from .config.run_fields import RUN_FIELDS, SECTIONS, RunField
from .config.setting import value_text
from .config.readout_spec import READOUT_CHOICES
from .jobs.stop_signals import StopSignals

if TYPE_CHECKING:
    from .rundir.metrics import Metrics


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every flag's help ends with its default, a tuple written as the flag takes it ("0.5", "q_proj,v_proj");
    switches, empty defaults (None, "", (): their help says what that means) and a help that already says its
    default show none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text, d = action.help or "", action.default
        if "%(default)" in text or "default" in text or not action.option_strings or d is None \
                or d is argparse.SUPPRESS or isinstance(d, bool) or value_text(d) == "":
            return text
        return f"{text} (default: {value_text(d).replace('%', '%%')})"


class ExamplesHelpFormatter(DefaultsHelpFormatter):
    """The defaults as above; the description and the examples epilog keep their own lines; a flag and its
    help share a line where the flag fits in 32 columns (on a terminal wide enough that the help keeps 80)."""

    def __init__(self, prog: str, **kw) -> None:
        import shutil

        wide = shutil.get_terminal_size().columns >= 116
        super().__init__(prog, **{"max_help_position": 34 if wide else 24, **kw})

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


class OneLineParser(argparse.ArgumentParser):
    """A bad value is one line on stderr, without the usage: "zerolock train: --steps: 'ten' is not an
    integer (see zerolock train --help)", exit 2 (EXIT_USAGE)."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {usage_words(message)} (see {self.prog} --help)\n")


_INVALID = re.compile(r"argument (?P<flag>[^:]+): invalid (?P<kind>\w+) value: (?P<value>.*)")
_KIND_WORDS = {"int": "an integer", "float": "a number"}


def usage_words(message: str) -> str:
    """argparse's error in the flags' words: "argument --steps: invalid int value: 'ten'" -> "--steps: 'ten'
    is not an integer"."""
    m = _INVALID.fullmatch(message)
    if m and m["kind"] in _KIND_WORDS:
        return f"{m['flag']}: {m['value']} is not {_KIND_WORDS[m['kind']]}"
    return message.removeprefix("argument ")


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
    kw: dict = dict(dest=f.key, action=RunFlag, help=s.help_text)
    if s.switch:
        return kw | dict(nargs=0, const=not d, default=d)
    parse = s.parse or (type(d) if type(d) in (int, float, str) else None)
    assert parse is not None or s.repeat, f"{f.key}: its setting needs parse="
    kw |= dict(type=parse, default=list(d) if s.repeat else d, repeat=s.repeat)
    if s.cli_choices:
        kw["choices"] = s.cli_choices
    else:
        # a number's metavar is short (N, X), so that most flags and their help share a line in --help
        kw["metavar"] = s.metavar or {int: "N", float: "X"}.get(parse) or s.flag.removeprefix("--").upper().replace("-", "_")
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
    p.add_argument("--readout-adapter", nargs="?", action=_ReadoutAdapterMoved, help=argparse.SUPPRESS)


class _ReadoutAdapterMoved(argparse.Action):
    """The flag of an earlier version: one line saying what took its place."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        raise ConfigError(f"--readout-adapter is now --readout: --readout {values or 'mlp'} "
                          f"(the readouts: {READOUT_CHOICES})")


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
    run then refuses unless they match it. DIR is a path, or a run id under runs/."""
    rd = _run_dir_of(a.resume)
    if not rd.config_json.exists():
        raise ConfigError(f"--resume {a.resume}: no run to resume there (no {rd.config_json.name})")
    return config_from_args(a, out=str(rd.path), base=rd.saved_config())


def _run_dir_of(name: str) -> RunDir:
    """A run named on the command line: a directory, or else the id of a run under the runs folder."""
    from .rundir.runs_root import DEFAULT_RUNS, NotARun, RunsRoot

    if Path(name).is_dir():
        return RunDir(name)
    try:
        return RunsRoot(DEFAULT_RUNS).resolve(name)
    except NotARun:
        return RunDir(name)  # the caller says what is missing there



def cmd_train(a: argparse.Namespace) -> int:
    if a.resume and a.out and Path(a.out) != Path(a.resume):
        raise ConfigError(f"--resume {a.resume} and --out {a.out} name different directories; give one")
    if a.resume and a.overwrite:
        raise ConfigError("--resume keeps the run's checkpoints and --overwrite deletes them; give one")
    if a.resume and a.config:
        raise ConfigError("--resume continues a run with its own config and --config starts one from a file; "
                          "give one")
    if a.resume:
        cfg = _resume_config(a)  # out: the directory, wherever it moved
        out = str(cfg.out)
    else:
        cfg = config_from_args(a, out=a.out, base=read_config_toml(a.config) if a.config else None)
        from .rundir.run_name import fresh_run_path
        from .rundir.runs_root import DEFAULT_RUNS

        out = a.out or str(fresh_run_path(DEFAULT_RUNS, cfg.train.method, cfg.train.stages))
        cfg = dataclasses.replace(cfg, out=out)
    if cfg.train.runtime == "pipeline" and not (a.out or a.resume) and "TORCHELASTIC_RUN_ID" in os.environ:
        raise ConfigError("under torchrun, give --out (a directory every host shares)")
    preflight(cfg)  # model, layers, dataset: refused here, before a directory or a process exists
    from .runtime.torchrun_entry import train_under_torchrun, under_torchrun

    if cfg.train.runtime == "pipeline" and under_torchrun():  # one rank per stage; rank 0 reports
        from .runtime.stage_process import exit_now

        metrics = train_under_torchrun(cfg, overwrite=a.overwrite, resume=bool(a.resume))
        if metrics is None:
            exit_now(0)  # no destructors: a link torn down after its peer has gone can abort
        exit_now(_report_end(metrics, out))
    from .jobs.job import make_job, run_to_end

    if a.stop_signals is not None and a.stop_signals.requested:  # during the imports and checks above
        print("zerolock: stopped before the run started: nothing was created", file=sys.stderr)
        return EXIT_STOPPED
    before_s = time.monotonic() - getattr(a, "t0", time.monotonic())  # the imports and checks: in the bar's elapsed time and the summary's
    metrics = run_to_end(make_job(cfg, overwrite=a.overwrite, resume=bool(a.resume)), progress=not a.quiet,
                         signals=a.stop_signals, before_s=before_s)
    return _report_end(metrics, out, before_s=before_s)


def _report_end(metrics: "Metrics", out: str, *, before_s: float = 0.0) -> int:
    """Say how the run ended (stderr for a failure) and return the exit code for it."""
    if metrics.state == "failed":
        print(f"zerolock: error: {metrics.runtime} run failed: {metrics.reason or 'unknown error'} "
              f"(details: {RunDir(out).metrics})", file=sys.stderr)
        return EXIT_FAILED
    print(summary(metrics, out, before_s=before_s))
    return EXIT_STOPPED if metrics.state == "stopped" else 0


def recovery_lines(recoveries: list[dict]) -> list[str]:
    """One line per recovery, in the phases every view uses (recovery_phases.py)."""
    return [f"recovered stage {r['stage']} ({r['mode']}, {r['kind']}): {phases_text(r)}" for r in recoveries]


def eval_scores(e: dict) -> str:
    """One chunk's (or the model's) eval numbers: label accuracy for a classification, per-token accuracy
    for a response task (its `accuracy` is the exact match of the whole response, teacher-forced)."""
    middle = (f"label accuracy {e['label_accuracy']:.3f}" if e.get("label_accuracy") is not None else
              f"token accuracy {e['token_accuracy']:.3f}" if e.get("token_accuracy") is not None else "")
    return "  ".join(part for part in (f"accuracy {e['accuracy']:.3f}", middle, f"nll {e['nll']:.3f}") if part)


def eval_lines(e: dict) -> list[str]:
    """An eval record (a run's final eval, `zerolock eval`): the model's numbers, then each chunk's."""
    return [f"eval: {eval_scores(e)}  ({e['examples']} examples)"
            + (f"; greedy generation: exact match {e['exact_match']:.3f} on {e['exact_match_examples']}"
               if "exact_match" in e else "")] + [f"  chunk {c['chunk']}: {eval_scores(c)}" for c in e["per_chunk"]]


def summary(metrics: "Metrics", out: str, *, before_s: float = 0.0) -> str:
    e = metrics.eval
    notes = [f"checkpoint skipped: stage {r['stage']}: {r['message']}" for r in metrics.checkpoint_rejections]
    notes += [f"failure not injected: {f['failure']}: {f['reason']}" for f in metrics.failures_not_injected]
    notes += [f"straggler {f['failure']}: stage {f['stage']} computed {f['factor']:g}x slower from then on"
              for f in metrics.stragglers]
    if metrics.telemetry_note:
        notes.append(f"note: {metrics.telemetry_note}")
    if metrics.state == "stopped":
        resume = (f"continue with `zerolock train --resume {out}`"
                  + (f" (from step {metrics.resumable_from_step}, the newest checkpoint of every stage)"
                     if metrics.resumable_from_step is not None and not metrics.training_complete else "")
                  if metrics.runtime == "pipeline" or metrics.resumable_from_step is not None
                  else "a reference run without a checkpoint cannot be resumed")
        return "\n".join(notes + [f"run stopped after {metrics.steps_done} of {metrics.total_steps} steps "
                                  f"(final/ weights from steps {metrics.final_steps}); "
                                  f"{metrics.eval_skipped or 'not evaluated'}; wrote {RunDir(out).metrics}; {resume}"])
    if e is None:
        return "\n".join(notes + [f"run {metrics.state} after {metrics.steps_done} steps; "
                                  f"{metrics.eval_skipped or 'no eval'}; wrote {RunDir(out).metrics}"])
    lines = notes + eval_lines(e)
    lines += time_lines(metrics, before_s=before_s)
    lines += recovery_lines(metrics.recovery)
    rd = RunDir(out)
    files = [rd.metrics.name, *([f"{rd.trace.name} (open it at ui.perfetto.dev)"] if rd.trace.exists() else []),
             f"{rd.final.name}/",
             *([f"{rd.tensorboard.name}/ (tensorboard --logdir {Path(out).parent})"] if rd.tensorboard.exists() else [])]
    lines.append(f"wrote {out}/: {', '.join(files)}")
    return "\n".join(lines)


def time_lines(metrics: "Metrics", *, before_s: float = 0.0) -> list[str]:
    """Wall time and where it went; throughput, bubble and peak activations per stage (pipeline runs).
    `before_s`: the command's imports and checks before the job, counted in the wall time as the progress
    bar counts them (run_to_end)."""
    outage = metrics.downtime_s
    parts = [*([f"checks {before_s:.1f} s"] if before_s else []), f"start-up {metrics.setup_s:.1f} s",
             f"training {metrics.wall_s:.1f} s" + (f" (outages {outage:.1f} s of it)" if outage else "")]
    if metrics.eval_s:
        parts.append(f"final eval {metrics.eval_s:.1f} s")
    lines = [(f"wall time {before_s + metrics.total_s:.1f} s: " if metrics.total_s else "time: ") + ", ".join(parts)]
    speed = f"{metrics.throughput_samples_per_s:.1f} samples/s over the training"
    if metrics.bubble_fraction is not None:
        speed += f", bubble {100 * metrics.bubble_fraction:.1f} %"
    lines.append(speed)
    peaks = [p["peak_activation_bytes"] / 2**20 for p in metrics.per_stage if "peak_activation_bytes" in p]
    if peaks:
        lines.append("peak activation memory per stage: " + " / ".join(f"{x:.2f}" for x in peaks) + " MiB")
    return lines


def cmd_pretrain_tiny(a: argparse.Namespace) -> int:
    from .models.locations import TINY_DIR
    from .models.pretrain_tiny import TinyPreset, pretrain_tiny

    preset = TinyPreset(steps=a.steps, seed=a.seed)
    report = pretrain_tiny(a.out or TINY_DIR, preset, progress=not a.quiet)
    print(f"pretrain-tiny: {report['parameters']:,} parameters, loss {report['first_loss']:.2f} -> "
          f"{report['final_loss']:.2f} in {report['wall_s']:.0f} s; wrote {a.out or TINY_DIR}")
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from .export.peft_export import ExportTargets, default_targets, export_run

    run = _run_dir_of(a.run).path
    targets = ExportTargets(peft=Path(a.peft) if a.peft else None, merged=Path(a.merged) if a.merged else None) \
        if a.peft or a.merged else default_targets(run)  # neither named: both, inside the run (RUN/exports/)
    result = export_run(run, targets)
    if result.note:
        print(result.note)
    print(f"wrote {', '.join(map(str, result.written))}")
    return 0


def cmd_generate(a: argparse.Namespace) -> int:
    from .export.generation import GenerateRequest, generate_answers, tally

    prompts = list(a.prompt)
    if a.file:
        prompts += [line for line in Path(a.file).read_text().splitlines() if line.strip()]
    request = GenerateRequest(prompts=tuple(prompts), eval_rows=a.eval_rows, max_new_tokens=a.max_new_tokens)
    answers = generate_answers(_run_dir_of(a.run).path, request)
    for answer in answers:
        print(f"prompt:     {answer.prompt}")
        if answer.expected is not None:
            print(f"expected:   {answer.expected}")
        print(f"base:       {answer.marked(answer.base)}\nfine-tuned: {answer.marked(answer.tuned)}\n")
    counts = tally(answers)
    if counts is not None and counts.rows:
        print(f"fine-tuned {counts.tuned}/{counts.rows} correct, base {counts.base}/{counts.rows} over the "
              f"{counts.rows} eval rows (each model answers the label it scores highest)")
    return 0


TRAIN_DESCRIPTION = """\
Fine-tune with the multi-process pipeline (one process per stage, what the dashboard's Run runs) or, with
--runtime reference, the one-process reference trainer (the oracle a pipeline run equals). Every value is
checked before anything is created."""
TRAIN_EXAMPLES = """\
examples:
  zerolock train --steps 50                             # the dashboard's default run, shorter
  zerolock train --runtime reference --method bp        # one process, backprop (the oracle)
  zerolock train --stages 3 --readout top-lora:last     # K = 3, each chunk reads through the last's layers
  zerolock train --steps 20 --ckpt-every 2 --fail 1@5   # kill stage 1 in step 6; it recovers"""


def cmd_eval(a: argparse.Namespace) -> int:
    from .export.run_eval import evaluate_trained_run

    if a.eval_size is not None and a.eval_size < 0:
        raise ConfigError(f"--eval-size: {a.eval_size} is below 0 (0 = all)")
    e = evaluate_trained_run(_run_dir_of(a.run).path, dataset=a.dataset, eval_size=a.eval_size)
    print("\n".join(eval_lines(e)))
    if a.json:
        from .rundir.atomic_files import write_json_atomic

        write_json_atomic(Path(a.json), e)
        print(f"wrote {a.json}")
    return 0


def _missing_app(err: ImportError) -> int:
    raise ConfigError(f"the dashboard needs the app extra (pip install -e '.[app]'): {err}")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="zerolock", description=__doc__)  # its subcommands' parsers are OneLineParsers too
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")

    p = sub.add_parser("train", help="fine-tune: the multi-process pipeline (the dashboard's Run), or the "
                                     "one-process reference trainer", description=TRAIN_DESCRIPTION,
                       usage="%(prog)s [FLAGS]  (every flag below; the run's own are saved in its config.toml)",
                       epilog=TRAIN_EXAMPLES, formatter_class=ExamplesHelpFormatter)
    add_run_flags(p)
    out = p.add_argument_group("output")
    out.add_argument("--out", default=None, help="run directory (default: runs/TIMESTAMP-METHOD-KN, as the "
                                                 "dashboard names its runs)")
    out.add_argument("--quiet", action="store_true", help="no progress bar")
    out.add_argument("--overwrite", action="store_true",
                     help="delete a previous run in --out (its checkpoints included) and start again")
    out.add_argument("--resume", metavar="DIR", default=None,
                     help="continue a crashed or stopped run from its newest verified checkpoints (--ckpt-every)")
    out.add_argument("--config", metavar="FILE.toml", default=None,
                     help="start from a run config in TOML (configs/*.toml, a run's config.toml); the run flags "
                          "given beside it override its values")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", help="evaluate a finished run's final weights again, on its eval set or another",
                       description="Score a run's final/ weights as its final eval did: on the run's own eval set "
                                   "the numbers equal those metrics.json records. Nothing is written into the run.",
                       formatter_class=DefaultsHelpFormatter)
    p.add_argument("run", metavar="RUN_DIR", help="a run directory (or a run id under runs/) with final/ weights")
    p.add_argument("--dataset", metavar="SPEC", default=None,
                   help="another eval set: a built-in dataset or KIND:PATH with the run's fields (default: the run's)")
    p.add_argument("--eval-size", type=int, metavar="N", default=None,
                   help="examples scored, 0 = all (default: the run's)")
    p.add_argument("--json", metavar="FILE", default=None,
                   help="also write the eval record there (JSON, written atomically)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("pretrain-tiny", help="rebuild the embedded tiny tokenizer + model",
                       formatter_class=DefaultsHelpFormatter)
    p.add_argument("--out", default=None, help="default: the package's assets/tiny")
    p.add_argument("--steps", type=int, default=700, help="pretraining steps (the committed preset used 700)")
    p.add_argument("--seed", type=int, default=0, help="seed of the corpus and the initial weights")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_pretrain_tiny)

    p = sub.add_parser("export", help="a run's fine-tuned model as a PEFT adapter and/or a merged model directory",
                       description="Without --peft or --merged, both go inside the run: RUN_DIR/exports/peft "
                                   "and RUN_DIR/exports/merged.", formatter_class=DefaultsHelpFormatter)
    p.add_argument("run", metavar="RUN_DIR", help="a run directory (or a run id under runs/) with final/ weights")
    p.add_argument("--peft", metavar="OUT", default=None,
                   help="write (only, unless --merged) the LoRA adapter here in PEFT's layout "
                        "(AutoPeftModelForCausalLM.from_pretrained(OUT))")
    p.add_argument("--merged", metavar="OUT", default=None,
                   help="write (only, unless --peft) the model with the adapter merged in, and its tokenizer "
                        "(AutoModelForCausalLM.from_pretrained(OUT))")
    p.set_defaults(func=cmd_export)

    from .export.generation import DEFAULT_NEW_TOKENS

    p = sub.add_parser("generate", help="the base and the fine-tuned model's greedy answers to prompts, side by side",
                       formatter_class=DefaultsHelpFormatter)
    p.add_argument("run", metavar="RUN_DIR", help="a run directory (or a run id under runs/) with final/ weights")
    p.add_argument("--prompt", action="append", default=[], metavar="TEXT",
                   help="a text to ask about (repeatable); the run's task adds its cue")
    p.add_argument("--file", metavar="FILE", default=None, help="more prompts, one a line")
    p.add_argument("--eval-rows", type=int, default=0, metavar="N",
                   help="also the first N rows of the run's eval split, with their expected answers")
    p.add_argument("--max-new-tokens", type=int, default=DEFAULT_NEW_TOKENS, metavar="N",
                   help="tokens each model may add")
    p.set_defaults(func=cmd_generate)

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
    t0 = time.monotonic()  # the command's clock: `zerolock train`'s wall time counts from here
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a torchrun rank is a stage process: its store errors are ours
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # before torch is imported (runtime/processes.py)
    # `zerolock train` records Ctrl-C and SIGTERM from its first instant — the seconds of imports and checks
    # before a run starts included — so none is lost; torchrun's ranks keep torchrun's signals
    stop_from_the_start = (argv if argv is not None else sys.argv[1:])[:1] == ["train"] \
        and "TORCHELASTIC_RUN_ID" not in os.environ and threading.current_thread() is threading.main_thread()
    with StopSignals() if stop_from_the_start else contextlib.nullcontext() as signals:
        try:
            args = parse(argv)
            args.stop_signals, args.t0 = signals, t0
            return args.func(args)
        except (ConfigError, ValueError, FileNotFoundError) as err:
            if os.environ.get("ZEROLOCK_DEBUG"):
                raise
            print(f"zerolock: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:  # another command's Ctrl-C (a run's is a stop request: job.py)
            print("zerolock: interrupted", file=sys.stderr)
            return EXIT_STOPPED


if __name__ == "__main__":
    sys.exit(main())
