"""Durations as people write them (`90s`, `15m`, `12h`, `7d`, `2w`), for expiry commands."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def parse_duration(text: str) -> float:
    """Seconds in `text`; a bare number is seconds. Raises ValueError saying the accepted forms."""
    match = _PATTERN.match(text)
    if not match:
        raise ValueError(
            f"{text!r} is not a duration; write a number with s, m, h, d or w, e.g. 7d"
        )
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]
