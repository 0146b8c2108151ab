"""A chat stream as Responses events: one output item at a time, in the order the SDKs parse.

`EventWriter` is fed the chat path's chunks (already recovered and repaired) and gives back the
bytes of the Responses events they become. The rules it keeps, each one a client's hard need:

- `response.created` and `response.in_progress` come first, with the first chunk (so a failure
  before any chunk is still an ordinary HTTP error the chat path can retry or latch);
- items are strictly sequential: `output_item.added`, its deltas, `output_item.done`, and only
  then the next item (Codex attaches every delta to "the open item" and builds its history from
  `output_item.done` alone); reasoning that follows text opens a new item;
- every event has a strictly increasing `sequence_number`, every item one id, used in its
  added, done and final forms;
- a call streams its argument deltas while it is the only one; calls to other indexes (parallel
  calls) are held and sent whole after it, as are calls to a `custom` tool, whose input is only
  known once the wrapper's arguments are complete, and the calls after a held one (the items
  keep the model's order);
- `response.completed` (or `response.incomplete`) carries the whole response, and nothing comes
  after it; a failure ends with `response.failed` and an `error` event the Python SDK raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.fronts.chatstream import ChatCall, QueuedWriter, assemble
from proxy.fronts.ids import new_id
from proxy.fronts.responses.output import (
    Context,
    call_item,
    message_item,
    reasoning_item,
    response_object,
    status_of,
    text_part,
    usage_of,
)


@dataclass(slots=True)
class _Text:
    """The open message or reasoning item."""

    kind: str  # "message" or "reasoning"
    id: str
    index: int  # its output_index
    text: list[str] = field(default_factory=list)
    logprobs: list[Any] = field(default_factory=list)
    pending: int = 0  # pieces of `text` not yet sent as a delta
    pending_logprobs: int = 0


@dataclass(slots=True)
class _Call(ChatCall):
    """A tool call being assembled from chat fragments, and its item once open."""

    item: dict[str, Any] | None = None  # its added item, once it is open
    index: int = -1  # its output_index, once open


_PLAIN = frozenset({"content", "role"})  # a delta with only these keys is just more text


class EventWriter(QueuedWriter):
    """Chat chunks in, Responses events out (as bytes on the wire)."""

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self.seq = 0
        self.output: list[dict[str, Any]] = []  # the items done, in order
        self.final: dict[str, Any] | None = None  # the response as completed (for the store)
        self._text: _Text | None = None
        self._calls: dict[int, _Call] = {}  # by chat index, in order of appearance
        self._live: _Call | None = None  # the call whose argument deltas go out as they come
        self._finish: object = None

    @property
    def completed(self) -> bool:
        return self.final is not None and self.final["status"] != "failed"

    # -- what the chat path writes --------------------------------------------------------

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        """The events one chat chunk becomes."""
        self.add(chunk)
        return self.take()

    def add_texts(self, texts: list[str]) -> bool:
        """More text for the open message, as `_choice` takes in a plain text chunk."""
        item = self._text
        if self.ended or item is None or item.kind != "message":
            return False
        for text in texts:
            if text:
                item.text.append(text)
                item.pending += 1
        return True

    def keepalive(self) -> bytes:
        """`response.in_progress` again: a real event (Codex's idle timer skips comments)."""
        if self.ended:
            return b""
        if not self.started:
            self._start()
        else:
            response = response_object(self.ctx, "in_progress", self.output, None)
            self._emit("response.in_progress", response=response)
        return self.take()

    def done(self) -> bytes:
        """The chat stream ended complete (`[DONE]`): close every item, then complete."""
        if self.ended:
            return b""
        self._start()
        status, incomplete = status_of(self._finish)
        self._close_all("incomplete" if incomplete else "completed")
        self.final = response_object(
            self.ctx, status, self.output, usage_of(self._usage), incomplete=incomplete
        )
        self._emit(f"response.{status}", response=self.final)
        self.ended = True
        return self.take()

    def failed(self, error: dict[str, Any]) -> bytes:
        """The chat stream ended with an error: `response.failed`, then the `error` event."""
        if self.ended:
            return b""
        self._start()
        self._close_text("incomplete")
        code = error.get("code") if isinstance(error.get("code"), str) else "server_error"
        message = error.get("message") if isinstance(error.get("message"), str) else "failed"
        failure = {"code": code, "message": message}
        self.final = response_object(
            self.ctx, "failed", self.output, usage_of(self._usage), error=failure
        )
        self._emit("response.failed", response=self.final)
        nested = {"type": error.get("type") or "server_error", "code": code,
                  "message": message, "param": error.get("param")}  # fmt: skip
        self._emit("error", code=code, message=message, param=error.get("param"), error=nested)
        self.ended = True
        return self.take()

    # -- one choice's delta -----------------------------------------------------------------

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        item = self._text
        if (
            item is not None
            and item.kind == "message"
            and type(delta) is dict
            and delta.keys() <= _PLAIN
            and choice.get("logprobs") is None
        ):
            # The common chunk, more text for the open message: taken in without the walk.
            content = delta.get("content")
            if content and type(content) is str:
                item.text.append(content)
                item.pending += 1
        elif type(delta) is dict:
            self._delta(choice, delta)
        if choice.get("finish_reason"):
            self._finish = choice["finish_reason"]

    def _delta(self, choice: dict[str, Any], delta: dict[str, Any]) -> None:
        """Any other delta: reasoning, text, call fragments, in that order."""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._text_delta("reasoning", reasoning, None)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text_delta("message", content, choice.get("logprobs"))
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for position, fragment in enumerate(calls):
                if isinstance(fragment, dict):
                    self._fragment(fragment, position)

    def _text_delta(self, kind: str, text: str, logprobs: object) -> None:
        item = self._text
        if item is None or item.kind != kind:
            self._close_text("completed")
            self._close_live()
            item = self._open_text(kind)
        item.text.append(text)
        item.pending += 1
        if logprobs is not None:
            tokens = logprobs.get("content") if isinstance(logprobs, dict) else None
            if isinstance(tokens, list) and tokens:
                item.logprobs.extend(tokens)
                item.pending_logprobs += len(tokens)

    def _flush(self) -> None:
        """The open item's text since its last delta, as one delta event."""
        item = self._text
        if item is None or not item.pending:
            return
        text = "".join(item.text[-item.pending :])
        item.pending = 0
        if item.kind == "reasoning":
            self._emit("response.reasoning_text.delta", item_id=item.id, output_index=item.index,
                       content_index=0, delta=text)  # fmt: skip
            return
        tokens = item.logprobs[len(item.logprobs) - item.pending_logprobs :]
        item.pending_logprobs = 0
        self._emit("response.output_text.delta", item_id=item.id, output_index=item.index,
                   content_index=0, delta=text, logprobs=tokens)  # fmt: skip

    def _open_text(self, kind: str) -> _Text:
        prefix = "rs" if kind == "reasoning" else "msg"
        item = _Text(kind, new_id(prefix), len(self.output))
        self._text = item
        if kind == "reasoning":
            added: dict[str, Any] = {"id": item.id, "type": "reasoning", "status": "in_progress",
                                     "summary": [], "content": []}  # fmt: skip
            part: dict[str, Any] = {"type": "reasoning_text", "text": ""}
        else:
            added = message_item(item.id, [], "in_progress")
            part = text_part("")
        self._emit("response.output_item.added", output_index=item.index, item=added)
        self._emit("response.content_part.added", item_id=item.id, output_index=item.index,
                   content_index=0, part=part)  # fmt: skip
        return item

    def _close_text(self, status: str) -> None:
        item = self._text
        if item is None:
            return
        self._flush()
        self._text = None
        text = "".join(item.text)
        ids = {"item_id": item.id, "output_index": item.index, "content_index": 0}
        done: dict[str, Any]
        if item.kind == "reasoning":
            self._emit("response.reasoning_text.done", **ids, text=text)
            self._emit("response.content_part.done", **ids,
                       part={"type": "reasoning_text", "text": text})  # fmt: skip
            done = reasoning_item(self.ctx, item.id, text, status)
        else:
            self._emit("response.output_text.done", **ids, text=text, logprobs=item.logprobs)
            part = text_part(text, item.logprobs)
            self._emit("response.content_part.done", **ids, part=part)
            done = message_item(item.id, [part], status)
        self._emit("response.output_item.done", output_index=item.index, item=done)
        self.output.append(done)

    # -- calls ---------------------------------------------------------------------------------

    def _fragment(self, fragment: dict[str, Any], position: int) -> None:
        call, piece = assemble(self._calls, _Call, fragment, position)
        if call is self._live:
            if piece:
                self._emit("response.function_call_arguments.delta", item_id=self._item_id(call),
                           output_index=call.index, delta=piece)  # fmt: skip
        elif (
            self._live is None
            and call.item is None
            and call.name
            and self._streams(call)
            and self._next_out(call)
        ):
            self._close_text("completed")
            self._open_call(call)
            self._live = call
            if call.arguments:
                self._emit("response.function_call_arguments.delta", item_id=self._item_id(call),
                           output_index=call.index, delta="".join(call.arguments))  # fmt: skip

    def _next_out(self, call: _Call) -> bool:
        """Whether no call before `call` waits to go out (a custom one, held whole): the items
        keep the model's order, which is the order Codex runs them in."""
        for other in self._calls.values():
            if other is call:
                return True
            if other.item is None and other.name:
                return False
        return True

    def _streams(self, call: _Call) -> bool:
        """Function calls stream their arguments; custom and shell calls go whole at the end."""
        return self.ctx.tools.origin(call.name).kind == "function"

    @staticmethod
    def _item_id(call: _Call) -> str:
        assert call.item is not None
        return str(call.item["id"])

    def _open_call(self, call: _Call) -> None:
        call.id = self.ctx.call_id(call.id)
        call.index = len(self.output)
        call.item = call_item(self.ctx, call.id, call.name, "", "in_progress")
        self._emit("response.output_item.added", output_index=call.index, item=call.item)

    def _close_live(self) -> None:
        call = self._live
        if call is not None:
            self._live = None
            self._close_call(call, "completed")

    def _close_call(self, call: _Call, status: str) -> None:
        assert call.item is not None
        arguments = "".join(call.arguments)
        done = call_item(self.ctx, call.id, call.name, arguments, status)
        done["id"] = call.item["id"]
        ids = {"item_id": done["id"], "output_index": call.index}
        if done["type"] == "function_call":
            self._emit("response.function_call_arguments.done", **ids, name=done["name"],
                       arguments=arguments)  # fmt: skip
        elif done["type"] == "custom_tool_call":
            self._emit("response.custom_tool_call_input.delta", **ids, delta=done["input"])
            self._emit("response.custom_tool_call_input.done", **ids, input=done["input"])
        self._emit("response.output_item.done", output_index=call.index, item=done)
        self.output.append(done)
        call.item = done

    def _close_all(self, status: str) -> None:
        """At the end: the open item, the live call, then the held calls, one by one."""
        pending = [c for c in self._calls.values() if c.item is None and c.name]
        last = pending[-1] if pending else self._live
        self._close_text(status if last is None else "completed")
        live = self._live
        self._live = None
        if live is not None:
            self._close_call(live, status if live is last else "completed")
        for call in pending:
            self._open_call(call)
            if call.arguments and self._streams(call):
                self._emit("response.function_call_arguments.delta", item_id=self._item_id(call),
                           output_index=call.index, delta="".join(call.arguments))  # fmt: skip
            self._close_call(call, status if call is last else "completed")

    # -- framing -------------------------------------------------------------------------------

    def _start(self) -> None:
        if self.started:
            return
        self.started = True
        # One encoding of the response for both events (with a client's tools it is large).
        response = orjson.Fragment(orjson.dumps(response_object(self.ctx, "in_progress", [], None)))
        self._emit("response.created", response=response)
        self._emit("response.in_progress", response=response)

    def _emit(self, kind: str, **fields: Any) -> None:
        event = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        # Its pieces, joined once by `take`: a Response event holds the client's tools, and
        # each `+` would copy them again.
        self._out += (b"event: ", kind.encode(), b"\ndata: ", orjson.dumps(event), b"\n\n")
