"""Every numeric run field is bounded before anything starts: any value, however extreme, is refused in one
line naming its flag before anything exists on disk, or it validates (the CLI's own parsing, validation and
preflight; no run is launched). The limits the model and the machine set (`most` in run_fields.py) and the
memory a run needs are checked with their numbers in the message."""
from __future__ import annotations

import argparse
import math
import random
import types
import typing
import zlib
from pathlib import Path

import pytest

from zerolock_core.cli import build_parser, config_from_args
from zerolock_core.config.arg_types import bytes_arg
from zerolock_core.config.field_words import CLI, FORM, FieldError, render
from zerolock_core.config.run_fields import RUN_FIELDS
from zerolock_core.config.setting import LIMITS
from zerolock_core.train import preflight as preflight_module
from zerolock_core.train.memory_need import memory_need
from zerolock_core.train.model_shape import ModelShape, model_shape
from zerolock_core.train.preflight import preflight

MAX_LINE = 300
PIPE = ["--runtime", "pipeline"]
# what makes a field count: the flags beside it (a stage speed slows the stages of a pipeline run)
CONTEXT: dict[str, list[str]] = {
    "stage_speed": PIPE, "inflight_depth": PIPE, "memory_budget_bytes": PIPE, "ckpt_every": PIPE,
    "keep_checkpoints": PIPE, "heartbeat_timeout_s": PIPE, "replay_buffer": PIPE, "max_restarts": PIPE,
    "stall_timeout_s": PIPE,
    "bandwidth_mbps": [*PIPE, "--link", "custom", "--link-latency-ms", "1"],
    "latency_ms": [*PIPE, "--link", "custom", "--link-bandwidth-mbps", "50"],
}
# the numbers inside one --fail spec: its stage, its step and a straggler's factor
FAIL_PARTS = {"fail stage": "{v}@3:kill", "fail step": "1@{v}:kill", "straggler factor": "1@3:slow={v}"}
FAIL_CONTEXT = [*PIPE, "--steps", "10", "--ckpt-every", "2"]

EXTREME_FLOATS = [0.0, -0.0, -1.0, 1.0, 0.5, 1e-300, 5e-324, -1e-300, 1e308, -1e308, math.inf, -math.inf, math.nan,
                  float(2**63), 1e30]
EXTREME_INTS = [0, -1, 1, 2, 7, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 + 1, -2**63, 10**30, 10**100, -10**250]


def random_floats(seed: int, n: int) -> list[float]:
    """Log-uniform magnitudes over the whole float range, either sign."""
    rng = random.Random(seed)
    return [rng.choice((1, -1)) * 10 ** rng.uniform(-300, 308) for _ in range(n)]


def random_ints(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.choice((1, 1, -1)) * rng.randrange(2 ** rng.randrange(1, 80)) for _ in range(n)]


def numeric_kind(kind: object) -> type | None:
    """int or float for a numeric field (a tuple of them, an optional one), else None."""
    args = [a for a in typing.get_args(kind) if a is not type(None) and a is not Ellipsis]
    if kind in (int, float):
        return kind  # type: ignore[return-value]
    if typing.get_origin(kind) in (tuple, types.UnionType, typing.Union) and args:
        return numeric_kind(args[0])
    return None


NUMERIC = {key: k for key, f in RUN_FIELDS.items() if (k := numeric_kind(f.kind)) is not None}


def text(value: float | int) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def cases() -> list[tuple[str, list[str], str]]:
    """(what, the CLI's flags, the flag the refusal must name) for every numeric field and value."""
    out = []
    for key, kind in NUMERIC.items():
        flag = RUN_FIELDS[key].setting.flag
        values = [*EXTREME_INTS, *random_ints(zlib.crc32(key.encode()), 8)] if kind is int else \
            [*EXTREME_FLOATS, *random_floats(zlib.crc32(key.encode()), 8)]
        for v in values:
            out.append((f"{key}={text(v)}", [*CONTEXT.get(key, []), f"{flag}={text(v)}"], flag))  # -1e-300 is no option
    for part, spec in FAIL_PARTS.items():
        values = [*EXTREME_FLOATS, *random_floats(7, 8)] if part == "straggler factor" else \
            [*EXTREME_INTS, *random_ints(7, 8)]
        for v in values:
            out.append((f"{part}={text(v)}", [*FAIL_CONTEXT, "--fail=" + spec.format(v=text(v))], "--fail"))
    return out


CASES = cases()


def validate(flags: list[str], out: Path) -> None:
    """What `zerolock train` checks before it creates anything."""
    preflight(config_from_args(build_parser().parse_args(["train", *flags, "--out", str(out)]), out=str(out)))


def test_every_numeric_field_is_in_the_property_test():
    assert {"seq_len", "threads", "stage_speed", "bandwidth_mbps", "latency_ms", "seed", "batch"} <= set(NUMERIC)
    assert all(key in {c[0].split("=")[0] for c in CASES} for key in NUMERIC)


@pytest.mark.parametrize("what,flags,flag", CASES, ids=[c[0] for c in CASES])
def test_an_extreme_value_is_refused_in_one_line_before_anything_exists_or_validates(tmp_path, what, flags, flag):
    try:
        validate(flags, tmp_path / "run")
    except ValueError as err:  # ConfigError, and argparse's types' refusals
        message = str(err)
        assert "\n" not in message and len(message) <= MAX_LINE, message
        assert flag in message, message
        if isinstance(err, FieldError):
            assert "--" not in render(err, FORM), render(err, FORM)  # the form's words, its labels
    assert list(tmp_path.iterdir()) == []


# flags -> the refusal's key words: what the issue found running (or OOM-killing the machine) after the run
# directory existed
DANGEROUS = [
    (["--runtime", "pipeline", "--stages", "3", "--seq-len", "100000000"],
     "--seq-len 100000000 is more than the model's 512 positions"),
    (["--runtime", "pipeline", "--stage-speed", "1e-300"], "--stage-speed 1e-300 is outside [0.001, 1]"),
    (["--runtime", "pipeline", "--steps", "10", "--fail", "1@3:slow=1e308"],
     "a straggler's factor must be a finite number > 1 and at most 1000"),
    (["--threads", "100000"], "--threads 100000 is more than the 4 cores"),
    (["--runtime", "pipeline", "--link", "custom", "--link-bandwidth-mbps", "1e-300", "--link-latency-ms", "1"],
     "--link-bandwidth-mbps 1e-300 is outside [0.001, 1,000,000]"),
    (["--runtime", "pipeline", "--link", "custom", "--link-bandwidth-mbps", "50", "--link-latency-ms", "1e308"],
     "--link-latency-ms 1e+308 is outside [0, 60,000]"),
    (["--seed", str(2**70)], "--seed 1.18e+21 is outside [0, 4,294,967,295]"),  # a huge number in short
    (["--lora-rank", "4096"], "--lora-rank 4096 is more than the model's hidden size, 128"),
    (["--heartbeat-timeout", "inf"], "--heartbeat-timeout must be at most 3,600 and finite (got inf)"),
    (["--runtime", "reference", "--batch", "20000"], "--batch 20000 is more than the 10000 train rows of --dataset topics"),
    (["--runtime", "reference", "--batch", "4096", "--microbatches", "1", "--seq-len", "512"],
     "--batch 4096 / --microbatches 1 × --seq-len 512 × hidden 128 needs at least 57.4 GiB in one process "
     "(8 MiB of weights, 57.4 GiB of activations), more than the 16.0 GiB this machine has available"),
]


@pytest.fixture
def machine(monkeypatch):
    """A machine of 4 cores and 16 GiB available, whatever runs the tests."""
    monkeypatch.setattr(preflight_module, "available_cores", lambda: 4)
    monkeypatch.setattr(preflight_module, "available_memory", lambda: 16 * 2**30)


@pytest.mark.parametrize("flags,message", DANGEROUS, ids=[" ".join(f)[:60] for f, _ in DANGEROUS])
def test_what_ran_out_of_bounds_is_refused_naming_the_bound(tmp_path, machine, flags, message):
    with pytest.raises(ValueError) as caught:
        validate(flags, tmp_path / "run")
    assert message in str(caught.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "1e400", "2 parsecs"])
def test_a_size_that_is_no_number_of_bytes_is_refused_by_its_parser(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected a size like 512MiB"):
        bytes_arg(text)


@pytest.mark.parametrize("flags", [["--threads", "4"], ["--threads", "0"], ["--seq-len", "512"],
                                   ["--lora-rank", "128"], ["--batch", "256", "--seq-len", "512"],
                                   ["--runtime", "pipeline", "--stage-speed", "0.001", "--fail", "1@3:slow=1000",
                                    "--steps", "10"]])
def test_values_at_the_bounds_validate(tmp_path, machine, flags):
    validate(flags, tmp_path / "run")


@pytest.mark.parametrize("key,limit", [(key, f.setting.most) for key, f in RUN_FIELDS.items() if f.setting.most])
def test_a_limit_from_the_model_or_the_machine_is_said_in_the_help_and_the_form(key, limit):
    bound = f"at most {LIMITS[limit].what}"
    assert bound in RUN_FIELDS[key].setting.help_text
    assert FORM.label(key) == f"{FORM.name(key)} ({bound})"
    assert CLI.label(key, "a hint") == f"{CLI.name(key)} (a hint)"  # a caller's hint comes first


def test_the_model_shape_comes_from_its_config_not_its_weights():
    tiny = model_shape("tiny")
    assert tiny == ModelShape(layers=8, positions=512, hidden=128, intermediate=352, heads=4, kv_heads=2, head_dim=32,
                              vocab=2048)
    assert model_shape("tinyllama-shape").positions == 2048  # the generator's shape: nothing is built


def test_the_memory_floor_counts_weights_adapters_and_one_micro_batch():
    tiny = model_shape("tiny")
    need = memory_need(tiny, [4, 4], processes=2, micro_batch=2, seq_len=64, lora_rank=4, lora_targets=("q_proj", "v_proj"),
                       readout_inner=0)
    per_layer = 2 * 128 * 128 + 2 * 128 * 64 + 3 * 128 * 352 + 2 * 128
    assert need.weights == 4 * (8 * per_layer + 2 * 2048 * 128 + 2048 * 128)  # two heads, one embedding
    assert need.trained == 4 * 4 * (8 * 4 * ((128 + 128) + (128 + 64)))  # value, gradient, two moments
    assert need.activations == 4 * 2 * 64 * 8 * 1_838  # test_memory_calculator's hand count of a tiny layer
    one = memory_need(tiny, [4, 4], processes=1, micro_batch=2, seq_len=64, lora_rank=4, lora_targets=("q_proj", "v_proj"),
                      readout_inner=0)
    assert one.activations * 2 == need.activations  # one process runs its chunks one after another
