"""How the frontier study names its arms: for the study (benchmarks/frontier.py) and for the pages that cite
its committed result (app/frontier_summary.py), which read its summary rows by these names."""
from __future__ import annotations

BASELINE_ARM = "1f1b"  # every time and memory ratio is against it; its accuracy is backprop's
PIPEDREAM_ARM = "pipedream"
READOUT_ARM = "zerolock "  # + a readout: `--readouts sample-lora:4` adds the arm "zerolock sample-lora:4"
CONTROL_ARM = "bp matched to "  # + an arm's name: BP with as many trainable parameters, timed as 1F1B
RECOMPUTE_ARM = " recompute"  # a schedule's arm + it: the schedule with memory_halving_recompute's --recompute


def readout_arm_name(readout: str) -> str:
    """The arm of ZeroLock with `readout` (the frozen head's arm is plain "zerolock")."""
    return READOUT_ARM + readout
