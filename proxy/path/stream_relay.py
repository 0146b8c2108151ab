"""The stream relay: one streamed chat attempt, from the upstream's reads to the client's writes.

A `StreamRelay` lives for one attempt. Each upstream read is split into whole SSE events, which
go out in one write per read (never one per event), each handled in one of these ways:

- **skim** (`_skim`): a run of ordinary events, once the answer is flowing and nothing will
  change it, goes out as it came, unread; a finish reason is all there is to look for.
- **open** (`_open_reply`): with a stream processor (a tools request), the events that open
  the reply (a role, empty values) and its first text are read without the walk, the text
  shown to the processor like those after it.
- **pass** (`_pass_texts`): with a stream processor (a tools request), the events that add to
  a string (the text, a call's arguments) shaped like one already read have it sliced out
  (`text_events`) and shown to the processor in a batch; text it would send unchanged goes out
  as it came, text it holds whole inside a call and arguments are taken in, unread either way.
- **walk** (`_walk`): any other event is read, judged and translated on its own (usage reports,
  error events, the tool-call stream processor, events that are not JSON). A tools stream's
  end (its finish reason) goes out as it came when the processor has nothing to send before
  it or change in it (`_passes_end`), instead of being fed and held to the settling.

The watchdog (first-token, then idle timeout) is armed before the request is sent and paused
while a slow client drains a write. Nothing the upstream does ends the client's stream silently:
a stream that stops short, breaks or goes quiet is retried while nothing reached the client, and
ended with an error event the SDK raises once something did. The per-read work is synchronous
methods (no coroutine frames); only reading, writing and ending await.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, TypeAlias

import aiohttp
from aiohttp import web

from proxy.agent.upstream_errors import parse_upstream_error
from proxy.errors import error_body
from proxy.observe import events as ev
from proxy.observe import logs
from proxy.path import client as out
from proxy.path import keepalive, text_events, usage
from proxy.path.answers import error_status
from proxy.path.chunks import (
    DONE_EVENT,
    adds_nothing,
    chunk_has_content,
    compact_error,
    completion_to_chunks,
    event_status,
    finishes,
    has_content,
    loads,
    only_end,
)
from proxy.path.deadlines import Deadline, Deadlines
from proxy.path.job import Decision, Job, Layer, StreamProcessor
from proxy.path.sending import Sender
from proxy.path.sse import (
    DONE,
    EventTooLarge,
    SSEParser,
    Unwritable,
    encoded,
    frame,
    next_block,
    parse_block,
    plain_run,
)
from proxy.upstreams.transport import BodyReads, UpstreamResponse

_WRITE_ROOM = 16 * 1024  # well under asyncio's 64 KiB default high-water mark
# `_translate_chunk`'s chunk, its shape not learnt yet (None is a shape learnt: there is none).
_UNLEARNT: Any = object()

Outcome: TypeAlias = web.StreamResponse | Decision


class ErrorEvent:
    """An error event in the stream: judged like an HTTP error before any content, relayed and
    ending the stream after."""

    __slots__ = ("data", "status")

    def __init__(self, data: bytes, status: int) -> None:
        self.data = data
        self.status = status


class StreamRelay:
    """One streamed attempt; `run` is the whole of it."""

    __slots__ = (
        "_carries",
        "_complete",
        "_skimmed",
        "deadline",
        "done",
        "every",
        "fed",
        "finished",
        "first",
        "forward_usage",
        "holding",
        "idle",
        "job",
        "layer",
        "loop",
        "opening",
        "parser",
        "pending",
        "pending_carries",
        "processor",
        "request",
        "sender",
        "shapes",
        "watchdog",
    )

    def __init__(
        self, layer: Layer, sender: Sender, deadlines: Deadlines, request: web.Request, job: Job
    ) -> None:
        cfg = job.upstream.config
        self.layer, self.sender, self.request, self.job = layer, sender, request, job
        self.loop = deadlines.loop()
        self.first, self.idle = cfg.effective_first_token_timeout, cfg.idle_timeout
        self.processor: StreamProcessor | None = None
        # The shapes of the events that add to a string (the text: None; a call's arguments:
        # its index), as seen; the shape of the last event fed to the processor.
        self.shapes: dict[int | None, text_events.TextShape] = {}
        self.fed: text_events.TextShape | None = None
        self.holding = False  # the processor last refused a string of those shapes
        self.opening = True  # the reply's opening events are next (`_open_reply`)
        # Seconds between keepalives while the answer has not begun (a front's; 0: none).
        self.every = 0.0 if job.front is None else job.front.keepalive
        self.forward_usage = layer.forward_usage(job)
        self.parser = SSEParser()
        self.finished = False  # a choice finished (a finish reason went by)
        self.done = False  # [DONE] came: nothing more to read
        self.pending: list[bytes] = []  # the last events, held for the final write
        self.pending_carries = False
        self.deadline = self.loop.time() + self.first if self.first > 0 else None
        self.watchdog: Deadline = deadlines.at(self.deadline)
        # Per read: whether its events carry content, and the skim's state for that read.
        self._carries = self._skimmed = False
        self._complete: bool | None = None

    async def run(self) -> Outcome:
        """The attempt: the client's (finished) stream, or what the attempt loop does next."""
        job = self.job
        job.content_started = False  # per attempt: a retry gets its own first-token limit
        try:
            with self.watchdog:
                resp = await self.sender.start(job)
                if isinstance(resp, Decision):
                    return resp
                # Closed on every way out but the stream's end, here rather than in a `finally`
                # over a variable set to None once released: compiled, mypyc reads a variable
                # there as the type mypy narrowed it to on the way without an error (None).
                try:
                    stopped = await self._relay_body(resp)
                except BaseException:
                    resp.close()
                    raise
                if stopped is not None:
                    resp.close()
                    return stopped
            self.sender.release(resp)
        except TimeoutError:
            return await self._timed_out()
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            return await self._failed(
                ("connect", f"{type(exc).__name__}: {exc}"),
                502,
                f"broke mid-stream (the connection failed: {type(exc).__name__})",
                "upstream_disconnected",
            )
        except EventTooLarge as err:
            return await self._too_large(err)
        except Unwritable:
            return await unwritable(self.request, job)
        except (asyncio.CancelledError, out.ClientGone):
            raise
        except Exception as exc:  # a bug of ours on an odd chunk: end the stream, never garble it
            if job.response is None or not job.response.prepared:
                raise
            _log_internal_error(job, exc)
            return await out.end_with_error(
                self.request,
                job,
                500,
                "latchgate hit an internal error relaying this stream; it was logged. Retry, "
                "and report it if it repeats.",
                "internal_error",
            )
        return await self._finish()

    async def _relay_body(self, resp: UpstreamResponse) -> Outcome | None:
        """Relay the response's body, read by read; an outcome when it ends the attempt early
        (an error event, or a whole answer to a streamed request), None at the stream's end."""
        job = self.job
        if "event-stream" not in resp.headers.get("Content-Type", "text/event-stream"):
            return await self._whole_as_stream(resp)
        # Chosen after `prepare` ran for this attempt: what to do with the reply
        # depends on what was sent (JSON asked for in words is only known then).
        self.processor = self.layer.stream_processor(job)
        content = resp.content
        while not self.done:
            t0 = time.perf_counter()
            try:
                if self.every and not job.content_started:
                    chunk = await self._read_or_keepalive(content)
                else:
                    chunk = await content.readany()
            finally:
                # Also when the watchdog or a leaving client cancels the read: that
                # wait is the upstream's, not latchgate's overhead.
                job.upstream_wait += time.perf_counter() - t0
            if chunk is None:
                continue  # a keepalive went out instead
            if not chunk:
                break
            stopped = await self._relay_read(chunk, resp)
            if stopped is not None:
                return stopped
        if not self.done:
            self.done = any(e.data == DONE for e in self.parser.close())
        return None

    # -- one read --------------------------------------------------------------------------

    async def _read_or_keepalive(self, content: BodyReads) -> bytes | None:
        """The next read; or, when `every` seconds pass without one before the answer began,
        a keepalive to the client instead (None). The relay writes it itself, so the client's
        stream has one writer (a second task's cancelled write could cancel the relay's)."""
        ready = content.read_nowait()  # what already came needs no timer (nor a task for one)
        if ready or content.at_eof():
            return ready
        try:
            return await asyncio.wait_for(content.readany(), self.every)
        except TimeoutError:
            # wait_for's own timeout: the watchdog's arrives as a cancellation, and becomes a
            # TimeoutError only where its block ends.
            await keepalive.send(self.request, self.job)
            return None

    async def _relay_read(self, chunk: bytes, resp: UpstreamResponse) -> Outcome | None:
        """Relay what one read completed; an outcome when an error event ends the attempt."""
        job = self.job
        # Whole events only: a key the masker looks for is never split across two regions.
        region = job.masker.bytes(self.parser.feed(chunk))
        batch, error = self._events(region)
        if error is not None:
            # What came before the error goes out first. If that was content, the stream ends
            # with the upstream's error: nothing may be resent.
            await self._flush(batch, self._carries)
            if not job.relayed:
                return self.layer.on_error(job, error.status, resp.headers, error.data)
            return await self._end_with_upstream_error(error)
        if self.done:
            # The end came with these events: they, `[DONE]` and the end of the body go out in
            # one write (`_end`), after the watchdog is off.
            self.pending, self.pending_carries = batch, self._carries
            return None
        if job.content_started:
            self.deadline = self.loop.time() + self.idle if self.idle > 0 else None
        # Time spent writing to the client is the client's, not the upstream's: the watchdog
        # is paused when this write can wait on a slow reader, which is only when it takes the
        # socket's buffer near its high-water mark (checking first saves two timer resets per
        # read on the common path).
        transport = self.request.transport
        backed_up = transport is None or (
            transport.get_write_buffer_size() + sum(map(len, batch)) > _WRITE_ROOM
        )
        if backed_up:
            self.watchdog.reschedule(None)
        await self._flush(batch, self._carries)
        if backed_up or job.content_started:
            self.watchdog.reschedule(self.deadline)
        return None

    def _events(self, region: bytes) -> tuple[list[bytes], ErrorEvent | None]:
        """The bytes for the client of one read's whole events (and an error event, if one
        stopped the walk); `_carries` says whether they hold content."""
        batch: list[bytes] = []
        self._new_read()
        pos, size = 0, len(region)
        while pos < size and not self.done:
            if region.startswith(DONE_EVENT, pos):
                self.done = True  # as the walk reads it, without reading it
                break
            if self.processor is None:
                if not self._skimmed and (self.job.content_started or self._complete is None):
                    end = self._skim(region, pos, batch)
                    if end > pos:
                        pos = end
                        continue
            elif self.shapes and self.job.content_started:
                end = self._pass_texts(region, pos, batch)
                if end > pos:
                    pos = end
                    continue
            elif self.opening:
                end = self._open_reply(region, pos, batch)
                if end > pos:
                    pos = end
                    continue
            found = next_block(region, pos)
            if found is None:
                break
            block, pos = found
            error = self._walk(block, batch)
            if error is not None:
                return batch, error
        return batch, None

    def _new_read(self) -> None:
        """The per-read state, as a read begins. Set in a method of its own: set in `_events`,
        mypy would take them to stay False and None there while `_skim` changes them, and the
        compiled build (proxy/compiled.py) checks each read against what mypy took."""
        self._carries = self._skimmed = False
        self._complete = None

    def _pass_texts(self, region: bytes, pos: int, batch: list[bytes]) -> int:
        """Relay unread the events from `pos` that only add to a string the stream processor
        watches, as far as it lets them through or takes them in; where the walk goes on.

        A tools stream, once the answer is flowing: the strings of the events shaped like ones
        already read (the answer's text, a call's arguments) are sliced out of their bytes
        (`text_events`) and shown to the processor. Text it would send unchanged goes out as it
        came; text it holds whole inside a call, and arguments (calls go out whole at the end),
        are taken in with nothing to send. The first event it would treat otherwise (a possible
        marker, a held tail), or of another shape, is walked as usual.
        """
        processor = self.processor
        assert processor is not None
        # After the processor refused a string, one event at a time until it takes one again:
        # reading a whole batch it would refuse is wasted work.
        most = 1 if self.holding else 64
        for shape in self.shapes.values():
            if shape.call is None and processor.refuses_texts():
                continue  # the walk feeds it: reading the run would be for nothing
            bodies, texts = text_events.read(shape, region, pos, most)
            if texts:
                break
        else:
            return pos
        passed = 0 if shape.call is not None else processor.pass_texts(texts)
        if passed:
            self.holding = passed < len(texts)
            end = text_events.end(shape, pos, bodies, passed)
            batch.append(region[pos:end])
            self._carries = self._carries or any(texts[:passed])
            return end
        # Taken in unread only when the chunks `feed` would build later from these events equal
        # those of the last event fed (the same shape), and such an event sends nothing (its
        # delta holds the string alone).
        taken = 0
        if shape is self.fed and shape.bare:
            if shape.call is None:
                taken = processor.hold_texts(texts)
            else:
                taken = processor.add_arguments(shape.call, texts)
        self.holding = taken < len(texts)
        return text_events.end(shape, pos, bodies, taken) if taken else pos

    def _open_reply(self, region: bytes, pos: int, batch: list[bytes]) -> int:
        """Relay the events from `pos` that open a tools stream's reply, as the walk would,
        without its steps; where the walk goes on.

        Every tools stream opens alike: a chunk or two that add nothing (the role), then its
        first text. The former go out as they came while the processor lets them (as in
        `_translate`); the latter too when the processor lets it through unfed (`pass_texts`,
        the reply's opening judged), and its shape is learnt for the texts after it. The first
        event of another kind ends the opening for good: a chunk is translated here as the walk
        would (read once), anything else is left to the walk.
        """
        while (found := next_block(region, pos)) is not None:
            block, after = found
            event = parse_block(block)
            data = None if event is None else event.data
            if data is None:
                pos = after  # a comment or an event name alone: the walk skips it too
                continue
            if event is not None and event.event is not None:
                break  # a named event (`event: error`): the walk's
            chunk = loads(data) if data != DONE else None
            if type(chunk) is not dict or ("error" in chunk and "choices" not in chunk):
                break  # the end, an event that is not a chunk, an error: the walk's
            if self._passes_unfed(chunk):
                batch.append(frame(data))
                pos = after
                continue
            self.opening = False
            if sent := self._open_text(data, chunk):
                batch.append(sent)
            return after
        else:
            return pos  # the read ended: the opening goes on in the next one
        self.opening = False
        return pos

    def _open_text(self, data: bytes, chunk: dict[str, Any]) -> bytes:
        """The first event after the reply's opening ones (`chunk`, parsed from `data`), as
        the bytes for the client: as it came when it is the reply's first text and the
        processor lets it through unfed (its shape learnt for the texts after it), else as the
        walk translates it (the shape learnt here is the one the walk would learn)."""
        processor = self.processor
        assert processor is not None
        shape = text_events.learn(data, chunk)
        if shape is not None and shape.call is None:
            self.shapes[None] = shape
            if shape.bare and processor.pass_texts([chunk["choices"][0]["delta"]["content"]]):
                self.job.content_started = True  # as `_note_choices` notes a text
                self._carries = True
                return frame(data)
        translated = self._translate_chunk(data, chunk, self._keep(shape))
        assert not isinstance(translated, ErrorEvent)  # an error chunk has stopped `_open_reply`
        return translated

    def _shape_of(self, data: bytes, chunk: Any) -> text_events.TextShape | None:
        """The shape of an event about to be fed to the processor: one already known, or one
        learnt from it (a few at most: the text, and the arguments of the first calls)."""
        for shape in self.shapes.values():
            if text_events.matches(shape, data):
                return shape
        return self._keep(text_events.learn(data, chunk))

    def _keep(self, learnt: text_events.TextShape | None) -> text_events.TextShape | None:
        """`learnt`, kept among the stream's shapes while there is room (a newer shape for the
        same string replaces it)."""
        if learnt is not None and (learnt.call in self.shapes or len(self.shapes) < 8):
            self.shapes[learnt.call] = learnt
        return learnt

    def _skim(self, region: bytes, pos: int, batch: list[bytes]) -> int:
        """Relay the run of ordinary events at `pos` unread; where the walk goes on.

        Only when the answer is flowing and nothing will change it (no stream processor):
        checked as soon as content starts, not per read, since an instant server's whole answer
        is one read; tried once per read, so a read that cannot be skimmed costs no rescans.
        Before content starts, only when this read holds the rest of the answer up to [DONE]
        with no error event in it: then nothing can fail after these events, and none needs
        judging on its own.
        """
        end = plain_run(region, pos)
        if not self.job.content_started:
            self._complete = region.endswith(DONE_EVENT) and region.find(b'"error"', end) < 0
            if not self._complete:
                end = pos
        self._skimmed = end > pos or self.job.content_started
        if end > pos:
            size = len(region)
            batch.append(region[pos:end] if pos or end < size else region)
            self.finished = self.finished or finishes(region, pos, end)
            self._carries = True
            if size - end == len(DONE_EVENT) and region.endswith(DONE_EVENT):
                self.done = True  # all that is left is [DONE]: nothing to read
        return end

    def _walk(self, block: bytes, batch: list[bytes]) -> ErrorEvent | None:
        """Read one event and add what it becomes to `batch`."""
        event = parse_block(block)
        if event is None or event.data is None:
            return None  # comments and bare event names carry nothing to relay
        if event.data == DONE:
            self.done = True
            return None
        if event.event == "error":
            # An error sent as a named event: an error whatever its data holds, never a chunk
            # (`{"message": "overloaded"}` would go out as one, and its words be lost).
            return ErrorEvent(event.data, _named_error_status(event.data))
        translated = self._translate(event.data)
        if isinstance(translated, ErrorEvent):
            return translated
        if translated:
            batch.append(translated)
        return None

    def _translate(self, data: bytes) -> bytes | ErrorEvent:
        """One upstream data event as the bytes for the client (noting finish and content)."""
        return self._translate_chunk(data, loads(data))

    def _translate_chunk(
        self, data: bytes, chunk: Any, learnt: Any = _UNLEARNT
    ) -> bytes | ErrorEvent:
        """`_translate` of the event `data`, parsed as `chunk` (`learnt`: its shape, when the
        caller learnt it)."""
        job = self.job
        if not isinstance(chunk, dict):
            return frame(data)  # not a JSON object: relayed as it came
        if "error" in chunk and "choices" not in chunk:
            # Before any answer (older llama.cpp reports overflows this way) it is judged like
            # an HTTP error: mapped, latched or retried. After, it ends the stream.
            return ErrorEvent(data, event_status(chunk))
        has = self._note_choices(chunk)
        reported = chunk.get("usage")
        processor = self.processor
        if isinstance(reported, dict):
            usage.record(job, chunk, self.layer.on_usage)
        elif reported is None and (processor is None or (not has and self._passes_unfed(chunk))):
            self._carries = self._carries or has
            return frame(data)  # the common case: relayed as it came
        outs = [chunk] if processor is None else self._processed(data, chunk, has, learnt)
        if outs is None:
            return frame(data)  # the reply's end, going out as it came
        parts: list[bytes] = []
        for out_chunk in outs:
            item = self._as_asked(out_chunk)
            if item is None:
                continue
            if item is chunk:  # unchanged: what it carries is known, its bytes are the event's
                self._carries = self._carries or has
                parts.append(frame(data))
            else:
                self._carries = self._carries or chunk_has_content(item)
                parts.append(encoded(item))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _processed(
        self, data: bytes, chunk: dict[str, Any], has: bool, learnt: Any = _UNLEARNT
    ) -> list[dict[str, Any]] | None:
        """What a tools stream's processor makes of the chunk `data` (parsed as `chunk`, `has`:
        whether it carries content); None when it is the reply's end going out as it came
        (`_passes_end`: a chunk carrying content is never one, nor one whose usage report the
        client did not ask for, which `_as_asked` removes)."""
        assert self.processor is not None
        asked = self.forward_usage or chunk.get("usage") is None
        if not has and asked and self._passes_end(chunk):
            self.fed = None  # as the walk learns of a chunk with a finish reason
            return None
        if learnt is _UNLEARNT:
            # Once a finish reason went by (this chunk's, nearly always) there is no shape to
            # learn: `learn` reads a delta only while its choice goes on. Not learning one only
            # means the events after it are walked, not passed unread.
            learnt = None if self.finished else self._shape_of(data, chunk)
        self.fed = learnt
        return self.processor.feed(chunk)

    def _as_asked(self, item: dict[str, Any]) -> dict[str, Any] | None:
        """A chunk for the client without the usage report it did not ask for (latchgate asks
        every upstream for one, for its metrics): the same object when it has none, None for a
        usage-only chunk. A chunk with empty `choices` breaks clients that read `choices[0]`."""
        if item.get("usage") is None or self.forward_usage:
            return item
        if not item.get("choices"):
            return None
        return {k: v for k, v in item.items() if k != "usage"}

    def _passes_unfed(self, chunk: dict[str, Any]) -> bool:
        """Whether a tools stream's chunk goes out as it came, unfed: one that adds nothing
        (its opening role chunk) while the processor holds nothing it would wait with."""
        assert self.processor is not None
        return adds_nothing(chunk) and self.processor.pass_inert()

    def _passes_end(self, chunk: dict[str, Any]) -> bool:
        """Whether a tools stream's chunk goes out as it came, unfed: one that only ends the
        reply (`only_end`) while the processor has nothing to send before it or change."""
        assert self.processor is not None
        return only_end(chunk) and self.processor.pass_end(chunk)

    def _note_choices(self, chunk: dict[str, Any]) -> bool:
        """Note a finish reason; whether the chunk carries content (starting the idle timer)."""
        has = False
        choices = chunk.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if isinstance(choice, dict):
                    if choice.get("finish_reason"):
                        self.finished = True
                    has = has or has_content(choice.get("delta"))
        if has:
            self.job.content_started = True  # the upstream is answering: the idle timer now
        return has

    # -- writing ---------------------------------------------------------------------------

    async def _flush(self, batch: list[bytes], carries: bool) -> None:
        """Write the events of one read in one go (opening the client's stream); `carries`
        says whether they hold content, after which nothing is ever resent."""
        if not batch:
            return
        job = self.job
        client = job.response or await out.open_stream(self.request, job)
        if carries and not job.relayed:
            # Set before the write: bytes handed to the socket may reach the client even when
            # waiting for the write to drain is then cut short.
            job.relayed = True
            job.first_token_at = time.perf_counter()
        await out.write(client, out.with_notices(job, b"".join(batch)))
        batch.clear()

    async def _finish(self) -> Outcome:
        """`_end`, or the error when an event it writes cannot be (`Unwritable`): the
        processor's last events, or an answer kept while asking again."""
        try:
            return await self._end()
        except Unwritable:
            return await unwritable(self.request, self.job)

    async def _end(self) -> Outcome:
        """The body ended: finish the client's stream, or say it came up short."""
        job = self.job
        incomplete = not self.done and not self.finished
        if incomplete and not job.relayed:
            # Nothing reached the client: retry, and drop whatever the processor still holds.
            return self.layer.on_failure(job, "connect", "the stream ended before any answer")
        if self.processor is not None:
            # What the processor held (a tools stream holds from the finish reason on) went by
            # the walk unfiltered: the usage report the client did not ask for comes out here.
            tail = [c for c in map(self._as_asked, self.processor.finish()) if c is not None]
            if incomplete:
                self.pending += [encoded(c) for c in tail]
                carries = any(chunk_has_content(c) for c in tail)
            else:
                settled = self.layer.settle_stream(job, self.pending, tail)
                if isinstance(settled, Decision):
                    return settled  # asked again (self-healing): nothing of it was relayed
                self.pending, carries = settled
            self.pending_carries = self.pending_carries or carries
        if incomplete:
            await self._flush(self.pending, self.pending_carries)
            return await self._failed(
                ("connect", "the stream ended before any answer"),
                502,
                "ended the stream without finishing the answer (no finish reason, no [DONE])",
                "upstream_incomplete",
            )
        return await self._done(self.pending, self.pending_carries)

    async def _done(self, batch: list[bytes], carries: bool) -> web.StreamResponse:
        """End a complete stream: the last events, `[DONE]` (after any pending notices) and the
        end of the body, in one write (a short answer is then one send in all)."""
        return await done(self.request, self.job, batch, carries)

    # -- what the upstream did instead ---------------------------------------------------------

    async def _whole_as_stream(self, resp: UpstreamResponse) -> Outcome:
        """The server ignored `stream: true` and answered whole: stream that answer ourselves."""
        job = self.job
        raw = job.masker.bytes(await resp.read())
        self.watchdog.reschedule(None)  # the answer is in hand: writing it is the client's time
        parsed = loads(raw)
        if not isinstance(parsed, dict) or not isinstance(parsed.get("choices"), list):
            ctype = resp.headers.get("Content-Type", "no content type")
            message = (
                f"The upstream {job.upstream.name} answered a streamed request with {ctype} "
                "that is neither an event stream nor a chat completion. Check the server."
            )
            return Decision.give(502, error_body(502, message, code="upstream_bad_stream"))
        usage.record(job, parsed, self.layer.on_usage)
        body = self.layer.whole(job, parsed) or parsed
        settled = self.layer.settle(job, body)
        if isinstance(settled, Decision):
            return settled  # asked again (self-healing)
        job.events.emit(
            ev.INFO,
            f"{job.upstream.name} answered a streamed request whole; "
            "latchgate sent it to the client as a stream.",
        )
        if isinstance(settled, list):
            return await self._done(settled, True)  # an earlier answer, kept as its events
        chunks = completion_to_chunks(settled, usage=self.forward_usage)
        return await self._done([encoded(c) for c in chunks], True)

    async def _timed_out(self) -> Outcome:
        job = self.job
        if not self.watchdog.expired():  # aiohttp's own socket timeout, not our watchdog
            return await self._failed(
                ("timeout", "the connection timed out"),
                504,
                "timed out mid-stream",
                "upstream_timeout",
            )
        started = job.content_started
        limit = self.idle if started else self.first
        job.events.emit(
            ev.SILENT,
            f"{job.upstream.name} sent nothing for {limit:g} s "
            f"({'mid-stream' if started else 'before the first token'}).",
            phase="idle" if started else "first_token",
        )
        return await self._failed(
            ("silent", f"silent for {limit:g} s"),
            504,
            f"went silent for {limit:g} s mid-stream",
            "upstream_timeout",
            ", or raise idle_timeout for this upstream",
        )

    async def _failed(
        self, failure: tuple[str, str], status: int, what: str, code: str, advice: str = ""
    ) -> Outcome:
        """The attempt failed: retried while nothing reached the client, else ended with an
        error event saying what the upstream did (`what`)."""
        job = self.job
        if not job.relayed:
            return self.layer.on_failure(job, *failure)
        pool, choice = job.upstream.pool, job.choice
        if pool is not None and choice is not None:
            # Nothing can be resent, but the member failed all the same: until its next good
            # check, the conversation's next turn must not go back to it.
            pool.failed(choice.member.name, failure[0])
        message = (
            f"The upstream {job.upstream.name} {what}; the answer is incomplete. "
            f"Retry the request{advice}."
        )
        return await out.end_with_error(self.request, job, status, message, code)

    async def _too_large(self, err: EventTooLarge) -> Outcome:
        """The upstream's stream has no event ends in sight: a broken server, not a transient
        failure (a retry would read the same megabytes again), so it is never retried."""
        return await too_large(self.request, self.job, err)

    async def _end_with_upstream_error(self, err: ErrorEvent) -> web.StreamResponse:
        """The upstream reported an error after content reached the client: relay it, end."""
        job = self.job
        job.status = err.status
        error = parse_upstream_error(err.status, err.data)
        job.upstream_error = f"HTTP {err.status} mid-stream: {error.message}"
        client = job.response or await out.open_stream(self.request, job)
        await out.write(client, out.with_notices(job, frame(compact_error(error))))
        await out.end(client)
        return client


async def done(
    request: web.Request, job: Job, batch: list[bytes], carries: bool
) -> web.StreamResponse:
    """End a stream with `batch` (events for the client), `[DONE]` and the end of the body."""
    client = job.response or await out.open_stream(request, job)
    if carries and not job.relayed:
        job.relayed = True
        job.first_token_at = time.perf_counter()
    batch.append(DONE_EVENT)
    await out.end(client, out.with_notices(job, b"".join(batch)))
    job.status = 200
    return client


async def too_large(request: web.Request, job: Job, err: EventTooLarge) -> web.StreamResponse:
    """An event that never ends, on any stream: a 502 before content, an error event after."""
    message = (
        f"The upstream {job.upstream.name} sent more than {err.limit} bytes without ending "
        "an SSE event, so latchgate stopped reading it. Check that the server sends an event "
        "stream (events end with a blank line)."
    )
    job.upstream_error = f"stream: {err}"
    return await _broken(request, job, message, "upstream_bad_stream")


async def unwritable(request: web.Request, job: Job) -> web.StreamResponse:
    """An event latchgate changed and cannot write (`Unwritable`): like a broken stream, a 502
    before content and an error event after; not retried (the server nests it so every time)."""
    message = (
        f"The upstream {job.upstream.name} sent a stream event nested more than 254 levels "
        "deep, and latchgate, which had to change it (a tool call recovered, a chunk rebuilt), "
        "cannot write it again. Check the server's output: no chat chunk needs that depth."
    )
    job.upstream_error = "stream: an event nests JSON more than 254 levels deep"
    return await _broken(request, job, message, "upstream_bad_answer")


async def _broken(request: web.Request, job: Job, message: str, code: str) -> web.StreamResponse:
    """A stream the upstream broke, never retried: a 502 before content, an error event after."""
    if job.relayed:
        return await out.end_with_error(request, job, 502, message, code)
    return await out.give(request, job, Decision.give(502, error_body(502, message, code=code)))


def _named_error_status(data: bytes) -> int:
    """The HTTP status an `event: error` stands for: its error object's code, or 500."""
    chunk = loads(data)
    if not isinstance(chunk, dict):
        return 500
    # `event_status` where the data holds an error object, else the data is that object.
    return error_status(chunk.get("error", chunk), 500, keys=("code",))


def _log_internal_error(job: Job, exc: BaseException) -> None:
    """Log a bug of ours met while relaying, with the request it happened on."""
    logs.get_logger().error(
        "internal_error",
        request_id=job.events.request_id,
        upstream=job.upstream.name,
        error=type(exc).__name__,
        exc_info=exc,
    )
