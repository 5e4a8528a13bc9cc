"""Explain's predict-then-reveal questions, one per section: a student picks an answer first, then reveals
the one the simulator (or the memory calculator) gives for the settings on screen (the shape, the reveal:
questions.py, shared with the Lessons' questions).
"""
from __future__ import annotations

from .explain import explain, label_of
from .memory_calculator import CalcSetting, memory_plans
from .questions import Answer, Question, nearest, reveal  # noqa: F401 (reveal: Explain's tab imports it here)

SAME = 0.02  # relative: closer than this counts as "the same"

IDLE = Question(key="idle", prompt="Before you press ▶ play: which lane of the backprop pipeline idles longest "
                                   "in this step?",
                choices=("the first", "a middle one", "the last", "they all idle the same"))
MORE_M = Question(key="more-m", prompt="With twice the micro-batches (2m), the backprop pipeline's "
                                       "bubble…",
                  choices=("halves (or more)", "shrinks, by less than half", "stays the same", "grows"))
MEMORY = Question(key="memory", prompt="On the fullest stage, ZeroLock (head readout) holds how many "
                                       "times less activation memory than 1F1B?",
                  choices=("about the same", "about 2×", "about K×", "about m×"))
QUESTIONS = (IDLE, MORE_M, MEMORY)


def idle_answer(*, stages: int, microbatches: int, bp_method: str, **schedule) -> Answer:
    e = explain(stages=stages, microbatches=microbatches, bp_method=bp_method, **schedule)
    sim = e.played[0].sim
    idle = sim.idle_s
    lane = "device" if sim.schedule.placement else "stage"
    lanes = ", ".join(f"{lane} {d}: {1e3 * t:.0f} ms" for d, t in enumerate(idle))
    longest = max(range(len(idle)), key=idle.__getitem__)
    if max(idle) - min(idle) <= SAME * sim.makespan_s:
        choice, how = "they all idle the same", ("every lane waits through the fill before its first action and "
                                                 "the drain after its last, and on equal stages these are as long")
    else:
        choice = "the first" if longest == 0 else "the last" if longest == len(idle) - 1 else "a middle one"
        slowest = max(range(len(sim.busy_s)), key=sim.busy_s.__getitem__)
        how = f"the lanes are unequal: the others wait for the busiest, {lane} {slowest}"
    return Answer(choice=choice, why=f"Idle per lane of {label_of(bp_method)}: {lanes} of "
                                     f"{1e3 * sim.makespan_s:.0f} ms; {how}.")


def more_m_answer(*, stages: int, microbatches: int, bp_method: str, **schedule) -> Answer:
    doubled = min(2 * microbatches, 64)
    before, after = (explain(stages=stages, microbatches=m, bp_method=bp_method, **schedule).played[0].sim
                     for m in (microbatches, doubled))
    ratio = after.bubble_fraction / before.bubble_fraction if before.bubble_fraction else 1.0
    choice = ("halves (or more)" if ratio <= 0.5 + 1e-9 else "shrinks, by less than half" if ratio < 1 - SAME
              else "stays the same" if ratio <= 1 + SAME else "grows")

    def idle_ms(sim) -> float:
        return 1e3 * sum(sim.idle_s) / len(sim.idle_s)

    why = (f"{label_of(bp_method)}: {100 * before.bubble_fraction:.0f}% at m = {microbatches}, "
           f"{100 * after.bubble_fraction:.0f}% at m = {doubled}; a lane idles {idle_ms(before):.0f} ms, then "
           f"{idle_ms(after):.0f} ms, while the work doubles.")
    if idle_ms(after) >= idle_ms(before) * (1 - SAME):
        why += " With the idle time unchanged, twice the work cannot halve its share: I / (I + 2W) > ½ · I / (I + W)."
    return Answer(choice=choice, why=why)


def memory_answer(setting: CalcSetting) -> Answer:
    plans = memory_plans(setting)
    baseline = "1f1b" if not isinstance(plans["1f1b"], str) else "gpipe"
    bp, zl = plans[baseline], plans["zerolock"]
    assert not isinstance(bp, str) and not isinstance(zl, str), "GPipe and ZeroLock have a schedule for any K, m"
    ratio = max(s.activations for s in bp) / max(s.activations for s in zl)
    near = {"about the same": 1.0, "about 2×": 2.0, "about K×": float(setting.stages),
            "about m×": float(setting.microbatches)}
    choice = nearest(near, ratio)
    held = (f"1F1B's stage 0 holds K = {setting.stages} micro-batches at its peak" if baseline == "1f1b" else
            f"1F1B needs m ≥ K, so against GPipe, whose stages hold m = {setting.microbatches} each")
    return Answer(choice=choice, why=f"{ratio:.1f}×: {held}, ZeroLock's stages one each (a micro-batch of "
                                     "ZeroLock costs the same activations: the head readout adds no layer).")
