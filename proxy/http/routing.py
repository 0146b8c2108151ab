"""Which upstream serves a model name, and the merged `/v1/models` listing.

Exact names win over globs, and among globs the first upstream in the config wins: an operator
lists specific servers first and a catch-all (`*`) last, the way proxy routes are usually read.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from proxy.agent.windows import window_from_models_entry


class Routable(Protocol):
    name: str

    @property
    def patterns(self) -> Sequence[str]: ...


class Router:
    """Maps a model name to the upstream that serves it."""

    # Answers are remembered (model names repeat on every request); the cache is bounded because
    # clients choose the names, and simply emptied when full.
    CACHE_SIZE = 4096

    def __init__(self, upstreams: Iterable[tuple[str, Sequence[str]]]) -> None:
        self._routes = [(name, list(patterns)) for name, patterns in upstreams]
        self._cache: dict[str, str | None] = {}

    def route(self, model: str) -> str | None:
        """The name of the upstream serving `model`, or None when none does."""
        try:
            return self._cache[model]
        except KeyError:
            pass
        if len(self._cache) >= self.CACHE_SIZE:
            self._cache.clear()
        found = self._cache[model] = self._find(model)
        return found

    def _find(self, model: str) -> str | None:
        for name, patterns in self._routes:
            if model in patterns:
                return name
        for name, patterns in self._routes:
            for pattern in patterns:
                if _is_glob(pattern) and fnmatch.fnmatchcase(model, pattern):
                    return name
        return None

    def configured_names(self) -> list[tuple[str, str]]:
        """(upstream, model) for every model named exactly (not by glob) in the config."""
        return [(n, p) for n, patterns in self._routes for p in patterns if not _is_glob(p)]


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def merge_listings(
    listings: Iterable[tuple[str, list[dict[str, Any]]]],
    router: Router,
    windows: dict[tuple[str, str], int],
) -> list[dict[str, Any]]:
    """The union of the upstreams' model lists, each model listed once, with windows where known.

    A model appears under the upstream that actually serves it (the router's choice), so a name two
    servers both list is shown once, as routed. Configured exact names that no server listed are
    included too, so a client can see everything it may ask for.
    """
    out: dict[str, dict[str, Any]] = {}
    for upstream, models in listings:
        for entry in models:
            model = entry["id"]
            if model in out or router.route(model) != upstream:
                continue
            item = dict(entry)
            item.setdefault("object", "model")
            item.setdefault("owned_by", upstream)
            # What latchgate knows (config, discovery) first, else what the entry itself says.
            window = windows.get((upstream, model)) or window_from_models_entry(entry)
            if window:
                item["context_length"] = window
            out[model] = item
    for upstream, model in router.configured_names():
        if model not in out and router.route(model) == upstream:
            item = {"id": model, "object": "model", "created": 0, "owned_by": upstream}
            window = windows.get((upstream, model))
            if window:
                item["context_length"] = window
            out[model] = item
    return list(out.values())
