"""The inline-SVG charts of the console."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from frontend import charts


def test_hourly_bars_scale_to_the_peak_and_keep_every_hour():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    series = [(start + timedelta(hours=i), n) for i, n in enumerate([0, 5, 10, 0])]
    c = charts.hourly_bars(series, width=400, height=80)
    assert len(c.bars) == 4 and c.peak == 10 and c.total == 15
    assert c.bars[0].h == 0 and c.bars[2].h == 76 and c.bars[1].h == 38
    assert c.first_label == "00:00" and c.last_label == "03:00"
    assert charts.hourly_bars([]).bars == []


def test_tension_curve_follows_the_engine_formula():
    c = charts.tension_curve(t0=1.0, lam=0.01, mentions=3, age_days=10, days=90)
    expected = 1.0 * math.exp(-0.01 * 10) * 1.3
    assert abs(c.now_value - round(expected, 4)) < 1e-4
    assert len(c.points.split()) == 61
    assert c.fades_in_days == round(math.log(expected / 0.05) / 0.01, 1)
    faded = charts.tension_curve(t0=0.01, lam=0.5, mentions=0, age_days=100)
    assert faded.fades_in_days == 0.0
    forever = charts.tension_curve(t0=1.0, lam=0.0, mentions=0, age_days=0)
    assert forever.fades_in_days is None
