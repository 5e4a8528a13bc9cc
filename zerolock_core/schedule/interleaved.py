"""Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's virtual pipeline stages): D devices hold v chunks
each, device d the chunks d, d + D, .., d + (v - 1)D, so a micro-batch goes round the devices v times. A
chunk is 1/v of a stage: the fill and the drain shrink v-fold, for v times as many messages.

The order of compute follows torch.distributed.pipelining's ScheduleInterleaved1F1B (torch 2.13), which
relaxes Megatron's m % D == 0: the m micro-batches go in max(1, m // D) rounds, so m must be a multiple of
that number. Each device runs its warm-up forwards, then a forward and a backward in turn, then the
cool-down backwards; the chunk of the n-th forward is (n // round) % v (the backwards run the chunks in
reverse). ``tests/test_interleaved.py`` compares the order with torch's for a grid of D, v and m.

Schedule data for the simulator and the Explain tab only: the runtime runs one stage per process.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from .action import Action, Kind
from .schedule import Schedule

INTERLEAVED_1F1B = "interleaved-1f1b"
INTERLEAVED_LABEL = "Interleaved 1F1B"

# (stage, kind, micro-batch within the window)
Compute = tuple[int, Kind, int]


def interleaved_placement(devices: int, chunks_per_device: int) -> tuple[int, ...]:
    """Device of each of the v·D chunks: chunk s on device s mod D."""
    return tuple(s % devices for s in range(devices * chunks_per_device))


def interleaved_round(devices: int, microbatches: int) -> int:
    """Micro-batches per round (torch's microbatches_per_round); ValueError when m does not split into rounds."""
    rounds = max(1, microbatches // devices)
    if microbatches % rounds:
        raise ValueError(f"interleaved 1F1B runs m micro-batches in max(1, m // K) = {rounds} rounds: m must be "
                         f"a multiple of {rounds} (got m={microbatches}, K={devices})")
    return microbatches // rounds


def interleaved_window(devices: int, chunks_per_device: int, microbatches: int, device: int) -> Iterator[Compute]:
    """Device ``device``'s forwards and backwards for one window, in torch's order."""
    D, v, m, r = devices, chunks_per_device, microbatches, device
    per_round = interleaved_round(D, m)
    total = v * m  # forwards (and backwards) on this device
    warm = min((v - 1) * per_round + 2 * (D - 1 - r), total)
    done: Counter[tuple[int, Kind]] = Counter()

    def run(stage: int, kind: Kind) -> Compute:
        j = done[stage, kind]
        done[stage, kind] += 1
        return stage, kind, j

    def forward(op: int) -> Compute:
        return run(((op // per_round) % v) * D + r, Kind.F)

    def backward(op: int) -> Compute:
        return run((v - 1 - ((op - warm) // per_round) % v) * D + r, Kind.B)

    for op in range(warm):
        yield forward(op)
    for op in range(warm, total):
        yield forward(op)
        yield backward(op)
    for op in range(total, total + warm):
        yield backward(op)


def _unit(placement: tuple[int, ...], stage: int, i: int, kind: Kind) -> Iterator[Action]:
    """A forward (kind F: receive from stage - 1, send to stage + 1) or backward (B: the other way) of one chunk."""
    last = len(placement) - 1
    before, after, source, target = ((Kind.RF, Kind.SF, stage - 1, stage + 1) if kind is Kind.F
                                     else (Kind.RB, Kind.SB, stage + 1, stage - 1))
    if 0 <= source <= last:
        yield Action(stage=stage, kind=before, microbatch=i)
    yield Action(stage=stage, kind=kind, microbatch=i)
    if 0 <= target <= last:
        yield Action(stage=stage, kind=after, microbatch=i)


def build_interleaved_1f1b(*, devices: int, chunks_per_device: int, microbatches: int, windows: int = 1) -> Schedule:
    """Interleaved 1F1B on ``devices`` devices of ``chunks_per_device`` (v >= 2) chunks each, one STEP per
    device after each window. ValueError for counts it has no schedule for."""
    for name, value, low in (("devices", devices, 2), ("chunks_per_device", chunks_per_device, 2),
                             ("microbatches", microbatches, 1), ("windows", windows, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an int >= {low} (got {value!r})")
    interleaved_round(devices, microbatches)
    placement = interleaved_placement(devices, chunks_per_device)
    rows = []
    for d in range(devices):
        row: list[Action] = []
        for w in range(windows):
            for stage, kind, j in interleaved_window(devices, chunks_per_device, microbatches, d):
                row += _unit(placement, stage, w * microbatches + j, kind)
            row.append(Action(stage=d, kind=Kind.STEP))  # one STEP per device, listed under its first chunk
        rows.append(tuple(row))
    return Schedule(method=INTERLEAVED_1F1B, stages=len(placement), microbatches=microbatches, windows=windows,
                    actions=tuple(rows), placement=placement)
