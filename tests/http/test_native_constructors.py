"""No request makes its objects through an `__init__` that `@dataclass` generated in a compiled
module.

mypyc compiles the methods a class's source holds, but runs the ones `@dataclass` generates
interpreted: 175 to 340 ns an object against 23 (proxy/compiled.py). So the dataclasses made on
every request write their own `__init__`. This sends the requests the benchmark sends (whole and
streamed; a text answer, a native call, a call written as text) through the real server and
records every generated `__init__` that ran on the second of two alike (their code is compiled
from a string, so their file is `<string>`; a written one's is its source), on either build.
What is made once a tool set, on the first, is not counted.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import httpx
import pytest

from proxy import compiled
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Reply, Stream, chunk, completion, text_stream

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
TEXT_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
NATIVE = {"id": "call_1", "type": "function", "function": {"name": "get_weather"}}


def _native_stream() -> Stream:
    events: list[Any] = [chunk({"role": "assistant", "content": None})]
    events.append(chunk({"tool_calls": [{"index": 0, **NATIVE, "function": {
        "name": "get_weather", "arguments": ""}}]}))  # fmt: skip
    for piece in ('{"ci', 'ty": ', '"Paris"}'):
        events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    events += [chunk({}, "tool_calls"), "[DONE]"]
    return Stream(events)


def _native_whole() -> Json:
    call = {**NATIVE, "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    return Json(completion(None, tool_calls=[call], finish="tool_calls"))  # type: ignore[arg-type]


ANSWERS: dict[str, Reply] = {
    "whole/text": Json(completion("It is sunny in Paris today.")),
    "whole/call": _native_whole(),
    "whole/textcall": Json(completion(TEXT_CALL)),
    "stream/text": text_stream("It is ", "sunny in ", "Paris today."),
    "stream/call": _native_stream(),
    "stream/textcall": text_stream(TEXT_CALL[:20], TEXT_CALL[20:50], TEXT_CALL[50:]),
}


@contextmanager
def generated_inits() -> Iterator[set[str]]:
    """The classes of compiled modules whose generated `__init__` ran meanwhile."""
    seen: set[str] = set()

    def hook(frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event == "call" and code.co_name == "__init__" and code.co_filename == "<string>":
            cls = type(frame.f_locals.get("self"))
            if cls.__module__ in compiled.MODULES:
                seen.add(f"{cls.__module__}.{cls.__qualname__}")

    sys.setprofile(hook)
    try:
        yield seen
    finally:
        sys.setprofile(None)


async def _send(lg: Running, stream: bool) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}]}
    async with httpx.AsyncClient() as client:
        return await client.post(
            lg.base_url + "/chat/completions", json={**body, "tools": TOOLS, "stream": stream}
        )


@pytest.mark.parametrize("case", sorted(ANSWERS))
async def test_no_generated_init_runs_on_the_request_path(
    start_proxy: StartProxy, fake: FakeUpstream, case: str
) -> None:
    lg = await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic"})
    fake.push(ANSWERS[case], ANSWERS[case])
    # The first request makes what is kept per tool set (marker tables, patterns): not counted.
    assert (await _send(lg, case.startswith("stream/"))).status_code == 200
    with generated_inits() as seen:
        answer = await _send(lg, case.startswith("stream/"))
        text = answer.text  # a stream is read whole inside the hook
    assert answer.status_code == 200
    if case.endswith("call"):
        assert "get_weather" in text and '\\"city\\":\\"Paris\\"' in text.replace(" ", "")
    assert seen == set()


def test_the_hook_sees_a_generated_init() -> None:
    from dataclasses import dataclass

    @dataclass
    class Generated:
        x: int

    Generated.__module__ = compiled.MODULES[0]
    with generated_inits() as seen:
        Generated(1)
    assert seen == {f"{compiled.MODULES[0]}.{Generated.__qualname__}"}
