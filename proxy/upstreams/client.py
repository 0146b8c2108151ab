"""The only module that talks to model servers: one pooled aiohttp client session per upstream.

An `Upstream` owns the connection pool, the key, the detected server kind and the probes
(`/v1/models` listing, readiness). The request pipeline asks it to `open` a request and gets the
live response back (`transport.UpstreamResponse`), so it can stream or read whole as it chooses;
everything about what to send and what to do with the answer lives elsewhere.

Two clients, on purpose: the request path's requests go through the lean `transport` (its
docstring says why), latchgate's own few (probes, listings, token counts, summaries, forwarded
`GET`s) through an aiohttp session, whose conveniences cost nothing at their rate.

An upstream of several servers (`base_urls`) has a `pool` (`proxy.upstreams.pool`): the sender
chooses a member per attempt and opens on its base URL (`open_on`); latchgate's own requests
(probes, windows, token counts, summaries) go to the first healthy member (`base`, `root`),
moved after each health check (`check_members`). A one-server upstream has no pool and pays
nothing for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson
from aiohttp import ClientSession, ClientTimeout, DummyCookieJar, TCPConnector

from proxy import __version__
from proxy.headers import header_value
from proxy.settings import LOCAL_KINDS, UpstreamConfig
from proxy.upstreams.pool import Change, Pool
from proxy.upstreams.transport import Transport, UpstreamResponse

if TYPE_CHECKING:
    from proxy.managed.fleet import Managed

# Response headers worth passing to the client. Everything else (hop-by-hop headers, lengths and
# encodings that no longer hold after relaying, the upstream's Server header) stays behind.
FORWARD_RESPONSE_HEADERS = (
    "x-request-id",
    "openai-processing-ms",
    "openai-model",
    "openai-version",
    "openai-organization",
    "retry-after",
    "retry-after-ms",
    "x-should-retry",
)
FORWARD_RESPONSE_PREFIXES = ("x-ratelimit-",)
USER_AGENT = f"latchgate/{__version__}"
_FORWARD_INITIALS = frozenset(
    c
    for name in FORWARD_RESPONSE_HEADERS + FORWARD_RESPONSE_PREFIXES
    for c in (name[0], name[0].upper())
)


def forwardable_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The subset of an upstream's response headers that the client should see."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        if name[0] not in _FORWARD_INITIALS:
            continue  # Date, Server, Content-*, Connection...: not lower-cased to be refused
        low = name.lower()
        if low in FORWARD_RESPONSE_HEADERS or low.startswith(FORWARD_RESPONSE_PREFIXES):
            out[low] = header_value(value)  # its bytes were the server's choice
    return out


class Upstream:
    """A configured model server and its connection pool."""

    def __init__(self, config: UpstreamConfig, endpoint_id: str) -> None:
        self.config = config
        self.name = config.name
        self.endpoint_id = endpoint_id
        self.kind = config.kind if config.kind != "auto" else "generic"
        self._kind_detected = config.kind != "auto"
        self._session: ClientSession | None = None
        self.transport = Transport(config.connect_timeout)
        self.base = config.base_url.rstrip("/")
        self.root = config.server_root.rstrip("/")
        self.pool = Pool.from_config(config) if len(config.pool) > 1 else None
        self.members_checked = False  # the pool's members have been checked once
        self._checking = asyncio.Lock()
        self.ready = False
        self.last_probe: float | None = None
        self.last_probe_error: str | None = None
        self.listing: list[dict[str, Any]] = []
        self.listing_at: float = 0.0
        self._static_headers = self._build_headers()
        # A llama-server latchgate runs (proxy.managed): requests take a lease on it first, and
        # its URL is set by each start (`move_to`).
        self.managed: Managed | None = None

    def move_to(self, root: str) -> None:
        """A managed server now listens at `root` (its URL without `/v1`)."""
        self.root = root.rstrip("/")
        self.base = self.root + "/v1"

    def _build_headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "User-Agent": USER_AGENT,
        }
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers

    @property
    def session(self) -> ClientSession:
        if self._session is None or self._session.closed:
            connector = TCPConnector(
                # No pool cap: clients already bound concurrency; a cap would only add queueing.
                limit=0,
                limit_per_host=0,
                keepalive_timeout=30,
                enable_cleanup_closed=True,
            )
            self._session = ClientSession(
                connector=connector,
                timeout=ClientTimeout(
                    total=None, sock_connect=self.config.connect_timeout, connect=None
                ),
                json_serialize=lambda o: orjson.dumps(o).decode(),
                auto_decompress=True,
                # One session carries every client's requests: a cookie an answer sets (a load
                # balancer's, say) must not ride along on the next client's request.
                cookie_jar=DummyCookieJar(),
            )
        return self._session

    async def close(self) -> None:
        await self.transport.close()
        if self._session is not None and not self._session.closed:
            await self._session.close()

    def headers(self, client_auth: str | None) -> dict[str, str]:
        """Request headers for this upstream: its own key, or the client's only when configured.

        Usually the same dict every time (built once): callers must not change it.
        """
        headers = self._static_headers
        if self.sends_client_key(client_auth):
            headers = {**headers, "Authorization": str(client_auth)}
        return headers

    def sends_client_key(self, client_auth: str | None) -> bool:
        """Whether a request goes upstream with the client's own key (instead of this
        upstream's, or none)."""
        return bool(self.config.forward_client_auth and client_auth and not self.config.api_key)

    def url(self, path: str) -> str:
        """`path` is relative to the OpenAI base URL, e.g. `/chat/completions`."""
        return self.base + path

    def open(
        self,
        path: str,
        body: bytes,
        *,
        client_auth: str | None = None,
    ) -> Awaitable[UpstreamResponse]:
        """Send a POST; awaiting it gives the response once its headers arrived (body unread).

        A plain function handing back the transport's coroutine, not a coroutine of its own:
        one frame fewer on every resume of the request.
        """
        return self.transport.send("POST", self.base + path, self.headers(client_auth), body)

    def open_on(
        self, base: str, path: str, body: bytes, *, client_auth: str | None = None
    ) -> Awaitable[UpstreamResponse]:
        """`open`, on one member of the pool (its base URL)."""
        return self.transport.send("POST", base + path, self.headers(client_auth), body)

    async def check_members(self) -> list[Change]:
        """Health-check the pool's members (`Pool.check`); latchgate's own requests then go to
        the first healthy one. What changed, for the caller to log.

        One check at a time (the health loop and the first probe may both ask): `Pool.check`
        is not made to overlap with itself, and a second check at once would learn nothing."""
        if self.pool is None:
            return []
        async with self._checking:
            changes = await self.pool.check(self._get_any)
            self.members_checked = True
        first = next((m for m in self.pool.members if m.healthy), self.pool.members[0])
        self.base, self.root = first.base, first.root
        return changes

    async def _get_any(self, url: str, timeout: float) -> tuple[int, Any]:
        return await self.get_json(url, timeout=timeout)

    async def request(
        self, method: str, path: str, query: str = "", *, client_auth: str | None = None
    ) -> tuple[int, bytes, str]:
        """Any request to a path of the API (`/responses/resp_1`): status, body, content type.
        For the few routes forwarded as they are, outside the attempt loop."""
        url = self.url(path) + (f"?{query}" if query else "")
        async with self.session.request(
            method, url, headers=self.headers(client_auth), timeout=ClientTimeout(total=30)
        ) as resp:
            raw = await resp.read()
            return resp.status, raw, resp.content_type or "application/json"

    async def get_json(self, url: str, *, timeout: float = 10.0) -> tuple[int, Any]:
        """GET a URL on this server and parse JSON; (status, None) when the body is not JSON."""
        return await self._json("GET", url, None, timeout)

    async def post_json(self, url: str, payload: Any, *, timeout: float = 10.0) -> tuple[int, Any]:
        """POST `payload` as JSON to a URL on this server; the answer as `get_json` gives it."""
        return await self._json("POST", url, orjson.dumps(payload), timeout)

    async def complete(
        self, body: dict[str, Any], *, client_auth: str | None, timeout: float
    ) -> tuple[int, Any]:
        """A whole chat completion of latchgate's own (a summary), sent with the key a client's
        request would be sent with; `timeout` 0 means none."""
        data = orjson.dumps(body)
        return await self._json("POST", self.url("/chat/completions"), data, timeout, client_auth)

    async def _json(
        self,
        method: str,
        url: str,
        data: bytes | None,
        timeout: float,
        client_auth: str | None = None,
    ) -> tuple[int, Any]:
        async with self.session.request(
            method,
            url,
            data=data,
            headers=self.headers(client_auth),
            timeout=ClientTimeout(total=timeout or None),
        ) as resp:
            raw = await resp.read()
            try:
                return resp.status, orjson.loads(raw)
            except orjson.JSONDecodeError:
                return resp.status, None

    async def count_prompt_tokens(self, messages: Any, tools: Any) -> int | None:
        """llama.cpp only: the exact prompt size, by rendering the template and tokenizing it.

        None when the server cannot say (not llama.cpp, an old build, unreachable): the caller
        then falls back to its estimate.
        """
        payload: dict[str, Any] = {"messages": messages}
        if tools:
            payload["tools"] = tools
        try:
            status, rendered = await self.post_json(self.root + "/apply-template", payload)
            if status != 200 or not isinstance(rendered, dict):
                return None
            prompt = rendered.get("prompt")
            if not isinstance(prompt, str):
                return None
            status, counted = await self.post_json(self.root + "/tokenize", {"content": prompt})
        except (aiohttp.ClientError, TimeoutError, OSError):
            return None
        tokens = counted.get("tokens") if isinstance(counted, dict) else None
        return len(tokens) if status == 200 and isinstance(tokens, list) else None

    async def probe(self) -> bool:
        """Fetch the model listing; the upstream is ready when it answers 200 (a pool: its
        members are checked first, and the listing asked of a healthy one)."""
        if self.pool is not None and not self.members_checked:
            # Only before the first check: after it, the health loop keeps `base` on a member
            # that is up.
            await self.check_members()
        self.last_probe = time.time()
        if self.managed is not None and not self.managed.ready:
            return self._unstarted(self.managed)
        try:
            status, data = await self.get_json(self.url("/models"))
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            self.ready = False
            self.last_probe_error = f"unreachable: {type(exc).__name__}"
            return False
        self.ready = status == 200
        self.last_probe_error = None if self.ready else f"GET /models answered {status}"
        if self.ready and isinstance(data, dict) and isinstance(data.get("data"), list):
            self.listing = [
                m for m in data["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)
            ]
            self.listing_at = time.monotonic()
        return self.ready

    def _unstarted(self, managed: Managed) -> bool:
        """A managed server that is not running is ready all the same (the first request starts
        it), unless its last start failed; it is not probed (that would start nothing)."""
        server = managed.server
        failed = server.failure
        self.ready = failed is None and server.state.value != "starting"
        if failed is not None:
            self.last_probe_error = f"its llama-server could not start: {failed.message}"
        else:
            self.last_probe_error = None if self.ready else "its llama-server is loading the model"
        return self.ready

    @property
    def kind_detected(self) -> bool:
        """Whether `kind` is settled (configured, or detected once)."""
        return self._kind_detected

    async def detect_kind(self) -> str:
        """For `kind = "auto"`: ask the routes only one kind of server answers, once."""
        if self._kind_detected:
            return self.kind
        probes: tuple[tuple[str, str], ...] = (
            ("llama.cpp", "/props"),
            ("ollama", "/api/version"),
            ("lmstudio", "/api/v0/models"),
            ("vllm", "/version"),
        )
        for kind, path in probes:
            try:
                status, data = await self.get_json(self.root + path, timeout=5.0)
            except (TimeoutError, aiohttp.ClientError, OSError):
                return self.kind  # unreachable: try again on a later request
            if status == 200 and isinstance(data, dict) and _looks_like(kind, data):
                self.kind = kind
                break
        else:
            self.kind = "openai" if "api.openai.com" in self.base else "generic"
        self._kind_detected = True
        return self.kind

    @property
    def is_local(self) -> bool:
        return self.kind in LOCAL_KINDS


def _looks_like(kind: str, data: dict[str, Any]) -> bool:
    if kind == "llama.cpp":
        return "default_generation_settings" in data or "total_slots" in data
    if kind == "ollama":
        return "version" in data and len(data) <= 2
    if kind == "lmstudio":
        return isinstance(data.get("data"), list) and any(
            isinstance(m, dict) and "state" in m for m in data["data"]
        )
    if kind == "vllm":
        return "version" in data
    return False
