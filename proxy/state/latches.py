"""The latch store: what each endpoint and each model on it has refused, remembered.

A refusal is learned once per (endpoint, model) and then applied to every later request, so the
second request pays nothing (BEHAVIOUR 2.1). This module holds that memory and nothing else: it
does not classify refusals (`negotiate` does) and does no file I/O (`snapshots` does). Latches
only ever move one way, from permissive to refused, and sets only grow; the only way back is an
operator's `reset` or `expire`.

The store is the one piece of mutable state in latchgate besides the metrics registry. It is
touched from a single asyncio loop, so it takes no lock; `generation` lets a request tell whether
the latches changed while it was in flight (the lost-race rule, BEHAVIOUR 2.2).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

SNAPSHOT_VERSION = 1
NO_KEY = "agent-core"

MODEL_FLAGS = (
    "reasoning_effort",
    "legacy_token_limit",
    "chosen_temperature",
    "structured_output",
    "native_tools",
)
ENDPOINT_FLAGS = ("strict_schemas", "usage_in_stream")
# The reasoning-effort ladder (BEHAVIOUR 2.4), cheapest first. Here, below negotiate (which steps
# along it), because the store orders the efforts it has learned by it.
LADDER = ("none", "minimal", "low", "medium", "high")


def endpoint_id(base_url: str, api_key: str | None) -> str:
    """The lowercase hex SHA-256 of the compact JSON array `[base_url, key]` (BEHAVIOUR 1).

    Serialised like JavaScript's `JSON.stringify` (no spaces, non-ASCII kept as UTF-8) so the id
    matches the one the agent-core package computes and snapshots stay interchangeable.
    """
    key = api_key if api_key else NO_KEY
    text = json.dumps([base_url, key], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Refusal:
    """What one refusal teaches the store; `capability` values are metric label values.

    Defined here, with the store that learns it, and built by the classifier
    (`proxy.agent.negotiate.classify`), which sits above the store and imports it from here.
    """

    capability: str
    fields: tuple[str, ...] = ()
    refused_effort: str | None = None
    next_effort: str | None = None
    supported_efforts: tuple[str, ...] | None = None
    effort_with_tools: str | None = None


@dataclass
class ModelLatches:
    """Per-model latches on one endpoint; all start permissive (True / empty)."""

    reasoning_effort: bool = True
    legacy_token_limit: bool = True
    chosen_temperature: bool = True
    structured_output: bool = True
    native_tools: bool = True
    refused_fields: set[str] = field(default_factory=set)
    refused_efforts: set[str] = field(default_factory=set)
    supported_efforts: list[str] | None = None
    effort_with_tools: str | None = None
    since: float = 0.0

    def permissive(self) -> bool:
        """Nothing is latched for this model (the usual case): it asks no change of a body."""
        return (
            self.reasoning_effort
            and self.legacy_token_limit
            and self.chosen_temperature
            and self.structured_output
            and self.native_tools
            and not self.refused_fields
            and not self.refused_efforts
            and self.supported_efforts is None
            and self.effort_with_tools is None
        )

    def held(self) -> dict[str, int]:
        """Capability label -> number of latches held (only non-zero entries)."""
        counts = {name: 1 for name in MODEL_FLAGS if not getattr(self, name)}
        efforts = len(self.refused_efforts) + (1 if self.effort_with_tools else 0)
        if efforts:
            counts["effort_value"] = efforts
        if self.refused_fields:
            counts["refused_field"] = len(self.refused_fields)
        return counts


@dataclass
class EndpointLatches:
    """Per-endpoint latches plus the models met on that endpoint."""

    strict_schemas: bool = True
    usage_in_stream: bool = True
    since: float = 0.0
    upstream: str = ""
    models: dict[str, ModelLatches] = field(default_factory=dict)
    # When an endpoint-level latch (strict_schemas, usage_in_stream) was first set; `since` is
    # when the endpoint was first met, which may be a model latch long before.
    latched_since: float = 0.0

    def held(self) -> dict[str, int]:
        return {name: 1 for name in ENDPOINT_FLAGS if not getattr(self, name)}

    def is_empty(self) -> bool:
        return not self.models and not self.held()


# What `view` answers for an endpoint or model with no latches: shared (read-only by `view`'s
# contract) rather than built on every request.
_NO_ENDPOINT = EndpointLatches()
_NO_MODEL = ModelLatches()


class LatchStore:
    """Every latch, keyed by endpoint id and then by model name as sent upstream."""

    def __init__(self) -> None:
        self.generation = 0
        self._endpoints: dict[str, EndpointLatches] = {}

    # -- reading -------------------------------------------------------------------------------

    def view(self, eid: str, model: str) -> tuple[EndpointLatches, ModelLatches]:
        """The current latches (permissive defaults when unknown). Never creates entries.

        The returned objects are the store's own; callers must treat them as read-only.
        """
        endpoint = self._endpoints.get(eid)
        if endpoint is None:
            return _NO_ENDPOINT, _NO_MODEL
        return endpoint, endpoint.models.get(model) or _NO_MODEL

    def held(self) -> dict[tuple[str, str], int]:
        """(upstream name, or the endpoint id when unnamed, capability) -> latches held."""
        out: dict[tuple[str, str], int] = {}
        for eid, endpoint in self._endpoints.items():
            who = endpoint.upstream or eid
            counts = [endpoint.held(), *(m.held() for m in endpoint.models.values())]
            for count in counts:
                for capability, n in count.items():
                    out[(who, capability)] = out.get((who, capability), 0) + n
        return out

    def describe(self) -> list[dict[str, Any]]:
        """A plain, JSON-able listing for `latches show` and the admin route."""
        return [
            {
                "endpoint": eid,
                "upstream": endpoint.upstream,
                "since": endpoint.since,
                **_endpoint_fields(endpoint),
                "refused": sorted(endpoint.held()),
                "models": [
                    {"model": name, **_model_fields(m), "refused": sorted(m.held())}
                    for name, m in sorted(endpoint.models.items())
                ],
            }
            for eid, endpoint in sorted(self._endpoints.items())
        ]

    def describe_in_words(self) -> list[str]:
        """`latches show` for people: one line per thing refused, in words, with ISO times.

        `describe()` is the machine form (the admin route and `--json` print it); its `true` /
        `false` read backwards to a person ("legacy_token_limit: false" means max_tokens was
        refused) and its times are epoch seconds, so this says what each latch means instead.
        Endpoints come sorted by id and models by name, as in `describe()`.
        """
        lines: list[str] = []
        for eid, endpoint in sorted(self._endpoints.items()):
            body = [
                f"  every model: {words}{_since(endpoint.latched_since or endpoint.since)}"
                for words in _endpoint_words(endpoint)
            ]
            for name, latches in sorted(endpoint.models.items()):
                body += [
                    f"  model {name}: {words}{_since(latches.since)}"
                    for words in _model_words(latches)
                ]
            if body:
                lines += [_endpoint_heading(eid, endpoint), *body]
        return lines

    # -- learning ------------------------------------------------------------------------------

    def learn(self, eid: str, model: str, refusal: Refusal, *, upstream: str = "") -> bool:
        """Apply a refusal; True when anything changed (and `generation` was bumped).

        Works on a copy and stores it only when something changed, so a refusal that teaches
        nothing new does not create entries (the pipeline then returns the error instead of
        resending the same body forever).
        """
        now = time.time()
        old = self._endpoints.get(eid)
        endpoint = copy.deepcopy(old) if old is not None else EndpointLatches(since=now)
        latches = endpoint.models.get(model) or ModelLatches(since=now)
        before = (_endpoint_fields(endpoint), _model_fields(latches))
        _apply(endpoint, latches, refusal, now)
        if (_endpoint_fields(endpoint), _model_fields(latches)) == before:
            return False
        if endpoint.held() and not endpoint.latched_since:
            endpoint.latched_since = now
        if latches != ModelLatches(since=latches.since):
            endpoint.models[model] = latches
        if upstream:
            endpoint.upstream = upstream
        self._endpoints[eid] = endpoint
        self.generation += 1
        return True

    # -- forgetting ----------------------------------------------------------------------------

    def reset(self, eid: str | None = None, model: str | None = None) -> int:
        """Forget latches: all, one endpoint, one model (on one or every endpoint).

        Returns how many were removed: endpoints when `model` is None, else model entries.
        """
        if model is None:
            removed = list(self._endpoints) if eid is None else [eid] * (eid in self._endpoints)
            for key in removed:
                del self._endpoints[key]
            return self._bump(len(removed))
        count = 0
        for key, endpoint in list(self._endpoints.items()):
            if (eid is None or key == eid) and endpoint.models.pop(model, None) is not None:
                count += 1
                if endpoint.is_empty():
                    del self._endpoints[key]
        return self._bump(count)

    def expire(self, older_than_seconds: float, now: float | None = None) -> int:
        """Forget latches first learned more than `older_than_seconds` ago.

        Counts model entries removed plus endpoints whose own latches were reset.
        """
        cutoff = (time.time() if now is None else now) - older_than_seconds
        count = 0
        for eid, endpoint in list(self._endpoints.items()):
            if endpoint.held() and endpoint.latched_since < cutoff:
                endpoint.strict_schemas = endpoint.usage_in_stream = True
                endpoint.latched_since = 0.0
                count += 1
            for name, latches in list(endpoint.models.items()):
                if latches.since < cutoff:
                    del endpoint.models[name]
                    count += 1
            if endpoint.is_empty():
                del self._endpoints[eid]
        return self._bump(count)

    def _bump(self, count: int) -> int:
        if count:
            self.generation += 1
        return count

    # -- snapshots -----------------------------------------------------------------------------

    def to_snapshot(self) -> dict[str, Any]:
        """The whole store as plain JSON-able data (BEHAVIOUR 2.7)."""
        return self._snapshot(self._endpoints)

    def snapshot_of(self, eid: str) -> dict[str, Any]:
        """A snapshot holding only endpoint `eid` (none when it has no latches): what one
        process tells the others it learned there (`proxy.state.sync`)."""
        endpoint = self._endpoints.get(eid)
        return self._snapshot({} if endpoint is None else {eid: endpoint})

    def endpoint_ids(self) -> list[str]:
        """The endpoints that hold latches."""
        return list(self._endpoints)

    @staticmethod
    def _snapshot(endpoints: dict[str, EndpointLatches]) -> dict[str, Any]:
        return {
            "version": SNAPSHOT_VERSION,
            "saved_at": time.time(),
            "endpoints": {
                eid: {
                    "since": endpoint.since,
                    "upstream": endpoint.upstream,
                    "latched_since": endpoint.latched_since,
                    **_endpoint_fields(endpoint),
                    "models": {
                        name: {**_model_fields(m), "since": m.since}
                        for name, m in endpoint.models.items()
                    },
                }
                for eid, endpoint in endpoints.items()
            },
        }

    def merge_snapshot(self, data: object) -> list[str]:
        """Import a snapshot; only ever latches off or grows sets. Returns warnings.

        A snapshot of another version is ignored whole; a malformed entry is skipped alone.
        """
        if not isinstance(data, dict):
            return ["latch snapshot ignored: it is not a JSON object"]
        version = data.get("version")
        if version != SNAPSHOT_VERSION:
            return [
                f"latch snapshot ignored: version {version!r} is not {SNAPSHOT_VERSION}; "
                "the proxy starts with the latches it has and will relearn the rest"
            ]
        endpoints = data.get("endpoints")
        if not isinstance(endpoints, dict):
            return ["latch snapshot ignored: 'endpoints' is not an object"]
        warnings: list[str] = []
        changed = False
        for eid, entry in endpoints.items():
            if not isinstance(entry, dict):
                warnings.append(f"latch snapshot: endpoint {eid} skipped, not an object")
                continue
            changed |= self._merge_endpoint(str(eid), entry, warnings, _when(data))
        if changed:
            self.generation += 1
        return warnings

    def _merge_endpoint(
        self, eid: str, entry: dict[str, Any], warnings: list[str], fallback: float
    ) -> bool:
        old = self._endpoints.get(eid)
        endpoint = copy.deepcopy(old) if old is not None else EndpointLatches()
        before = _dump(endpoint)
        endpoint.since = _earliest(endpoint.since, entry.get("since"))
        endpoint.latched_since = _earliest(endpoint.latched_since, entry.get("latched_since"))
        for name in ENDPOINT_FLAGS:
            if entry.get(name) is False:
                setattr(endpoint, name, False)
        if not endpoint.upstream and isinstance(entry.get("upstream"), str):
            endpoint.upstream = entry["upstream"]
        models = entry.get("models", {})
        if not isinstance(models, dict):
            warnings.append(f"latch snapshot: models of endpoint {eid} skipped, not an object")
            models = {}
        for name, item in models.items():
            if not isinstance(item, dict):
                warnings.append(f"latch snapshot: model {name} of {eid} skipped, not an object")
                continue
            latches = endpoint.models.get(str(name)) or ModelLatches()
            _merge_model(latches, item)
            if latches != ModelLatches(since=latches.since):
                # A snapshot without times (another writer's format) must not read as
                # "latched in 1970": that would make every expiry remove it at once.
                latches.since = latches.since or endpoint.since or fallback
                endpoint.models[str(name)] = latches
        endpoint.since = endpoint.since or fallback
        if endpoint.held() and not endpoint.latched_since:
            endpoint.latched_since = endpoint.since
        if endpoint.is_empty() or _dump(endpoint) == before:
            return False
        self._endpoints[eid] = endpoint
        return True


def _apply(endpoint: EndpointLatches, model: ModelLatches, refusal: Refusal, now: float) -> None:
    """Latch what one refusal says, on (copies of) the endpoint and model latches."""
    capability = refusal.capability
    if capability in ENDPOINT_FLAGS:
        setattr(endpoint, capability, False)
    elif capability in MODEL_FLAGS:
        setattr(model, capability, False)
    elif capability == "refused_field":
        model.refused_fields |= set(refusal.fields)
    if refusal.refused_effort:
        model.refused_efforts.add(refusal.refused_effort)
    if refusal.supported_efforts is not None:
        model.supported_efforts = _narrow(model.supported_efforts, refusal.supported_efforts)
    if refusal.effort_with_tools and model.effort_with_tools is None:
        model.effort_with_tools = refusal.effort_with_tools


def _narrow(current: list[str] | None, published: tuple[str, ...] | list[str]) -> list[str]:
    """A newly published effort list, narrowed by any list already held (sets only shrink)."""
    if current is None:
        return list(published)
    return [value for value in published if value in current]


def _merge_model(latches: ModelLatches, item: dict[str, Any]) -> None:
    for name in MODEL_FLAGS:
        if item.get(name) is False:
            setattr(latches, name, False)
    latches.refused_fields |= _strings(item.get("refused_fields"))
    latches.refused_efforts |= _strings(item.get("refused_efforts"))
    supported = item.get("supported_efforts")
    if isinstance(supported, list):
        latches.supported_efforts = _narrow(
            latches.supported_efforts, [v for v in supported if isinstance(v, str)]
        )
    with_tools = item.get("effort_with_tools")
    if isinstance(with_tools, str) and latches.effort_with_tools is None:
        latches.effort_with_tools = with_tools
    latches.since = _earliest(latches.since, item.get("since"))


def _strings(value: object) -> set[str]:
    if not isinstance(value, list):
        return set()
    return {v for v in value if isinstance(v, str)}


def _when(data: dict[str, Any]) -> float:
    """The time an imported snapshot speaks for: its `saved_at`, else now."""
    saved = data.get("saved_at")
    if isinstance(saved, int | float) and not isinstance(saved, bool) and saved > 0:
        return float(saved)
    return time.time()


def _earliest(current: float, imported: object) -> float:
    """The earlier of two `since` times, where 0 means unknown."""
    if not isinstance(imported, int | float) or isinstance(imported, bool) or imported <= 0:
        return current
    return float(imported) if not current else min(current, float(imported))


def _endpoint_fields(endpoint: EndpointLatches) -> dict[str, Any]:
    return {name: getattr(endpoint, name) for name in ENDPOINT_FLAGS}


def _model_fields(model: ModelLatches) -> dict[str, Any]:
    """The latch values of a model as JSON-able data (sets sorted), without `since`."""
    return {
        **{name: getattr(model, name) for name in MODEL_FLAGS},
        "refused_fields": sorted(model.refused_fields),
        "refused_efforts": sorted(model.refused_efforts),
        "supported_efforts": model.supported_efforts,
        "effort_with_tools": model.effort_with_tools,
    }


# What each latch means, as `latches show` prints it: what was refused, then what latchgate does.
_ENDPOINT_WORDS = {
    "strict_schemas": "cannot build a grammar from some JSON schemas (tool and response schemas "
    "sent relaxed, without pattern and format)",
    "usage_in_stream": "refuses stream_options (not sent; streams carry no usage report)",
}
_MODEL_WORDS = {
    "reasoning_effort": "refuses reasoning_effort (not sent)",
    "legacy_token_limit": "refuses max_tokens (sent as max_completion_tokens)",
    "chosen_temperature": "accepts only its default temperature (temperature not sent)",
    "structured_output": "refuses response_format (JSON asked for in the system prompt)",
    "native_tools": "refuses native tool calling (tools described in the prompt)",
}


def _endpoint_heading(eid: str, endpoint: EndpointLatches) -> str:
    """The upstream's name when it has one (what `latches reset --upstream` takes), and the
    start of its id: enough to tell endpoints apart, the full id is in `--json`."""
    met = f"first met {_iso(endpoint.since)}" if endpoint.since else "first met at an unknown time"
    if endpoint.upstream:
        return f"upstream {endpoint.upstream} (endpoint {eid[:12]}, {met}):"
    return f"unnamed endpoint {eid[:12]} ({met}):"


def _endpoint_words(endpoint: EndpointLatches) -> list[str]:
    return [_ENDPOINT_WORDS[name] for name in ENDPOINT_FLAGS if not getattr(endpoint, name)]


def _model_words(model: ModelLatches) -> list[str]:
    words = [_MODEL_WORDS[name] for name in MODEL_FLAGS if not getattr(model, name)]
    if model.refused_fields:
        plural = "s" if len(model.refused_fields) > 1 else ""
        words.append(
            f"refuses the field{plural} {', '.join(sorted(model.refused_fields))} (dropped)"
        )
    if model.refused_efforts:
        # ladder order (none, minimal, ...) reads better than alphabetical; others follow
        ordered = sorted(model.refused_efforts, key=lambda v: (_rung(v), v))
        words.append(f"refuses reasoning_effort {', '.join(ordered)} (the next value up is sent)")
    if model.supported_efforts is not None:
        allowed = ", ".join(model.supported_efforts) or "no value latchgate knows"
        words.append(f"accepts only reasoning_effort {allowed}")
    if model.effort_with_tools is not None:
        words.append(
            "refuses tools together with a reasoning effort (reasoning_effort "
            f"{model.effort_with_tools} sent with tools)"
        )
    return words


def _rung(value: str) -> int:
    """A value's place on the effort ladder (BEHAVIOUR 2.4); values off it come last."""
    return LADDER.index(value) if value in LADDER else len(LADDER)


def _since(when: float) -> str:
    return f" since {_iso(when)}" if when else ""


def _iso(when: float) -> str:
    """UTC, to the second, with a Z: what people compare with logs and paste into tickets."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dump(endpoint: EndpointLatches) -> tuple[Any, ...]:
    models = {name: (_model_fields(m), m.since) for name, m in endpoint.models.items()}
    return (_endpoint_fields(endpoint), endpoint.since, endpoint.latched_since, models)
