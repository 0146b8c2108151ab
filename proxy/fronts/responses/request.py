"""A Responses request as a chat completions request, and the settings its answer echoes.

Every field is accounted for: mapped to its chat counterpart (`max_output_tokens` → the reply
ceiling, `reasoning.effort` → `reasoning_effort`, `text.format` → `response_format`...), kept by
the front itself (`store`, `include`, `previous_response_id`, `metadata`), or dropped with a
notice when it has no chat meaning. Nothing is dropped silently, and a field of the wrong shape
is a 400 naming it (`input[3].call_id`). The chat path does the rest (latches, schemas, sizing,
recovery), exactly as for a chat client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy import knowntools
from proxy.fronts.common import Options
from proxy.fronts.responses.items import item_param, to_messages
from proxy.fronts.responses.tools import Tools, bad, translate_choice, translate_tools

ENCRYPTED_REASONING = "reasoning.encrypted_content"
LOGPROBS = "message.output_text.logprobs"
_KNOWN_INCLUDES = frozenset({ENCRYPTED_REASONING, LOGPROBS})
# Fields the front reads itself, or that only describe the client (telemetry, cache hints the
# model server does not take): echoed where the Response has them, never sent upstream.
_FRONT_FIELDS = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
    "max_output_tokens", "temperature", "top_p", "reasoning", "text", "stream", "store",
    "include", "metadata", "user", "previous_response_id", "truncation", "background",
    "prompt_cache_key", "safety_identifier", "client_metadata", "service_tier", "top_logprobs",
    "stream_options", "conversation", "prompt", "max_tool_calls",
})  # fmt: skip
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


@dataclass(slots=True)
class Translated:
    """A Responses request, translated."""

    chat: dict[str, Any]
    tools: Tools
    echo: dict[str, Any]  # the request's settings, as the Response object repeats them
    stream: bool
    store: bool
    encrypted_reasoning: bool  # include asks for reasoning.encrypted_content
    notices: list[str] = field(default_factory=list)


def translate(
    body: dict[str, Any], history: list[dict[str, Any]], options: Options, *, openai: bool
) -> Translated:
    """The chat request for `body`, after the stored `history` (a previous response's input and
    output items). `openai` says the upstream is OpenAI's own API, which takes the few chat
    fields local servers do not (`verbosity`, `service_tier`, `prompt_cache_key`)."""
    _refuse_unsupported(body)
    notices: list[str] = []
    if body.get("input") is None and not history:
        raise bad("input", "Missing required field 'input': a string or a list of items.",
                  code="missing_required_parameter")  # fmt: skip
    items = [*history, *as_items(body.get("input"))]
    extra = _additional_tools(items, len(history))
    tools = translate_tools(body.get("tools"), notices, extra=extra)
    choice = translate_choice(body.get("tool_choice"), tools)
    instructions = _optional(body, "instructions", str, "a string")
    chat: dict[str, Any] = {
        "model": body["model"],
        "messages": to_messages(items, instructions, tools, options, notices, len(history)),
    }
    _tools(chat, body, tools, choice)
    _sampling(chat, body, notices)
    _reasoning(chat, body, notices)
    _text(chat, body, notices, openai)
    include = _include(body, chat, notices)
    _passed_or_noted(chat, body, notices, openai)
    stream = _optional(body, "stream", bool, "true or false") is True
    if stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}  # usage for response.completed
    store = _optional(body, "store", bool, "true or false") is not False
    return Translated(
        chat=chat,
        tools=tools,
        echo=echo(body, store),
        stream=stream,
        store=store,
        encrypted_reasoning=ENCRYPTED_REASONING in include,
        notices=notices,
    )


def _additional_tools(items: list[Any], history: int) -> list[tuple[str, object]]:
    """Tools declared inside the input (`additional_tools` items: Codex sends its tools so for
    most models), each with the path an error names."""
    found: list[tuple[str, object]] = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            tools, param = item.get("tools"), item_param(i, history)
            if not isinstance(tools, list):
                raise bad(f"{param}.tools", f"{param}.tools must be a list of tools.")
            found += [(f"{param}.tools[{j}]", tool) for j, tool in enumerate(tools)]
    return found


def as_items(items: object) -> list[Any]:
    """`input` as a list of items (a string is one user message)."""
    if items is None:
        return []
    if isinstance(items, str):
        return [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list):
        raise bad("input", "'input' must be a string or a list of input items.")
    return items


def _refuse_unsupported(body: dict[str, Any]) -> None:
    _optional(body, "background", bool, "true or false")
    if body.get("background") is True:
        raise bad(
            "background",
            "background responses are not supported by latchgate: send the request without "
            "'background' (stream it if it is long).",
            code="unsupported_parameter",
        )
    for name in ("conversation", "prompt"):
        if body.get(name) is not None:
            raise bad(
                name,
                f"'{name}' refers to state kept on OpenAI's servers, which latchgate does not "
                "have: send the input itself (or a previous_response_id of latchgate's).",
                code="unsupported_parameter",
            )


def _optional(body: dict[str, Any], name: str, kind: type, what: str) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if (kind is not bool and isinstance(value, bool)) or not isinstance(value, kind):
        raise bad(name, f"'{name}' must be {what}.")
    return value


def _number(body: dict[str, Any], name: str, low: float, high: float | None = None) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value < low
        or (high is not None and value > high)
    ):
        upper = f" and {high:g}" if high is not None else " or more"
        raise bad(name, f"'{name}' must be a number between {low:g}{upper}.")
    return value


def _tools(chat: dict[str, Any], body: dict[str, Any], tools: Tools, choice: object) -> None:
    parallel = _optional(body, "parallel_tool_calls", bool, "true or false")
    if tools.chat:
        chat["tools"] = tools.chat
        if choice is not None:
            chat["tool_choice"] = choice
        if parallel is not None:
            chat["parallel_tool_calls"] = parallel
    elif choice == "required" or isinstance(choice, dict):
        raise bad("tool_choice", "tool_choice asks for a tool call, but no tool is declared.")


def _sampling(chat: dict[str, Any], body: dict[str, Any], notices: list[str]) -> None:
    ceiling = body.get("max_output_tokens")
    if ceiling is not None:
        if isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling < 1:
            raise bad("max_output_tokens", "'max_output_tokens' must be a whole number, 1 or more.")
        chat["max_tokens"] = ceiling
    for name, high in (("temperature", 2.0), ("top_p", 1.0)):
        value = _number(body, name, 0.0, high)
        if value is not None:
            chat[name] = value
    if _number(body, "max_tool_calls", 1) is not None:
        notices.append("max_tool_calls has no chat equivalent and was not applied.")
    top = body.get("top_logprobs")
    if top is not None and (
        isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= 20
    ):
        raise bad("top_logprobs", "'top_logprobs' must be a whole number from 0 to 20.")
    user = _optional(body, "user", str, "a string")
    if user is not None:
        chat["user"] = user


def _reasoning(chat: dict[str, Any], body: dict[str, Any], notices: list[str]) -> None:
    reasoning = body.get("reasoning")
    if reasoning is None:
        return
    if not isinstance(reasoning, dict):
        raise bad("reasoning", '\'reasoning\' must be an object such as {"effort": "low"}.')
    effort = reasoning.get("effort")
    if effort is not None:
        if effort not in _EFFORTS:
            raise bad("reasoning.effort", f"reasoning.effort must be one of {', '.join(_EFFORTS)}.")
        chat["reasoning_effort"] = effort
    extra = sorted(k for k, v in reasoning.items() if k != "effort" and v is not None)
    if extra:
        notices.append(
            f"reasoning.{', reasoning.'.join(extra)} has no chat equivalent and was not applied "
            "(the model's raw reasoning is returned as reasoning_text instead of a summary)."
        )


def _text(chat: dict[str, Any], body: dict[str, Any], notices: list[str], openai: bool) -> None:
    text = body.get("text")
    if text is None:
        return
    if not isinstance(text, dict):
        raise bad("text", '\'text\' must be an object such as {"format": {"type": "text"}}.')
    fmt = text.get("format")
    if fmt is not None:
        chat_format = _format(fmt)
        if chat_format is not None:
            chat["response_format"] = chat_format
    verbosity = text.get("verbosity")
    if verbosity is not None:
        if verbosity not in ("low", "medium", "high"):
            raise bad("text.verbosity", "text.verbosity must be low, medium or high.")
        if openai:
            chat["verbosity"] = verbosity
        else:
            notices.append("text.verbosity is not a setting model servers take; not applied.")


def _format(fmt: object) -> dict[str, Any] | None:
    if not isinstance(fmt, dict):
        raise bad("text.format", "text.format must be an object with a 'type'.")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise bad("text.format.type", "text.format.type must be text, json_object or json_schema.")
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise bad("text.format.schema", "text.format.schema must be a JSON schema object.")
    name = fmt.get("name")
    if not isinstance(name, str) or not name:
        raise bad("text.format.name", "text.format.name must be a non-empty string.")
    spec: dict[str, Any] = {"name": name, "schema": schema}
    for key, kind_ in (("strict", bool), ("description", str)):
        if fmt.get(key) is not None:
            if not isinstance(fmt[key], kind_):
                raise bad(f"text.format.{key}", f"text.format.{key} has the wrong type.")
            spec[key] = fmt[key]
    return {"type": "json_schema", "json_schema": spec}


def _include(body: dict[str, Any], chat: dict[str, Any], notices: list[str]) -> list[str]:
    include = body.get("include")
    if include is None:
        return []
    if not isinstance(include, list) or not all(isinstance(i, str) for i in include):
        raise bad("include", "'include' must be a list of strings.")
    if LOGPROBS in include:
        chat["logprobs"] = True
        if body.get("top_logprobs") is not None:
            chat["top_logprobs"] = body["top_logprobs"]  # checked with the sampling fields
    unknown = sorted(set(include) - _KNOWN_INCLUDES)
    if unknown:
        notices.append(f"include {', '.join(unknown)}: nothing of the kind here; not included.")
    return include


def _passed_or_noted(
    chat: dict[str, Any], body: dict[str, Any], notices: list[str], openai: bool
) -> None:
    """The fields left: OpenAI's API takes a few; everything else is noted, never silent."""
    metadata = body.get("metadata")
    if metadata is not None:
        _check_metadata(metadata)
    if body.get("truncation") not in (None, "disabled", "auto"):
        raise bad("truncation", "'truncation' must be auto or disabled.")
    if body.get("truncation") == "auto":
        notices.append(
            "truncation: auto is not applied: an input too long for the model's window is "
            "refused with context_length_exceeded instead of cut."
        )
    for name in ("service_tier", "prompt_cache_key", "safety_identifier"):
        value = body.get(name)
        if value is not None and not isinstance(value, str):
            raise bad(name, f"'{name}' must be a string.")
    if openai:
        for name in ("service_tier", "prompt_cache_key", "safety_identifier"):
            if body.get(name) is not None:
                chat[name] = body[name]
    elif body.get("service_tier") not in (None, "auto", "default"):
        notices.append("service_tier is OpenAI's; the model server has none. Not applied.")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad("stream_options", "'stream_options' must be an object.")
    if options:
        notices.append("stream_options of the Responses API have no chat meaning; not applied.")
    unknown = sorted(k for k in body if k not in _FRONT_FIELDS and body[k] is not None)
    if unknown:
        notices.append(f"Fields unknown to the Responses API were not sent: {', '.join(unknown)}.")


def _check_metadata(metadata: object) -> None:
    if not isinstance(metadata, dict) or len(metadata) > 16:
        raise bad("metadata", "'metadata' must be an object of at most 16 string pairs.")
    for key, value in metadata.items():
        if len(key) > 64 or not isinstance(value, str) or len(value) > 512:
            raise bad(
                "metadata",
                "metadata keys are at most 64 characters and values strings of at most 512.",
            )


def echo(body: dict[str, Any], store: bool) -> dict[str, Any]:
    """The request's settings as the Response object repeats them (unset: null, not a guess
    at the upstream's default)."""
    text: dict[str, Any] = body["text"] if isinstance(body.get("text"), dict) else {}
    reasoning: dict[str, Any] = body["reasoning"] if isinstance(body.get("reasoning"), dict) else {}
    return {
        "instructions": body.get("instructions"),
        "tools": _echoed_tools(body.get("tools")),
        "tool_choice": body.get("tool_choice") or "auto",
        "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {
            "effort": reasoning.get("effort"),
            "summary": reasoning.get("summary"),
        },
        "text": {
            "format": text.get("format") or {"type": "text"},
            "verbosity": text.get("verbosity"),
        },
        "truncation": body.get("truncation") or "disabled",
        "store": store,
        "background": False,
        "service_tier": body.get("service_tier") or "default",
        "metadata": body.get("metadata") or {},
        "user": body.get("user"),
        "safety_identifier": body.get("safety_identifier"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "top_logprobs": body.get("top_logprobs"),
    }


def _echoed_tools(tools: Any) -> Any:
    """The client's tools as the Response repeats them. For a list `knowntools` remembers (an
    agent's, the same every turn), its stored bytes (`orjson.Fragment`): a stream writes the
    Response three times (created, in progress, completed), and serialising tens of KB of
    tools for each cost more than the rest of the stream's events."""
    return knowntools.written(tools) if tools else []
