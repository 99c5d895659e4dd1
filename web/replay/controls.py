"""Control and start form values: rate, speed, seek position.

One rule for every HTML form (``POST /sessions``, ``/sessions/upload`` and
``/sessions/{id}/control``): a value that is not a number is refused (``400`` with a
message); a number out of range is clamped to the nearest allowed value and the session
page says so in a notice under the status bar. The JSON API (``POST /api/sessions``)
refuses both with ``400``: a program should not have its values changed silently.

Ranges: rate :data:`~toollatch.web.replay.runner.MIN_RATE` … :data:`~toollatch.web.replay.runner.MAX_RATE` events/second;
speed 0.25 … 20 (or ``max``); position 0 … the session's total events.
"""

from __future__ import annotations

import math
from typing import Any

from toollatch.web.replay.runner import MAX_RATE, MIN_RATE, clamp_rate
from toollatch.web.settings import FULL_SPEED, MAX_SPEED, MIN_SPEED, speed_label


class BadValue(ValueError):
    """A control or start form value that is not a number at all (a 400 with this message)."""


def _number(raw: Any) -> float | None:
    """A finite number from a form value; None when the field is absent or blank."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    try:
        value = float(str(raw))
    except ValueError:
        raise BadValue(f"{str(raw)[:40]!r} is not a number.") from None
    if not math.isfinite(value):
        raise BadValue(f"{str(raw)[:40]!r} is not a finite number.")
    return value


def form_rate(raw: Any) -> tuple[float | None, str | None]:
    """``(base rate, notice)`` from a form's ``rate`` field; a rate out of range is clamped,
    with a notice saying so. :class:`BadValue` if it is not a number."""
    try:
        rate = _number(raw)
    except BadValue:
        raise BadValue(f"Rate must be a number of events per second, from {MIN_RATE:g} to {MAX_RATE:,g}.") from None
    if rate is None:
        return None, None
    clamped = clamp_rate(rate)
    if clamped == rate:
        return rate, None
    return clamped, f"Rate {rate:g} events/s is out of range ({MIN_RATE:g} … {MAX_RATE:,g}); using {clamped:,g} events/s."


def form_speed(raw: Any) -> tuple[float | None, str | None]:
    """``(speed, notice)`` from a form's ``speed`` field: ``max``, or a number clamped to
    0.25 … 20 with a notice. :class:`BadValue` if it is neither."""
    if isinstance(raw, str) and raw.strip().lower() in ("max", "full", "inf"):
        return FULL_SPEED, None
    try:
        speed = _number(raw)
    except BadValue:
        raise BadValue(f"Speed must be a number from {MIN_SPEED:g} to {MAX_SPEED:g}, or max.") from None
    if speed is None:
        return None, None
    clamped = min(MAX_SPEED, max(MIN_SPEED, speed))
    if clamped == speed:
        return speed, None
    return clamped, f"Speed {speed:g}× is out of range ({MIN_SPEED:g}× … {MAX_SPEED:g}×, or max); using {speed_label(clamped)}."


def form_position(raw: Any, total: int) -> tuple[int | None, str | None]:
    """``(position, notice)`` from a seek's ``position`` field, clamped to 0 … ``total`` with a
    notice. :class:`BadValue` if it is not a whole number."""
    message = f"Seek needs a position: a whole number of events from 0 to {total:,}."
    try:
        value = _number(raw)
    except BadValue:
        raise BadValue(message) from None
    if value is None or value != int(value):
        raise BadValue(message)
    position = int(value)
    clamped = max(0, min(total, position))
    if clamped == position:
        return position, None
    return clamped, f"Event {position:,} is out of range (0 … {total:,}); went to event {clamped:,}."


#: ``(base rate or None for the default, speed, notice or None)``
Pace = tuple[float | None, float, str | None]


def start_pace(raw: Any) -> Pace:
    """``(base rate, speed, notice)`` from a start form's ``rate`` field; ``"max"`` means full
    speed; ``"recorded"`` no rate: the recorded pace where the source has chunk times, else
    the default rate."""
    if isinstance(raw, str) and raw.strip().lower() == "max":
        return None, FULL_SPEED, None
    if isinstance(raw, str) and raw.strip().lower() == "recorded":
        return None, 1.0, None
    rate, notice = form_rate(raw)
    return rate, 1.0, notice
