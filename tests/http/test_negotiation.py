"""Capability negotiation through the real HTTP path, with the openai SDK (issue 3; BEHAVIOUR 2, 9).

The pure modules (classify, build_body, the latch store) have their own unit tests; these check
that the glue between them and the pipeline does what the spec promises end to end: a scripted
upstream refuses with a real server's exact words, latchgate learns it, resends the rebuilt body
and the client gets its answer; the next identical request goes out right the first time; what
must never latch reaches the client untouched; and the refusals that can only be seen on the wire
(several in a row, one after streamed tokens, 20 at once) behave.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import orjson
import pytest

from proxy.agent.emulation import emulate
from proxy.state.latches import EndpointLatches, ModelLatches, endpoint_id
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Stream, chunk, completion, text_stream
from tests.refusal_cases import CASES, MESSAGES, TOOLS, Case

MODEL = "m"
ANSWER = "Hello!"  # what the fake says by default, whole or streamed ("Hel", "lo", "!")


# -- helpers ------------------------------------------------------------------------------------


def client(lg: Running) -> openai.AsyncOpenAI:
    # verify=False: no TLS here, and loading the CA bundle for every client costs ~35 ms a test.
    return lg.client(http_client=httpx.AsyncClient(verify=False))


async def start(start_proxy: StartProxy, fake: FakeUpstream, **cfg: Any) -> Running:
    """latchgate in front of the fake; no retries, so a transient status comes straight back,
    and no healing: the fake's plain answer to a request with `tool_choice: "required"` would
    otherwise be asked for again (tests/http/test_healing.py)."""
    table = {"name": "fake", "base_url": fake.url, "kind": "generic", "retries": 0,
             "loading_timeout": 0, "heal_retries": 0, **cfg}
    return await start_proxy(table)


def sdk_args(body: dict[str, Any]) -> dict[str, Any]:
    """An upstream-shaped body as SDK arguments: fields the SDK does not know go in extra_body."""
    rest = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
    args: dict[str, Any] = {"model": body["model"], "messages": body["messages"]}
    if body.get("stream"):
        args["stream"] = True
    if rest:
        args["extra_body"] = rest
    return args


async def ask(lg: Running, body: dict[str, Any]) -> tuple[str, httpx.Headers]:
    """Send `body` through latchgate; the answer's text and the response headers."""
    raw = await client(lg).chat.completions.with_raw_response.create(**sdk_args(body))
    parsed = raw.parse()
    if not body.get("stream"):
        return parsed.choices[0].message.content or "", raw.headers
    text = ""
    async for piece in parsed:
        if piece.choices:
            text += piece.choices[0].delta.content or ""
    return text, raw.headers


def first_body(body: dict[str, Any]) -> dict[str, Any]:
    """What latchgate sends upstream for `body` with no latches (BEHAVIOUR 2.6, 7).

    The ceiling goes out as `max_tokens` (the newer name's value wins when both are sent), and a
    stream also asks for usage.
    """
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key in ("max_tokens", "max_completion_tokens"):
            out.setdefault("max_tokens", body.get("max_completion_tokens", value))
        else:
            out[key] = value
    if body.get("stream"):
        out["stream_options"] = {"include_usage": True}
    return out


def latches(lg: Running, model: str = MODEL) -> tuple[EndpointLatches, ModelLatches]:
    return lg.proxy.store.view(lg.proxy.upstreams["fake"].endpoint_id, model)


def notices(headers: httpx.Headers) -> list[str]:
    return headers.get_list("x-latchgate-notice")


def without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


# -- the table ----------------------------------------------------------------------------------

# A schema llama.cpp cannot compile and its relaxed form (BEHAVIOUR 3.3: no pattern, no format),
# used for the grammar cases so attempt 2 visibly differs from attempt 1.
STRICT = {
    "type": "object",
    "properties": {"city": {"type": "string", "pattern": "^[A-Z]", "format": "hostname"}},
}
RELAXED = {"type": "object", "properties": {"city": {"type": "string"}}}


def tools(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "get_weather", "parameters": schema}}]


def schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def client_body(case: Case) -> dict[str, Any]:
    """The request that triggers the case, as a client sends it."""
    body = dict(case.sent)
    if case.capability == "usage_in_stream":
        # latchgate removes stream_options from a request that does not stream (it means nothing
        # there), so the refusal can only come back for a stream.
        body["stream"] = True
    if case.capability == "strict_schemas":
        if "tools" in body:
            body["tools"] = tools(STRICT)
        if "response_format" in body:
            body["response_format"] = schema_format(STRICT)
    return body


def rebuilt(case: Case, sent: dict[str, Any]) -> dict[str, Any]:
    """The body latchgate must send on attempt 2, from attempt 1's body."""
    cap = case.capability
    if cap == "legacy_token_limit":
        return {("max_completion_tokens" if k == "max_tokens" else k): v for k, v in sent.items()}
    if cap == "chosen_temperature":
        return without(sent, "temperature")
    if cap == "reasoning_effort":
        return without(sent, "reasoning_effort")
    if cap == "refused_field":
        return without(sent, *case.fields)
    if cap == "usage_in_stream":
        return without(sent, "stream_options")
    if cap == "effort_value":
        return {**sent, "reasoning_effort": case.effort_with_tools or case.next_effort}
    if cap == "native_tools":
        return emulate(sent)  # its own tests: tests/unit/agent/test_emulation.py
    if cap == "strict_schemas":
        out = dict(sent)
        if "tools" in sent:
            out["tools"] = tools(RELAXED)
        if "response_format" in sent:
            out["response_format"] = schema_format(RELAXED)
        return out
    raise AssertionError(f"no expectation for {cap}")  # structured_output is checked apart


def refusal_notice(case: Case) -> str:
    who = f"Model {MODEL} on fake"
    fields = ", ".join(case.fields)
    them = "it" if len(case.fields) == 1 else "them"
    return {
        "legacy_token_limit": f"{who} refused max_tokens, so the reply ceiling is now sent as "
        "max_completion_tokens.",
        "chosen_temperature": f"{who} accepts only its default temperature, so temperature is "
        "not sent.",
        "reasoning_effort": f"{who} takes no reasoning_effort, so latchgate no longer sends it.",
        "structured_output": f"{who} refused response_format, so JSON output is now asked for "
        "in the system prompt.",
        "refused_field": f"{who} refused {fields}, so latchgate no longer sends {them}.",
        "usage_in_stream": "fake refused stream_options, so latchgate no longer sends it and "
        "streams from this server carry no usage report.",
        "native_tools": f"{who} refused native tool calling, so tools are now described in the "
        "prompt.",
        "strict_schemas": "fake could not build a grammar from a JSON schema, so tool and "
        "response schemas are now sent to it relaxed (without pattern and format).",
        "effort_value": (
            f"{who} refuses function tools together with its reasoning effort, so "
            f"reasoning_effort '{case.effort_with_tools}' is sent whenever tools are present."
            if case.effort_with_tools
            else f"{who} refused reasoning_effort '{case.refused_effort}', so "
            f"'{case.next_effort}' is sent instead."
        ),
    }[case.capability or ""]


def assert_latched(case: Case, lg: Running) -> None:
    endpoint, model = latches(lg)
    expected_endpoint = EndpointLatches(
        strict_schemas=case.capability != "strict_schemas",
        usage_in_stream=case.capability != "usage_in_stream",
    )
    assert (endpoint.strict_schemas, endpoint.usage_in_stream) == (
        expected_endpoint.strict_schemas,
        expected_endpoint.usage_in_stream,
    )
    assert endpoint.upstream == "fake"
    flags = ("reasoning_effort", "legacy_token_limit", "chosen_temperature", "structured_output")
    assert {f: getattr(model, f) for f in flags} == {f: f != case.capability for f in flags}
    assert model.native_tools is (case.capability != "native_tools")
    assert model.refused_fields == set(case.fields)
    assert model.refused_efforts == ({case.refused_effort} if case.refused_effort else set())
    assert model.supported_efforts == (list(case.supported) if case.supported else None)
    assert model.effort_with_tools == case.effort_with_tools


LATCHING = [c for c in CASES if c.capability is not None]
RETURNED = [c for c in CASES if c.capability is None]

# Context overflows come back as OpenAI's one overflow shape (BEHAVIOUR 5.4), the upstream's
# message kept; everything else that must not latch comes back as the upstream said it.
OVERFLOWS = {
    "8-openai-context-length-exceeded", "8-gpt5-input-tokens-exceed",
    "8-llamacpp-exceed-context-size", "8-llamacpp-current-request-exceeds",
    "8-vllm-max-tokens-too-large-both-names", "8-vllm-input-tokens",
    "8-ollama-prompt-longer-than-context", "8-lmstudio-n-keep", "8-lmstudio-cannot-truncate",
    "8-anthropic-prompt-too-long", "8-gemini-input-token-count",
}  # fmt: skip
# latchgate refuses these itself before calling the upstream (BEHAVIOUR 11: bad input).
REFUSED_LOCALLY = {"10-vllm-max-tokens-at-least-1"}
# Bodies that are not `{"error": {...}}`: the message latchgate lifts out of them.
LIFTED = {
    "1-vllm-old-max-completion-tokens-extra-forbidden": "[{'type': 'extra_forbidden', 'loc': "
    "('body', 'max_completion_tokens'), 'msg': 'Extra inputs are not permitted', 'input': 64}]",
    "5-litellm-system-prompt-not-droppable": "litellm.BadRequestError: OpenAIException - "
    "Unrecognized request argument supplied: system_prompt",
    "5-mistral-422-message-extras": '{"detail":[{"type":"extra_forbidden","loc":["body",'
    '"messages",0,"user","name"],"msg":"Extra inputs are not permitted","input":null}]}',
    "5-mistral-safe-prompt-not-droppable": '{"detail":[{"type":"extra_forbidden","loc":["body",'
    '"safe_prompt"],"msg":"Extra inputs are not permitted"}]}',
    "7-gemini-unknown-name-additional-properties": "Invalid JSON payload received. Unknown name "
    "\"additionalProperties\" at 'tools[0].function_declarations[0].parameters': Cannot find "
    "field.",
    "10-deepseek-developer-role": "Failed to deserialize the JSON body into the target type: "
    "messages[0].role: unknown variant `developer`, expected one of `system`, `user`, "
    "`assistant`, `tool`, `latest_reminder` at line 1 column 60",
    "7-llamacpp-b4369-unsupported-param-tools": "Unsupported param: tools",
    "5-mistral-newer-envelope-tools": '[{"type":"extra_forbidden","loc":["body","tools"],'
    '"msg":"Extra inputs are not permitted","input":[]}]',
    "5-vllm-tools-extra-forbidden": "[{'type': 'extra_forbidden', 'loc': ('body', "
    "'tool_choice'), 'msg': 'Extra inputs are not permitted', 'input': 'auto'}, {'type': "
    "'extra_forbidden', 'loc': ('body', 'tools'), 'msg': 'Extra inputs are not permitted'}]",
    "7-vllm-05-only-named-tools": "[{'type': 'value_error', 'loc': ('body',), 'msg': 'Value "
    "error, Currently only named tools are supported.'}]",
    "7-ollama-native-does-not-support-tools": "registry.ollama.ai/library/Qwen3.5:0.8b does not "
    "support tools",
    "3-sglang-literal-error-xhigh": "1 validation error:\n  {'type': 'literal_error', 'loc': "
    "('body', 'reasoning_effort'), 'msg': \"Input should be 'low', 'medium' or 'high'\", "
    "'input': 'xhigh', 'ctx': {'expected': \"'low', 'medium' or 'high'\"}}",
}
STATUS_TYPES = {400: "invalid_request_error", 500: "server_error", 422: "api_error"}


def expected_error(case: Case) -> tuple[int, dict[str, Any]]:
    """The status and `error` object the client must get for a case that is not latched."""
    if case.name in LIFTED:
        return case.status, {"message": LIFTED[case.name], "type": STATUS_TYPES[case.status],
                             "param": None, "code": str(case.status)}
    data = orjson.loads(case.body)
    if case.name in OVERFLOWS:
        error = data[0]["error"] if isinstance(data, list) else data["error"]
        message = error if isinstance(error, str) else error["message"]
        return 400, {"message": message, "type": "invalid_request_error", "param": "messages",
                     "code": "context_length_exceeded"}
    return case.status, data["error"]


def test_every_case_is_sorted_into_one_expectation() -> None:
    """A new case in the table must land in one of the branches above, never fall through."""
    for case in RETURNED:
        if case.name in REFUSED_LOCALLY:
            continue
        try:
            data = orjson.loads(case.body)
        except orjson.JSONDecodeError:
            data = None
        shaped = isinstance(data, dict) and isinstance(data.get("error"), dict)
        assert shaped or case.name in OVERFLOWS | set(LIFTED), case.name


# Each capability once more as a stream: the refusal arrives as an HTTP status before any event.
STREAMED = list({c.capability: c for c in reversed(LATCHING)}.values())
TABLE = [pytest.param(c, False, id=c.name) for c in LATCHING] + [
    pytest.param(c, True, id=f"{c.name}-streamed") for c in STREAMED
    if c.capability != "usage_in_stream"  # streamed already
]


@pytest.mark.parametrize(("case", "stream"), TABLE)
async def test_a_refusal_is_learned_resent_and_never_paid_again(
    case: Case, stream: bool, fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    body = client_body(case) | ({"stream": True} if stream else {})
    fake.push(Json(case.body, status=case.status))

    text, headers = await ask(lg, body)

    assert text == ANSWER
    sent = fake.bodies()
    assert len(sent) == 2
    assert sent[0] == first_body(body)
    if case.capability == "structured_output":
        assert_asked_in_words(sent[1], sent[0])
    else:
        assert sent[1] == rebuilt(case, sent[0])
    assert notices(headers)[0] == refusal_notice(case)
    if case.capability == "refused_field":
        assert headers["x-latchgate-dropped-fields"] == ", ".join(case.fields)
    assert_latched(case, lg)

    text, _ = await ask(lg, body)

    assert text == ANSWER
    assert fake.bodies()[2:] == [sent[1]]  # right the first time: one attempt, the rebuilt body


def assert_asked_in_words(second: dict[str, Any], first: dict[str, Any]) -> None:
    assert "response_format" not in second
    assert without(second, "messages") == without(first, "messages", "response_format")
    system, *rest = second["messages"]
    assert rest == first["messages"]
    assert system["role"] == "system"
    assert system["content"].startswith("Reply with a single JSON value and nothing else")


@pytest.mark.parametrize("case", RETURNED, ids=[c.name for c in RETURNED])
async def test_what_must_not_latch_reaches_the_client_untouched(
    case: Case, fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    body = client_body(case)
    fake.push(Json(case.body, status=case.status))

    with pytest.raises(openai.APIStatusError) as info:
        await ask(lg, body)

    if case.name in REFUSED_LOCALLY:
        assert info.value.status_code == 400
        assert fake.bodies() == []
        return
    status, error = expected_error(case)
    assert info.value.status_code == status
    assert info.value.body == error
    assert fake.bodies() == [first_body(body)]  # one attempt: no resend, no retry
    assert lg.proxy.store.describe() == []
    assert lg.proxy.store.generation == 0


# -- several refusals in one client call --------------------------------------------------------


async def test_three_refusals_in_a_row_are_all_answered_in_one_call(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    fake.push(
        Json(orjson.dumps({"error": {"message": "Unsupported parameter: 'max_tokens' is not "
             "supported with this model. Use 'max_completion_tokens' instead."}}), status=400),
        Json(orjson.dumps({"error": {"message": "Unsupported value: 'temperature' does not "
             "support 0.2 with this model. Only the default (1) value is supported."}}),
             status=400),
        Json(orjson.dumps({"error": {"message": "Unrecognized request argument supplied: "
             "top_k"}}), status=400),
    )
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 50, "temperature": 0.2,
            "top_k": 40}

    text, headers = await ask(lg, body)

    assert text == ANSWER
    assert fake.bodies() == [
        body,
        {"model": MODEL, "messages": MESSAGES, "max_completion_tokens": 50, "temperature": 0.2,
         "top_k": 40},
        {"model": MODEL, "messages": MESSAGES, "max_completion_tokens": 50, "top_k": 40},
        {"model": MODEL, "messages": MESSAGES, "max_completion_tokens": 50},
    ]
    # Every field of the client's that was not sent: refused, latched off or renamed.
    assert headers["x-latchgate-dropped-fields"] == "max_tokens, temperature, top_k"
    said = notices(headers)
    for expected in (
        "Model m on fake refused max_tokens, so the reply ceiling is now sent as "
        "max_completion_tokens.",
        "Model m on fake accepts only its default temperature, so temperature is not sent.",
        "Model m on fake refused top_k, so latchgate no longer sends it.",
    ):
        assert expected in said
    refusals = {
        cap: lg.proxy.metrics.registry.get_sample_value(
            "latchgate_refusals_total", {"upstream": "fake", "model": MODEL, "capability": cap}
        )
        for cap in ("legacy_token_limit", "chosen_temperature", "refused_field")
    }
    assert refusals == {"legacy_token_limit": 1.0, "chosen_temperature": 1.0,
                        "refused_field": 1.0}


# -- a refusal after content: never resent ------------------------------------------------------


async def test_an_error_after_two_streamed_tokens_is_not_resent(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    refusal = {"error": {"message": "Unrecognized request argument supplied: top_k",
                         "type": "invalid_request_error"}}
    fake.push(Stream([chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"}),
                      refusal]))
    body = {"model": MODEL, "messages": MESSAGES, "stream": True, "top_k": 40}
    got: list[str] = []

    with pytest.raises(openai.APIError) as info:
        stream = await client(lg).chat.completions.create(**sdk_args(body))
        async for piece in stream:
            got.append(piece.choices[0].delta.content or "")

    assert got == ["Hel", "lo"]
    assert "Unrecognized request argument supplied: top_k" in str(info.value)
    assert len(fake.bodies()) == 1
    assert lg.proxy.store.describe() == []


async def test_a_stream_cut_after_two_tokens_ends_with_an_error_not_a_resend(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    fake.push(Stream([chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"})],
                     then="drop"))
    body = {"model": MODEL, "messages": MESSAGES, "stream": True}
    got: list[str] = []

    with pytest.raises(openai.APIError) as info:
        stream = await client(lg).chat.completions.create(**sdk_args(body))
        async for piece in stream:
            got.append(piece.choices[0].delta.content or "")

    assert got == ["Hel", "lo"]
    assert "broke mid-stream" in str(info.value)
    assert len(fake.bodies()) == 1


# -- concurrency --------------------------------------------------------------------------------


async def test_twenty_first_requests_racing_one_refusal_all_succeed(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    refusal = orjson.dumps({"error": {"message": "Unrecognized request argument supplied: "
                                      "stream_options"}})

    def reply(rec: Any) -> Json | Stream:
        if "stream_options" in rec.json:
            return Json(refusal, status=400, delay=0.05)  # slow: every request sees it first
        return text_stream("Hel", "lo", "!", usage=False)

    fake.push(*[reply] * 40)
    body = {"model": MODEL, "messages": MESSAGES, "stream": True}
    sdk = client(lg)

    async def one() -> str:
        stream = await sdk.chat.completions.create(**sdk_args(body))
        return "".join([p.choices[0].delta.content or "" async for p in stream if p.choices])

    answers = await asyncio.gather(*[one() for _ in range(20)])

    assert answers == [ANSWER] * 20
    sent = fake.bodies()
    assert len(sent) == 40  # each: refused once, then sent without stream_options
    assert sum("stream_options" in b for b in sent) == 20
    assert latches(lg)[0].usage_in_stream is False
    assert lg.proxy.store.generation == 1  # learned once; the other 19 resent as lost races
    labels = {"upstream": "fake", "model": MODEL, "capability": "usage_in_stream"}
    assert lg.proxy.metrics.registry.get_sample_value("latchgate_refusals_total", labels) == 1.0


# -- the effort ladder --------------------------------------------------------------------------


def refuse_effort(value: str, supported: str | None = None) -> Json:
    tail = f" Supported values are: {supported}." if supported else ""
    return Json(orjson.dumps({"error": {
        "message": f"Unsupported value: 'reasoning_effort' does not support '{value}' with this "
        f"model.{tail}", "type": "invalid_request_error", "code": "unsupported_value"}}),
        status=400)


@pytest.mark.parametrize("stream", [False, True])
async def test_effort_steps_up_the_published_list_and_later_requests_follow(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake)
    fake.push(refuse_effort("none", "'minimal', 'low', 'medium', and 'high'"))
    body = {"model": MODEL, "messages": MESSAGES, "reasoning_effort": "none",
            **({"stream": True} if stream else {})}

    text, headers = await ask(lg, body)

    assert text == ANSWER
    assert [b["reasoning_effort"] for b in fake.bodies()] == ["none", "minimal"]
    assert notices(headers)[0] == (
        "Model m on fake refused reasoning_effort 'none', so 'minimal' is sent instead."
    )
    _, model = latches(lg)
    assert (model.refused_efforts, model.supported_efforts) == (
        {"none"}, ["minimal", "low", "medium", "high"])
    # A later client asking for a supported value sends it as asked; the refused one steps up.
    await ask(lg, {**body, "reasoning_effort": "high"})
    await ask(lg, body)
    assert [b["reasoning_effort"] for b in fake.bodies()[2:]] == ["high", "minimal"]


async def test_effort_climbs_two_rungs_in_one_call_without_a_list(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    fake.push(refuse_effort("minimal"), refuse_effort("low"))
    body = {"model": MODEL, "messages": MESSAGES, "reasoning_effort": "minimal"}

    text, _ = await ask(lg, body)

    assert text == ANSWER
    assert [b["reasoning_effort"] for b in fake.bodies()] == ["minimal", "low", "medium"]
    assert latches(lg)[1].refused_efforts == {"minimal", "low"}


async def test_effort_never_steps_down(fake: FakeUpstream, start_proxy: StartProxy) -> None:
    lg = await start(start_proxy, fake)
    fake.push(refuse_effort("high", "'none', 'low', and 'medium'"))
    body = {"model": MODEL, "messages": MESSAGES, "reasoning_effort": "high"}

    with pytest.raises(openai.BadRequestError) as info:
        await ask(lg, body)

    assert info.value.body["message"].startswith(  # type: ignore[index]
        "Unsupported value: 'reasoning_effort' does not support 'high'"
    )
    assert len(fake.bodies()) == 1
    assert lg.proxy.store.describe() == []


GPT54 = Json(orjson.dumps({"error": {
    "message": "Function tools with reasoning_effort are not supported for gpt-5.4 in "
    "/v1/chat/completions. Please use /v1/responses instead.",
    "type": "invalid_request_error", "param": "reasoning_effort", "code": None}}), status=400)


@pytest.mark.parametrize("stream", [False, True])
async def test_gpt54_tools_without_effort_get_effort_none(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake)
    fake.push(GPT54)
    body = {"model": MODEL, "messages": MESSAGES, "tools": TOOLS,
            **({"stream": True} if stream else {})}

    text, _ = await ask(lg, body)

    assert text == ANSWER
    first, second = fake.bodies()
    assert "reasoning_effort" not in first
    assert second == {**first, "reasoning_effort": "none"}
    assert latches(lg)[1].effort_with_tools == "none"
    # Later: with tools, "none" from the start; without tools, nothing added.
    await ask(lg, body)
    await ask(lg, without(body, "tools"))
    assert fake.bodies()[2]["reasoning_effort"] == "none"
    assert "reasoning_effort" not in fake.bodies()[3]


# -- response_format asked for in words ---------------------------------------------------------

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
PROSE = 'Sure! Here it is:\n```json\n{"name": "Ada", "age": 36}\n```\nAnything else?'


@pytest.mark.parametrize("stream", [False, True])
async def test_response_format_refused_is_asked_in_words_and_the_json_extracted(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake)
    refusal = Json(orjson.dumps({"error": {
        "message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported "
        "with this model.", "type": "invalid_request_error"}}), status=400)
    answer = (text_stream(*[PROSE[i : i + 7] for i in range(0, len(PROSE), 7)]) if stream
              else Json(completion(PROSE, model=MODEL)))
    fake.push(refusal, answer, answer)
    body = {"model": MODEL, "stream": stream,
            "messages": [{"role": "system", "content": "Be terse."}, *MESSAGES],
            "response_format": schema_format(PERSON)}
    body = body if stream else without(body, "stream")

    text, headers = await ask(lg, body)

    assert orjson.loads(text) == {"name": "Ada", "age": 36}
    first, second = fake.bodies()
    assert first["response_format"] == schema_format(PERSON)
    assert "response_format" not in second
    system = second["messages"][0]
    assert system["role"] == "system"
    prefix = ("Be terse.\n\nReply with a single JSON value and nothing else: no prose before or "
              "after it, no code fence. The value must match this JSON schema: ")
    assert system["content"].startswith(prefix)
    schema = orjson.loads(system["content"][len(prefix):])
    assert schema["properties"] == PERSON["properties"]
    assert schema["required"] == ["name", "age"]
    assert second["messages"][1:] == MESSAGES
    assert latches(lg)[1].structured_output is False
    assert ("Model m on fake refused response_format, so JSON output is now asked for in the "
            "system prompt.") in notices(headers)
    # The next request goes out in words from the start and is extracted the same way.
    text, _ = await ask(lg, body)
    assert orjson.loads(text) == {"name": "Ada", "age": 36}
    assert len(fake.bodies()) == 3
    assert "response_format" not in fake.bodies()[2]


# -- grammar failures -> relaxed schemas --------------------------------------------------------

GRAMMAR_FAILURES = [
    pytest.param(400, {"error": {"code": 400, "message": "JSON schema conversion failed:\n"
                                 "Unrecognized schema: {\"pattern\":\"^[A-Z]\"}",
                                 "type": "invalid_request_error"}}, id="llamacpp-400"),
    pytest.param(500, {"error": {"code": 500, "message": "failed to parse grammar",
                                 "type": "server_error"}}, id="llamacpp-500-parse"),
    pytest.param(500, {"error": {"code": 500, "message": "error parsing grammar: expecting name "
                                 "at ]", "type": "server_error"}}, id="llamacpp-500-error"),
]


@pytest.mark.parametrize(("status", "error"), GRAMMAR_FAILURES)
@pytest.mark.parametrize("where", ["tools", "response_format"])
async def test_a_grammar_failure_relaxes_schemas_for_the_endpoint(
    fake: FakeUpstream, start_proxy: StartProxy, status: int, error: dict[str, Any], where: str
) -> None:
    # Retries stay on (the default budget): a 500 that is a grammar failure is a refusal first.
    lg = await start_proxy({"name": "fake", "base_url": fake.url, "kind": "generic"})
    fake.push(Json(error, status=status))
    extra = ({"tools": tools(STRICT)} if where == "tools"
             else {"response_format": schema_format(STRICT)})
    body = {"model": MODEL, "messages": MESSAGES, **extra}

    text, headers = await ask(lg, body)

    assert text == ANSWER
    first, second = fake.bodies()
    assert first == body
    relaxed = {"tools": tools(RELAXED)} if where == "tools" else {
        "response_format": schema_format(RELAXED)}
    assert second == {**body, **relaxed}
    assert latches(lg)[0].strict_schemas is False
    # One notice per change: the refusal's own, not a second "sent relaxed" one.
    assert notices(headers) == [
        "fake could not build a grammar from a JSON schema, so tool and response schemas are now "
        "sent to it relaxed (without pattern and format)."
    ]
    # Another model on the same endpoint is sent relaxed from its first request.
    await ask(lg, {**body, "model": "other"})
    assert fake.bodies()[2] == {**body, **relaxed, "model": "other"}


# -- "only this temperature" stated as a number (issue 13, item 23) ------------------------------

MOONSHOT = {
    "error": {
        "message": "invalid temperature: only 1 is allowed for this model",
        "type": "invalid_request_error",
    }
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_moonshot_s_one_temperature_is_learned_and_never_sent_again(
    stream: bool, fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    body: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, "temperature": 0.3}
    if stream:
        body["stream"] = True
    fake.push(Json(MOONSHOT, status=400))

    text, headers = await ask(lg, body)

    assert text == ANSWER
    first, second = fake.bodies()
    assert first["temperature"] == 0.3
    assert second == without(first, "temperature")
    assert notices(headers)[0] == (
        f"Model {MODEL} on fake accepts only its default temperature, so temperature is not sent."
    )
    assert latches(lg)[1].chosen_temperature is False

    text, _ = await ask(lg, body)

    assert text == ANSWER
    assert fake.bodies()[2:] == [second]  # one attempt, without temperature


@pytest.mark.parametrize(
    "message",
    ["'temperature' : number must be at most 2", "temperature must be in [0, 2], got 3.0."],
)
async def test_a_temperature_range_error_reaches_the_client_and_latches_nothing(
    message: str, fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)
    fake.push(Json({"error": {"message": message, "type": "invalid_request_error"}}, status=400))
    with pytest.raises(openai.BadRequestError) as info:
        await ask(lg, {"model": MODEL, "messages": MESSAGES, "temperature": 3})
    assert info.value.body == {"message": message, "type": "invalid_request_error"}
    assert len(fake.bodies()) == 1
    assert latches(lg)[1].chosen_temperature is True


# -- what must not latch, and races between requests ----------------------------------------------

MSG = [{"role": "user", "content": "Hi"}]


async def test_a_grammar_error_with_nothing_to_relax_is_returned(
    lg: Running, fake: FakeUpstream
) -> None:
    error = {
        "error": {
            "code": 500,
            "type": "server_error",
            "message": 'JSON schema conversion failed:\nUnrecognized schema: {"required":["x"]}',
        }
    }
    fake.push(Json(error, status=500), Json(error, status=500), Json(error, status=500))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"x": {"type": "string"}},
                    "required": ["x"],
                },
            },
        }
    ]
    with pytest.raises(openai.InternalServerError, match="JSON schema conversion failed"):
        await lg.client().chat.completions.create(model="m", messages=MSG, tools=tools)
    assert all(b["tools"] == tools for b in fake.bodies())  # never sent "relaxed"
    endpoint, _ = lg.proxy.store.view(endpoint_id(fake.url, None), "m")
    assert endpoint.strict_schemas is True  # nothing was relaxable: no latch


async def test_a_request_that_lost_the_race_on_an_effort_value_is_resent(
    lg: Running, fake: FakeUpstream
) -> None:
    refusal = {
        "error": {
            "message": "Unsupported value: 'reasoning_effort' does not support "
            "'none' with this model. Supported values are: 'minimal', 'low', "
            "'medium', and 'high'.",
            "type": "invalid_request_error",
            "param": "reasoning_effort",
            "code": "unsupported_value",
        }
    }
    # Both first attempts are refused before either is answered; then both are served.
    fake.push(
        Json(refusal, status=400, delay=0.2),
        Json(refusal, status=400, delay=0.3),
        Json(completion()),
        Json(completion()),
    )
    client = lg.client()
    results = await asyncio.gather(
        *(
            client.chat.completions.create(model="m", messages=MSG, reasoning_effort="none")
            for _ in range(2)
        )
    )
    assert [r.choices[0].message.content for r in results] == ["Hello!", "Hello!"]
    assert [b.get("reasoning_effort") for b in fake.bodies()[2:]] == ["minimal", "minimal"]


async def test_the_latch_gauge_is_labelled_with_the_whole_upstream_name(
    fake: FakeUpstream, start_proxy
) -> None:
    running = await start_proxy(
        {"name": "openrouter-production", "base_url": fake.url, "kind": "generic"}
    )
    refusal = {
        "error": {
            "message": "Unsupported value: 'temperature' does not support 0.2 with "
            "this model. Only the default (1) value is supported.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "unsupported_value",
        }
    }
    fake.push(Json(refusal, status=400))
    await running.client().chat.completions.create(model="m", messages=MSG, temperature=0.2)
    value = running.proxy.metrics.registry.get_sample_value(
        "latchgate_latches",
        {"upstream": "openrouter-production", "capability": "chosen_temperature"},
    )
    assert value == 1

MAX_TOKENS_REFUSAL = orjson.dumps(
    {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    }
)


async def test_an_error_body_in_several_pieces_is_judged_whole(
    lg: Running, fake: FakeUpstream
) -> None:
    # The refusal arrives in two TCP writes 50 ms apart: it must still be recognised.
    fake.push(Stream([MAX_TOKENS_REFUSAL[:40], MAX_TOKENS_REFUSAL[40:]], delay=0.05, status=400))
    got = await lg.client().chat.completions.create(model="m", messages=MSG, max_tokens=5)
    assert got.choices[0].message.content == "Hello!"
    first, second = fake.bodies()
    assert first["max_tokens"] == 5 and second["max_completion_tokens"] == 5
