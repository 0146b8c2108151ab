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
from dataclasses import dataclass
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


# Negotiation, Healing, Rescue and Job, one each a request, write their own `__init__`: this
# module is compiled, and the one `@dataclass` generates would run interpreted (proxy/compiled.py).
# Healing and Job are plain classes: compiled, `@dataclass` reads the annotations' names at import,
# and theirs name classes imported only for type checking (or defined further down).


@dataclass(slots=True, init=False)
class Negotiation:
    """What the agent layer remembers across the attempts of one request."""

    generation: int  # the latch store's generation when the last body was built
    resends: int  # downgrade resends so far (bounded: see proxy.path.layer.MAX_RESENDS)
    race_resent: bool  # resent once because another request latched meanwhile
    latched: bool  # this request taught the store something: save it afterwards
    learned: set[str]  # topics its refusals' notices announced
    counted: set[str]  # dropped fields counted (once a request)
    in_words: bool  # response_format is asked for in the prompt
    emulated: bool  # the tools are described in the prompt (native_tools latched off)
    relaxed: bool  # schemas went out relaxed (announced once)
    loading_waited: float  # seconds spent polling a loading model
    restart_waited: bool  # a managed server broke the connection, and was waited for
    chars: int | None  # the prompt's size estimate, when a window made it matter
    calibrated: bool  # the estimate was calibrated from this request's usage

    def __init__(self) -> None:
        self.generation = -1
        self.resends = 0
        self.race_resent = False
        self.latched = False
        self.learned = set()
        self.counted = set()
        self.in_words = False
        self.emulated = False
        self.relaxed = False
        self.loading_waited = 0.0
        self.restart_waited = False
        self.chars = None
        self.calibrated = False


class Healing:
    """What self-healing (`proxy.agent.healing`) remembers across the attempts of one request:
    the turns it sent back to the model, and the best answer so far."""

    asked: int  # times the model was asked again (bounded by the upstream's heal_retries)
    source: dict[str, Any] | None  # the body the next attempt is built from, when asked
    source_raw: bytes  # its bytes
    best: Any  # the best answer so far: a whole body, or a stream's unsent bytes
    best_score: int  # its problems (fewer is better)
    first: str  # what was wrong with the first answer, for the notice
    forced: bool  # a re-ask was for tool_choice (counted as enforcement)
    calls_bad: bool  # a re-ask was for the calls themselves (counted as a heal)
    stream: HeldReply | None  # the current stream attempt's holder (proxy.path.holding)
    spent: dict[str, int]  # tokens of the answers asked again for

    def __init__(self) -> None:
        self.asked = 0
        self.source = None
        self.source_raw = b""
        self.best = None
        self.best_score = 0
        self.first = ""
        self.forced = False
        self.calls_bad = False
        self.stream = None
        self.spent = {}


@dataclass(slots=True, init=False)
class Rescue:
    """What context rescue (`proxy.path.rescue`) knows of one request."""

    mode: str | None  # the client's `x-latchgate-context` (else the upstream's setting)
    told: str  # what was done, for the `x-latchgate-context` response header
    refits: int  # times the upstream's own overflow sent the request back to be fitted
    ratio: float | None  # chars per token that overflow revealed, for the refit

    def __init__(self) -> None:
        self.mode = None
        self.told = ""
        self.refits = 0
        self.ratio = None


class Job:
    """One client request on its way through the path."""

    upstream: Upstream
    route: str  # "chat", "completions", "embeddings"
    path: str  # upstream path relative to the base URL
    raw: bytes  # the client's body as received
    body: dict[str, Any]  # the client's body, parsed; never mutated
    stream: bool
    events: RequestEvents
    client_auth: str | None
    masker: Masker  # secrets its answer must not carry
    started: float
    upstream_wait: float
    attempts: int
    retries: int
    sent: dict[str, Any] | None  # the body of the last attempt
    content_started: bool  # the upstream has begun answering (the watchdog's switch)
    relayed: bool  # content reached the client: from here on, nothing is ever resent
    interrupted: bool  # cancelled because latchgate is shutting down (proxy.http.drain)
    left: bool  # the client went away
    first_token_at: float | None
    usage: dict[str, Any] | None  # the last usage report (llama.cpp's is cumulative)
    cache_n: int | None  # llama.cpp's `timings.cache_n`: prompt tokens from its cache
    dropped: list[str]
    upstream_headers: dict[str, str]
    upstream_error: str | None  # the last upstream failure, for the log line
    response: web.StreamResponse | None  # the client's stream, once opened
    notices_sent: int  # notices already in the response's headers or comments
    negotiation: Negotiation
    heal: Healing
    rescue: Rescue
    status: int
    front: Front | None  # the API the client spoke, when it is not chat (proxy.fronts)
    # A pooled upstream only (proxy.path.sending): the member (and slot) of the attempt in
    # flight, the members that failed it, and its conversation's key for cache affinity.
    choice: Choice | None
    tried: frozenset[str]
    conversation: str | None
    # A managed upstream only (proxy.managed): the request's hold on its llama-server, taken
    # before anything is asked of it, released when the request is over.
    lease: Lease | None

    def __init__(
        self,
        upstream: Upstream,
        route: str,
        path: str,
        raw: bytes,
        body: dict[str, Any],
        stream: bool,
        events: RequestEvents,
        client_auth: str | None = None,
        masker: Masker | None = None,
    ) -> None:
        self.upstream = upstream
        self.route = route
        self.path = path
        self.raw = raw
        self.body = body
        self.stream = stream
        self.events = events
        self.client_auth = client_auth
        self.masker = Masker() if masker is None else masker
        self.started = time.perf_counter()
        self.upstream_wait = 0.0
        self.attempts = 0
        self.retries = 0
        self.sent = None
        self.content_started = False
        self.relayed = False
        self.interrupted = False
        self.left = False
        self.first_token_at = None
        self.usage = None
        self.cache_n = None
        self.dropped = []
        self.upstream_headers = {}
        self.upstream_error = None
        self.response = None
        self.notices_sent = 0
        self.negotiation = Negotiation()
        self.heal = Healing()
        self.rescue = Rescue()
        self.status = 0
        self.front = None
        self.choice = None
        self.tried = frozenset()
        self.conversation = None
        self.lease = None

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

    def refuses_texts(self) -> bool:
        """Whether `pass_texts` and `hold_texts` would both take none of any texts right now:
        then the relay reads no text events for them, and the walk feeds the next one."""
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
