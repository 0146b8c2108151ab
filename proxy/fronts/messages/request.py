"""An Anthropic Messages request as a chat completions request.

Every field is mapped, or dropped with a notice, or refused with a 400 naming it:

- `system` (a string or text blocks; `cache_control` ignored) becomes the leading system
  message; a `role: "system"` message inside `messages` (Claude Code sends one after the
  user's turn) is sent as a user message marked `[system]`, as on the Responses front;
- content blocks: `text`; `image` (base64 or URL) as an `image_url` part; `document` with a
  text source as text; assistant `tool_use` as `tool_calls`; user `tool_result` as `tool`
  messages, in the order the calls were made, `is_error` said in the text; `thinking` as
  `reasoning_content` where the upstream reads it;
- `tools` as functions (`input_schema` the parameters; the chat path sanitises the schemas);
  Anthropic's server tools (web search, code execution, bash, the text editor, computer use)
  are removed with a notice; `tool_choice` `auto`/`any`/`tool`/`none`;
- `max_tokens`, `temperature`, `top_p`, `top_k`, `stop_sequences`, `metadata.user_id`, and
  `thinking` / `output_config.effort` as the upstream kind's reasoning switch.

Pure: a function of the body and of what the upstream takes (`proxy.fronts.common.Options`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy import knowntools
from proxy.errors import ProxyError, too_deep_to_write
from proxy.fronts.common import Options, late_system

TOOL_ID_PREFIX = "toolu_"
_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "stream",
        "tools",
        "tool_choice",
        "thinking",
        "metadata",
        "output_config",
        "context_management",
        "service_tier",
        "container",
        "mcp_servers",
    }
)
_EFFORTS = ("low", "medium", "high", "max")
_REFUSED = {
    "mcp_servers": "MCP servers are connected by Anthropic's servers",
    "container": "containers are Anthropic's code execution environment",
}


@dataclass(slots=True)
class Translated:
    """A Messages request, translated."""

    chat: dict[str, Any]
    stream: bool
    notices: list[str] = field(default_factory=list)


def bad(param: str, message: str) -> ProxyError:
    return ProxyError(400, message, param=param, code="invalid_value")


def chat_call_id(tool_use_id: str) -> str:
    """The chat call id for an Anthropic tool_use id (the front made it `toolu_<chat id>`)."""
    return (
        tool_use_id[len(TOOL_ID_PREFIX) :]
        if tool_use_id.startswith(TOOL_ID_PREFIX)
        else tool_use_id
    )


def translate(body: dict[str, Any], options: Options) -> Translated:
    """The chat request for a Messages body (its `model` already checked)."""
    notices: list[str] = []
    for name, why in _REFUSED.items():
        if body.get(name) is not None:
            raise bad(
                name, f"'{name}' is not supported here: {why}, which latchgate does not have."
            )
    messages = _system(body.get("system"))
    messages += to_messages(body.get("messages"), options, notices)
    chat: dict[str, Any] = {"model": body["model"], "messages": messages}
    _sampling(chat, body, options)
    _tools(chat, body, notices)
    _thinking(chat, body, options)
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad("stream", "'stream' must be true or false.")
    if stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}  # usage for message_delta
    if body.get("context_management") is not None:
        notices.append(
            "context_management has no chat equivalent (the server keeps no "
            "context to edit) and was not applied."
        )
    if body.get("service_tier") not in (None, "auto", "standard_only"):
        notices.append("service_tier is Anthropic's; the model server has none. Not applied.")
    unknown = sorted(k for k in body if k not in _FIELDS and body[k] is not None)
    if unknown:
        notices.append(f"Fields unknown to the Messages API were not sent: {', '.join(unknown)}.")
    return Translated(chat, bool(stream), notices)


# -- system and messages ------------------------------------------------------------------------


def _system(system: object) -> list[dict[str, Any]]:
    if isinstance(system, list):
        # Claude Code's first block is a billing line that changes from run to run: it means
        # nothing to a model, and at the head of the prompt it would defeat the server's
        # prompt cache for everything after it.
        system = [b for b in system if not _billing_line(b)]
    if system is None or system == "" or system == []:
        return []
    return [{"role": "system", "content": _plain_text(system, "system")}]


def _billing_line(block: object) -> bool:
    return (
        isinstance(block, dict)
        and isinstance(block.get("text"), str)
        and block["text"].startswith("x-anthropic-billing-header:")
    )


def _plain_text(content: object, param: str) -> str:
    """Text that must be text (system prompts): a string or text blocks, joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad(param, f"'{param}' must be a string or a list of text blocks.")
    texts = []
    for i, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise bad(f"{param}[{i}]", f"{param}[{i}] must be a text block.")
        if not isinstance(block.get("text"), str):
            raise bad(f"{param}[{i}].text", f"{param}[{i}].text must be a string.")
        texts.append(block["text"])
    return "\n\n".join(texts)


def to_messages(messages: object, options: Options, notices: list[str]) -> list[dict[str, Any]]:
    """The chat messages for the `messages` list."""
    if not isinstance(messages, list) or not messages:
        raise bad("messages", "'messages' must be a non-empty list of messages.")
    out: list[dict[str, Any]] = []
    dropped: set[str] = set()
    calls: list[str] = []  # chat ids of every call so far, in the order they were made
    for i, message in enumerate(messages):
        param = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad(param, f"{param} must be an object with 'role' and 'content'.")
        role = message.get("role")
        if role == "assistant":
            turn = _assistant(message.get("content"), f"{param}.content", options, dropped)
            calls += [call["id"] for call in turn.get("tool_calls", [])]
            out.append(turn)
        elif role == "user":
            out += _user(message.get("content"), f"{param}.content", options, dropped, calls)
        elif role == "system":
            text = _plain_text(message.get("content"), f"{param}.content")
            late, notice = late_system("system", text, param)
            out.append(late)
            notices.append(notice)
        else:
            raise bad(f"{param}.role", f'{param}.role must be "user" or "assistant".')
    if dropped:
        notices.append(
            f"Dropped content blocks of types {', '.join(sorted(dropped))}: the "
            "model server cannot read them."
        )
    return out


def _blocks(content: object, param: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise bad(param, f"{param} must be a string or a list of content blocks.")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise bad(f"{param}[{j}]", f"{param}[{j}] must be a content block with a 'type'.")
    return content


def _assistant(content: object, param: str, options: Options, dropped: set[str]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(_blocks(content, param)):
        kind, where = block["type"], f"{param}[{j}]"
        if kind == "text":
            texts.append(_string(block, "text", where))
        elif kind == "tool_use":
            calls.append(_call(block, where))
        elif kind == "thinking":
            thoughts.append(_string(block, "thinking", where))
        elif (
            kind == "redacted_thinking"
            or kind.endswith("_tool_result")
            or kind in ("server_tool_use", "mcp_tool_use")
        ):
            dropped.add(kind)
        else:
            raise bad(f"{where}.type", f"{where}.type {kind!r} is not an assistant content block.")
    if texts:
        message["content"] = "".join(texts)
    if calls:
        message["tool_calls"] = calls
    if thoughts and options.reasoning_field:
        message[options.reasoning_field] = "\n".join(thoughts)
    elif thoughts:
        dropped.add("thinking")
    return message


def _call(block: dict[str, Any], param: str) -> dict[str, Any]:
    call_id = _string(block, "id", param)
    name = _string(block, "name", param)
    arguments = block.get("input", {})
    if not isinstance(arguments, dict):
        raise bad(f"{param}.input", f"{param}.input must be an object.")
    try:
        text = orjson.dumps(arguments).decode()
    except orjson.JSONEncodeError:  # orjson reads 1024 levels of nesting, writes 254
        raise too_deep_to_write(f"{param}.input", "the call's arguments") from None
    return {
        "id": chat_call_id(call_id),
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


def _string(block: dict[str, Any], key: str, param: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise bad(f"{param}.{key}", f"{param}.{key} must be a string.")
    return value


def _user(
    content: object, param: str, options: Options, dropped: set[str], calls: list[str]
) -> list[dict[str, Any]]:
    """A user turn: its tool results as `tool` messages first, in the order the calls were
    made (chat wants them right after the calls, and templates pair them by position), then
    whatever else it says as one user message."""
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(_blocks(content, param)):
        kind, where = block["type"], f"{param}[{j}]"
        if kind == "tool_result":
            result = _result(block, where)
            if result["tool_call_id"] not in calls:
                raise bad(
                    f"{where}.tool_use_id",
                    f"{where}.tool_use_id matches no tool_use before it: every tool_result "
                    "must answer a call the assistant made.",
                )
            results.append(result)
        elif kind == "text":
            parts.append({"type": "text", "text": _string(block, "text", where)})
        elif kind == "image":
            parts.append(_image(block, where))
        elif kind == "document":
            parts.append(_document(block, where, options))
        elif kind in ("search_result", "container_upload"):
            dropped.add(kind)
        else:
            raise bad(f"{where}.type", f"{where}.type {kind!r} is not a user content block.")
    out = sorted(results, key=lambda r: calls.index(r["tool_call_id"]))
    if parts:
        if all(p["type"] == "text" for p in parts):
            out.append({"role": "user", "content": "\n".join(p["text"] for p in parts)})
        else:
            out.append({"role": "user", "content": parts})
    return out


def _result(block: dict[str, Any], param: str) -> dict[str, Any]:
    call_id = _string(block, "tool_use_id", param)
    content = block.get("content", "")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(
            _result_part(part, f"{param}.content[{k}]") for k, part in enumerate(content)
        )
    else:
        raise bad(f"{param}.content", f"{param}.content must be a string or a list of blocks.")
    if block.get("is_error") is True:
        text = f"Error: {text}"
    return {"role": "tool", "tool_call_id": chat_call_id(call_id), "content": text}


def _result_part(part: object, param: str) -> str:
    if not isinstance(part, dict):
        raise bad(param, f"{param} must be a content block.")
    if part.get("type") == "text" and isinstance(part.get("text"), str):
        return str(part["text"])
    if part.get("type") in ("image", "document"):
        # A tool message cannot carry an image in chat: said in words instead of refused.
        return f"[{part['type']} omitted: the model server takes none in a tool result]"
    raise bad(param, f"{param} must be a text, image or document block.")


def _image(block: dict[str, Any], param: str) -> dict[str, Any]:
    source = block.get("source")
    if not isinstance(source, dict):
        raise bad(f"{param}.source", f"{param}.source must be an object.")
    if source.get("type") == "base64":
        media = _string(source, "media_type", f"{param}.source")
        data = _string(source, "data", f"{param}.source")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if source.get("type") == "url":
        return {
            "type": "image_url",
            "image_url": {"url": _string(source, "url", f"{param}.source")},
        }
    raise bad(
        f"{param}.source.type",
        f"{param}.source.type must be base64 or url (file ids are Anthropic's own storage).",
    )


def _document(block: dict[str, Any], param: str, options: Options) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "text":
        return {"type": "text", "text": _string(source, "data", f"{param}.source")}
    if isinstance(source, dict) and source.get("type") == "base64" and options.files:
        media = _string(source, "media_type", f"{param}.source")
        data = _string(source, "data", f"{param}.source")
        return {"type": "file", "file": {"file_data": f"data:{media};base64,{data}"}}
    raise bad(
        f"{param}.source",
        f"{param} is a document this upstream cannot read in a chat "
        "request; send its text as a text block (or a document with a text source).",
    )


# -- settings ----------------------------------------------------------------------------


def _sampling(chat: dict[str, Any], body: dict[str, Any], options: Options) -> None:
    ceiling = body.get("max_tokens")
    if ceiling is None:
        raise ProxyError(400, "Missing required field 'max_tokens'.", param="max_tokens",
                         code="missing_required_parameter")  # fmt: skip
    chat["max_tokens"] = _whole(body, "max_tokens", 1)
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise bad(name, f"'{name}' must be a number from 0 to 1.")
            chat[name] = value
    top_k = body.get("top_k")
    if top_k is not None:
        top_k = _whole(body, "top_k", 0)
        if options.kind != "openai":  # OpenAI's chat API has no top_k; local servers do
            chat["top_k"] = top_k
    stop = body.get("stop_sequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise bad("stop_sequences", "'stop_sequences' must be a list of strings.")
        if stop:
            chat["stop"] = stop
    user = _user_id(body.get("metadata"))
    if user:
        chat["user"] = user


def _whole(body: dict[str, Any], name: str, low: int) -> int:
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise bad(name, f"'{name}' must be a whole number, {low} or more.")
    return value


def _user_id(metadata: object) -> str | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise bad("metadata", "'metadata' must be an object.")
    user = metadata.get("user_id")
    if user is not None and not isinstance(user, str):
        raise bad("metadata.user_id", "metadata.user_id must be a string.")
    return user


def _tools(chat: dict[str, Any], body: dict[str, Any], notices: list[str]) -> None:
    tools = body.get("tools")
    functions: list[dict[str, Any]] = []
    removed: list[str] = []
    if tools is not None:
        if not isinstance(tools, list):
            raise bad("tools", "'tools' must be a list of tools.")
        # Claude Code sends the same tools every turn: translated once (`knowntools`).
        functions = knowntools.derived(tools, _functions)
        removed = [str(t["type"]) for t in tools if t.get("type") not in (None, "custom")]
    if removed:
        notices.append(
            f"Removed Anthropic's server tools ({', '.join(sorted(set(removed)))}): "
            "they run on Anthropic's side, and the model server cannot run them."
        )
    names = {f["function"]["name"] for f in functions}
    choice = _choice(body.get("tool_choice"), names)
    if functions:
        chat["tools"] = functions
        if choice is not None:
            chat["tool_choice"], parallel = choice
            if parallel is False:
                chat["parallel_tool_calls"] = False
    elif choice is not None and choice[0] not in ("auto", "none"):
        raise bad("tool_choice", "tool_choice asks for a tool, but no tool is declared.")


def _functions(tools: list[Any]) -> list[dict[str, Any]]:
    """The chat functions for the client's tools (its server tools left out)."""
    made = (_tool(tool, f"tools[{i}]") for i, tool in enumerate(tools))
    return [function for function in made if function is not None]


def _tool(tool: object, param: str) -> dict[str, Any] | None:
    """The chat function for a client tool; None for a server tool."""
    if not isinstance(tool, dict):
        raise bad(param, f"{param} must be a tool object.")
    kind = tool.get("type")
    if kind not in (None, "custom"):
        if not isinstance(kind, str):
            raise bad(f"{param}.type", f"{param}.type must be a string.")
        return None  # web_search_20250305, bash_20250124, text_editor_..., computer_...
    name = _string(tool, "name", param)
    if not name:
        raise bad(f"{param}.name", f"{param}.name must not be empty.")
    function: dict[str, Any] = {"name": name}
    description = tool.get("description")
    if description is not None:
        function["description"] = _string(tool, "description", param)
    schema = tool.get("input_schema")
    if not isinstance(schema, dict):
        raise bad(f"{param}.input_schema", f"{param}.input_schema must be a JSON schema object.")
    function["parameters"] = schema
    return {"type": "function", "function": function}


def _choice(choice: object, names: set[str]) -> tuple[object, bool | None] | None:
    """The chat tool_choice and parallel_tool_calls for an Anthropic tool_choice."""
    if choice is None:
        return None
    if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        raise bad("tool_choice.type", "tool_choice.type must be auto, any, tool or none.")
    parallel = choice.get("disable_parallel_tool_use")
    if parallel is not None and not isinstance(parallel, bool):
        raise bad(
            "tool_choice.disable_parallel_tool_use",
            "tool_choice.disable_parallel_tool_use must be true or false.",
        )
    kind = choice["type"]
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or name not in names:
            raise bad("tool_choice.name", f"tool_choice.name {name!r} is not a declared tool.")
        return {
            "type": "function",
            "function": {"name": name},
        }, None if parallel is None else not parallel
    mapped = {"auto": "auto", "any": "required", "none": "none"}[kind]
    return mapped, None if parallel is None else not parallel


def _thinking(chat: dict[str, Any], body: dict[str, Any], options: Options) -> None:
    """`thinking` and `output_config.effort` as the upstream kind's reasoning switch."""
    effort = _effort(body.get("output_config"))
    thinking = body.get("thinking")
    on: bool | None = None
    if thinking is not None:
        if not isinstance(thinking, dict) or thinking.get("type") not in (
            "enabled", "adaptive", "disabled"
        ):  # fmt: skip
            raise bad("thinking", 'thinking must be {"type": "enabled" | "adaptive" | "disabled"}.')
        on = thinking["type"] != "disabled"
        if effort is None and thinking["type"] == "enabled":
            effort = _budget_effort(thinking.get("budget_tokens"))
    if on is not None and options.kind in ("llama.cpp", "vllm"):
        chat["chat_template_kwargs"] = {"enable_thinking": on}
    elif on is not None and options.kind == "ollama":
        chat["think"] = on
    if effort is not None and on is not False:
        chat["reasoning_effort"] = "high" if effort == "max" else effort


def _effort(config: object) -> str | None:
    if config is None:
        return None
    if not isinstance(config, dict):
        raise bad("output_config", "'output_config' must be an object.")
    effort = config.get("effort")
    if effort is not None and effort not in _EFFORTS:
        raise bad(
            "output_config.effort", f"output_config.effort must be one of {', '.join(_EFFORTS)}."
        )
    return effort


def _budget_effort(budget: object) -> str | None:
    """An effort for a thinking budget (the chat API knows efforts, not budgets)."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise bad("thinking.budget_tokens", "thinking.budget_tokens must be a whole number.")
    return "low" if budget < 4096 else "medium" if budget < 16384 else "high"
