"""Reading a llama-server log line: its level and its text (a pure function).

With `--log-prefix` llama.cpp writes `0.03.683.878 I srv  llama_server: model loaded`: a
timestamp, a level letter (D, I, W, E), the text. Lines without the prefix (printed before
logging starts, or by a library) keep the level of the line before them.
"""

from __future__ import annotations

import re

# llama.cpp's info level is chatty (six lines per request: slot chosen, prompt timings, release),
# where latchgate writes one line per request at info; its info lines go to debug, so that
# `--log-level info` stays one line a request. Warnings and errors keep their level.
LEVELS = {"D": "debug", "I": "debug", "W": "warning", "E": "error"}
_PREFIX = re.compile(r"^(?:\d+\.\d+\.\d+\.\d+ )?([DIWE]) (.*)$")


def parse(line: str, previous: str = "debug") -> tuple[str, str]:
    """(level, text) of one line; `previous` is the level of the line before it."""
    text = line.rstrip("\r\n")
    match = _PREFIX.match(text)
    if match is None:
        return previous, text.strip()
    return LEVELS[match.group(1)], match.group(2).strip()
