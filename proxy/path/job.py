"""One client request on its way through the path: the job, its typed state, and the contracts.

A `Job` is made by the HTTP layer once a request is parsed, validated and routed; the attempt
loop (`proxy.path.attempts`) carries it through every attempt, and the agent layer reads and
writes the part of its state that is about negotiation (`Negotiation`). Everything an attempt
decides comes back as a `Decision` the loop reads, not as an exception.

The protocols here are what the loop asks of the agent layer (`Layer`), of a stream processor
(`StreamProcessor`) and of a front that translates the answer for a client of another API
(`Front`); `proxy.path.layer` and `proxy.fronts` implement them, and the unit tests hand the
loop fakes of their own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import orjson
from aiohttp import web

from proxy.observe.masking import Masker

if TYPE_CHECKING:
    from proxy.errors import ProxyError
    from proxy.managed.fleet import Lease
    from proxy.observe.events import RequestEvents
    from proxy.upstreams.client import Upstream
    from proxy.upstreams.pool import Choice

Action = Literal["resend", "retry", "return", "refit"]


@dataclass(slots=True)
class Decision:
    """What to do after an attempt that did not answer the client: resend at once (a latch was
    learned: the body is rebuilt), retry after `wait` seconds, fit the request to its window
    again and resend it (the upstream said it overflows), or return this error to the client
    (`status`, `body`)."""

    action: Action
    wait: float = 0.0
    status: int = 502
    body: bytes = b""
    reason: str = ""

    @staticmethod
    def give(status: int, body: bytes | dict[str, Any]) -> Decision:
        raw = body if isinstance(body, bytes) else orjson.dumps(body)
        return Decision("return", status=status, body=raw)


@dataclass(slots=True)
class Negotiation:
    """What the agent layer remembers across the attempts of one request."""

    generation: int = -1  # the latch store's generation when the last body was built
    resends: int = 0  # downgrade resends so far (bounded: see proxy.path.layer.MAX_RESENDS)
    race_resent: bool = False  # resent once because another request latched meanwhile
    latched: bool = False  # this request taught the store something: save it afterwards
    learned: set[str] = field(default_factory=set)  # topics its refusals' notices announced
    counted: set[str] = field(default_factory=set)  # dropped fields counted (once a request)
    in_words: bool = False  # response_format is asked for in the prompt
    emulated: bool = False  # the tools are described in the prompt (native_tools latched off)
    relaxed: bool = False  # schemas went out relaxed (announced once)
    loading_waited: float = 0.0  # seconds spent polling a loading model
    restart_waited: bool = False  # a managed server broke the connection, and was waited for
    chars: int | None = None  # the prompt's size estimate, when a window made it matter
    calibrated: bool = False  # the estimate was calibrated from this request's usage


@dataclass(slots=True)
class Healing:
    """What self-healing (`proxy.agent.healing`) remembers across the attempts of one request:
    the turns it sent back to the model, and the best answer so far."""

    asked: int = 0  # times the model was asked again (bounded by the upstream's heal_retries)
    source: dict[str, Any] | None = None  # the body the next attempt is built from, when asked
    source_raw: bytes = b""  # its bytes
    best: Any = None  # the best answer so far: a whole body, or a stream's unsent bytes
    best_score: int = 0  # its problems (fewer is better)
    first: str = ""  # what was wrong with the first answer, for the notice
    forced: bool = False  # a re-ask was for tool_choice (counted as enforcement)
    calls_bad: bool = False  # a re-ask was for the calls themselves (counted as a heal)
    stream: HeldReply | None = None  # the current stream attempt's holder (proxy.path.holding)
    spent: dict[str, int] = field(default_factory=dict)  # tokens of the answers asked again for


@dataclass(slots=True)
class Rescue:
    """What context rescue (`proxy.path.rescue`) knows of one request."""

    mode: str | None = None  # the client's `x-latchgate-context` (else the upstream's setting)
    told: str = ""  # what was done, for the `x-latchgate-context` response header
    refits: int = 0  # times the upstream's own overflow sent the request back to be fitted
    ratio: float | None = None  # chars per token that overflow revealed, for the refit


@dataclass(slots=True)
class Job:
    """One client request on its way through the path."""

    upstream: Upstream
    route: str  # "chat", "completions", "embeddings"
    path: str  # upstream path relative to the base URL
    raw: bytes  # the client's body as received
    body: dict[str, Any]  # the client's body, parsed; never mutated
    stream: bool
    events: RequestEvents
    client_auth: str | None = None
    masker: Masker = field(default_factory=Masker)  # secrets its answer must not carry
    started: float = field(default_factory=time.perf_counter)
    upstream_wait: float = 0.0
    attempts: int = 0
    retries: int = 0
    sent: dict[str, Any] | None = None  # the body of the last attempt
    content_started: bool = False  # the upstream has begun answering (the watchdog's switch)
    relayed: bool = False  # content reached the client: from here on, nothing is ever resent
    interrupted: bool = False  # cancelled because latchgate is shutting down (proxy.http.drain)
    left: bool = False  # the client went away
    first_token_at: float | None = None
    usage: dict[str, Any] | None = None  # the last usage report (llama.cpp's is cumulative)
    cache_n: int | None = None  # llama.cpp's `timings.cache_n`: prompt tokens from its cache
    dropped: list[str] = field(default_factory=list)
    upstream_headers: dict[str, str] = field(default_factory=dict)
    upstream_error: str | None = None  # the last upstream failure, for the log line
    response: web.StreamResponse | None = None  # the client's stream, once opened
    notices_sent: int = 0  # notices already in the response's headers or comments
    negotiation: Negotiation = field(default_factory=Negotiation)
    heal: Healing = field(default_factory=Healing)
    rescue: Rescue = field(default_factory=Rescue)
    status: int = 0
    front: Front | None = None  # the API the client spoke, when it is not chat (proxy.fronts)
    # A pooled upstream only (proxy.path.sending): the member (and slot) of the attempt in
    # flight, the members that failed it, and its conversation's key for cache affinity.
    choice: Choice | None = None
    tried: frozenset[str] = frozenset()
    conversation: str | None = None
    # A managed upstream only (proxy.managed): the request's hold on its llama-server, taken
    # before anything is asked of it, released when the request is over.
    lease: Lease | None = None

    @property
    def label(self) -> str:
        """The route in metrics and logs: the front the client spoke, else the route."""
        return self.route if self.front is None else self.front.name


class Front(Protocol):
    """A translation between the chat path and the API the client spoke (`proxy.fronts`): the
    chat path answers as always, and the front turns each answer into its own shape."""

    name: str  # the route label in metrics and logs
    keepalive: float  # seconds between keepalives while a stream waits (0: none)

    def whole(self, job: Job, body: dict[str, Any]) -> bytes:
        """The client's body for a whole chat completion."""
        ...

    def stream(self, status: int) -> web.StreamResponse:
        """The client's stream, which takes chat events and writes the front's own."""
        ...


class HeldReply(Protocol):
    """A stream's reply held back until it is judged (`proxy.path.holding.HoldingStream`)."""

    finish_reason: str | None
    calls: list[dict[str, Any]]  # the reply's calls, as they would go to the client

    def message(self) -> dict[str, Any]:
        """The reply as a chat message: its text (what is known of it) and its calls."""
        ...

    def in_words(self) -> bool:
        """Whether the reply, as far as it is known, is one in words settling leaves as it is."""
        ...

    def may_be_call(self) -> bool:
        """Whether the text known of the reply could be a call written out."""
        ...

    @property
    def may_heal(self) -> bool:
        """Whether the reply can still be asked for again: none of it reached the client."""
        ...


class StreamProcessor(Protocol):
    """Turns each upstream chunk into the chunks the client should get (see toolcalls.stream)."""

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]: ...

    def pass_texts(self, texts: list[str]) -> int:
        """How many of the chunks adding `texts` to the first choice's content (one each, in
        order) go out unchanged, from the first: those are taken in without being parsed, and
        the rest go through `feed`. The first may be the reply's first, nothing fed before."""
        ...

    def hold_texts(self, texts: list[str]) -> int:
        """How many of such chunks, from the first, are taken in with nothing to send (text
        held back whole, as inside a call); the rest go through `feed`."""
        ...

    def add_arguments(self, call: int, texts: list[str]) -> int:
        """How many of the chunks adding `texts` to the arguments of tool call `call` (one
        each, in order, fragments with an index and arguments alone) are taken in, with nothing
        to send; the rest go through `feed`."""
        ...

    def pass_inert(self) -> bool:
        """Whether a chunk that adds nothing (`chunks.adds_nothing`: a role, empty values) goes
        out as it came without being fed: `feed` would send it unchanged, and nothing is held
        that a chunk made later would copy its fields from."""
        ...

    def pass_end(self, chunk: dict[str, Any]) -> bool:
        """Whether a chunk that only ends the first choice (`chunks.only_end`) goes out as it
        came without being fed, taken in as `feed` would take it: `feed` would send it
        unchanged, and nothing is held that would go out before it or change it."""
        ...

    def finish(self) -> list[dict[str, Any]]: ...


class Layer(Protocol):
    """The agent layer: every decision the attempt loop delegates."""

    async def preflight(self, job: Job) -> ProxyError | None: ...

    def prepare(self, job: Job) -> tuple[dict[str, Any], bytes]: ...

    def on_error(self, job: Job, status: int, headers: Any, raw: bytes) -> Decision: ...

    def on_failure(self, job: Job, reason: str, detail: str) -> Decision: ...

    def whole(self, job: Job, body: dict[str, Any]) -> dict[str, Any] | None: ...

    def settle(self, job: Job, body: dict[str, Any]) -> dict[str, Any] | list[bytes] | Decision:
        """A whole chat answer, judged: the body to send (this one or a better earlier one; on a
        streamed request an earlier one comes as its events), or the decision to ask the model
        again."""
        ...

    def settle_stream(
        self, job: Job, unsent: list[bytes], tail: list[dict[str, Any]]
    ) -> tuple[list[bytes], bool] | Decision:
        """The end of a complete chat stream, judged: the events still to send (the relay's
        `unsent` ones and the processor's `tail`, framed) and whether they carry content; or
        the decision to ask the model again."""
        ...

    def stream_processor(self, job: Job) -> StreamProcessor | None: ...

    def on_usage(self, job: Job, usage: dict[str, Any]) -> None: ...

    def forward_usage(self, job: Job) -> bool: ...
