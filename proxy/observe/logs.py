"""Structured logs: one line per request, JSON for machines, colour for people, keys never shown.

Logging goes through structlog so a request's line is a dict until the very end: processors
(plain functions) add the level and time, mask secrets, then render JSON lines (when the output
is not a terminal, as under Docker or systemd) or console text (on a TTY). The redaction
processor is the last thing before rendering, so nothing a caller passes in, nested or not,
reaches the output with an API key or an Authorization header in it.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import orjson
import structlog
from structlog.typing import EventDict, FilteringBoundLogger, WrappedLogger

from proxy.observe import events as ev
from proxy.observe.events import RequestEvents
from proxy.observe.masking import REDACTED, Masker

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

# Names whose value is a secret whatever its type, searched in the name after lower-casing and
# turning "-" into "_", so `X-Api-Key` and `x_api_key` are the same name.
_SECRET_NAME = re.compile(
    r"^(?:key|cookie|set_cookie)$|api_?key|secret|password|authorization|token(?!s)"
)
# "token" in a name means a credential (access_token, id_token, x-auth-token), but "tokens" means
# a count (prompt_tokens, max_tokens, prompt_tokens_details), and a few singular names are counts
# or timings too. Masking a count would hide exactly what operators read the logs for.
_TOKEN_NOT_SECRET = re.compile(
    r"first_token|tokeniz|token_(count|estimate|usage|budget|limit|ms|seconds|rate)"
)

# Secrets inside free text: bearer credentials, OpenAI/Anthropic-style keys, key query params.
# `_TEXT_HINT` is one cheap search that lets the common string (no secret) skip the three subs.
_TEXT_HINT = re.compile(r"(?i)bearer|basic|sk-|[?&](?:key|api|access|token)")
_TEXT_PATTERNS = (
    # The scheme word may repeat ("Bearer Bearer sk-..." from a client that doubled it).
    (
        re.compile(r"(?i)\b(bearer|basic)(?:\s+(?:bearer|basic)\b)*\s+[^\s\"',;]*[^\s\"',;.]"),
        r"\1 " + REDACTED,
    ),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{3,}"), "sk-" + REDACTED),
    (
        re.compile(r"(?i)([?&](?:key|api_key|api-key|access_token|token)=)[^&\s\"']+"),
        r"\1" + REDACTED,
    ),
)


@functools.lru_cache(maxsize=4096)  # names repeat on every line; bounded, as names may vary
def is_secret_name(name: str) -> bool:
    """Whether a field or header called `name` holds a credential (token counts do not)."""
    n = name.lower().replace("-", "_")
    found = _SECRET_NAME.search(n)
    if found is None:
        return False
    return not (found.group().startswith("token") and _TOKEN_NOT_SECRET.search(n))


# The configured secrets of the running proxy, masked exactly in every string of every line (a
# key need not look like one to the patterns above). Set by `mask_secrets` when a proxy starts.
_secrets = Masker()


def mask_secrets(masker: Masker) -> None:
    """Mask these secrets (besides the patterns) in every log line from now on."""
    global _secrets
    _secrets = masker


def redact_text(text: str) -> str:
    """Mask configured secrets, bearer credentials, `sk-...` keys and key query parameters."""
    text = _secrets.text(text)
    if _TEXT_HINT.search(text) is None:
        return text
    for pattern, replacement in _TEXT_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


# Most values on a line are numbers: answered before any isinstance (the Mapping check is an ABC
# check, slow enough to show on every request's line).
_NOTHING_TO_HIDE = frozenset({int, float, bool, type(None)})


def redact(value: Any) -> Any:
    """A copy of `value` with every secret masked: by key name in mappings, by pattern in text."""
    kind = type(value)
    if kind in _NOTHING_TO_HIDE:
        return value
    if isinstance(value, str):
        return redact_text(value)
    if kind is dict or isinstance(value, Mapping):
        return {
            k: REDACTED if isinstance(k, str) and is_secret_name(k) else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        # A header pair such as ("Authorization", "Bearer ..."), as aiohttp lists them.
        return (value[0], REDACTED if is_secret_name(value[0]) else redact(value[1]))
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    return value


def redact_processor(logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: `redact` over the whole event (the event dict is structlog's copy)."""
    out: EventDict = redact(event_dict)
    return out


# Lines that could not be written (disk full, a closed pipe): counted, exported as
# latchgate_log_write_failures_total, never raised into the request that logged them.
_write_failures = 0


def write_failures() -> int:
    """How many log lines could not be written since start."""
    return _write_failures


class _NamedWriteLogger(structlog.WriteLogger):
    """A WriteLogger that knows the name it was asked for, so lines can say which logger, and
    that never fails its caller: a log line is not worth a failed request."""

    def __init__(self, file: TextIO, name: str) -> None:
        super().__init__(file)
        self.name = name

    def msg(self, message: str) -> None:
        global _write_failures
        try:
            super().msg(message)
        except (OSError, ValueError):  # ValueError: a closed file
            _write_failures += 1

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


def _add_logger_name(logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
    event_dict.setdefault("logger", getattr(logger, "name", "latchgate"))
    return event_dict


def _orjson_text(obj: Any, **kwargs: Any) -> str:
    # orjson rather than json: ~10x faster per line; JSONRenderer passes a `default` fallback.
    opts = orjson.OPT_NON_STR_KEYS
    return orjson.dumps(obj, default=kwargs.get("default"), option=opts).decode()


# Whether info lines are written, known without asking structlog (which builds a bound logger
# per call): the request line is skipped on this one check at level warning.
_info_enabled = True


def _level_number(level: str) -> int:
    try:
        return _LEVELS[level.lower()]
    except KeyError:
        allowed = ", ".join(k for k in _LEVELS if k != "warn")
        raise ValueError(f"log level {level!r} is not one of: {allowed}") from None


def configure(
    level: str = "info", *, json: bool | None = None, stream: TextIO | None = None
) -> None:
    """Set up structlog: level filter, redaction, and JSON lines or console text.

    `json=None` chooses by the stream: console text on a TTY, JSON lines otherwise. Logs go to
    stderr by default, so a command's own output on stdout (a latch export) stays clean.
    """
    global _info_enabled
    _info_enabled = _level_number(level) <= logging.INFO
    out = sys.stderr if stream is None else stream
    as_json = not out.isatty() if json is None else json
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer(serializer=_orjson_text)
        if as_json
        else structlog.dev.ConsoleRenderer(
            colors=out.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            _add_logger_name,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            # Tracebacks become text before redaction, so a key inside an exception message
            # is masked too; the console renderer then prints that text as it is.
            structlog.processors.format_exc_info,
            redact_processor,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_level_number(level)),
        logger_factory=lambda *args: _NamedWriteLogger(out, args[0] if args else "latchgate"),
        # Not cached: `configure` may run again (tests, a reload) and loggers obtained before
        # must follow it; the cost is one bind per get_logger, not per line.
        cache_logger_on_first_use=False,
    )


def get_logger(name: str = "latchgate") -> FilteringBoundLogger:
    """A logger whose lines carry `logger=name`; it follows later calls to `configure`."""
    # The name travels as a logger-factory argument, not a bound value: binding would build the
    # logger now, freezing the configuration of the moment (a module-level logger taken at
    # import would then never see `configure`).
    logger: FilteringBoundLogger = structlog.get_logger(name)
    return logger


def wanted(status: int, req: RequestEvents) -> bool:
    """Whether a finished request's line would be written at the configured level."""
    if _info_enabled or status >= 500:
        return True
    return bool(req.events) and req.has(ev.REFUSAL)  # a latch is logged as a warning


def _tool_fields(req: RequestEvents, line: dict[str, Any]) -> None:
    """The tool-call and context decisions of a request as fields of its line (self-healing,
    enforced tool_choice, emulated tools, context rescue), so they can be filtered on without
    parsing notices."""
    for event in req.events:
        if event.kind == ev.TOOL_HEALED:
            line["tool_heal"] = event.labels.get("outcome", "")
        elif event.kind == ev.TOOL_CHOICE_ENFORCED:
            labels = event.labels
            line["tool_choice_enforced"] = f"{labels.get('choice')}: {labels.get('outcome')}"
        elif event.kind == ev.TOOLS_EMULATED:
            line["tools_emulated"] = True
        elif event.kind == ev.CONTEXT_RESCUED:
            labels = event.labels
            line["context"] = f"{labels.get('action')}: {labels.get('outcome')}"
            if "before" in labels:
                line["context_tokens"] = f"{labels['before']} -> {labels['after']}"


def request_line(
    req: RequestEvents,
    *,
    status: int,
    duration: float,
    attempts: int,
    route: str,
    stream: bool,
    tokens: Mapping[str, int] | None = None,
    **fields: Any,
) -> None:
    """Log the one line of a finished request.

    Info normally; warning when a latch was learned (any refusal), so operators see each new
    latch once; error for a status >= 500. Extra `fields` (the upstream's error message, say)
    are added to the line, redacted like everything else.
    """
    if not wanted(status, req):
        return  # an info line at level warning: not worth building
    latched = [e.labels.get("capability", "") for e in req.events if e.kind == ev.REFUSAL]
    line: dict[str, Any] = {
        "request_id": req.request_id,
        "upstream": req.upstream,
        "model": req.model,
        "route": route,
        "stream": stream,
        "status": status,
        "duration_ms": round(duration * 1000, 1),
        "attempts": attempts,
        "tokens": dict(tokens) if tokens is not None else None,
        "notices": req.notices,
    }
    if latched:
        line["latched"] = latched
    if req.events:
        _tool_fields(req, line)
    line.update(fields)
    log = get_logger()
    if status >= 500:
        log.error("request", **line)
    elif latched:
        log.warning("request", **line)
    else:
        log.info("request", **line)
