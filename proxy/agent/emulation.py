"""Tool calling for models whose server refuses `tools`: the tools are described in the prompt.

When a model has latched `native_tools` off (BEHAVIOUR 2.3 rule 9, section 10), the request goes
out without `tools` (nor `tool_choice`, `parallel_tool_calls` or the legacy `functions` /
`function_call`). The tools are listed in the system prompt with one instruction to write calls in
one fixed format, the Hermes/Qwen `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` that
the recovery of section 4.1 (proxy/toolcalls/recovery.py) already turns back into `tool_calls`.
Earlier calls and their results are rewritten into plain user/assistant text in the same format,
since templates without tool support reject `tool` roles and assistant `content: null`.

Everything here is pure and deterministic: the same body gives the same bytes, and the system
prompt depends only on the client's system prompt and tools, so a server's prompt cache survives
from one turn of a conversation to the next. What changes per turn (`tool_choice`,
`parallel_tool_calls`) is said in a note on the last user message instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from proxy.agent.structured import append_text, with_instruction

DROPPED = frozenset({"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"})

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"


@dataclass(frozen=True)
class Tool:
    """One declared function, as the prompt lists it."""

    name: str
    description: str | None
    parameters: object  # the JSON schema as the client sent it; None when it sent none


@dataclass(frozen=True)
class Choice:
    """What this turn allows, from `tool_choice` (or legacy `function_call`)."""

    mode: Literal["auto", "none", "required", "named"] = "auto"
    name: str | None = None  # the function to call, for "named"
    allowed: tuple[str, ...] = ()  # `allowed_tools`: only these may be called
    single: bool = False  # `parallel_tool_calls: false`


@dataclass(frozen=True)
class Wording:
    """The words of the instruction; bench/emulation_wording.py measures alternatives."""

    intro: str  # before the tool list
    format: str  # after the tool list: how to write a call
    required: str  # per-turn notes, on the last user message
    named: str  # holds {name}
    none: str
    allowed: str  # holds {names}
    single: str


# Chosen by bench/emulation_wording.py on Qwen2.5-Coder-0.5B behind llama-server --no-jinja
# (bench/RESULTS.md, "Tool emulation wording"): Qwen's own tool-template wording, 9/15 turns
# recovered as valid calls against 8/15 for plain imperative English and 9/15 for this text
# plus a "use the tags, stop after the last call" reminder (longer, no better).
WORDING = Wording(
    intro=(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:"
    ),
    format=(
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    ),
    required="You must call at least one function in this reply.",
    named="You must call the function {name} in this reply.",
    none="Do not call any function in this reply; answer in text.",
    allowed="Only these functions may be called in this reply: {names}.",
    single="Call at most one function in this reply.",
)


def emulate(body: dict[str, Any], wording: Wording = WORDING) -> dict[str, Any]:
    """A new chat-completions body without native tools: the tools are described in the system
    prompt, earlier calls and results are rewritten as text, and this turn's `tool_choice` is a
    note on the last user message. `body` is never mutated; what cannot be read is left as is."""
    out = {key: value for key, value in body.items() if key not in DROPPED}
    messages = body.get("messages")
    if not isinstance(messages, list):
        return out  # nothing to describe the tools in: the server answers the client's error
    rewritten = rewrite_history(messages)
    tools = declared(body)
    note = choice_note(choice_of(body), wording) if tools else None
    if note is not None:
        last = _last_user(rewritten)
        if last is None:
            rewritten = [*rewritten, {"role": "user", "content": note}]
        else:
            message = rewritten[last]
            updated = {**message, "content": append_text(message.get("content"), note)}
            rewritten = [*rewritten[:last], updated, *rewritten[last + 1 :]]
    if tools:
        rewritten = with_instruction(rewritten, instruction(tools, wording))
    out["messages"] = rewritten
    return out


def declared(body: dict[str, Any]) -> list[Tool]:
    """The functions the body declares: `tools`, then legacy `functions` not already named."""
    found: list[Tool] = []
    tools = body.get("tools")
    for item in tools if isinstance(tools, list) else []:
        spec = item.get("function") if isinstance(item, dict) else None
        tool = _tool(spec)
        if tool is not None:
            found.append(tool)
    functions = body.get("functions")
    for spec in functions if isinstance(functions, list) else []:
        tool = _tool(spec)
        if tool is not None and all(tool.name != t.name for t in found):
            found.append(tool)
    return found


def openai_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The declared functions in `tools` shape, for recovering calls from the reply
    (`proxy.toolcalls.recovery.process_response(reply, openai_tools(body))`)."""
    return [{"type": "function", "function": _tool_line(tool)} for tool in declared(body)]


def _tool(spec: object) -> Tool | None:
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        return None
    description = spec.get("description")
    return Tool(
        name=spec["name"],
        description=description if isinstance(description, str) and description else None,
        parameters=spec.get("parameters"),
    )


def _tool_line(tool: Tool) -> dict[str, Any]:
    line: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        line["description"] = tool.description
    if tool.parameters is not None:
        line["parameters"] = tool.parameters
    return line


def instruction(tools: list[Tool], wording: Wording = WORDING) -> str:
    """The system-prompt text: the tools, one compact JSON object a line, and how to call.

    It depends on the tools alone (not on `tool_choice`), so it stays the same on every turn.
    """
    lines = "\n".join(_dumps(_tool_line(tool), spaced=False) for tool in tools)
    return f"{wording.intro}\n<tools>\n{lines}\n</tools>\n\n{wording.format}"


def choice_of(body: dict[str, Any]) -> Choice:
    """This turn's `tool_choice` (else legacy `function_call`) and `parallel_tool_calls`."""
    single = body.get("parallel_tool_calls") is False
    raw = body.get("tool_choice", body.get("function_call"))
    if raw == "none" or raw == "required":
        return Choice(mode=raw, single=single)
    if not isinstance(raw, dict):
        return Choice(single=single)
    if raw.get("type") == "allowed_tools":
        return _allowed(raw.get("allowed_tools"), single)
    function = raw.get("function")
    spec: dict[str, Any] = function if isinstance(function, dict) else raw  # legacy: {"name"}
    name = spec.get("name")
    if isinstance(name, str) and name:
        return Choice(mode="named", name=name, single=single)
    return Choice(single=single)


def _allowed(spec: object, single: bool) -> Choice:
    if not isinstance(spec, dict):
        return Choice(single=single)
    names: list[str] = []
    tools = spec.get("tools")
    for item in tools if isinstance(tools, list) else []:
        function = item.get("function") if isinstance(item, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            names.append(name)
    mode: Literal["auto", "required"] = "required" if spec.get("mode") == "required" else "auto"
    return Choice(mode=mode, allowed=tuple(names), single=single)


def choice_note(choice: Choice, wording: Wording = WORDING) -> str | None:
    """The per-turn sentence(s) for this choice; None for plain "auto".

    "none" keeps the tools in the system prompt and says no call may be made, rather than
    leaving the tools out: leaving them out would change the system prompt for that one turn
    (the server's prompt cache lost twice), and the history may still show earlier calls.
    """
    parts: list[str] = []
    if choice.mode == "none":
        return wording.none
    if choice.mode == "required":
        parts.append(wording.required)
    if choice.mode == "named" and choice.name is not None:
        parts.append(wording.named.format(name=choice.name))
    if choice.allowed:
        parts.append(wording.allowed.format(names=", ".join(choice.allowed)))
    if choice.single:
        parts.append(wording.single)
    return " ".join(parts) or None


def _last_user(messages: list[Any]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, dict) and message.get("role") == "user":
            return index
    return None


# --- history --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One earlier call, readable enough to be written as a `<tool_call>` block."""

    id: str | None
    name: str
    arguments: object  # a parsed JSON object when the string held one, else as sent


@dataclass(frozen=True)
class _Turn:
    message: Any
    from_tool: bool  # a user message made from a tool result: merged with its neighbours


def rewrite_history(messages: list[Any]) -> list[Any]:
    """The messages with assistant calls written as `<tool_call>` blocks, tool results as user
    messages, and user messages next to a result merged, so roles alternate; other messages and
    anything unreadable are left as they are."""
    names: dict[str, str] = {}  # tool_call_id -> name, from the calls seen so far
    turns: list[_Turn] = []
    for message in messages:
        turn = _Turn(message, False)
        if isinstance(message, dict) and message.get("role") == "assistant":
            calls = calls_of(message)
            names.update({c.id: c.name for c in calls or [] if c.id is not None})
            turn = _Turn(_assistant_text(message, calls), False)
        elif isinstance(message, dict) and message.get("role") in ("tool", "function"):
            turn = _Turn(_tool_result(message, names), True)
        _push(turns, turn)
    return [turn.message for turn in turns]


def calls_of(message: dict[str, Any]) -> list[Call] | None:
    """The calls an assistant message carries ([] for none); None when `tool_calls` (or legacy
    `function_call`) is there but not every call in it can be read."""
    raw = message.get("tool_calls")
    legacy = message.get("function_call")
    if raw is None and legacy is None:
        return []
    if raw is None:
        items: list[Any] = [{"function": legacy}]
    elif isinstance(raw, list):
        items = raw
    else:
        return None
    calls = [_call(item) for item in items]
    # One unreadable call leaves the whole message as it is, rather than silently dropping it
    # from the history the model sees.
    return None if any(call is None for call in calls) else [c for c in calls if c is not None]


def _call(item: object) -> Call | None:
    function = item.get("function") if isinstance(item, dict) else None
    if not isinstance(item, dict) or not isinstance(function, dict):
        return None
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return None
    call_id = item.get("id")
    return Call(call_id if isinstance(call_id, str) else None, name, _arguments(function))


def _arguments(function: dict[str, Any]) -> object:
    raw = function.get("arguments")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        return raw
    try:
        parsed = json.loads(raw)
    except ValueError:
        return raw
    return parsed if isinstance(parsed, dict) else raw


def tool_block(name: str, arguments: object) -> str:
    """One call in the fixed format, as the instruction shows it and the recovery reads it."""
    payload = _dumps({"name": name, "arguments": arguments}, spaced=True)
    return f"{CALL_OPEN}\n{payload}\n{CALL_CLOSE}"


def _assistant_text(message: dict[str, Any], calls: list[Call] | None) -> dict[str, Any]:
    content = message.get("content")
    if calls is None:
        # Unreadable calls stay; only the `content: null` templates reject is filled in.
        return {**message, "content": ""} if content is None else message
    if not calls and content is not None and "tool_calls" not in message:
        return message
    rest = {k: v for k, v in message.items() if k not in ("tool_calls", "function_call")}
    blocks = "\n".join(tool_block(call.name, call.arguments) for call in calls)
    if not blocks:
        return {**rest, "content": "" if content is None else content}
    return {**rest, "content": _join([_parts(content), _parts(blocks)], "\n")}


def _tool_result(message: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    call_id = message.get("tool_call_id")
    name = names.get(call_id) if isinstance(call_id, str) else None
    if name is None and isinstance(message.get("name"), str):
        name = message["name"]  # legacy `function` role, or a client that names the tool
    opener = f'<tool_response name="{name}">' if name else "<tool_response>"
    parts = [_parts(opener), _parts(message.get("content")), _parts("</tool_response>")]
    return {"role": "user", "content": _join(parts, "\n")}


def _push(turns: list[_Turn], turn: _Turn) -> None:
    last = turns[-1] if turns else None
    if (
        last is not None
        and (last.from_tool or turn.from_tool)
        and _is_user(last.message)
        and _is_user(turn.message)
    ):
        content = _join([_parts(last.message.get("content")), _parts(turn.message.get("content"))])
        turns[-1] = _Turn({**last.message, "content": content}, True)
        return
    turns.append(turn)


def _is_user(message: object) -> bool:
    return isinstance(message, dict) and message.get("role") == "user"


def _parts(content: object) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, list):
        return content
    text = content if isinstance(content, str) else _dumps(content, spaced=False)
    return [{"type": "text", "text": text}] if text else []


def _join(groups: list[list[Any]], separator: str = "\n\n") -> str | list[Any]:
    """The groups' parts in order with adjacent text parts joined by `separator`: one string
    when every part is text, else a list in which image (and other) parts are kept as they are."""
    merged: list[Any] = []
    for part in (part for group in groups for part in group):
        previous = merged[-1] if merged else None
        if _text_of(part) is not None and previous is not None and _text_of(previous) is not None:
            merged[-1] = {**previous, "text": f"{_text_of(previous)}{separator}{_text_of(part)}"}
        else:
            merged.append(part)
    if all(_text_of(part) is not None for part in merged):
        return "".join(str(_text_of(part)) for part in merged)
    return merged


def _text_of(part: object) -> str | None:
    if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return str(part["text"])
    return None


def _dumps(value: object, spaced: bool) -> str:
    """JSON text; UTF-8 kept unless a lone surrogate forces escapes, never raising."""
    separators = (", ", ": ") if spaced else (",", ":")
    try:
        text = json.dumps(value, ensure_ascii=False, separators=separators, default=str)
        text.encode()
        return text
    except UnicodeEncodeError:
        return json.dumps(value, separators=separators, default=str)
    except (TypeError, ValueError):
        return str(value)  # keys that are not strings, or a cycle: not from a JSON body
