"""The sampling error of an accuracy measured on n examples: the Wilson score interval (95 %).

One definition for every place that asks whether two accuracies differ by more than chance would
(Readability's cut suggestion, and whatever compares rates next). The Wilson interval, unlike the
normal approximation p ± z·sqrt(p(1−p)/n), stays inside [0, 1] and does not collapse to a point at
p = 0 or 1, which matters at the few hundred examples a dashboard measures on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile: a two-sided 95 % interval


@dataclass(kw_only=True, frozen=True)
class Interval:
    rate: float  # the measured accuracy
    low: float
    high: float
    n: int  # the examples it was measured on

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def overlaps(self, other: "Interval") -> bool:
        return self.low <= other.high and other.low <= self.high

    def clears(self, other: "Interval") -> bool:
        """Above `other` by more than the sampling error of either: the intervals do not overlap (conservative:
        a difference this clear is significant by a two-proportion test too)."""
        return self.low > other.high

    def text(self) -> str:
        """"0.375 ± 0.08", "0.30 ± 0.08": the rate and half the interval's width (the interval is not quite
        symmetric; `low` and `high` are what a comparison uses)."""
        rate = f"{self.rate:.3f}"
        return f"{rate[:-1] if rate.endswith('0') else rate} ± {self.half_width:.2f}"


def wilson(rate: float, n: int, *, z: float = Z95) -> Interval:
    """The Wilson score interval of an accuracy `rate` measured on `n` examples."""
    if n < 1:
        raise ValueError(f"an accuracy needs at least one example to have an interval (got n = {n})")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"an accuracy is a rate in [0, 1] (got {rate})")
    z2 = z * z
    centre = (rate + z2 / (2 * n)) / (1 + z2 / n)
    spread = z / (1 + z2 / n) * math.sqrt(rate * (1 - rate) / n + z2 / (4 * n * n))
    # clamped around the rate: at p = 0 or 1 the bound is the rate itself, which rounding may miss by an ulp
    return Interval(rate=rate, low=min(rate, max(0.0, centre - spread)), high=max(rate, min(1.0, centre + spread)), n=n)

