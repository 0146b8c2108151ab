"""Tool emulation through a running latchgate: a server that refuses `tools` still gives the
client `tool_calls` (issue 19, BEHAVIOUR 2.3 rule 9 and section 10).

The scripted upstream refuses the first request with a real server's wording, then answers the
emulated request (no `tools`, the tools described in the system prompt, earlier calls and results
rewritten as text) with a call written in the fixed format. Read back with the real openai SDK,
whole and streamed one character per event, and through the Messages front.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from tests.conftest import Running
from tests.fakeupstream import FakeUpstream, Json, completion
from tests.http.test_healing import ask, messages_stream, sample
from tests.http.test_toolcalls import one_char_stream

MODEL = "fake-model"
REFUSALS = {
    "llama.cpp": (500, {"error": {"code": 500, "message": "tools param requires --jinja flag",
                                  "type": "server_error"}}),
    "ollama": (400, {"error": {"message": "registry.ollama.ai/library/gemma:2b does not support "
                               "tools", "type": "api_error", "param": None, "code": None}}),
    "vllm": (400, {"object": "error", "message": '"auto" tool choice requires '
                   "--enable-auto-tool-choice and --tool-call-parser to be set",
                   "type": "BadRequestError", "param": None, "code": 400}),
}
WRITTEN = '<tool_call>{"name": "read_file", "arguments": {"path": "src/main.py"}}</tool_call>'
HISTORY: Any = [
    {"role": "user", "content": "What is in README.md?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "README.md"}'}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": "# latchgate\nA proxy."},
    {"role": "user", "content": "And src/main.py?"},
]


def reply(stream: bool, text: str) -> Any:
    return one_char_stream(text) if stream else Json(completion(text))


@pytest.mark.parametrize("server", sorted(REFUSALS))
@pytest.mark.parametrize("how", ["whole", "manual"])
async def test_refused_tools_are_emulated_and_calls_come_back(
    server: str, how: str, fake: FakeUpstream, lg: Running
) -> None:
    status, body = REFUSALS[server]
    stream = how != "whole"
    fake.push(Json(body, status=status), reply(stream, WRITTEN), reply(stream, WRITTEN))
    api = lg.client()
    got, notices = await ask(api, how, messages=HISTORY)
    assert got == (None, [("read_file", {"path": "src/main.py"})], "tool_calls")
    refused, emulated = fake.bodies()[:2]
    assert "tools" in refused
    assert "tools" not in emulated and "tool_choice" not in emulated
    system = emulated["messages"][0]
    assert system["role"] == "system" and "<tool_call>" in system["content"]
    assert "read_file" in system["content"] and "get_weather" in system["content"]
    # No tool role and no null content left for a template without tools to choke on.
    roles = [m["role"] for m in emulated["messages"][1:]]
    assert "tool" not in roles
    assert all(m.get("content") is not None for m in emulated["messages"])
    history = json.dumps(emulated["messages"])
    assert "README.md" in history and "# latchgate" in history
    if how == "whole":
        assert any("described in the prompt" in n for n in notices)
    # Latched: the next request goes out emulated at once, in the same bytes.
    again, _ = await ask(api, how, messages=HISTORY)
    await api.close()
    assert again == got
    assert fake.bodies()[2] == emulated
    assert sample(lg, "latchgate_tools_emulated_total") == 2
    assert sample(lg, "latchgate_refusals_total", capability="native_tools") == 1


async def test_an_emulated_reply_in_prose_stays_prose(fake: FakeUpstream, lg: Running) -> None:
    status, body = REFUSALS["ollama"]
    fake.push(Json(body, status=status), Json(completion("It holds the entry point.")))
    api = lg.client()
    got, _ = await ask(api, "whole")
    await api.close()
    assert got == ("It holds the entry point.", [], "stop")


async def test_an_emulated_call_to_an_undeclared_tool_is_healed(
    fake: FakeUpstream, lg: Running
) -> None:
    status, body = REFUSALS["llama.cpp"]
    wrong = '<tool_call>{"name": "read_file", "arguments": {"file": "src/main.py"}}</tool_call>'
    fake.push(Json(body, status=status), Json(completion(wrong)), Json(completion(WRITTEN)))
    api = lg.client()
    got, _ = await ask(api, "whole")
    await api.close()
    assert got[1] == [("read_file", {"path": "src/main.py"})]
    heal = fake.bodies()[2]
    assert "tools" not in heal
    text = orjson.dumps(heal["messages"]).decode()
    assert "'path' is a required property" in text or '\\"path\\" is a required' in text


async def test_messages_front_over_an_emulated_model(fake: FakeUpstream, lg: Running) -> None:
    status, body = REFUSALS["ollama"]
    fake.push(Json(body, status=status), one_char_stream(WRITTEN))
    message = await messages_stream(lg)
    uses = [b for b in message.content if b.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == [("read_file", {"path": "src/main.py"})]
    assert "tools" not in fake.bodies()[1]


FOLLOW_UP = '{"name": "read_file", "arguments": {"path": "src/main.py"}}\n{"content": "print(1)"}'


@pytest.mark.parametrize("how", ["whole", "manual"])
async def test_an_emulated_reply_opening_with_a_call_line_is_a_call(
    how: str, fake: FakeUpstream, lg: Running
) -> None:
    # What small models do on follow-up turns: the call as a bare line, then an invented result.
    status, body = REFUSALS["llama.cpp"]
    fake.push(Json(body, status=status), reply(how != "whole", FOLLOW_UP))
    api = lg.client()
    got, _ = await ask(api, how, messages=HISTORY)
    await api.close()
    assert got == ('{"content": "print(1)"}', [("read_file", {"path": "src/main.py"})],
                   "tool_calls")
    assert len(fake.bodies()) == 2


@pytest.mark.parametrize("how", ["whole", "manual"])
async def test_without_emulation_a_call_line_before_text_stays_text(
    how: str, fake: FakeUpstream, lg: Running
) -> None:
    fake.push(reply(how != "whole", FOLLOW_UP))
    api = lg.client()
    got, _ = await ask(api, how, messages=HISTORY)
    await api.close()
    assert got == (FOLLOW_UP, [], "stop")


async def test_an_emulated_stream_that_opens_with_text_flows(
    fake: FakeUpstream, lg: Running
) -> None:
    status, body = REFUSALS["ollama"]
    fake.push(Json(body, status=status), one_char_stream("It prints 1."))
    api = lg.client()
    got, _ = await ask(api, "manual", messages=HISTORY)
    await api.close()
    assert got == ("It prints 1.", [], "stop")
