"""A chat stream as Anthropic Messages events, one content block at a time.

`MessageWriter` is the Messages front's `proxy.fronts.chatstream.Writer`: fed the chat path's
chunks (calls already recovered and repaired), it writes `message_start` exactly once, then per
block `content_block_start`, its deltas (`thinking_delta`, `text_delta`, `input_json_delta`) and
`content_block_stop`, strictly one block after another (thinking in its own block before the
text: the SDK refuses a thinking delta in a text block), then `message_delta` with the stop
reason and usage, and `message_stop`. A failure ends the stream with `event: error`, which the
Anthropic SDK raises. Text that arrives in one write goes out as one delta, as on the
Responses front.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.fronts.chatstream import ChatCall, QueuedWriter, assemble
from proxy.fronts.messages.errors import overflow_message
from proxy.fronts.messages.output import (
    Context,
    matched_stop,
    message_object,
    stop_of,
    tool_input,
    usage_of,
)

_ERROR_TYPES = {
    "invalid_request_error": "invalid_request_error",
    "rate_limit_error": "rate_limit_error",
    "authentication_error": "authentication_error",
    "permission_error": "permission_error",
    "not_found_error": "not_found_error",
    "service_unavailable": "overloaded_error",
}


_PLAIN = frozenset({"content", "role"})  # a delta with only these keys is just more text


@dataclass(slots=True)
class _Block:
    kind: str  # "thinking", "text" or "tool_use"
    index: int
    pending: list[str] = field(default_factory=list)  # text not yet sent as a delta
    text: list[str] = field(default_factory=list)
    call: _Call | None = None


@dataclass(slots=True)
class _Call(ChatCall):
    opened: bool = False  # its block has started


class MessageWriter(QueuedWriter):
    """Chat chunks in, Messages events out (as bytes on the wire)."""

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self.content: list[dict[str, Any]] = []  # the blocks done, in order
        self.final: dict[str, Any] | None = None
        self._block: _Block | None = None
        self._calls: dict[int, _Call] = {}
        self._finish: object = None
        self._sequence: str | None = None  # the stop sequence that ended it, when known
        self._failed = False

    @property
    def completed(self) -> bool:
        return self.ended and not self._failed

    # -- the Writer protocol -----------------------------------------------------------------

    def done(self) -> bytes:
        if self.ended:
            return b""
        self._start()
        self._close()
        for call in self._calls.values():
            if not call.opened and call.name:
                self._open_call(call)
                self._close()
        stop = stop_of(self._finish, self.content)
        if self._sequence is not None:
            stop = "stop_sequence"
        usage = usage_of(self._usage)
        self._emit("message_delta", delta={"stop_reason": stop, "stop_sequence": self._sequence},
                   usage=usage)  # fmt: skip
        self._emit("message_stop")
        self.final = message_object(self.ctx, self.content, stop, usage, self._sequence)
        self.ended = True
        return self.take()

    def failed(self, error: dict[str, Any]) -> bytes:
        if self.ended:
            return b""
        self._start()
        self._flush()
        message = error.get("message") if isinstance(error.get("message"), str) else "failed"
        kind = _ERROR_TYPES.get(str(error.get("type")), "api_error")
        if error.get("code") == "context_length_exceeded":
            kind, message = "invalid_request_error", overflow_message(str(message))
        elif error.get("code") == "proxy_shutting_down":
            kind = "overloaded_error"
        self._emit("error", error={"type": kind, "message": message})
        self.ended = self._failed = True
        return self.take()

    def add_texts(self, texts: list[str]) -> bool:
        """More text for the open text block, as `_choice` takes in a plain text chunk."""
        block = self._block
        if self.ended or block is None or block.kind != "text":
            return False
        for text in texts:
            if text:
                block.pending.append(text)
                block.text.append(text)
        return True

    def keepalive(self) -> bytes:
        """`ping`, after `message_start` (the SDK wants that first), as Anthropic's API does."""
        if self.ended:
            return b""
        self._start()
        self._emit("ping")
        return self.take()

    # -- deltas ------------------------------------------------------------------------------

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        block = self._block
        if (
            block is not None
            and block.kind == "text"
            and type(delta) is dict
            and (delta.keys() <= _PLAIN)
        ):
            # The common chunk, more text for the open text block: taken in without the walk.
            content = delta.get("content")
            if content and type(content) is str:
                block.pending.append(content)
                block.text.append(content)
        elif type(delta) is dict:
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                self._text("thinking", reasoning)
            content = delta.get("content")
            if content and isinstance(content, str):
                self._text("text", content)
            calls = delta.get("tool_calls")
            if isinstance(calls, list):
                for position, fragment in enumerate(calls):
                    if isinstance(fragment, dict):
                        self._fragment(fragment, position)
        if choice.get("finish_reason"):
            self._finish = choice["finish_reason"]
            self._sequence = matched_stop(self.ctx, choice)

    def _text(self, kind: str, text: str) -> None:
        block = self._block
        if block is None or block.kind != kind:
            self._close()
            block = self._open(kind, {"type": kind, kind: ""} | (
                {"signature": ""} if kind == "thinking" else {}))  # fmt: skip
        block.pending.append(text)
        block.text.append(text)

    def _fragment(self, fragment: dict[str, Any], position: int) -> None:
        call, piece = assemble(self._calls, _Call, fragment, position)
        block = self._block
        if piece and block is not None and block.call is call:
            block.pending.append(piece)
        if not call.opened and call.name and (self._block is None or self._block.call is None):
            # One block at a time: a call opens when no other call is open (a parallel call's
            # fragments wait for the end, then go whole).
            self._close()
            self._open_call(call)

    def _open_call(self, call: _Call) -> None:
        call.opened = True
        call.id = self.ctx.tool_id(call.id)
        block = self._open("tool_use", {"type": "tool_use", "id": call.id, "name": call.name,
                                        "input": {}})  # fmt: skip
        block.call = call
        block.pending.extend(call.arguments)

    # -- blocks ------------------------------------------------------------------------------

    def _open(self, kind: str, start: dict[str, Any]) -> _Block:
        block = _Block(kind, len(self.content))
        self._block = block
        self._emit("content_block_start", index=block.index, content_block=start)
        return block

    def _flush(self) -> None:
        block = self._block
        if block is None or not block.pending:
            return
        piece = "".join(block.pending)
        block.pending.clear()
        if block.kind == "tool_use":
            delta: dict[str, Any] = {"type": "input_json_delta", "partial_json": piece}
        elif block.kind == "thinking":
            delta = {"type": "thinking_delta", "thinking": piece}
        else:
            delta = {"type": "text_delta", "text": piece}
        self._emit("content_block_delta", index=block.index, delta=delta)

    def _close(self) -> None:
        block = self._block
        if block is None:
            return
        self._flush()
        self._block = None
        if block.kind == "thinking":
            # The SDK's thinking blocks carry a signature; a local model's has none to give.
            self._emit("content_block_delta", index=block.index,
                       delta={"type": "signature_delta", "signature": ""})  # fmt: skip
            done: dict[str, Any] = {"type": "thinking", "thinking": "".join(block.text),
                                    "signature": ""}  # fmt: skip
        elif block.call is not None:
            call = block.call
            done = {"type": "tool_use", "id": call.id, "name": call.name,
                    "input": tool_input("".join(call.arguments))}  # fmt: skip
        else:
            done = {"type": "text", "text": "".join(block.text)}
        self._emit("content_block_stop", index=block.index)
        self.content.append(done)

    # -- framing -----------------------------------------------------------------------------

    def _start(self) -> None:
        if self.started:
            return
        self.started = True
        message = message_object(self.ctx, [], None, {"input_tokens": 0, "output_tokens": 0})
        self._emit("message_start", message=message)

    def _emit(self, kind: str, **fields: Any) -> None:
        data = orjson.dumps({"type": kind, **fields})
        self._out += (b"event: ", kind.encode(), b"\ndata: ", data, b"\n\n")  # joined by `take`
