"""The summary side request (`proxy.agent.rescue.summary`): messages rendered as a transcript,
split into passes that fit, the request body, and the answer read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.agent.rescue.summary import (
    CONTINUE,
    FIRST,
    INSTRUCTIONS,
    MAX_PASSES,
    MIN_CLIP,
    passes,
    read,
    render,
    request,
)


def user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text}


def calling(content: Any, *calls: tuple[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": args}}
            for n, (name, args) in enumerate(calls)
        ],
    }


def answer(message: Any, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }


def test_render_user_and_assistant() -> None:
    assert render(user("Fix the bug."), 4000) == "user: Fix the bug."
    assert render({"role": "assistant", "content": "Done."}, 4000) == "assistant: Done."
    parts = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert render(user(parts), 4000) == "user: one\ntwo"
    assert render({"content": "who?"}, 4000) == "unknown: who?"


def test_render_tool_calls() -> None:
    message = calling(
        "Let me look.",
        ("read_file", '{"path":"a.py"}'),
        ("grep", {"pattern": "def ", "path": "."}),
    )
    assert render(message, 4000) == (
        "assistant: Let me look.\n"
        '[called read_file({"path":"a.py"})]\n'
        '[called grep({"pattern":"def ","path":"."})]'
    )
    assert render(calling(None, ("ls", "{}")), 4000) == "assistant: [called ls({})]"
    assert render(calling("", ("ls", "{}")), 4000) == "assistant: [called ls({})]"
    # calls are an assistant's: the same field on a user message is not rendered
    assert render({**calling("hi", ("ls", "{}")), "role": "user"}, 4000) == "user: hi"


def test_render_tool_results_name_the_tool() -> None:
    result = {"role": "tool", "tool_call_id": "c0", "name": "read_file", "content": "x = 1"}
    assert render(result, 4000) == "tool result (read_file): x = 1"
    assert render({**result, "name": ""}, 4000) == "tool: x = 1"
    assert render({"role": "tool", "tool_call_id": "c0", "content": "x = 1"}, 4000) == "tool: x = 1"
    # only a tool message's name labels it
    assert render({"role": "user", "name": "alice", "content": "hi"}, 4000) == "user: hi"


def test_render_what_has_no_text() -> None:
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    assert render(user(image), 4000) == "user: [content that is not text]"
    assert render(user(""), 4000) == ""
    assert render(user(None), 4000) == ""
    assert render({"role": "assistant", "content": None}, 4000) == ""
    assert render("user: hi", 4000) == ""
    assert render(None, 4000) == ""


def test_render_clips_long_texts_to_head_and_tail() -> None:
    text = "H" * 600 + "M" * 3000 + "T" * 400
    # 900 kept: two thirds from the head, the rest from the tail; 4,000 - 900 omitted
    assert render(user(text), 900) == (
        "user: " + "H" * 600 + "\n[... 3,100 chars omitted ...]\n" + "T" * 300
    )
    assert render(user(text), 4000) == "user: " + text  # exactly at the limit: whole
    assert render(user(text), 3999) == (
        "user: " + text[:2666] + "\n[... 1 chars omitted ...]\n" + text[-1333:]
    )


def test_render_clips_each_call_on_its_own() -> None:
    args = '{"content":"' + "x" * 1000 + '"}'
    rendered = render(calling("ok", ("write_file", args)), 300)
    line = f"[called write_file({args})]"
    assert rendered == (
        "assistant: ok\n"
        + line[:200]
        + f"\n[... {len(line) - 300:,} chars omitted ...]\n"
        + line[-100:]
    )


def test_passes_join_entries_up_to_the_budget() -> None:
    messages = [user("x" * 98) for _ in range(5)]
    entry = "user: " + "x" * 98
    assert len(entry) == 104
    assert passes(messages, range(5), 300) == [
        f"{entry}\n\n{entry}",
        f"{entry}\n\n{entry}",
        entry,
    ]
    # a piece may be exactly the budget: 3 * 104 + 2 * 2
    assert passes(messages, range(5), 316) == [
        f"{entry}\n\n{entry}\n\n{entry}",
        f"{entry}\n\n{entry}",
    ]
    assert passes(messages, range(5), 315)[0] == f"{entry}\n\n{entry}"


def test_passes_take_the_given_messages_in_the_given_order() -> None:
    messages = [user("zero"), user("one"), {"role": "assistant", "content": None}, user("three")]
    assert passes(messages, [3, 1, 2], 1000) == ["user: three\n\nuser: one"]
    assert passes(messages, [], 1000) == []
    assert passes(messages, [2], 1000) == []


def test_passes_clip_harder_when_an_entry_is_too_long() -> None:
    result = {"role": "tool", "name": "read_file", "content": "y" * 10_000}
    messages = [user("Read it."), result]
    pieces = passes(messages, [0, 1], 2000)
    # 4000 and 2000 leave the entry longer than 2000 characters; 1000 does not
    assert pieces == [f"user: Read it.\n\n{render(result, 1000)}"]
    assert all(len(piece) <= 2000 for piece in pieces)
    assert len(render(result, 2000)) > 2000


def test_passes_clip_harder_when_there_would_be_too_many_passes() -> None:
    messages = [user("z" * 5000) for _ in range(MAX_PASSES + 1)]
    pieces = passes(messages, range(MAX_PASSES + 1), 5100)
    # at 4000 each entry fills a piece; at 2000 two share one: 4 pieces
    entry = render(messages[0], 2000)
    assert pieces == [f"{entry}\n\n{entry}"] * 3 + [entry]


def test_passes_none_when_even_the_shortest_clip_is_too_long() -> None:
    big = {"role": "tool", "name": "read_file", "content": "y" * 10_000}
    shortest = render(big, MIN_CLIP)
    assert passes([big], [0], len(shortest)) == [shortest]
    assert passes([big], [0], len(shortest) - 1) == []


def test_passes_none_when_more_than_max_passes_pieces_are_needed() -> None:
    messages = [user("x" * 98) for _ in range(MAX_PASSES + 1)]  # 104 characters each
    assert passes(messages, range(MAX_PASSES), 200) == ["user: " + "x" * 98] * MAX_PASSES
    assert passes(messages, range(MAX_PASSES + 1), 200) == []
    assert MAX_PASSES == 6


def test_request_of_a_first_pass() -> None:
    body = request("qwen3-8b", "user: hi", None, 512)
    assert body == {
        "model": "qwen3-8b",
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": FIRST.format(transcript="user: hi")},
        ],
        "max_tokens": 512,
        "stream": False,
    }
    assert body["messages"][1]["content"].endswith("\n\nuser: hi")
    assert "tools" not in body and "tool_choice" not in body
    assert (
        request("m", "user: hi", "", 64)["messages"][1]["content"] == body["messages"][1]["content"]
    )


def test_request_continuing_an_earlier_summary() -> None:
    body = request("m", "user: more", "- did A", 256)
    prompt = body["messages"][1]["content"]
    assert prompt == CONTINUE.format(earlier="- did A", transcript="user: more")
    assert prompt.startswith("Notes so far, on the conversation before this part:\n- did A\n\n")
    assert prompt.endswith("\n\nuser: more")
    assert (body["max_tokens"], body["stream"]) == (256, False)
    assert body["messages"][0] == {"role": "system", "content": INSTRUCTIONS}
    assert set(body) == {"model", "messages", "max_tokens", "stream"}


def test_read_the_summary() -> None:
    assert read(answer({"role": "assistant", "content": "  - did A\n- did B\n"})) == (
        "- did A\n- did B"
    )
    thought = "<think>\nThe user wants notes.\n</think>\n\n- did A"
    assert read(answer({"role": "assistant", "content": thought})) == "- did A"
    twice = "<think>a</think>- did A <think>b</think>and B"
    assert read(answer({"role": "assistant", "content": twice})) == "- did A and B"
    # cut off after it said something: what it said is used
    assert read(answer({"role": "assistant", "content": "- did A"}, "length")) == "- did A"


@pytest.mark.parametrize(
    "body",
    [
        answer({"role": "assistant", "content": ""}),
        answer({"role": "assistant", "content": "  \n"}),
        answer({"role": "assistant", "content": None}),
        answer({"role": "assistant"}),
        answer({"role": "assistant", "content": None, "reasoning_content": "Let me think."}),
        answer({"role": "assistant", "content": "<think>Let me think.</think>\n"}),
        answer({"role": "assistant", "content": [{"type": "text", "text": "- did A"}]}),
        answer(None),
        answer("- did A"),
        {"choices": []},
        {"choices": ["- did A"]},
        {"choices": {"message": {"content": "- did A"}}},
        {"object": "chat.completion"},
        {"error": {"message": "boom"}},
        None,
        "- did A",
    ],
)
def test_read_nothing_worth_using(body: object) -> None:
    assert read(body) is None


def test_read_a_reply_cut_off_while_thinking() -> None:
    cut_off = answer({"role": "assistant", "content": "<think>\nThe user wants"}, "length")
    assert read(cut_off) is None


def test_render_writes_object_arguments_at_any_depth() -> None:
    # Arguments sent as an object 300 levels deep: orjson writes 254 (compacting was a 500).
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    rendered = render(calling(None, ("ls", {"a": deep})), 100_000)
    written = json.dumps({"a": deep}, separators=(",", ":"))
    assert rendered == f"assistant: [called ls({written})]"
