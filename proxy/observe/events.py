"""The event seam: every decision latchgate makes about a request becomes one `Event`.

A stage that changes a request or a response (a latch learned, a field dropped, a retry, a
recovered tool call...) does not touch metrics, logs or headers itself. It records an `Event` on
the request's `RequestEvents`; the request's owner then fans the events out to the Prometheus
metrics, the request's structured log line and the `x-latchgate-notice` response header (or an SSE
comment line once a stream has started). One record, three views, so they never disagree.

Pure modules that have no request at hand return events (or plain notice strings) to their caller
instead of recording them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Event kinds and the labels each carries. The metrics module maps them onto counters; keep the
# two in step (tests/unit/observe/test_metrics.py checks every kind here has a mapping).
REFUSAL = "refusal"  # labels: capability
FIELD_DROPPED = "field_dropped"  # labels: field
RETRY = "retry"  # labels: reason (connect, timeout, silent, status_429, status_5xx, loading)
SILENT = "silent"  # labels: phase (first_token, idle)
OVERFLOW = "overflow"  # labels: where (preflight, upstream)
TOOL_RECOVERED = "tool_recovered"  # labels: format; count = number of calls
ARGUMENTS = "arguments"  # labels: outcome (repaired, unparseable, truncated)
SCHEMAS_RELAXED = "schemas_relaxed"  # no labels
SCHEMA_FIXED = "schema_fixed"  # a contradictory bound dropped and similar; no metric of its own
STRUCTURED_IN_WORDS = "structured_in_words"  # response_format asked for in the prompt instead
TOOL_HEALED = "tool_healed"  # labels: outcome (healed, failed, flagged)
TOOL_CHOICE_ENFORCED = "tool_choice_enforced"  # labels: choice, outcome
TOOLS_EMULATED = "tools_emulated"  # tools described in the prompt (native_tools latched off)
CONTEXT_RESCUED = "context_rescued"  # labels: action (pruned, compacted), outcome; before, after
HOLDBACK_RELEASED = "holdback_released"  # held text released past the hold-back limit
CLIENT_DISCONNECT = "client_disconnect"  # client went away; upstream cancelled
INFO = "info"  # anything else worth a notice


@dataclass(frozen=True, slots=True, init=False)  # its own __init__: see proxy/compiled.py
class Event:
    """One decision: what kind it is, the one-sentence notice, and its metric labels."""

    kind: str
    notice: str
    labels: dict[str, str]
    count: int
    # A notice-less event (count only) carries an empty notice and is not shown to the client.

    def __init__(
        self, kind: str, notice: str, labels: dict[str, str] | None = None, count: int = 1
    ) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "notice", notice)
        object.__setattr__(self, "labels", {} if labels is None else labels)
        object.__setattr__(self, "count", count)


Listener = Callable[["RequestEvents", Event], None]


@dataclass(slots=True, init=False)  # its own __init__: one a request (proxy/compiled.py)
class RequestEvents:
    """The events of one client request, with the context every view needs to label them."""

    request_id: str
    upstream: str
    model: str
    events: list[Event]
    listeners: Sequence[Listener]  # often one tuple shared by every request
    extra: dict[str, Any]

    def __init__(
        self,
        request_id: str,
        upstream: str = "",
        model: str = "",
        events: list[Event] | None = None,
        listeners: Sequence[Listener] = (),
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.request_id = request_id
        self.upstream = upstream
        self.model = model
        self.events = [] if events is None else events
        self.listeners = listeners
        self.extra = {} if extra is None else extra

    def add(self, event: Event) -> Event:
        """Record an event and hand it to every listener at once (metrics count it live)."""
        self.events.append(event)
        for listener in self.listeners:
            listener(self, event)
        return event

    def emit(self, kind: str, notice: str, count: int = 1, **labels: str) -> Event:
        """Shorthand for `add(Event(kind, notice, labels, count))`."""
        return self.add(Event(kind, notice, dict(labels), count))

    def has(self, kind: str) -> bool:
        """Whether an event of `kind` was recorded. Asked of every finished request that had
        events (logs.wanted): compiled, where a generator in the log module cost a recovered
        call some 3,000 instructions."""
        return any(event.kind == kind for event in self.events)  # a loop, compiled

    @property
    def notices(self) -> list[str]:
        """The notice sentences so far, in order, without empty ones or exact repeats."""
        seen: list[str] = []
        for event in self.events:
            if event.notice and event.notice not in seen:
                seen.append(event.notice)
        return seen
