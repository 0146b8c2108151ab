"""The agent layer: every decision the attempt loop delegates, made from the feature modules.

The loop and the relays know how to send, relay and time out; this module decides what to send
(negotiation and schemas), whether to send at all (sizing), what an error means (overflow,
refusal, transient) and how to change what comes back (tool-call recovery, argument repair,
JSON asked for in words). Each decision is recorded as an event on the request, so metrics, logs
and notices are fed from one place. The feature modules themselves are pure; this is the glue
that gives them the request's context (its upstream, latches and settings). It is handed the
latch store, the upstreams and a callback for when a latch changes, not the running proxy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import orjson

from proxy import knowntools
from proxy.agent.negotiate import (
    DEFAULT_DROPPABLE,
    build_body,
    classify,
    client_wants_usage,
    field_topic,
    refusal_notice,
)
from proxy.agent.overflow import is_overflow, overflow_message, reported_prompt, reported_window
from proxy.agent.retry import RetryPolicy, Transient, classify_status, next_wait
from proxy.agent.schemas import apply_to_request, passthrough_problem, sanitise
from proxy.agent.sizing import Calibration, estimate_chars, overflow_body, preflight, reply_ceiling
from proxy.agent.structured import JsonInWordsStream, json_from_words
from proxy.agent.upstream_errors import UpstreamError, parse_upstream_error
from proxy.agent.windows import WindowDiscovery
from proxy.errors import ProxyError, too_deep_to_send
from proxy.observe import events as ev
from proxy.path import reask, rescue
from proxy.path.chunks import upstream_error_body
from proxy.path.job import Decision, Job, StreamProcessor
from proxy.state.latches import LatchStore, Refusal
from proxy.state.rescues import MemoryPlans, PlanStore
from proxy.toolcalls import leading
from proxy.toolcalls.recovery import process_response, recovered_event
from proxy.toolcalls.stream import StreamToolProcessor
from proxy.toolcalls.validation import declared_names
from proxy.upstreams.client import Upstream

# Negotiation resends per client request, at most: each latches something new, so this is only a
# guard against a server that keeps refusing in ever new words.
MAX_RESENDS = 12
_FAILURE_STATUS = {"connect": 502, "timeout": 504, "silent": 504}
RESTART_NOTICE = 0.5  # seconds before a request on a managed server that broke is resent


class AgentLayer:
    """Implements `proxy.path.job.Layer` for a running proxy."""

    def __init__(
        self,
        store: LatchStore,
        upstreams: Mapping[str, Upstream],
        on_latch: Callable[[str], None] = lambda eid: None,
        plans: PlanStore | None = None,
    ) -> None:
        self.store = store
        self.upstreams = upstreams
        # A latch was learned on an endpoint (the proxy refreshes its gauge and shares it).
        self.on_latch = on_latch
        self.calibration = Calibration()
        self.rescuer = rescue.Rescuer(plans or MemoryPlans(), self._summarise)
        self._windows: dict[str, WindowDiscovery] = {}
        self._droppable: dict[str, frozenset[str]] = {}

    # -- per-upstream helpers ---------------------------------------------------------------
    def droppable(self, up: Upstream) -> frozenset[str]:
        if up.name not in self._droppable:
            cfg = up.config
            self._droppable[up.name] = (
                DEFAULT_DROPPABLE | frozenset(cfg.droppable_add)
            ) - frozenset(cfg.droppable_remove)
        return self._droppable[up.name]

    def schema_mode(self, up: Upstream) -> str:
        mode = up.config.schema_mode
        if mode != "auto":
            return mode
        return "sanitise" if up.is_local else "passthrough"

    def windows(self, up: Upstream) -> WindowDiscovery:
        found = self._windows.get(up.name)
        if found is None:

            async def fetch(method: str, path: str, body: object | None) -> tuple[int, Any]:
                url = up.root + path
                if method == "GET":
                    return await up.get_json(url)
                return await up.post_json(url, body)

            found = WindowDiscovery(fetch, up.kind, up.config.context_length)
            self._windows[up.name] = found
        return found

    def known_windows(self) -> dict[tuple[str, str], int]:
        """(upstream, model) -> window: discovered ones, and configured ones from the start.

        Every upstream is asked (not only those a chat request reached), and each listed model
        is matched against the configured globs, so `GET /v1/models` shows a configured window
        before any request and under the model's own name.
        """
        out: dict[tuple[str, str], int] = {}
        for up in self.upstreams.values():
            disc = self.windows(up)
            for entry in up.listing:
                if (window := disc.configured(entry["id"])) is not None:
                    out[(up.name, entry["id"])] = window
            out.update(((up.name, model), window) for model, window in disc.known().items())
        return out

    # -- before sending ---------------------------------------------------------------------
    async def preflight(self, job: Job) -> ProxyError | None:
        if job.route != "chat":
            return None
        up = job.upstream
        if not up.kind_detected:
            await up.detect_kind()
        body = job.body
        if _has_schema_fields(body) and self.schema_mode(up) == "passthrough":
            problem = passthrough_problem(body)
            if problem is not None:
                return problem
        known, window = self.windows(up).settled(job.events.model)  # usually: no await at all
        if not known:
            window = await self._window(job)
        if window is None:
            return None
        # Estimated (and later calibrated) only where a window makes it matter.
        chars = estimate_chars(body.get("messages"), body.get("tools"))
        job.negotiation.chars = chars
        ratio, exact = await self._ratio(job, chars, window)
        tokens = exact if exact is not None else math.ceil(chars / ratio)
        ceiling = reply_ceiling(body)
        # Ollama truncates silently instead of refusing: its window is trusted at any size. So
        # is one the server has just refused this very request for (a refit).
        trust = up.kind == "ollama" or job.rescue.refits > 0
        message = preflight(tokens, ceiling, window, trust_small=trust)
        mode = job.rescue.mode or up.config.on_overflow
        if mode != "refuse" and body.get("messages"):
            budget = rescue.Budget(window, ceiling, ratio, body.get("tools"), tokens)
            needed = message is not None or job.rescue.refits > 0
            refused = await self._rescue(job, mode, budget, needed=needed)
            if refused is None:
                return None
            message = refused
        if message is None:
            return None
        job.events.emit(ev.OVERFLOW, "", where="preflight")
        error = overflow_body(message)["error"]
        return ProxyError(
            400, error["message"], type=error["type"], param=error["param"], code=error["code"]
        )

    async def _window(self, job: Job) -> int | None:
        """The model's window, or None when it is unknown (then nothing is checked)."""
        windows = self.windows(job.upstream)
        known, window = windows.settled(job.events.model)  # the usual case: no await at all
        if not known:
            try:
                window = await windows.window(job.events.model)
            except (TimeoutError, aiohttp.ClientError, OSError):
                window = None  # the probe failed: asked again next time; no check this time
        return window

    async def _ratio(self, job: Job, chars: int, window: int) -> tuple[float, int | None]:
        """Characters per token for this request: calibrated for the model, counted exactly by
        the server when configured and close to the window (then the count too: a ratio of it
        would round it up), or what the server's refusal of this very request revealed (a
        refit)."""
        up = job.upstream
        key = (up.endpoint_id, job.events.model)
        ratio = self.calibration.ratio(key)
        ceiling = reply_ceiling(job.body)
        if job.rescue.ratio is not None:
            ratio = min(ratio, job.rescue.ratio)
        elif job.rescue.refits:
            # The server refused it without saying its size: at least one token over, then.
            ratio = min(ratio, chars / max(window - ceiling + 1, 1))
        if (
            up.config.exact_token_count
            and up.kind == "llama.cpp"
            and chars / ratio + ceiling >= window // 2
        ):
            # Close enough to the window for the estimate's error to matter: ask the server to
            # count. Far below it the estimate decides, so most requests pay nothing.
            body = job.body
            exact = await up.count_prompt_tokens(body.get("messages"), body.get("tools"))
            if exact is not None and exact > 0:
                self.calibration.observe(key, chars, exact)
                return chars / exact, exact
        return ratio, None

    async def _rescue(
        self, job: Job, mode: str, budget: rescue.Budget, *, needed: bool
    ) -> str | None:
        """Fit the request by context rescue: None when it is sent (rewritten or not), else
        the refusal's message."""
        cfg = job.upstream.config
        options = rescue.Options(
            mode, cfg.prune_keep_last, cfg.prune_max_chars, cfg.compact_summary_tokens
        )
        fitted = await self.rescuer.fit(job, options, budget, needed=needed)
        if fitted is None:
            return None
        rescue.report(job, fitted, budget.window)
        if fitted.messages is None:
            return rescue.refusal(fitted, budget)
        old = job.body
        job.body = {**old, "messages": fitted.messages}
        job.raw = _encode(job.raw, old, job.body)
        job.negotiation.chars = estimate_chars(fitted.messages, old.get("tools"))
        return None

    async def _summarise(self, job: Job, body: dict[str, Any]) -> object:
        """One summary request to the job's own model, under its latches; its answer's JSON,
        or why there is none (`rescue.Failed`)."""
        up = job.upstream
        endpoint, latches = self.store.view(up.endpoint_id, job.events.model)
        built = build_body(body, endpoint, latches, droppable=self.droppable(up))
        t0 = time.perf_counter()
        try:
            status, answer = await up.complete(
                built.body, client_auth=job.client_auth, timeout=up.config.request_timeout
            )
        except TimeoutError:
            return rescue.Failed(f"no answer in {up.config.request_timeout:g} s")
        except (aiohttp.ClientError, OSError) as exc:
            return rescue.Failed(f"{type(exc).__name__}")
        finally:
            # the model's time writing the summary, not latchgate's own overhead
            job.upstream_wait += time.perf_counter() - t0
        if status != 200:
            error = parse_upstream_error(status, orjson.dumps(answer) if answer else b"")
            return rescue.Failed(f"HTTP {status}: {error.message[:200]}")
        return answer

    async def count_tokens(
        self, up: Upstream, model: str, messages: list[dict[str, Any]], tools: Any
    ) -> int:
        """A prompt's size in tokens: the server's own count where it has one (llama.cpp),
        else the estimate, calibrated by this model's earlier answers."""
        key = (up.endpoint_id, model)
        chars = estimate_chars(messages, tools)
        if up.kind == "llama.cpp":
            exact = await up.count_prompt_tokens(messages, tools)
            if exact is not None:
                self.calibration.observe(key, chars, exact)
                return exact
        return self.calibration.tokens(key, chars)

    def prepare(self, job: Job) -> tuple[dict[str, Any], bytes]:
        if job.route != "chat":
            return job.body, job.raw
        up, model = job.upstream, job.events.model
        store, state = self.store, job.negotiation
        state.generation = store.generation
        endpoint, latches = store.view(up.endpoint_id, model)
        # Asked again (self-healing): the conversation with the reply and its correction.
        source, raw = job.body, job.raw
        if job.heal.source is not None:
            source, raw = job.heal.source, job.heal.source_raw
        built = build_body(
            source, endpoint, latches, droppable=self.droppable(up), sanitise=sanitise
        )
        for name in built.dropped:
            if name not in state.counted:  # once per request, not per attempt
                state.counted.add(name)
                # build_body's own notice already says it; this event only counts it
                job.events.emit(ev.FIELD_DROPPED, "", field=name)
        body = built.body
        if body is not source:
            # Every field of the client's that is not sent (refused, latched off, renamed):
            # the header lists them all, whatever removed them. The last attempt's list wins.
            job.dropped = [name for name in job.body if name not in body]
        learned = state.learned
        for notice in built.notices:
            # A latch this very request learned was announced by its refusal's notice: the
            # rebuild that follows does not say it a second time.
            if notice.topic not in learned:
                job.events.emit(ev.INFO, notice)
        if built.tools_emulated and not state.emulated:
            state.emulated = True
            job.events.emit(ev.TOOLS_EMULATED, "")  # build_body's notice says it
        if built.structured_in_words and not state.in_words:
            state.in_words = True
            job.events.emit(ev.STRUCTURED_IN_WORDS, "")  # build_body's notice says it
        if not _has_schema_fields(body):
            # No schema anywhere (most requests): nothing for the schema step to look at.
            return body, _encode(raw, source, body)
        result = apply_to_request(
            body, mode=self.schema_mode(up), relaxed=not endpoint.strict_schemas
        )
        if result.relaxed and not state.relaxed:
            state.relaxed = True
            said = "strict_schemas" in learned  # the refusal's notice says it already
            job.events.emit(
                ev.SCHEMAS_RELAXED,
                ""
                if said
                else f"Schemas sent relaxed (no pattern or format) because {up.name} cannot "
                "build a grammar from them.",
            )
        for fixed in result.notices:
            job.events.emit(ev.SCHEMA_FIXED, fixed)
        return result.body, _encode(raw, source, result.body)

    # -- after an error ---------------------------------------------------------------------
    def on_error(self, job: Job, status: int, headers: Any, raw: bytes) -> Decision:
        error = parse_upstream_error(status, raw)  # the one reading every decision below uses
        # The last upstream error, for the request's log line (which masks keys).
        job.upstream_error = f"HTTP {status}: {error.text[:500]}"
        if job.route == "chat":
            decision = self._chat_error(job, error)
            if decision is not None:
                return decision
        transient = classify_status(error, headers)
        if transient is not None:
            decision = self._retry(job, transient)
            if decision is not None:
                return decision
        return Decision.give(status, upstream_error_body(error))

    def _chat_error(self, job: Job, error: UpstreamError) -> Decision | None:
        """An error on the chat route: an overflow mapped, a refusal latched and resent, or
        None when neither (then it may be transient)."""
        up, model = job.upstream, job.events.model
        if is_overflow(error):
            job.events.emit(ev.OVERFLOW, "", where="upstream")
            reported = reported_window(error)  # llama.cpp says its n_ctx: refuse early next time
            if reported:
                self.windows(up).learn(model, reported)
            if self._may_refit(job, reported is not None):
                return self._refit(job, error)
            return Decision.give(400, overflow_body(overflow_message(error)))
        if job.negotiation.resends >= MAX_RESENDS:
            return None
        known = self.store.view(up.endpoint_id, model)[1]
        sent = job.sent or job.body
        refusal = classify(error, sent, droppable=self.droppable(up), known=known)
        if refusal is None:
            # A refusal of something latched since this request was built (classify, told
            # what is known, had nothing new to learn): the rebuilt body avoids it. Once.
            if self._raced(job) and classify(error, sent, droppable=self.droppable(up)):
                return self._resend_after_race(job)
            return None
        if not self._worth_latching(job, refusal):
            return Decision.give(error.status, upstream_error_body(error))
        if self.store.learn(up.endpoint_id, model, refusal, upstream=up.name):
            return self._latched(job, refusal)
        if self._raced(job):
            # Another request learned this refusal while ours was in flight: send again, once.
            return self._resend_after_race(job)
        return Decision.give(error.status, upstream_error_body(error))

    def _may_refit(self, job: Job, window_said: bool) -> bool:
        """Whether an overflow the upstream reported can be answered by fitting the request
        (context rescue is on, its window is now known, and it was not fitted for this yet)."""
        if (job.rescue.mode or job.upstream.config.on_overflow) == "refuse":
            return False
        if job.rescue.refits or job.relayed or job.heal.source is not None:
            return False
        known = window_said or self.windows(job.upstream).settled(job.events.model)[1]
        return bool(known) and bool(job.body.get("messages"))

    @staticmethod
    def _refit(job: Job, error: UpstreamError) -> Decision:
        """Fit the request again, taught by the overflow: the prompt's size as the server
        counted it sets this request's chars per token (the estimate was too low)."""
        job.rescue.refits += 1
        prompt = reported_prompt(error)
        chars = job.negotiation.chars
        if chars is None:
            chars = estimate_chars(job.body.get("messages"), job.body.get("tools"))
        if prompt:
            job.rescue.ratio = max(chars / prompt, 0.5)
        job.events.emit(
            ev.INFO, f"{job.upstream.name} said the request overflows its window; fitting it."
        )
        return Decision("refit", reason="overflow")

    def _worth_latching(self, job: Job, refusal: Refusal) -> bool:
        if refusal.capability != "strict_schemas":
            return True
        # Nothing to relax in what was sent: latching would resend the same body and leave the
        # endpoint relaxed for nothing. The error is the client's to see.
        sent = job.sent or job.body
        mode = self.schema_mode(job.upstream)
        return apply_to_request(sent, mode=mode, relaxed=True).changed

    def _latched(self, job: Job, refusal: Refusal) -> Decision:
        state = job.negotiation
        state.resends += 1
        state.latched = True
        state.learned.add(
            field_topic(refusal.fields)
            if refusal.capability == "refused_field"
            else refusal.capability
        )
        notice = refusal_notice(refusal, job.events.model, job.upstream.name)
        job.events.emit(ev.REFUSAL, notice, capability=refusal.capability)
        self.on_latch(job.upstream.endpoint_id)
        return Decision("resend", reason="latched")

    def _raced(self, job: Job) -> bool:
        """Whether the latches changed while this request was in flight (and it has not been
        resent for that yet)."""
        state = job.negotiation
        return not state.race_resent and self.store.generation != state.generation

    @staticmethod
    def _resend_after_race(job: Job) -> Decision:
        state = job.negotiation
        state.race_resent = True
        state.resends += 1
        return Decision("resend", reason="lost race")

    def on_failure(self, job: Job, reason: str, detail: str) -> Decision:
        job.upstream_error = f"{reason}: {detail}"[:500]
        pool, choice = job.upstream.pool, job.choice
        if pool is not None and choice is not None:
            pool.failed(choice.member.name, reason)  # unhealthy until its next good check
        decision = self._retry(job, Transient(reason))
        if decision is not None:
            return decision
        status = _FAILURE_STATUS.get(reason, 502)
        what = {
            "connect": "could not be reached or broke the connection",
            "timeout": "did not answer in time",
            "silent": "went silent before the first token",
        }.get(reason, "failed")
        return Decision.give(
            status,
            {
                "error": {
                    "message": f"The upstream {job.upstream.name} {what} ({detail}) after "
                    f"{job.attempts} attempt(s). Check that the server is up, or raise its "
                    "timeouts or retry budget.",
                    "type": "upstream_error",
                    "param": None,
                    "code": "upstream_timeout" if status == 504 else "upstream_unreachable",
                }
            },
        )

    def _retry(self, job: Job, transient: Transient) -> Decision | None:
        if job.relayed:
            return None  # never resend once anything reached the client
        failover = self._failover(job, transient) or self._restart(job, transient)
        if failover is not None:
            return failover
        cfg = job.upstream.config
        policy = RetryPolicy(budget=cfg.retries, loading_timeout=cfg.loading_timeout)
        waited = job.negotiation.loading_waited
        wait = next_wait(policy, job.retries, transient, loading_waited=waited)
        if wait is None:
            return None
        if transient.reason == "loading":
            job.negotiation.loading_waited = waited + wait
            if not waited:
                job.events.emit(
                    ev.RETRY,
                    f"{job.upstream.name} is loading the model; waiting "
                    f"up to {cfg.loading_timeout:g} s.",
                    reason="loading",
                )
        else:
            job.retries += 1
            job.events.emit(
                ev.RETRY,
                f"Retry {job.retries} of {cfg.retries} on "
                f"{job.upstream.name} after {transient.reason} "
                f"(waiting {wait:.2f} s).",
                reason=transient.reason,
            )
        return Decision("retry", wait=wait, reason=transient.reason)

    @staticmethod
    def _failover(job: Job, transient: Transient) -> Decision | None:
        """A pool member failed before anything reached the client: the request goes to another
        member at once, once per member, without spending the client's retry budget (which is
        for an upstream that is down as a whole)."""
        pool, choice = job.upstream.pool, job.choice
        if pool is None or choice is None:
            return None
        tried = job.tried | {choice.member.name}
        if not pool.retry_member(tried):
            return None
        job.tried = tried
        job.events.emit(
            ev.RETRY,
            f"{job.upstream.name}: member {choice.member.name} failed ({transient.reason}); "
            "sent to another member.",
            reason="failover",
        )
        return Decision("retry", reason="failover")

    @staticmethod
    def _restart(job: Job, transient: Transient) -> Decision | None:
        """A managed llama-server that broke the connection has most likely died, and is being
        restarted: the request waits for it (`Sender.open`), once, without spending the retry
        budget (which is for a server that keeps failing)."""
        if job.lease is None or transient.reason != "connect" or job.negotiation.restart_waited:
            return None
        job.negotiation.restart_waited = True
        job.events.emit(
            ev.RETRY,
            f"{job.upstream.name}: its llama-server broke the connection; the request waits "
            "for it to be restarted.",
            reason="restart",
        )
        # Time for the supervisor to see the exit, so the next attempt waits for the restart
        # instead of meeting a closed port.
        return Decision("retry", wait=RESTART_NOTICE, reason="restart")

    # -- on the way back --------------------------------------------------------------------
    def on_usage(self, job: Job, usage: dict[str, Any]) -> None:
        prompt = usage.get("prompt_tokens")
        state = job.negotiation
        # Once per request: a server that reports usage on every chunk must not fill the whole
        # calibration window with one prompt.
        chars = state.chars
        if isinstance(prompt, int) and prompt > 0 and chars and not state.calibrated:
            state.calibrated = True
            self.calibration.observe((job.upstream.endpoint_id, job.events.model), chars, prompt)

    def forward_usage(self, job: Job) -> bool:
        return client_wants_usage(job.body)

    def _tools(self, job: Job) -> list[dict[str, Any]] | None:
        tools = job.body.get("tools")
        return tools if isinstance(tools, list) and tools else None

    def whole(self, job: Job, body: dict[str, Any]) -> dict[str, Any] | None:
        changed: dict[str, Any] | None = None
        if job.negotiation.in_words:
            changed = json_from_words(body)
        tools = self._tools(job)
        if tools is None and not _has_tool_calls(body):
            return changed  # nothing to recover, nothing to repair: skip the walk
        new, events = process_response(changed or body, tools, recover=self._recover(job))
        for event in events:
            job.events.add(event)
        result = new if new is not None else changed
        if job.negotiation.emulated and job.body.get("tool_choice") != "none":
            opened = leading.in_answer(result or body, set(declared_names(tools or [])))
            if opened is not None:
                result, count = opened
                job.events.add(recovered_event(count, "bare_json"))
        return result

    @staticmethod
    def _recover(job: Job) -> bool:
        """Whether calls written as text are recovered: always when the tools went into the
        prompt (that is how the calls come back), never when the client forbade calls."""
        if job.body.get("tool_choice") == "none":
            return False
        return job.negotiation.emulated or job.upstream.config.recover_tool_calls

    def settle(self, job: Job, body: dict[str, Any]) -> dict[str, Any] | list[bytes] | Decision:
        return reask.settle(job, body)

    def settle_stream(
        self, job: Job, unsent: list[bytes], tail: list[dict[str, Any]]
    ) -> tuple[list[bytes], bool] | Decision:
        return reask.settle_stream(job, unsent, tail)

    def stream_processor(self, job: Job) -> StreamProcessor | None:
        tools = self._tools(job)
        if tools is not None:
            cfg = job.upstream.config
            limit = cfg.holdback_limit
            inner = StreamToolProcessor(tools, recover=self._recover(job), holdback_limit=limit)
            return reask.holder(job, inner, limit, job.negotiation.emulated)
        if job.negotiation.in_words:
            return JsonInWordsStream()
        return None


def _has_schema_fields(body: dict[str, Any]) -> bool:
    """Whether a body has a field a schema lives in (most requests have neither)."""
    return "tools" in body or "response_format" in body


def _encode(raw: bytes, client: dict[str, Any], body: dict[str, Any]) -> bytes:
    """The bytes of `body`, built from the client's own `raw` bytes when possible.

    Unchanged: `raw` itself. Changed only by one key added at the end (a stream asked for its
    usage report, the common case for streams): `raw` with that key spliced in before its closing
    brace. An agent's request is often hundreds of KB of conversation; re-serialising it for one
    small key would cost more than everything else latchgate does to the request. Otherwise it
    is serialised, with a tools list whose bytes are stored (an agent's, or its sanitised form:
    `knowntools.stored_key`) put in as those bytes.
    """
    if body is client:
        return raw
    if len(body) == len(client) + 1:
        last = next(reversed(body))
        end = raw.rstrip()
        if last not in client and end.endswith(b"}"):
            for key, value in client.items():  # a loop, not all(<genexpr>): every stream runs it
                if body.get(key, body) is not value:
                    break
            else:
                # One copy of a body that may be hundreds of KB (a slice, then `%`, made two).
                added = b",%s:%s}" % (orjson.dumps(last), orjson.dumps(body[last]))
                return b"".join((memoryview(end)[:-1], added))
    try:
        return knowntools.dumps(body)
    except orjson.JSONEncodeError:  # orjson reads 1024 levels of nesting but writes only 254
        raise too_deep_to_send() from None


def _has_tool_calls(body: dict[str, Any]) -> bool:
    choices = body.get("choices")
    if type(choices) is not list:
        return False
    for choice in choices:  # a loop, not any(<genexpr>): this runs on every whole answer
        message = choice.get("message") if type(choice) is dict else None
        if type(message) is dict and message.get("tool_calls"):
            return True
    return False


__all__ = ["AgentLayer"]
