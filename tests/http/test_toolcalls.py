"""Tool-call recovery and argument repair through the real HTTP path (BEHAVIOUR.md 4.1-4.4).

The pure modules are tested on their own in tests/unit/toolcalls/ (test_recovery.py,
test_stream.py); here the same corpus goes through a running latchgate in front of the scripted
fake upstream and is read back with the real openai SDK, whole and streamed (one character per SSE
event, and random content pieces written to the socket in 7-byte TCP pieces). What the agent sees
must be the corpus expectation: calls with ids `call_recovered_N`, names, arguments; the remaining
content; the finish reason. Also: the notice (header on whole replies, SSE comment on streams),
native calls with almost-JSON arguments repaired, ordinary text not batched by the hold-back,
recovery switched off, and the two counters.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Stream, chunk, completion, text_stream
from tests.toolcall_case import TOOLS as CORPUS_TOOLS
from tests.toolcall_corpus import CASES, FORMATS, TRUNCATED, TRUNCATED_RAW_ARGS, Case

TOOLS: Any = CORPUS_TOOLS
MSG: Any = [{"role": "user", "content": "What is the weather in Paris?"}]
MODEL = "fake-model"
# (content, [(id, name, arguments-as-parsed-JSON-or-raw-text)], finish_reason)
Result = tuple[str | None, list[tuple[str, str, Any]], str | None]

_BY_NAME = {c.name: c for c in CASES}
_FORMAT_CASES = [
    # One case per format: with leading prose where the format allows it, else two calls.
    _BY_NAME[f"{label}_prose"] if prose_ok else _BY_NAME[f"{label}_two"]
    for label, _, _, prose_ok in FORMATS
]
_EXTRA_FORMATS = ["lmstudio1979_lfm_pythonic", "lmstudio_tool_request", "function_tag_json_35129"]
_TRAPS = [
    "literal_close_tag_in_string",
    "same_tool_back_to_back_nothing",
    "same_tool_back_to_back_semicolon",
    "same_tool_back_to_back_newline_bare",
    "hermes_think",
    "qwen3_coder_think",
    "qwen_literal_close_parameter_in_code",
    "python_literals",
    "prose_mentions_brace_then_call",
    "hermes5867_bare_ollama",  # multi-byte text: 7-byte TCP pieces cut UTF-8 sequences
]
# End-of-turn tokens after a call, and prose before one fenced call (issue 13, item 24).
_END_OF_TURN = [
    "llama_builtin_call_eom",
    "llama3_python_tag_json_eom",
    "llama3_bare_json_eot",
    "hermes_text_after_then_im_end",
    "ollama13519_prose_then_fenced_parameters",
    "prose_fenced_call_eot",
]
NEGATIVES = [c for c in CASES if c.format is None]
# The first case of every other label (the families of tests/toolcall_families/), so each format
# goes through the proxy once, whole and streamed.
_FIRST_OF_LABEL: dict[str, Case] = {}
for _case in CASES:
    if _case.format:
        _FIRST_OF_LABEL.setdefault(_case.format, _case)
_COVERED = {c.format for c in _FORMAT_CASES}
_FAMILY_CASES = [c for label, c in _FIRST_OF_LABEL.items() if label not in _COVERED]
SUBSET = [
    *_FORMAT_CASES,
    *_FAMILY_CASES,
    *(_BY_NAME[n] for n in _EXTRA_FORMATS + _TRAPS + _END_OF_TURN),
    *NEGATIVES,
]


def _ids(case: Case) -> str:
    return case.name


def tools_of(case: Case, *, strict: bool = False) -> Any:
    """The case's tools; `strict` for the SDK stream helper, which only accepts strict tools."""
    if not strict:
        return list(case.tools)
    return [{**t, "function": {**t["function"], "strict": True}} for t in case.tools]


def expected(case: Case) -> Result:
    """What the agent must see for a corpus case (ids, names, parsed arguments)."""
    if case.format is None:
        return case.text, [], "stop"
    calls = [(f"call_recovered_{k}", n, a) for k, (n, a) in enumerate(case.calls)]
    return case.content, calls, "tool_calls"


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments  # unparseable (truncated): compared as the raw text


def from_message(message: Any, finish: str | None) -> Result:
    calls = [
        (c.id, c.function.name, _parsed(c.function.arguments)) for c in message.tool_calls or []
    ]
    # A stream's role chunk carries content "": a reply that is all calls reads "" there.
    return message.content or None, calls, finish


def accumulate(chunks: list[Any]) -> Result:
    """Manual delta accumulation, the way an agent without the SDK helper does it."""
    content: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish: str | None = None
    for ch in chunks:
        for choice in ch.choices:
            delta = choice.delta
            if delta.content:
                content.append(delta.content)
            for frag in delta.tool_calls or []:
                call = calls.setdefault(frag.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = frag.id or call["id"]
                if frag.function is not None:
                    call["name"] += frag.function.name or ""
                    call["arguments"] += frag.function.arguments or ""
            finish = choice.finish_reason or finish
    got = [(c["id"], c["name"], _parsed(c["arguments"])) for _, c in sorted(calls.items())]
    return "".join(content) or None, got, finish


def one_char_stream(text: str, finish: str = "stop", **kw: Any) -> Stream:
    return text_stream(*text, finish=finish, **kw)


def random_pieces(text: str, seed: int) -> list[str]:
    rnd = random.Random(seed)
    pieces, i = [], 0
    while i < len(text):
        k = rnd.randint(1, 9)
        pieces.append(text[i : i + k])
        i += k
    return pieces


async def whole(api: Any, tools: Any) -> tuple[Result, list[str]]:
    raw = await api.chat.completions.with_raw_response.create(
        model=MODEL, messages=MSG, tools=tools
    )
    completion_ = raw.parse()
    choice = completion_.choices[0]
    return from_message(choice.message, choice.finish_reason), raw.headers.get_list(
        "x-latchgate-notice"
    )


async def streamed_helper(api: Any, tools: Any) -> Result:
    """Streamed through `client.chat.completions.stream(...)`, read with get_final_completion."""
    async with api.chat.completions.stream(model=MODEL, messages=MSG, tools=tools) as stream:
        final = await stream.get_final_completion()
    choice = final.choices[0]
    return from_message(choice.message, choice.finish_reason)


async def streamed_manual(api: Any, tools: Any) -> Result:
    stream = await api.chat.completions.create(model=MODEL, messages=MSG, tools=tools, stream=True)
    return accumulate([ch async for ch in stream])


@pytest.fixture
async def lg(fake: FakeUpstream, start_proxy: StartProxy) -> Running:
    """latchgate in front of the fake with healing off: the corpus's negatives include calls to
    undeclared tools, which healing would send back to the model (tests/http/test_healing.py);
    here they must come back as the text recovery leaves them."""
    return await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "heal_retries": 0}
    )


@pytest.fixture
async def api(lg: Running) -> AsyncIterator[Any]:
    """One SDK client per test (building one costs ~0.1 s).

    Typed Any: the SDK wants its TypedDicts and unions, and these tests pass plain JSON.
    """
    client = lg.client()
    yield client
    await client.close()


def sample(lg: Running, name: str, **labels: str) -> float:
    full = {"upstream": "fake", "model": MODEL, **labels}
    return lg.proxy.metrics.registry.get_sample_value(name, full) or 0.0


# -- the corpus subset, whole and streamed --------------------------------------------------------


@pytest.mark.parametrize("case", SUBSET, ids=_ids)
async def test_corpus_whole_stream_and_split(
    case: Case, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    want = expected(case)
    fake.push(Json(completion(case.text)))
    got, notices = await whole(api, tools_of(case))
    assert got == want
    recovered = [n for n in notices if n.startswith("Recovered")]
    if case.format is None:
        assert recovered == []
    else:
        n = len(case.calls)
        assert recovered == [
            f"Recovered {n} tool call{'s' if n != 1 else ''} written as text ({case.format}); "
            "the server's tool-call parser does not match the model's chat template."
        ]

    # One character per SSE event, read with the SDK's stream helper.
    fake.push(one_char_stream(case.text))
    assert await streamed_helper(api, tools_of(case, strict=True)) == want

    # Random content pieces, each SSE event cut into 7-byte TCP writes; manual accumulation.
    fake.push(text_stream(*random_pieces(case.text, len(case.text)), split=7))
    assert await streamed_manual(api, tools_of(case)) == want


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ('<|python_tag|>brave_search.call(query="weather in Paris")<|eom_id|>', None),
        (
            "I'll check the weather.\n```json\n"
            '{"name": "get_weather", "parameters": {"city": "Paris"}}\n```<|eot_id|>',
            "I'll check the weather.",
        ),
    ],
    ids=["python_tag_eom", "prose_fenced_parameters"],
)
async def test_a_llama_call_reaches_the_agent_as_a_call_without_its_end_token(
    text: str, content: str | None, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "parameters": {"type": "object", "properties": {key: {"type": "string"}}},
            },
        }
        for name, key in (("brave_search", "query"), ("get_weather", "city"))
    ]
    args = {"query": "weather in Paris"} if "brave" in text else {"city": "Paris"}
    name = "brave_search" if "brave" in text else "get_weather"
    want: Result = (content, [("call_recovered_0", name, args)], "tool_calls")

    fake.push(Json(completion(text)))
    got, _ = await whole(api, tools)
    assert got == want
    fake.push(one_char_stream(text))
    assert await streamed_manual(api, tools) == want
    fake.push(text_stream(*random_pieces(text, 7), split=7))
    strict = [{**t, "function": {**t["function"], "strict": True}} for t in tools]
    assert await streamed_helper(api, strict) == want


async def test_a_tool_named_longer_than_any_api_allows_is_served_and_its_call_recovered(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # Before its name got no markers of its own, the stream's marker tables raised
    # RecursionError on it (Python's `re` parsing a regex nested as deep as the name).
    name = "t" * 5_000
    tools = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}]
    text = f'<tool_call>{{"name": "{name}", "arguments": {{"q": "x"}}}}</tool_call>'
    want: Result = (None, [("call_recovered_0", name, {"q": "x"})], "tool_calls")
    fake.push(Json(completion(text)))
    assert (await whole(api, tools))[0] == want
    fake.push(text_stream(*random_pieces(text, 7), split=7))
    assert await streamed_manual(api, tools) == want


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("Paris is sunny today.\n<|im_end|>", "Paris is sunny today."),
        ("Done.</tool_call><|eot_id|>", "Done."),
    ],
    ids=["im_end", "stray_closer_then_eot"],
)
async def test_an_answer_reaches_the_agent_without_the_end_tokens_a_server_left(
    text: str, content: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    """No call, so nothing recovered and no notice: only the template's tokens go (issue 18)."""
    want: Result = (content, [], "stop")
    fake.push(Json(completion(text)))
    got, notices = await whole(api, list(CORPUS_TOOLS))
    assert got == want and not [n for n in notices if n.startswith("Recovered")]
    fake.push(one_char_stream(text))
    assert await streamed_manual(api, list(CORPUS_TOOLS)) == want
    fake.push(text_stream(*random_pieces(text, 3), split=7))
    assert await streamed_manual(api, list(CORPUS_TOOLS)) == want


async def test_sync_client_whole_and_streamed(fake: FakeUpstream, lg: Running) -> None:
    case = _BY_NAME["hermes_two"]
    fake.push(Json(completion(case.text)), one_char_stream(case.text, split=7))

    def run() -> tuple[Result, Result]:
        client = lg.sync_client()
        done = client.chat.completions.create(model=MODEL, messages=MSG, tools=tools_of(case))
        whole_result = from_message(done.choices[0].message, done.choices[0].finish_reason)
        with client.chat.completions.stream(
            model=MODEL, messages=MSG, tools=tools_of(case, strict=True)
        ) as stream:
            final = stream.get_final_completion()
        choice = final.choices[0]
        return whole_result, from_message(choice.message, choice.finish_reason)

    got_whole, got_stream = await asyncio.to_thread(run)
    assert got_whole == got_stream == expected(case)
    assert got_whole[1] == [
        ("call_recovered_0", "get_weather", {"city": "Paris", "days": 3}),
        ("call_recovered_1", "get_time", {"tz": "Europe/Paris"}),
    ]


# -- a truncated final call -----------------------------------------------------------------------


async def test_truncated_final_call_whole_and_streamed(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    want: Result = (
        None,
        [
            ("call_recovered_0", "get_time", {"tz": "UTC"}),
            ("call_recovered_1", "write_file", TRUNCATED_RAW_ARGS),
        ],
        "length",  # the last call is cut off: the client is told the reply hit its ceiling
    )
    before = sample(lg, "latchgate_tool_arguments_repaired_total", outcome="truncated")
    fake.push(Json(completion(TRUNCATED.text, finish="length")))
    got, notices = await whole(api, TOOLS)
    assert got == want
    assert any("cut off at the reply ceiling" in n and "max_tokens" in n for n in notices)

    fake.push(one_char_stream(TRUNCATED.text, finish="length"))
    assert await streamed_manual(api, TOOLS) == want
    fake.push(text_stream(*random_pieces(TRUNCATED.text, 3), finish="length", split=7))
    assert await streamed_manual(api, TOOLS) == want
    after = sample(lg, "latchgate_tool_arguments_repaired_total", outcome="truncated")
    assert after - before == 3


# -- upstream stream shapes ------------------------------------------------------------------------

CALL_TEXT = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>'
USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
SHAPES: dict[str, list[Any]] = {
    # role, content and finish all in one chunk
    "one_chunk": [chunk({"role": "assistant", "content": "Sure. " + CALL_TEXT}, "stop")],
    # llama.cpp with a reasoning model: reasoning deltas first, content: null in the role chunk
    "reasoning_first": [
        chunk({"role": "assistant", "content": None}),
        chunk({"reasoning_content": "The user wants the time."}),
        chunk({"content": "Sure. " + CALL_TEXT[:20]}),
        chunk({"content": CALL_TEXT[20:]}),
        chunk({}, "stop"),
    ],
    # usage on the finishing chunk itself rather than a chunk of its own
    "usage_on_finish": [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Sure. "}),
        chunk({"content": CALL_TEXT}),
        chunk({}, "stop", usage=USAGE),
    ],
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_upstream_stream_shapes(
    shape: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    fake.push(Stream([*SHAPES[shape], "[DONE]"], split=5))
    stream = await api.chat.completions.create(
        model=MODEL,
        messages=MSG,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert accumulate(chunks) == (
        "Sure.",
        [("call_recovered_0", "get_time", {"tz": "UTC"})],
        "tool_calls",
    )
    usages = [c.usage.model_dump(exclude_none=True) for c in chunks if c.usage is not None]
    assert usages == ([USAGE] if shape == "usage_on_finish" else [])
    reasoning = "".join(
        getattr(ch.delta, "reasoning_content", None) or "" for c in chunks for ch in c.choices
    )
    assert reasoning == ("The user wants the time." if shape == "reasoning_first" else "")


def _two_choices(d0: dict[str, Any], d1: dict[str, Any], finish: str | None = None) -> Any:
    return chunk(
        choices=[
            {"index": 0, "delta": d0, "finish_reason": finish},
            {"index": 1, "delta": d1, "finish_reason": finish},
        ]
    )


async def test_two_choices_recovered_independently(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    role = {"role": "assistant", "content": ""}
    events = [
        _two_choices(role, role),
        _two_choices({"content": "Hello"}, {"content": CALL_TEXT[:15]}),
        _two_choices({"content": " there"}, {"content": CALL_TEXT[15:]}),
        _two_choices({}, {}, "stop"),
        "[DONE]",
    ]
    fake.push(Stream(events, split=7))
    stream = await api.chat.completions.create(
        model=MODEL, messages=MSG, tools=TOOLS, stream=True, n=2
    )
    chunks = [c async for c in stream]
    by_choice = [
        accumulate(
            [
                c.model_copy(update={"choices": [ch]})
                for c in chunks
                for ch in c.choices
                if ch.index == k
            ]
        )
        for k in (0, 1)
    ]
    assert by_choice == [
        ("Hello there", [], "stop"),
        (None, [("call_recovered_0", "get_time", {"tz": "UTC"})], "tool_calls"),
    ]


async def test_empty_native_list_does_not_stop_recovery(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # Some servers send `"tool_calls": []` alongside text: that is no call, so the text is read.
    want: Result = (None, [("call_recovered_0", "get_time", {"tz": "UTC"})], "tool_calls")
    fake.push(Json(completion(CALL_TEXT, tool_calls=[])))
    assert (await whole(api, TOOLS))[0] == want
    events: list[Any] = [chunk({"role": "assistant", "content": "", "tool_calls": []})]
    events += [chunk({"content": c, "tool_calls": []}) for c in CALL_TEXT]
    fake.push(Stream([*events, chunk({}, "stop"), "[DONE]"]))
    assert await streamed_manual(api, TOOLS) == want


async def test_holdback_limit_releases_text(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "holdback_limit": 64}
    )
    api: Any = lg.client()
    text = "<tool_call>" + "never closed " * 10
    fake.push(one_char_stream(text))
    body = {"model": MODEL, "messages": MSG, "tools": TOOLS, "stream": True}
    async with (
        aiohttp.ClientSession() as session,
        session.post(lg.base_url + "/chat/completions", json=body) as resp,
    ):
        raw = (await resp.read()).decode()
    assert (
        ": latchgate: Released 65 characters held back as a possible tool call: past the "
        "64-character hold-back limit they are relayed as text." in raw.split("\n")
    )
    fake.push(one_char_stream(text))
    assert await streamed_manual(api, TOOLS) == (text, [], "stop")


# -- the notice on streams ------------------------------------------------------------------------


async def test_stream_notice_is_an_sse_comment(fake: FakeUpstream, lg: Running, api: Any) -> None:
    case = _BY_NAME["hermes_prose"]
    fake.push(one_char_stream(case.text))
    body = {"model": MODEL, "messages": MSG, "tools": list(case.tools), "stream": True}
    async with (
        aiohttp.ClientSession() as session,
        session.post(lg.base_url + "/chat/completions", json=body) as resp,
    ):
        assert resp.status == 200
        raw = (await resp.read()).decode()
    lines = raw.split("\n")
    notice = (
        ": latchgate: Recovered 2 tool calls written as text (hermes); the server's tool-call "
        "parser does not match the model's chat template."
    )
    assert notice in lines
    # The comment comes before the calls it describes, and the stream still ends properly.
    first_call = next(i for i, line in enumerate(lines) if "call_recovered_0" in line)
    assert lines.index(notice) < first_call
    assert raw.endswith("data: [DONE]\n\n")
    datas = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert [
        d["choices"][0]["delta"]["tool_calls"][0]["id"]
        for d in datas
        if d["choices"] and d["choices"][0]["delta"].get("tool_calls")
    ] == ["call_recovered_0", "call_recovered_1"]
    # The SDK ignores the comment: the same stream reads as the plain result.
    fake.push(one_char_stream(case.text))
    assert await streamed_manual(api, list(case.tools)) == expected(case)


# -- native tool calls with almost-JSON arguments (4.2, 4.4) --------------------------------------

ALMOST = "{'city': 'Paris', 'metric': True}"
REPAIRED = '{"city":"Paris","metric":true}'


def _frag(
    index: int | None = None,
    id_: str | None = None,
    name: str | None = None,
    arguments: str | None = None,
) -> dict[str, Any]:
    frag: dict[str, Any] = {}
    if index is not None:
        frag["index"] = index
    if id_ is not None:
        frag["id"] = id_
        frag["type"] = "function"
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if arguments is not None:
        fn["arguments"] = arguments
    frag["function"] = fn
    return frag


def tool_stream(frags: list[dict[str, Any]], **kw: Any) -> Stream:
    events: list[Any] = [chunk({"role": "assistant", "content": None})]
    events += [chunk({"tool_calls": [f]}) for f in frags]
    events += [chunk({}, "tool_calls"), "[DONE]"]
    return Stream(events, **kw)


def pieces3(text: str) -> list[str]:
    return [text[i : i + 3] for i in range(0, len(text), 3)]


async def test_native_almost_json_whole(fake: FakeUpstream, lg: Running, api: Any) -> None:
    calls = [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "get_weather", "arguments": ALMOST},
        },
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": ""}},
        {
            "id": "call_c",
            "type": "function",
            "function": {"name": "get_time", "arguments": '{"tz": "UTC"}'},
        },
    ]
    before = sample(lg, "latchgate_tool_arguments_repaired_total", outcome="repaired")
    fake.push(Json(completion(None, finish="tool_calls", tool_calls=calls)))  # type: ignore[arg-type]
    raw = await api.chat.completions.with_raw_response.create(
        model=MODEL, messages=MSG, tools=TOOLS
    )
    done = raw.parse()
    calls_out = done.choices[0].message.tool_calls
    got = [(c.id, c.function.name, c.function.arguments) for c in calls_out]
    # Repaired to compact JSON; empty becomes {}; valid JSON is left with its own spacing.
    assert got == [
        ("call_a", "get_weather", REPAIRED),
        ("call_b", "get_time", "{}"),
        ("call_c", "get_time", '{"tz": "UTC"}'),
    ]
    assert done.choices[0].finish_reason == "tool_calls"
    assert raw.headers.get_list("x-latchgate-notice") == [
        "Repaired the almost-JSON arguments of tool call 'get_weather' into valid JSON."
    ]
    after = sample(lg, "latchgate_tool_arguments_repaired_total", outcome="repaired")
    assert after - before == 1


NATIVE_STREAMS = {
    # index, id and name first, then the arguments three characters per chunk; a second call
    "fragmented": [
        _frag(0, "call_a", "get_weather", ""),
        *(_frag(0, arguments=p) for p in pieces3(ALMOST)),
        _frag(1, "call_b", "get_time", ""),
        *(_frag(1, arguments=p) for p in pieces3("{'tz': 'UTC',}")),
    ],
    # no index at all: id opens a call, nameless fragments continue the latest
    "index_less": [
        _frag(None, "call_a", "get_weather"),
        *(_frag(None, arguments=p) for p in pieces3(ALMOST)),
        _frag(None, "call_b", "get_time"),
        *(_frag(None, arguments=p) for p in pieces3("{'tz': 'UTC',}")),
    ],
    # whole calls, each at index 0 (servers that do not number their calls)
    "whole_at_index_0": [
        _frag(0, "call_a", "get_weather", ALMOST),
        _frag(0, "call_b", "get_time", "{'tz': 'UTC',}"),
    ],
}


@pytest.mark.parametrize("shape", sorted(NATIVE_STREAMS))
async def test_native_fragments_streamed(
    shape: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    want: Result = (
        None,
        [
            ("call_a", "get_weather", {"city": "Paris", "metric": True}),
            ("call_b", "get_time", {"tz": "UTC"}),
        ],
        "tool_calls",
    )
    before = sample(lg, "latchgate_tool_arguments_repaired_total", outcome="repaired")
    fake.push(tool_stream(NATIVE_STREAMS[shape], split=7))
    chunks = [
        c
        async for c in await api.chat.completions.create(
            model=MODEL, messages=MSG, tools=TOOLS, stream=True
        )
    ]
    assert accumulate(chunks) == want
    # Each call is relayed whole: one delta per call, with index, id, type, name and the
    # arguments already compact JSON.
    frags = [f for c in chunks for ch in c.choices for f in ch.delta.tool_calls or []]
    assert [(f.index, f.id, f.type, f.function.name, f.function.arguments) for f in frags] == [
        (0, "call_a", "function", "get_weather", REPAIRED),
        (1, "call_b", "function", "get_time", '{"tz":"UTC"}'),
    ]
    after = sample(lg, "latchgate_tool_arguments_repaired_total", outcome="repaired")
    assert after - before == 2


async def test_native_whole_calls_without_ids_get_minted_ids(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    fake.push(
        tool_stream(
            [
                _frag(0, None, "get_time", '{"tz": "UTC"}'),
                _frag(0, None, "get_time", '{"tz": "CET"}'),
            ]
        )
    )
    async with api.chat.completions.stream(
        model=MODEL, messages=MSG, tools=tools_of(_BY_NAME["hermes_one"], strict=True)
    ) as stream:
        final = await stream.get_final_completion()
    choice = final.choices[0]
    assert from_message(choice.message, choice.finish_reason) == (
        None,
        [("call_0", "get_time", {"tz": "UTC"}), ("call_1", "get_time", {"tz": "CET"})],
        "tool_calls",
    )


@pytest.mark.parametrize("ids", ["missing", "repeated"])
async def test_native_whole_calls_get_ids_and_types_as_streamed_ones_do(
    ids: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # The API requires each call's id and type, and a client answers a call by its id: a
    # whole answer gets the ids a stream of the same calls gets (call_N; a repeat made unique).
    given = [None, None] if ids == "missing" else ["call_x", "call_x"]
    calls: list[dict[str, Any]] = [
        {"function": {"name": "get_time", "arguments": '{"tz": "UTC"}'}},
        {"function": {"name": "get_time", "arguments": '{"tz": "CET"}'}},
    ]
    for call, call_id in zip(calls, given, strict=True):
        if call_id is not None:
            call["id"] = call_id
    fake.push(Json(completion(None, finish="tool_calls", tool_calls=calls)))
    whole = await api.chat.completions.create(model=MODEL, messages=MSG, tools=TOOLS)
    fake.push(
        tool_stream(
            [
                _frag(0, i, "get_time", c["function"]["arguments"])
                for i, c in zip(given, calls, strict=True)
            ]
        )
    )
    streamed = [
        c
        async for c in await api.chat.completions.create(
            model=MODEL, messages=MSG, tools=TOOLS, stream=True
        )
    ]
    got = [(c.id, c.type, c.function.name) for c in whole.choices[0].message.tool_calls or []]
    want = ["call_0", "call_1"] if ids == "missing" else ["call_x", "call_x_1"]
    assert got == [(i, "function", "get_time") for i in want]
    assert [c[0] for c in accumulate(streamed)[1]] == want


TIMINGS = {"predicted_n": 7, "predicted_ms": 70.5}
FILTERED = {"hate": {"filtered": False, "severity": "safe"}}


@pytest.mark.parametrize("tools", [None, TOOLS], ids=["no tools", "tools"])
@pytest.mark.parametrize("answer", ["native call", "text ending in a newline"])
async def test_the_finish_chunk_keeps_the_upstreams_own_fields(
    answer: str, tools: Any, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # llama.cpp's `timings` and Azure's `content_filter_results` ride on the finish chunk. A
    # tools stream rebuilds that chunk when it sends calls or held text with it; it must keep
    # them, as the same answer does without tools.
    opening = chunk({"role": "assistant", "content": None})
    if answer == "native call":
        events = [opening, chunk({"tool_calls": [_frag(0, "call_a", "get_time", '{"tz":"UTC"}')]})]
        finish = "tool_calls"
    else:
        events = [opening, chunk({"content": "Hello.\n"})]
        finish = "stop"
    end = chunk({}, finish)
    end["timings"] = TIMINGS
    end["choices"][0]["content_filter_results"] = FILTERED
    fake.push(Stream([*events, end, "[DONE]"]))
    extra = {"tools": tools} if tools else {}
    chunks = [
        c
        async for c in await api.chat.completions.create(
            model=MODEL, messages=MSG, stream=True, **extra
        )
    ]
    last = chunks[-1]
    assert last.choices[0].finish_reason == finish
    assert last.model_extra == {"timings": TIMINGS}
    assert last.choices[0].model_extra == {"content_filter_results": FILTERED}
    content, calls, _ = accumulate(chunks)
    assert (content, calls) == (
        (None, [("call_a", "get_time", {"tz": "UTC"})])
        if answer == "native call"
        else ("Hello.\n", [])
    )


async def test_a_long_answer_and_a_long_call_stream_through_whole(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # What an agent's file write looks like: prose in hundreds of deltas, then one call whose
    # arguments (a file's content, quotes, escapes and non-ASCII in it) come in a thousand
    # fragments. Most of these events are read unread by the relay (their shape learnt from
    # the first of them); the agent must get every character, and the call whole, repaired.
    words = [f" word{k}," for k in range(400)]
    content = "".join(f'line {k}: "quoted" \\ é\n' for k in range(200))
    arguments = json.dumps({"path": "notes.txt", "content": content})
    pieces = [arguments[i : i + 7] for i in range(0, len(arguments), 7)]
    events: list[Any] = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": w}) for w in ["Writing", *words]]
    events.append(chunk({"tool_calls": [_frag(0, "call_w", "write_file", "")]}))
    events += [chunk({"tool_calls": [_frag(0, None, None, p)]}) for p in pieces]
    events += [chunk({}, "tool_calls")]
    events.append("[DONE]")
    fake.push(Stream(events, split=4096))
    chunks = [
        c
        async for c in await api.chat.completions.create(
            model=MODEL, messages=MSG, tools=TOOLS, stream=True
        )
    ]
    text, calls, finish = accumulate(chunks)
    assert text == "Writing" + "".join(words)
    assert calls == [("call_w", "write_file", {"path": "notes.txt", "content": content})]
    assert finish == "tool_calls"


# -- latency: ordinary text is not batched --------------------------------------------------------


async def test_plain_text_with_tools_is_not_batched(
    fake: FakeUpstream, lg: Running, api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No piece can start a marker, none opens with `{`/`[`/a fence, none ends in whitespace.
    pieces = ["Paris", " is", " sunny", " today,", " 21", " degrees", " (feels", " like", " 19)."]
    # Lockstep, not a stopwatch (issue 13, item 16): the fake writes each piece only once the
    # client has read the one before, so a hold-back that batched pieces would stall the stream
    # and fail at the guard below; nothing depends on how fast the machine is.
    read: list[asyncio.Event] = [asyncio.Event() for _ in pieces]
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": p}) for p in pieces] + [chunk({}, "stop"), "[DONE]"]

    async def lockstep(request: web.Request, reply: Any) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for item in events:
            if isinstance(item, dict) and item["choices"][0]["delta"].get("content"):
                k = pieces.index(item["choices"][0]["delta"]["content"])
                if k:
                    await read[k - 1].wait()
            data = (
                b"data: [DONE]\n\n"
                if item == "[DONE]"
                else b"data: " + json.dumps(item).encode() + b"\n\n"
            )
            await resp.write(data)
        await resp.write_eof()
        return resp

    monkeypatch.setattr(fake, "_play", lockstep)
    got: list[str] = []

    async def consume() -> None:
        stream = await api.chat.completions.create(
            model=MODEL, messages=MSG, tools=TOOLS, stream=True
        )
        async for ch in stream:
            if ch.choices and ch.choices[0].delta.content:
                got.append(ch.choices[0].delta.content)
                read[len(got) - 1].set()

    # Not a measurement: only what turns a stall into a failure instead of a hung test.
    await asyncio.wait_for(consume(), timeout=30)
    assert got == pieces  # each piece on its own, in order


# -- recovery switched off ------------------------------------------------------------------------


async def test_recovery_off_keeps_text(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": "generic", "recover_tool_calls": False}
    )
    api: Any = lg.client()
    case = _BY_NAME["hermes_prose"]
    fake.push(Json(completion(case.text)))
    got, notices = await whole(api, tools_of(case))
    assert got == (case.text, [], "stop")
    assert notices == []
    fake.push(one_char_stream(case.text, split=7))
    assert await streamed_manual(api, tools_of(case)) == (case.text, [], "stop")
    # Native almost-JSON arguments are still repaired: only recovery is off.
    calls = [
        {"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": ALMOST}}
    ]
    fake.push(Json(completion(None, finish="tool_calls", tool_calls=calls)))  # type: ignore[arg-type]
    done = await api.chat.completions.create(model=MODEL, messages=MSG, tools=TOOLS)
    assert done.choices[0].message.tool_calls[0].function.arguments == REPAIRED
    assert sample(lg, "latchgate_tool_calls_recovered_total", format="hermes") == 0.0


# -- the counters ---------------------------------------------------------------------------------


async def test_recovered_counter_by_format(fake: FakeUpstream, lg: Running, api: Any) -> None:
    def recovered(fmt: str) -> float:
        return sample(lg, "latchgate_tool_calls_recovered_total", format=fmt)

    fake.push(Json(completion(_BY_NAME["hermes_two"].text)))
    await api.chat.completions.create(model=MODEL, messages=MSG, tools=TOOLS)
    assert recovered("hermes") == 2.0
    fake.push(one_char_stream(_BY_NAME["mistral_v13_one"].text))
    await streamed_manual(api, TOOLS)
    assert (recovered("hermes"), recovered("mistral")) == (2.0, 1.0)
    # A negative moves nothing; python literals in a recovered call count as repaired.
    fake.push(Json(completion(_BY_NAME["prose_with_braces"].text)))
    await api.chat.completions.create(model=MODEL, messages=MSG, tools=TOOLS)
    fake.push(Json(completion(_BY_NAME["python_literals"].text)))
    await api.chat.completions.create(model=MODEL, messages=MSG, tools=TOOLS)
    assert (recovered("hermes"), recovered("mistral")) == (3.0, 1.0)
    assert sample(lg, "latchgate_tool_arguments_repaired_total", outcome="repaired") == 1.0


# -- a call written in the reasoning, the content empty (issue 18) -----------------------------

# Qwen3.5 on vLLM: the model skipped `</think>`, so its XML call lands in the reasoning field.
QWEN_CALL = (
    "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>"
)
REASONING = "The user wants the time in UTC. I'll call get_time.\n\n" + QWEN_CALL


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_a_call_in_the_reasoning_with_no_content_is_recovered(
    key: str, fake: FakeUpstream, lg: Running, api: Any
) -> None:
    want: Result = (None, [("call_recovered_0", "get_time", {"tz": "UTC"})], "tool_calls")
    message = {"role": "assistant", "content": None, key: REASONING}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    body = {**completion(""), "choices": [choice]}
    fake.push(Json(body))
    got, notices = await whole(api, TOOLS)
    assert got == want
    assert any("written as text in the reasoning (qwen3_coder)" in n for n in notices)

    pieces = [REASONING[k : k + 9] for k in range(0, len(REASONING), 9)]
    events = [chunk({"role": "assistant", "content": None})]
    events += [chunk({key: p}) for p in pieces] + [chunk({}, "stop"), "[DONE]"]
    fake.push(Stream(events, split=5))
    stream = await api.chat.completions.create(model=MODEL, messages=MSG, tools=TOOLS, stream=True)
    chunks = [c async for c in stream]
    assert accumulate(chunks) == want
    # The reasoning itself reaches the client whole, as it came.
    sent = "".join((getattr(ch.delta, key, None) or "") for c in chunks for ch in c.choices)
    assert sent == REASONING


async def test_reasoning_with_content_is_not_searched_for_calls(
    fake: FakeUpstream, lg: Running, api: Any
) -> None:
    # The model thought about a call and then answered: the answer stands.
    message = {"role": "assistant", "content": "It is noon.", "reasoning_content": REASONING}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    body = {**completion(""), "choices": [choice]}
    fake.push(Json(body))
    assert (await whole(api, TOOLS))[0] == ("It is noon.", [], "stop")
    events = [
        chunk({"role": "assistant", "content": None}),
        chunk({"reasoning_content": REASONING}),
        chunk({"content": "It is noon."}),
        chunk({}, "stop"),
        "[DONE]",
    ]
    fake.push(Stream(events))
    stream = await api.chat.completions.create(model=MODEL, messages=MSG, tools=TOOLS, stream=True)
    assert accumulate([c async for c in stream]) == ("It is noon.", [], "stop")
