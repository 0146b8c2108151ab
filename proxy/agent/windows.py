"""Finding each model's context window by asking the server, once, in the right order.

The pre-flight check (BEHAVIOUR.md 5.3) needs the window the server actually serves, which is
often not the model's trained window: llama.cpp splits `-c` across `--parallel` slots, LM Studio
and Ollama load models with a context of their own choosing. Every server reports it somewhere
else (5.1; research/llama-server-observed.md (g)), so sources are tried in order and the first
positive number wins:

1. the configured `context_length` (exact model name, then globs in order);
2. the served window on the model's `/v1/models` entry (`context_length`, `max_context_window`,
   `max_model_len`, `context_window`, `n_ctx`, at the top level or under llama.cpp's `meta`);
3. llama.cpp `GET /props` `default_generation_settings.n_ctx`. This is already the per-slot
   window (`-c 4096 --parallel 2` reports 2048, the same figure the overflow error uses), so it
   is used as is, not divided by the slot count again;
4. LM Studio `GET /api/v0/models` `loaded_context_length`;
5. Ollama `POST /api/show` `num_ctx` parameter, else `model_info.<arch>.context_length`;
6. the trained window of the `/v1/models` entry (`meta.n_ctx_train`).

Only the I/O is injected (`Fetch`), so the order and caching rules are tested without sockets.
"""

from __future__ import annotations

import asyncio
import fnmatch
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

# (method, path from the server root, JSON body or None) -> (status, parsed JSON or None).
# Raises OSError or asyncio.TimeoutError when the server cannot be reached.
Fetch = Callable[[str, str, object | None], Awaitable[tuple[int, object | None]]]
Clock = Callable[[], float]

SERVED_KEYS = ("context_length", "max_context_window", "max_model_len", "context_window", "n_ctx")
MISSING_ROUTE = frozenset({404, 405, 501})

PROPS = "/props"
LMSTUDIO_MODELS = "/api/v0/models"
OLLAMA_SHOW = "/api/show"

# Which server-specific probes each upstream kind tries (the /v1/models listing is always
# read). `generic` and `auto` try all of them: a route that does not exist answers 404 once
# and is never asked again, so guessing costs one request per route per upstream.
KIND_PROBES: dict[str, tuple[str, ...]] = {
    "openai": (),
    "vllm": (),
    "llama.cpp": (PROPS,),
    "lmstudio": (LMSTUDIO_MODELS,),
    "ollama": (OLLAMA_SHOW,),
}
ALL_PROBES = (PROPS, LMSTUDIO_MODELS, OLLAMA_SHOW)

_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def _positive(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 0:
        return value
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    return None


def _first_positive(data: object, keys: tuple[str, ...]) -> int | None:
    if not isinstance(data, dict):
        return None
    return next((n for key in keys if (n := _positive(data.get(key))) is not None), None)


def window_from_models_entry(entry: dict[str, object]) -> int | None:
    """The served window on one `/v1/models` entry (top level first, then llama.cpp's `meta`)."""
    found = _first_positive(entry, SERVED_KEYS)
    return found if found is not None else _first_positive(entry.get("meta"), SERVED_KEYS)


def trained_window_from_models_entry(entry: dict[str, object]) -> int | None:
    """The trained window on one `/v1/models` entry (`meta.n_ctx_train`), the last resort."""
    found = _first_positive(entry.get("meta"), ("n_ctx_train",))
    return found if found is not None else _first_positive(entry, ("n_ctx_train",))


def find_entry(listing: object, model: str) -> dict[str, object] | None:
    """The entry for `model` in a models listing (`{"data": [...]}` or `{"models": [...]}`)."""
    if not isinstance(listing, dict):
        return None
    for field in ("data", "models"):
        entries = listing.get(field)
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if isinstance(entry, dict) and model in (entry.get("id"), entry.get("model")):
                return entry
    return None


def window_from_props(props: object) -> int | None:
    """llama.cpp `/props`: `default_generation_settings.n_ctx` (per slot)."""
    if not isinstance(props, dict):
        return None
    return _first_positive(props.get("default_generation_settings"), ("n_ctx",))


def window_from_lmstudio(listing: object, model: str) -> int | None:
    """LM Studio `/api/v0/models`: the model's `loaded_context_length` (only once loaded)."""
    entry = find_entry(listing, model)
    return _first_positive(entry, ("loaded_context_length",)) if entry else None


def window_from_ollama_show(show: object) -> int | None:
    """Ollama `/api/show`: `num_ctx` from `parameters`, else `model_info.*.context_length`."""
    if not isinstance(show, dict):
        return None
    parameters = show.get("parameters")
    if isinstance(parameters, str) and (match := _NUM_CTX.search(parameters)):
        return _positive(int(match.group(1)))
    info = show.get("model_info")
    if not isinstance(info, dict):
        return None
    return next(
        (
            n
            for key, value in info.items()
            if key.endswith(".context_length") and (n := _positive(value)) is not None
        ),
        None,
    )


@dataclass(slots=True)
class _Probe:
    """What one discovery found; `complete` is False when some source could not be asked."""

    window: int | None = None
    complete: bool = True


class WindowDiscovery:
    """Per-model context windows for one upstream: config first, then the server's own figures.

    A window once found is kept. A failed probe (connection error, timeout, 5xx) is not
    remembered: the next request asks again. A route that answered 404/405/501 does not exist
    and is never asked again. When every source answered and none had a window, "unknown" is
    remembered for `unknown_ttl` seconds, so a server without any source is not asked on every
    request. Concurrent lookups of one model share one probe.
    """

    def __init__(
        self,
        fetch: Fetch,
        kind: str,
        configured: dict[str, int] | None = None,
        *,
        models_path: str = "/v1/models",
        unknown_ttl: float = 60.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._probes = KIND_PROBES.get(kind, ALL_PROBES)
        self._kind = kind
        self._configured = {m: n for m, n in (configured or {}).items() if _positive(n)}
        self._models_path = models_path
        self._unknown_ttl = unknown_ttl
        self._clock = clock
        self._found: dict[str, int] = {}
        self._unknown_until: dict[str, float] = {}
        self._missing_routes: set[str] = set()
        self._inflight: dict[str, asyncio.Task[int | None]] = {}

    def known(self) -> dict[str, int]:
        """Every window known now, configured ones included (for `/v1/models`).

        Configured globs are listed as written; a model they matched is listed by its name.
        """
        return {**self._found, **self._configured}

    def configured(self, model: str) -> int | None:
        """The configured window for `model`: its exact name first, then the first glob matching."""
        if not self._configured:
            return None
        if model in self._configured:
            return self._configured[model]
        return next(
            (n for pattern, n in self._configured.items() if fnmatch.fnmatchcase(model, pattern)),
            None,
        )

    def learn(self, model: str, window: int) -> None:
        """Remember a window learned elsewhere (llama.cpp's overflow error carries `n_ctx`)."""
        if self.configured(model) is None and _positive(window):
            self._found[model] = window

    def forget(self, model: str) -> None:
        """Drop what was discovered for `model` (the server was restarted with another window)."""
        self._found.pop(model, None)
        self._unknown_until.pop(model, None)

    def settled(self, model: str) -> tuple[bool, int | None]:
        """(True, the window) when it is known without asking anyone, (True, None) while the
        model is known to have none, else (False, None): then `window` must be awaited."""
        if (configured := self.configured(model)) is not None:
            return True, configured
        if model in self._found:
            return True, self._found[model]
        return self._unknown_until.get(model, -1.0) > self._clock(), None

    async def window(self, model: str) -> int | None:
        """The model's window, or None when no source knows it (then no pre-flight check)."""
        known, window = self.settled(model)
        if known:
            return window
        task = self._inflight.get(model)
        if task is None:
            task = asyncio.ensure_future(self._discover(model))
            self._inflight[model] = task
            task.add_done_callback(lambda _: self._inflight.pop(model, None))
        # shield: one caller going away (client disconnect) must not cancel the others' probe
        return await asyncio.shield(task)

    async def _discover(self, model: str) -> int | None:
        probe = _Probe()
        listing = await self._get(probe, "GET", self._models_path, None)
        entry = find_entry(listing, model)
        found = window_from_models_entry(entry) if entry else None
        for route in self._probes:
            if found is not None:
                break
            found = await self._ask_route(probe, route, model)
        if found is None and entry is not None:
            found = trained_window_from_models_entry(entry)
        if found is not None and probe.complete:
            self._found[model] = found
        elif found is None and probe.complete:
            self._unknown_until[model] = self._clock() + self._unknown_ttl
        # A window found after a higher-precedence source failed is used but not kept, so the
        # better source is asked again next time.
        return found

    async def _ask_route(self, probe: _Probe, route: str, model: str) -> int | None:
        if route == PROPS:
            return window_from_props(await self._get(probe, "GET", PROPS, None))
        if route == LMSTUDIO_MODELS:
            return window_from_lmstudio(await self._get(probe, "GET", LMSTUDIO_MODELS, None), model)
        show = await self._get(probe, "POST", OLLAMA_SHOW, {"model": model})
        return window_from_ollama_show(show)

    def _model_missing(self, path: str, status: int, data: object) -> bool:
        """Whether a 404 from Ollama's /api/show means "no such model" rather than "no such route".

        Ollama answers `{"error": "model 'x' not found"}`; taking that for a missing route would
        stop asking about every other model too.
        """
        if path != OLLAMA_SHOW or status != 404:
            return False
        if self._kind == "ollama":
            return True
        error = data.get("error") if isinstance(data, dict) else None
        return isinstance(error, str) and "model" in error.lower()

    async def _get(self, probe: _Probe, method: str, path: str, body: object | None) -> object:
        """One request; None when the route is missing, failed, or answered without JSON."""
        if path in self._missing_routes:
            return None
        try:
            status, data = await self._fetch(method, path, body)
        except (TimeoutError, OSError, aiohttp.ClientError):
            probe.complete = False
            return None
        if status >= 500 and status != 501:
            probe.complete = False
            return None
        if status in MISSING_ROUTE and not self._model_missing(path, status, data):
            self._missing_routes.add(path)
            return None
        return data if status == 200 else None
