"""Kimi K3's empty response section and K2's calls without end markers, and harmony headers
with spaces or after a call (proxy/toolcalls/formats/kimi.py, harmony.py): what the corpus
cannot say, how soon a stream relays the words after a K3 response opener, and that a header's
parts are taken only where the template writes them."""

from __future__ import annotations

from typing import Any

from proxy.toolcalls.stream import StreamToolProcessor
from tests.toolcall_case import TOOLS
from tests.unit.toolcalls.test_stream import chunk
from tests.unit.toolcalls.whole_reply import run, stays_text

K3_OPEN = "<|open|>response<|sep|>"


def _relayed(pieces: list[str]) -> list[str]:
    """The content each piece made the stream relay at once (before the choice finishes)."""
    proc = StreamToolProcessor(TOOLS)
    proc.feed(chunk({"role": "assistant", "content": ""}))
    out: list[str] = []
    for piece in pieces:
        sent: list[dict[str, Any]] = proc.feed(chunk({"content": piece}))
        out.append("".join(c["choices"][0]["delta"].get("content") or "" for c in sent))
    return out


def test_a_k3_response_opener_is_held_only_until_the_next_characters_decide() -> None:
    # It may begin the empty section before the tools (a marker): held while it may...
    assert _relayed([K3_OPEN, "Hello", " there"]) == ["", K3_OPEN + "Hello", " there"]
    # ...and a closing tag after it is still the empty section's.
    assert _relayed([K3_OPEN, "<|close|>resp"]) == ["", ""]


def test_a_k3_reply_with_no_call_keeps_its_response_wrapper() -> None:
    stays_text(K3_OPEN + "Use the tools tag.<|close|>response<|sep|><|close|>message<|sep|>")


def test_a_k2_call_without_end_marker_before_prose_leaves_the_prose() -> None:
    text = ('<|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{"tz": "UTC"}'
            " then I will answer.")
    assert run(text) == ("then I will answer.", [("get_time", '{"tz":"UTC"}')], "tool_calls")


def test_a_k2_call_whose_value_never_closes_stays_text() -> None:
    stays_text('<|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{"tz": "UTC"')


def test_the_harmony_role_word_alone_is_prose() -> None:
    text = 'I am the assistant <|channel|>commentary to=functions.get_time<|message|>{"tz": "UTC"}'
    assert run(text) == ("I am the assistant", [("get_time", '{"tz":"UTC"}')], "tool_calls")
