"""Tiny inline-SVG charts, computed on the server (no chart library, nothing to fetch)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from memory.engine.tension import frequency_boost
from memory.engine.types import TENSION_THRESHOLD


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    label: str
    value: int


@dataclass(frozen=True)
class BarChart:
    width: int
    height: int
    bars: list[Bar]
    peak: int
    total: int
    first_label: str
    last_label: str


def hourly_bars(series: list[tuple[datetime, int]], *, width: int = 480, height: int = 80) -> BarChart:
    peak = max((n for _, n in series), default=0)
    step = width / max(1, len(series))
    bars = []
    for i, (hour, n) in enumerate(series):
        h = 0.0 if peak == 0 else (height - 4) * n / peak
        bars.append(Bar(x=round(i * step + 1, 2), y=round(height - h, 2), w=round(max(1.0, step - 2), 2),
                        h=round(h, 2), label=hour.strftime("%H:00"), value=n))
    return BarChart(width=width, height=height, bars=bars, peak=peak, total=sum(n for _, n in series),
                    first_label=bars[0].label if bars else "", last_label=bars[-1].label if bars else "")


@dataclass(frozen=True)
class TensionCurve:
    width: int
    height: int
    points: str  # SVG polyline points
    now_value: float
    peak: float
    threshold_y: float
    fades_in_days: float | None  # days from now until T(t) < threshold (None: not within 10 years)
    days: int


def tension_curve(*, t0: float, lam: float, mentions: int, age_days: float, days: int = 90,
                  width: int = 300, height: int = 80) -> TensionCurve:
    """T(t) = t0 · exp(−λ · (age + t)) · F(mentions) for t in [0, days] (see memory.engine.tension)."""
    boost = float(frequency_boost(mentions))
    age = max(0.0, age_days)

    def value(t: float) -> float:
        return t0 * math.exp(-lam * (age + t)) * boost

    now_value = value(0.0)
    top = max(now_value, TENSION_THRESHOLD * 2, 1e-9)
    pts = []
    samples = 60
    for i in range(samples + 1):
        t = days * i / samples
        x = width * i / samples
        y = height - (height - 4) * min(1.0, value(t) / top)
        pts.append(f"{x:.1f},{y:.1f}")
    fades: float | None
    if now_value < TENSION_THRESHOLD:
        fades = 0.0
    elif lam <= 0:
        fades = None
    else:
        fades = math.log(now_value / TENSION_THRESHOLD) / lam
        fades = round(fades, 1) if fades <= 3650 else None
    return TensionCurve(width=width, height=height, points=" ".join(pts), now_value=round(now_value, 4),
                        peak=round(top, 4), threshold_y=round(height - (height - 4) * TENSION_THRESHOLD / top, 1),
                        fades_in_days=fades, days=days)
