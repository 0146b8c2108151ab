"""Tool and response schemas through the real HTTP path, with the openai SDK (issue 4; BEHAVIOUR 3).

The schemas module has its own unit and property tests; these check the glue end to end: what the
upstream actually receives in each schema mode, what the client is told, and the grammar-failure
loop (BEHAVIOUR 2.3 rule 1) against llama.cpp's real converter errors (refusal-wordings.md item 6,
llama-server-observed.md (b) and (c)): a scripted upstream refuses while the schema it got still
carries `pattern`/`format`, latchgate latches `strict_schemas` off, resends the relaxed form and
the client's call succeeds; from then on the endpoint is sent relaxed schemas first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
import orjson
import pytest

from proxy.agent.schemas import clear_caches, find_contradictions, pattern_ok, sanitise
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Recorded, completion, text_stream
from tests.unit.agent.test_schema_corpus import CORPUS, keyword_values, property_paths

MODEL = "m"
ANSWER = "Hello!"  # what the scripted upstream says once it can compile the schema
MESSAGES = [{"role": "user", "content": "Hi"}]
RELAXED_NOTICE = (
    "Schemas sent relaxed (no pattern or format) because fake cannot build a grammar from them."
)
REFUSAL_NOTICE = (
    "fake could not build a grammar from a JSON schema, so tool and response schemas are now "
    "sent to it relaxed (without pattern and format)."
)


# -- helpers ------------------------------------------------------------------------------------


async def start(start_proxy: StartProxy, fake: FakeUpstream, kind: str, **cfg: Any) -> Running:
    return await start_proxy({"name": "fake", "base_url": fake.url, "kind": kind, **cfg})


def client(lg: Running) -> openai.AsyncOpenAI:
    # verify=False: no TLS here, and loading the CA bundle for every client costs ~35 ms a test.
    return lg.client(http_client=httpx.AsyncClient(verify=False))


def tool(name: str, parameters: Any, **function: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, **function, "parameters": parameters}}


def schema_format(schema: Any, name: str = "answer") -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


async def ask(lg: Running, stream: bool = False, **extra: Any) -> tuple[str, httpx.Headers]:
    """One chat request through latchgate; the answer's text and the response headers."""
    args: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, **extra}
    if stream:
        args["stream"] = True
    raw = await client(lg).chat.completions.with_raw_response.create(**args)
    parsed = raw.parse()
    if not stream:
        return parsed.choices[0].message.content or "", raw.headers
    text = ""
    async for piece in parsed:
        if piece.choices:
            text += piece.choices[0].delta.content or ""
    return text, raw.headers


def notices(headers: httpx.Headers) -> list[str]:
    return headers.get_list("x-latchgate-notice")


def relaxed_count(lg: Running) -> float:
    value = lg.proxy.metrics.registry.get_sample_value(
        "latchgate_schemas_relaxed_total", {"upstream": "fake"}
    )
    return value or 0.0


def strict_schemas(lg: Running) -> bool:
    endpoint, _ = lg.proxy.store.view(lg.proxy.upstreams["fake"].endpoint_id, MODEL)
    return endpoint.strict_schemas


def schemas_of(body: dict[str, Any]) -> list[Any]:
    """Every tool `parameters` and the response schema in an upstream body."""
    found = [t["function"]["parameters"] for t in body.get("tools") or []]
    rf = body.get("response_format")
    if isinstance(rf, dict) and isinstance(rf.get("json_schema"), dict):
        found.append(rf["json_schema"].get("schema"))
    return found


def grammar_keywords(body: dict[str, Any]) -> list[Any]:
    """`pattern` and `format` values at schema positions (property *names* do not count)."""
    out: list[Any] = []
    for schema in schemas_of(body):
        out += keyword_values(schema, "pattern") + keyword_values(schema, "format")
    return out


def llamacpp_error(status: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if status == 400 else "server_error"
    return {"error": {"code": status, "message": message, "type": kind}}


def grammar_server(status: int, message: str) -> Callable[[Recorded], Json | Any]:
    """A llama.cpp stand-in: refuses with `message` while any schema it got has pattern/format."""

    def reply(rec: Recorded) -> Any:
        body = rec.json
        if grammar_keywords(body):
            return Json(llamacpp_error(status, message), status=status)
        if body.get("stream"):
            return text_stream("Hel", "lo", "!")
        return Json(completion(ANSWER))

    return reply


# -- grammar failures: llama.cpp's own wordings -------------------------------------------------

JINJA = "Unable to generate parser for this template. Automatic parser generation failed: "
CONVERSION = "JSON schema conversion failed:\n"

# Verbatim (refusal-wordings.md item 6; llama-server-observed.md (b), (c) with the tool path).
WORDINGS = {
    "unsupported-ref": JINJA + "JSON schema error at #/properties/city: unsupported $ref "
    "https://example.com/x.json#/defs/a, only references into the same document are supported",
    "unsupported-ref-root": JINJA + "JSON schema error at #: unsupported $ref "
    "https://example.com/x.json, only references into the same document are supported",
    "cannot-resolve-ref": JINJA + "JSON schema error at #/properties/city: cannot resolve $ref "
    "#/$defs/nope, $defs not found",
    "unrecognized-type": JINJA + "JSON schema error at #/properties/city: unrecognized type foo",
    "type-not-string": JINJA + "JSON schema error at #: type must be a string or an array of "
    "strings",
    "empty-enum": JINJA + "JSON schema error at #: enum must be a non-empty array",
    "jinja-pattern-anchors": JINJA + CONVERSION + "Pattern must start with '^' and end with '$'",
    "no-jinja-unsupported-ref": "JSON schema error at #/properties/city: unsupported $ref "
    "https://example.com/x.json, only references into the same document are supported",
    "invalid-pattern": CONVERSION + "Invalid pattern ^(abc$: unbalanced parentheses",
    "unrecognized-schema": CONVERSION + 'Unrecognized schema: {"required":["instructions"]}',
    "converter-list": CONVERSION + "Unbalanced parentheses\nUnbalanced square brackets\n"
    "Rule dot not known",
    "resolving-ref": CONVERSION + "Error resolving ref #/$defs/a: a not in {}",
    "sampling-setup": '"json_schema": ' + CONVERSION + "Unsupported ref: https://example.com/x",
    "min-max-value": CONVERSION + "At least one of min_value or max_value must be set",
    "failed-to-parse-grammar": "Failed to initialize samplers: failed to parse grammar",
}

# Lookaround, a plain pattern and a format, next to properties *named* `format` and `pattern`.
GRAMMAR_SCHEMA = {
    "type": "object",
    "properties": {
        "slug": {"type": "string", "pattern": "^(?!-)[a-z0-9-]+$"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "email": {"type": "string", "format": "email"},
        "format": {"type": "string", "enum": ["json", "yaml"]},
        "pattern": {"type": "string", "description": "a glob such as *.py"},
    },
    "required": ["slug", "format", "pattern"],
}
# What sanitise mode sends first: only the lookaround goes (BEHAVIOUR 3.2).
GRAMMAR_SANITISED = {
    "type": "object",
    "properties": {
        "slug": {"type": "string"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "email": {"type": "string", "format": "email"},
        "format": {"type": "string", "enum": ["json", "yaml"]},
        "pattern": {"type": "string", "description": "a glob such as *.py"},
    },
    "required": ["slug", "format", "pattern"],
}
# The relaxed form (3.3), in every mode: no pattern, no format, the properties so named kept.
GRAMMAR_RELAXED = {
    "type": "object",
    "properties": {
        "slug": {"type": "string"},
        "code": {"type": "string"},
        "email": {"type": "string"},
        "format": {"type": "string", "enum": ["json", "yaml"]},
        "pattern": {"type": "string", "description": "a glob such as *.py"},
    },
    "required": ["slug", "format", "pattern"],
}


def with_schema(where: str, schema: Any) -> dict[str, Any]:
    if where == "tools":
        return {"tools": [tool("lookup", schema)]}
    return {"response_format": schema_format(schema)}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("status", [400, 500])
@pytest.mark.parametrize("message", WORDINGS.values(), ids=WORDINGS.keys())
async def test_each_llamacpp_grammar_error_relaxes_and_the_call_succeeds(
    fake: FakeUpstream, start_proxy: StartProxy, message: str, status: int, stream: bool
) -> None:
    lg = await start(start_proxy, fake, "generic")
    fake.push(*[grammar_server(status, message)] * 3)
    extra = with_schema("tools", GRAMMAR_SCHEMA)

    text, headers = await ask(lg, stream, **extra)

    assert text == ANSWER
    first, second = fake.bodies()
    assert schemas_of(first) == [GRAMMAR_SCHEMA]
    assert schemas_of(second) == [GRAMMAR_RELAXED]
    assert grammar_keywords(second) == []
    assert strict_schemas(lg) is False
    # One notice per change: the refusal's says the schemas are now sent relaxed.
    assert REFUSAL_NOTICE in notices(headers)
    assert RELAXED_NOTICE not in notices(headers)
    assert relaxed_count(lg) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("where", ["tools", "response_format"])
@pytest.mark.parametrize(
    ("kind", "first_form"),
    [("llama.cpp", GRAMMAR_SANITISED), ("generic", GRAMMAR_SCHEMA)],
    ids=["sanitise", "passthrough"],
)
async def test_a_relaxed_endpoint_is_sent_relaxed_schemas_first_from_then_on(
    fake: FakeUpstream,
    start_proxy: StartProxy,
    kind: str,
    first_form: dict[str, Any],
    where: str,
    stream: bool,
) -> None:
    lg = await start(start_proxy, fake, kind)
    fake.push(*[grammar_server(400, WORDINGS["unsupported-ref"])] * 4)
    extra = with_schema(where, GRAMMAR_SCHEMA)

    text, headers = await ask(lg, stream, **extra)

    assert text == ANSWER
    first, second = fake.bodies()
    assert schemas_of(first) == [first_form]
    assert second == {**first, **with_schema(where, GRAMMAR_RELAXED)}
    assert strict_schemas(lg) is False
    ours = [n for n in notices(headers) if n in (REFUSAL_NOTICE, RELAXED_NOTICE)]
    assert ours == [REFUSAL_NOTICE]  # one notice per change (issue 13 item 22)
    assert relaxed_count(lg) == 1

    # The next request goes out relaxed at once: one upstream call, told and counted again.
    text, headers = await ask(lg, stream, **extra)

    assert text == ANSWER
    assert len(fake.bodies()) == 3
    assert fake.bodies()[2] == second
    assert RELAXED_NOTICE in notices(headers)
    assert REFUSAL_NOTICE not in notices(headers)
    assert relaxed_count(lg) == 2


async def test_a_schema_error_that_relaxing_cannot_fix_is_returned_after_one_resend(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # The server keeps refusing the relaxed form: the second refusal teaches nothing new, so the
    # client gets the upstream's error (status and words kept) instead of a loop.
    lg = await start(start_proxy, fake, "generic")
    error = llamacpp_error(400, WORDINGS["empty-enum"])
    fake.push(Json(error, status=400), Json(error, status=400))

    with pytest.raises(openai.BadRequestError) as caught:
        await ask(lg, **with_schema("tools", GRAMMAR_SCHEMA))

    assert caught.value.status_code == 400
    assert caught.value.body["message"] == WORDINGS["empty-enum"]  # type: ignore[index]
    assert [schemas_of(b) for b in fake.bodies()] == [[GRAMMAR_SCHEMA], [GRAMMAR_RELAXED]]
    assert strict_schemas(lg) is False


async def test_a_grammar_error_on_a_body_without_schemas_is_the_clients_and_latches_nothing(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # llama-server-observed (b): a client's own `grammar` that does not parse. Relaxing schemas
    # cannot change a body that carries none, so nothing is learned and nothing is resent.
    lg = await start(start_proxy, fake, "llama.cpp")
    message = "Failed to initialize samplers: failed to parse grammar"
    fake.push(Json(llamacpp_error(400, message), status=400))

    with pytest.raises(openai.BadRequestError) as caught:
        await ask(lg, extra_body={"grammar": "root ::= ("})

    assert caught.value.body["message"] == message  # type: ignore[index]
    assert len(fake.bodies()) == 1
    assert strict_schemas(lg) is True


# -- sanitise mode (kind llama.cpp) -------------------------------------------------------------

# Everything 3.2 rewrites, in one tool: root anyOf, a type list with null, a nullable union, a
# `$ref` with siblings, an external `$ref`, several types, a bare type name, an object without
# properties, a lookaround pattern and an unreachable definition.
MESSY = {
    "anyOf": [
        {"properties": {"id": {"type": "integer"}, "path": {"type": "string"}},
         "required": ["id", "path"]},
        {"properties": {"id": {"type": "integer"}, "glob": {"type": "string"}},
         "required": ["id", "glob"]},
    ],
    "properties": {
        "owner": {"type": ["string", "null"], "minLength": 1},
        "note": {"anyOf": [{"type": "string", "maxLength": 80}, {"type": "null"}]},
        "target": {"$ref": "#/$defs/Target", "description": "where to write"},
        "remote": {"$ref": "https://example.com/schemas/remote.json"},
        "mode": {"type": ["string", "integer"], "pattern": "^(?!tmp)[a-z]+$", "minimum": 0},
        "when": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": "string"},
        "meta": {"type": "object"},
        "level": {"enum": ["low", "high"], "default": "low", "description": "$ref: not a ref"},
    },
    "$defs": {
        "Target": {"type": "object", "properties": {"file": {"type": "string"}}},
        "Unused": {"type": "string", "pattern": "^(?=x)"},
    },
}
MESSY_SANITISED = {
    "properties": {
        "owner": {"type": "string", "minLength": 1, "nullable": True},
        "note": {"type": "string", "maxLength": 80, "nullable": True},
        "target": {"$ref": "#/$defs/Target"},
        "remote": {"type": "object", "properties": {}},
        "mode": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]},
        "when": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object", "properties": {}},
        "level": {"enum": ["low", "high"], "default": "low", "description": "$ref: not a ref"},
        "id": {"type": "integer"},
        "path": {"type": "string"},
        "glob": {"type": "string"},
    },
    "type": "object",
    "required": ["id"],
    "$defs": {"Target": {"type": "object", "properties": {"file": {"type": "string"}}}},
}

# A response schema behind a root `$ref`, with a nullable type list.
PERSON = {
    "$ref": "#/definitions/Person",
    "definitions": {
        "Person": {
            "type": "object",
            "properties": {
                "name": {"type": ["string", "null"]},
                "age": {"type": "integer", "minimum": 0},
            },
            "required": ["name", "age"],
            "additionalProperties": False,
        },
        "Pet": {"type": "object", "properties": {"kind": {"type": "string"}}},
    },
}
PERSON_SANITISED = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "nullable": True},
        "age": {"type": "integer", "minimum": 0},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}

# Contradictory bounds of all four kinds (BEHAVIOUR 3; the llama-server OOM of issue 4).
TAGGER = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 5, "maxItems": 2},
        "name": {"type": "string", "minLength": 10, "maxLength": 2},
    },
    "required": ["tags"],
}
TAGGER_SANITISED = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "name": {"type": "string", "maxLength": 2},
    },
    "required": ["tags"],
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_sanitise_mode_sends_sanitised_tools_and_response_schema(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake, "llama.cpp")
    sent_tools = [tool("edit_record", MESSY)]
    sent_tools_copy = json.loads(json.dumps(sent_tools))

    text, headers = await ask(
        lg, stream, tools=sent_tools, response_format=schema_format(PERSON, "person")
    )

    assert text == "Hello!"
    (body,) = fake.bodies()
    assert body["tools"] == [tool("edit_record", MESSY_SANITISED)]
    assert body["response_format"] == schema_format(PERSON_SANITISED, "person")
    assert sent_tools == sent_tools_copy  # the client's objects are not touched
    assert [n for n in notices(headers) if "Dropped" in n] == []
    assert relaxed_count(lg) == 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_sanitise_mode_drops_an_impossible_bound_with_a_notice(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake, "llama.cpp")

    text, headers = await ask(lg, stream, tools=[tool("tag", TAGGER)])

    assert text == "Hello!"
    (body,) = fake.bodies()
    assert body["tools"] == [tool("tag", TAGGER_SANITISED)]
    assert sorted(n for n in notices(headers) if n.startswith("Dropped")) == [
        "Dropped minItems 5 at #/properties/tags in tool 'tag' because it exceeds maxItems 2 "
        "and no value could satisfy both.",
        "Dropped minLength 10 at #/properties/name in tool 'tag' because it exceeds maxLength 2 "
        "and no value could satisfy both.",
    ]


async def test_sanitise_mode_drops_an_impossible_bound_in_the_response_schema(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, "llama.cpp")
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 9,
                                                     "maximum": 1}}}

    await ask(lg, response_format=schema_format(schema))

    (body,) = fake.bodies()
    assert body["response_format"] == schema_format(
        {"type": "object", "properties": {"n": {"type": "integer", "maximum": 1}}}
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_sanitise_mode_passes_strict_true_through(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake, "llama.cpp")
    params = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": ["integer", "null"]}},
        "required": ["path", "limit"],
        "additionalProperties": False,
    }

    await ask(lg, stream, tools=[tool("read", params, strict=True)])

    (body,) = fake.bodies()
    assert body["tools"] == [tool("read", {
        "type": "object",
        "properties": {"path": {"type": "string"},
                       "limit": {"type": "integer", "nullable": True}},
        "required": ["path", "limit"],
        "additionalProperties": False,
    }, strict=True)]


# -- passthrough mode (kind openai) -------------------------------------------------------------

CONTRADICTION_400 = (
    "Tool 'tag' has an impossible schema: 'minItems' at #/properties/tags contradicts its "
    "counterpart (the minimum is above the maximum). Fix the bound; no value can satisfy it."
)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_passthrough_refuses_an_impossible_bound_naming_tool_and_keyword(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake, "openai")

    with pytest.raises(openai.BadRequestError) as caught:
        await ask(lg, stream, tools=[tool("read", {"type": "object", "properties": {}}),
                                     tool("tag", TAGGER)])

    assert caught.value.status_code == 400
    assert caught.value.body == {  # the SDK hands over the `error` object
        "message": CONTRADICTION_400,
        "type": "invalid_request_error",
        "param": "tools",
        "code": "invalid_tool_schema",
    }
    assert fake.requests == []


async def test_passthrough_refuses_an_impossible_bound_in_the_response_schema(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, "openai")
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 9,
                                                     "maximum": 1}}}

    with pytest.raises(openai.BadRequestError) as caught:
        await ask(lg, response_format=schema_format(schema, "count"))

    assert caught.value.status_code == 400
    assert caught.value.body == {
        "message": "Response format 'count' has an impossible schema: 'minimum' at "
        "#/properties/n contradicts its counterpart (the minimum is above the maximum). Fix the "
        "bound; no value can satisfy it.",
        "type": "invalid_request_error",
        "param": "response_format",
        "code": "invalid_json_schema",
    }
    assert fake.requests == []


# OpenAI strict mode: every property required, additionalProperties false, nullability as a type
# list; latchgate must not add `nullable` or anything else in passthrough.
STRICT_TOOL = tool(
    "search",
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "pattern": "^(?!\\s).+$", "format": "regex"},
            "limit": {"type": ["integer", "null"], "minimum": 1},
            "where": {"anyOf": [{"$ref": "#/$defs/Filter"}, {"type": "null"}]},
        },
        "required": ["query", "limit", "where"],
        "additionalProperties": False,
        "$defs": {
            "Filter": {
                "type": "object",
                "properties": {"field": {"type": "string"}},
                "required": ["field"],
                "additionalProperties": False,
            }
        },
    },
    strict=True,
    description="Search the docs.",
)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_passthrough_sends_strict_tools_as_written(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake, "openai")
    schema = {"type": "object", "properties": {"a": {"type": ["string", "null"]}},
              "required": ["a"], "additionalProperties": False}

    await ask(lg, stream, tools=[STRICT_TOOL], response_format=schema_format(schema))

    (body,) = fake.bodies()
    assert orjson.dumps(body["tools"]) == orjson.dumps([STRICT_TOOL])
    assert orjson.dumps(body["response_format"]) == orjson.dumps(schema_format(schema))


# STRICT_TOOL relaxed: pattern and format go; nothing is added (no `nullable`), the type list,
# the null branch beside the `$ref` and the definitions stay as strict mode wants them.
STRICT_TOOL_RELAXED = tool(
    "search",
    {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": ["integer", "null"], "minimum": 1},
            "where": {"anyOf": [{"$ref": "#/$defs/Filter"}, {"type": "null"}]},
        },
        "required": ["query", "limit", "where"],
        "additionalProperties": False,
        "$defs": {
            "Filter": {
                "type": "object",
                "properties": {"field": {"type": "string"}},
                "required": ["field"],
                "additionalProperties": False,
            }
        },
    },
    strict=True,
    description="Search the docs.",
)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_passthrough_relaxes_strict_tools_without_adding_keywords(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake, "openai")
    fake.push(*[grammar_server(400, WORDINGS["failed-to-parse-grammar"])] * 3)

    text, _ = await ask(lg, stream, tools=[STRICT_TOOL])

    assert text == ANSWER
    first, second = fake.bodies()
    assert first["tools"] == [STRICT_TOOL]
    assert second["tools"] == [STRICT_TOOL_RELAXED]
    assert b"nullable" not in fake.requests[1].raw


async def test_passthrough_forwards_the_clients_bytes_untouched(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # Nothing needs changing, so the very bytes the client sent go upstream (spacing included).
    lg = await start(start_proxy, fake, "openai")
    raw = json.dumps({"model": MODEL, "messages": MESSAGES, "tools": [STRICT_TOOL]}, indent=1)

    async with httpx.AsyncClient() as http:
        resp = await http.post(lg.base_url + "/chat/completions", content=raw,
                               headers={"content-type": "application/json"})

    assert resp.status_code == 200
    assert fake.requests[0].raw == raw.encode()


# -- an agent's 40 tools, turn after turn -------------------------------------------------------

# The corpus's schemas plus one more, so the agent sends exactly 40 tools.
EXTRA_TOOL = {
    "type": "object",
    "properties": {
        "cell": {"type": ["integer", "null"]},
        "source": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["source"],
}


def agent_tools() -> list[dict[str, Any]]:
    found = [tool(p.stem, json.loads(p.read_text())) for p in CORPUS]
    found.append(tool("notebook_insert_cell", EXTRA_TOOL))
    return found[:40]


async def test_forty_tools_on_three_turns_all_arrive_sanitised_with_every_property(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    clear_caches()  # the first turn pays for sanitising, as in a fresh process
    lg = await start(start_proxy, fake, "llama.cpp")
    tools = agent_tools()
    assert len(tools) == 40
    expected = [sanitise(t["function"]["parameters"]) for t in tools]

    for turn in range(3):
        messages = [*MESSAGES, *([{"role": "assistant", "content": "ok"}] * turn)]
        await client(lg).chat.completions.create(model=MODEL, messages=messages, tools=tools)

    bodies = fake.bodies()
    assert len(bodies) == 3
    for body in bodies:
        got = [t["function"]["parameters"] for t in body["tools"]]
        assert [t["function"]["name"] for t in body["tools"]] == [
            t["function"]["name"] for t in tools
        ]
        assert got == expected
        for raw, sent in zip(tools, got, strict=True):
            paths = property_paths(raw["function"]["parameters"])
            assert paths and property_paths(sent) == paths, raw["function"]["name"]
            assert sent["type"] == "object"
            assert find_contradictions(sent) == []
            assert all(pattern_ok(p) for p in keyword_values(sent, "pattern"))


# -- the corpus check that guards the agent test ------------------------------------------------


def test_the_agent_tools_exercise_sanitising() -> None:
    # If sanitising were a no-op for every tool, the agent test would prove nothing.
    changed = [t["function"]["name"] for t in agent_tools()
               if sanitise(t["function"]["parameters"]) != t["function"]["parameters"]]
    assert len(changed) >= 10


# -- schemas latchgate cannot walk or send as they are (issue 13 item 4) ------------------------

MODES = [("llama.cpp", "sanitise"), ("openai", "passthrough")]


def nested_json(levels: int, via: str) -> str:
    """A schema `levels` schema objects deep, each holding the next under `via`, as JSON text.

    Written out as text: deeper than about 250 JSON levels neither json nor orjson encodes it.
    """
    head, tail = (
        ('{"type": "object", "properties": {"a": ', "}}")
        if via == "properties"
        else ('{"type": "array", "items": ', "}")
    )
    return head * (levels - 1) + '{"type": "string"}' + tail * (levels - 1)


def nested(levels: int, via: str) -> dict[str, Any]:
    parsed: dict[str, Any] = orjson.loads(nested_json(levels, via))
    return parsed


async def post_raw(lg: Running, raw: bytes) -> tuple[int, Any]:
    """POST raw bytes (numbers exactly as written) to the chat route; the status and JSON."""
    async with httpx.AsyncClient() as http:
        resp = await http.post(lg.base_url + "/chat/completions", content=raw,
                               headers={"content-type": "application/json"})
    return resp.status_code, resp.json()


def assert_schema_400(answer: Any, param: str, code: str) -> None:
    error = answer["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code)
    assert "nested too deeply" in error["message"] and "$defs" in error["message"]


@pytest.mark.parametrize(("kind", "mode"), MODES, ids=[m for _, m in MODES])
@pytest.mark.parametrize("via", ["items", "properties"])
async def test_a_tool_schema_nested_480_levels_is_a_400_naming_the_tool(
    fake: FakeUpstream, start_proxy: StartProxy, kind: str, mode: str, via: str
) -> None:
    # Before: RecursionError in the sanitiser (sanitise) or a body orjson cannot re-encode
    # (passthrough): a 500 either way.
    lg = await start(start_proxy, fake, kind)
    ok = json.dumps(tool("ok", {"type": "object"}))
    deep = '{"type": "function", "function": {"name": "deep", "parameters": ' + nested_json(
        480, via) + "}}"
    head = '{"model": "m", "messages": [{"role": "user", "content": "Hi"}], "tools": ['

    status, answer = await post_raw(lg, f"{head}{ok}, {deep}]}}".encode())

    assert status == 400, answer
    assert_schema_400(answer, "tools[1].function.parameters", "invalid_tool_schema")
    assert fake.requests == []


@pytest.mark.parametrize(("kind", "mode"), MODES, ids=[m for _, m in MODES])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_deep_response_schema_is_a_400_the_sdk_raises(
    fake: FakeUpstream, start_proxy: StartProxy, kind: str, mode: str, stream: bool
) -> None:
    lg = await start(start_proxy, fake, kind)

    with pytest.raises(openai.BadRequestError) as caught:
        await ask(lg, stream, response_format=schema_format(nested(150, "properties")))

    assert caught.value.status_code == 400
    assert_schema_400({"error": caught.value.body}, "response_format.json_schema.schema",
                      "invalid_json_schema")
    assert fake.requests == []


@pytest.mark.parametrize(("kind", "mode"), MODES, ids=[m for _, m in MODES])
async def test_a_schema_nested_within_the_limit_is_sent(
    fake: FakeUpstream, start_proxy: StartProxy, kind: str, mode: str
) -> None:
    lg = await start(start_proxy, fake, kind)
    schema = nested(32, "properties")  # MAX_DEPTH

    await ask(lg, tools=[tool("deep", schema)], response_format=schema_format(schema))

    (body,) = fake.bodies()
    assert body["tools"][0]["function"]["parameters"] == schema
    assert body["response_format"]["json_schema"]["schema"] == schema


# Counts beyond 64 bits, as an agent's generated schema may write them; orjson parses each as a
# float. The lookaround pattern makes sanitise mode rewrite the schema, so the body is
# re-encoded rather than forwarded as the client's bytes.
HUGE = (
    b'{"type": "object", "minProperties": 1e308, "properties": {'
    b'"s": {"type": "string", "maxLength": 1e21, "pattern": "^(?!x)"}, '
    b'"l": {"type": ["array", "null"], "minItems": 1e20, "items": {"type": "string"}}}}'
)


def huge_body(where: str) -> bytes:
    if where == "tools":
        holder = b'"tools": [{"type": "function", "function": {"name": "t", "parameters": %s}}]'
    else:
        holder = b'"response_format": {"type": "json_schema", "json_schema": {"name": "r", ' \
                 b'"schema": %s}}'
    return b'{"model": "m", "messages": [{"role": "user", "content": "Hi"}], %s}' % (
        holder % HUGE)


@pytest.mark.parametrize("where", ["tools", "response_format"])
async def test_counts_beyond_64_bits_reach_the_upstream_as_the_client_wrote_them(
    fake: FakeUpstream, start_proxy: StartProxy, where: str
) -> None:
    # Before: `int(1e21)` in the sanitised schema, which orjson cannot encode: a 500.
    lg = await start(start_proxy, fake, "llama.cpp")

    status, answer = await post_raw(lg, huge_body(where))

    assert status == 200, answer
    (body,) = fake.bodies()
    sent = (body["tools"][0]["function"]["parameters"] if where == "tools"
            else body["response_format"]["json_schema"]["schema"])
    assert sent["properties"]["s"] == {"type": "string", "maxLength": 1e21}  # pattern gone
    assert sent["properties"]["l"]["minItems"] == 1e20
    assert sent["minProperties"] == 1e308
    raw = fake.requests[0].raw  # the same numbers, as orjson writes a float
    assert b'"maxLength":1e+21' in raw and b'"minItems":1e+20' in raw
    assert b'"minProperties":1e+308' in raw


@pytest.mark.parametrize(("kind", "mode"), MODES, ids=[m for _, m in MODES])
async def test_a_type_list_of_non_names_is_never_a_500(
    fake: FakeUpstream, start_proxy: StartProxy, kind: str, mode: str
) -> None:
    # Before: `TypeError: unhashable type` deciding whether the response schema's root is an
    # object, in both modes. Sanitise refuses it with a 400 naming the field (a list of type
    # names holding an object means nothing it could repair); passthrough sends the schema as
    # written, for the upstream to judge, as it does every schema.
    lg = await start(start_proxy, fake, kind)
    schema = {"type": "object", "properties": {"a": {"type": [["string"], "null"]}}}
    if mode == "passthrough":
        await ask(lg, response_format=schema_format(schema))
        (body,) = fake.bodies()
        assert body["response_format"]["json_schema"]["schema"] == schema
        return
    with pytest.raises(openai.BadRequestError) as err:
        await ask(lg, response_format=schema_format(schema))
    assert err.value.param == "response_format.json_schema.schema"
    message = err.value.body["message"]  # type: ignore[index]
    assert "'type' list" in message and "#/properties/a" in message
    assert fake.bodies() == []


async def test_a_deep_response_schema_asked_for_in_words_is_a_400(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    # Once a model refuses response_format, its schema goes into the system prompt through
    # `sanitise` alone (no response_format is left for the schema step): the same 400.
    lg = await start(start_proxy, fake, "llama.cpp")
    fake.push(Json(orjson.dumps({"error": {
        "message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported "
        "with this model.", "type": "invalid_request_error"}}), status=400),
        Json(completion('{"a": "x"}', model=MODEL)))
    await ask(lg, response_format=schema_format({"type": "object", "properties": {
        "a": {"type": "string"}}}))
    assert len(fake.requests) == 2  # refused, then asked in words

    with pytest.raises(openai.BadRequestError) as caught:
        await ask(lg, response_format=schema_format(nested(150, "properties")))

    assert_schema_400({"error": caught.value.body}, "response_format.json_schema.schema",
                      "invalid_json_schema")
    assert len(fake.requests) == 2
