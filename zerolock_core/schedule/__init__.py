"""Pipeline schedules (zerolock, gpipe, 1f1b, pipedream, zb-h1) and their discrete-event simulation.

Pure Python: no torch import anywhere in this package.
"""

from .action import COMPUTE_KINDS, RECV_KINDS, SCHEDULE_KINDS, SEND_KINDS, Action, Kind
from .analysis import (
    inflight_peak,
    max_stashed_versions,
    stale_backwards,
    weight_version_of_backward,
    weight_version_of_forward,
)
from .builders import METHODS, build_schedule, iter_stage_actions, schedulable
from .costs import LINK_PROFILES, Costs, LinkProfile
from .schedule import Deadlock, Schedule
from .simulate import ActionRecord, SimResult, simulate, textbook_bubble

__all__ = [
    "COMPUTE_KINDS",
    "LINK_PROFILES",
    "METHODS",
    "RECV_KINDS",
    "SCHEDULE_KINDS",
    "SEND_KINDS",
    "Action",
    "ActionRecord",
    "Costs",
    "Deadlock",
    "Kind",
    "LinkProfile",
    "Schedule",
    "SimResult",
    "build_schedule",
    "inflight_peak",
    "iter_stage_actions",
    "max_stashed_versions",
    "schedulable",
    "simulate",
    "stale_backwards",
    "textbook_bubble",
    "weight_version_of_backward",
    "weight_version_of_forward",
]
