"""Responses input items as chat messages.

A Responses conversation is a list of items: messages, the model's calls (`function_call`,
`custom_tool_call`, `local_shell_call`), their outputs, reasoning. Chat wants messages, so:

- roles `developer` and `system` become `system`; every one before the first user message is
  merged, with `instructions` first, into one leading system message (Codex sends several
  developer messages, and many chat templates refuse a system message anywhere but first); a
  later one becomes a user message marked `[developer]`, with a notice;
- consecutive calls, and the assistant text right before them, become one assistant message
  with `tool_calls`; each output becomes a `tool` message, and an output whose `call_id` no call
  before it carries is a 400 naming it (a chat template cannot render it);
- a reasoning item's text goes on the next assistant message as `reasoning_content` where the
  upstream reads it (else it is dropped): from its `content`, or latchgate's own token in
  `encrypted_content`; OpenAI's ciphertext means nothing to another server and is dropped;
- history of hosted tools (web search calls and the like) is dropped with a notice.

Pure: `references` (items an `item_reference` names) are looked up by the caller beforehand.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.errors import too_deep_to_write
from proxy.fronts.common import Options, late_system
from proxy.fronts.ids import new_id
from proxy.fronts.responses.tools import CUSTOM_PARAMETER, Tools, bad

REASONING_TOKEN = "lg1:"  # latchgate's own encrypted_content: "lg1:" + base64url(JSON)
_IGNORED_HISTORY = frozenset({
    "web_search_call", "file_search_call", "computer_call", "computer_call_output",
    "image_generation_call", "code_interpreter_call", "mcp_call", "mcp_list_tools",
    "mcp_approval_request", "mcp_approval_response", "tool_search_call", "tool_search_output",
    "shell_call", "shell_call_output", "apply_patch_call", "apply_patch_call_output",
    "compaction",
})  # fmt: skip
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})


def reasoning_token(text: str) -> str:
    """latchgate's `encrypted_content` for a reasoning text (not secret: a client that keeps
    only this field, as store:false clients are told to, still round-trips the reasoning)."""
    data = base64.urlsafe_b64encode(orjson.dumps({"t": text})).decode("ascii")
    return REASONING_TOKEN + data


def _token_text(token: str) -> str | None:
    try:
        value = orjson.loads(base64.urlsafe_b64decode(token[len(REASONING_TOKEN) :]))
    except (ValueError, orjson.JSONDecodeError):
        return None
    text = value.get("t") if isinstance(value, dict) else None
    return text if isinstance(text, str) else None


@dataclass(slots=True)
class _Builder:
    """The messages built so far, and what the next item attaches to."""

    tools: Tools
    options: Options
    notices: list[str]
    messages: list[dict[str, Any]] = field(default_factory=list)
    system: list[str] = field(default_factory=list)  # leading system text, merged
    seen_user: bool = False
    calls: set[str] = field(default_factory=set)  # call ids so far
    shell_ids: dict[str, str] = field(default_factory=dict)  # local shell call item id -> call id
    open_turn: dict[str, Any] | None = None  # the assistant message calls still join
    reasoning: list[str] = field(default_factory=list)  # for the next assistant message
    dropped: set[str] = field(default_factory=set)

    def assistant(self) -> dict[str, Any]:
        if self.open_turn is None:
            self.open_turn = {"role": "assistant", "content": None}
            self.messages.append(self.open_turn)
            if self.reasoning and self.options.reasoning_field:
                self.open_turn[self.options.reasoning_field] = "\n".join(self.reasoning)
            self.reasoning = []
        return self.open_turn


def to_messages(
    items: list[Any],
    instructions: str | None,
    tools: Tools,
    options: Options,
    notices: list[str],
    history: int = 0,
) -> list[dict[str, Any]]:
    """The chat messages for the input items; the first `history` of them come from the
    previous response (an error names those by that, the rest by their place in `input`)."""
    b = _Builder(tools, options, notices)
    if instructions:
        b.system.append(instructions)
    for i, item in enumerate(items):
        _item(b, item, item_param(i, history))
    if b.dropped:
        notices.append(
            f"Dropped input items of types {', '.join(sorted(b.dropped))}: they are the history "
            "of hosted tools (or opaque reasoning) that the model server cannot read."
        )
    if b.system:
        b.messages.insert(0, {"role": "system", "content": "\n\n".join(b.system)})
    return b.messages


def item_param(i: int, history: int) -> str:
    """How an error names the `i`th item of a conversation whose first `history` are stored."""
    if i < history:
        return f"previous_response_id (its item {i})"
    return f"input[{i - history}]"


def _item(b: _Builder, item: object, param: str) -> None:
    if not isinstance(item, dict):
        raise bad(param, f"{param} must be an input item object.")
    kind = item.get("type")
    if kind is None and "role" in item:
        kind = "message"  # `type` is optional on messages
    elif kind is None and "id" in item:
        raise bad(f"{param}.id", f"{param} refers to an item that is not stored here.")
    if not isinstance(kind, str):
        raise bad(f"{param}.type", f"{param}.type must be a string naming the item type.")
    if kind == "message":
        _message(b, item, param)
    elif kind in _CALLS:
        _call(b, item, param, kind)
    elif kind in _OUTPUTS:
        _output(b, item, param)
    elif kind == "reasoning":
        _reasoning(b, item, param)
    elif kind == "additional_tools":
        pass  # its tools were declared with the rest (proxy.fronts.responses.request)
    elif kind in _IGNORED_HISTORY:
        b.dropped.add(kind)
    elif kind == "item_reference":
        raise bad(f"{param}.id", f"{param} refers to an item that is not stored here.")
    else:
        raise bad(f"{param}.type", f"{param}.type {kind!r} is not an input item type.")


# -- messages --------------------------------------------------------------------------------


def _message(b: _Builder, item: dict[str, Any], param: str) -> None:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise bad(f"{param}.role", f"{param}.role must be user, assistant, system or developer.")
    content = item.get("content")
    if role in ("system", "developer"):
        text = _text(content, f"{param}.content")
        if not b.seen_user and not b.messages:
            b.system.append(text)
        else:
            b.open_turn = None
            message, notice = late_system(role, text, param)
            b.messages.append(message)
            b.notices.append(notice)
        return
    if role == "assistant":
        turn = b.assistant()
        text = _text(content, f"{param}.content")
        turn["content"] = text if turn["content"] is None else turn["content"] + text
        return
    b.seen_user = True
    b.open_turn = None
    b.messages.append({"role": "user", "content": _user_content(b, content, f"{param}.content")})


def _text(content: object, param: str) -> str:
    """The text of a content that must be text (system, developer and assistant messages)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad(param, f"{param} must be a string or a list of content parts.")
    texts: list[str] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        key = "refusal" if kind == "refusal" else "text"
        value = part.get(key) if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text", "refusal") or not isinstance(
            value, str
        ):
            raise bad(f"{param}[{j}]", f"{param}[{j}] must be a text part with a 'text' string.")
        texts.append(value)
    return "".join(texts)


def _user_content(b: _Builder, content: object, param: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad(param, f"{param} must be a string or a list of content parts.")
    parts = [_part(b, part, f"{param}[{j}]") for j, part in enumerate(content)]
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)  # the form every chat template reads
    return parts


def _part(b: _Builder, part: object, param: str) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise bad(param, f"{param} must be a content part object.")
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        text = part.get("text")
        if not isinstance(text, str):
            raise bad(f"{param}.text", f"{param}.text must be a string.")
        return {"type": "text", "text": text}
    if kind == "input_image":
        return _image(part, param)
    if kind == "input_file":
        return _file(b, part, param)
    raise bad(f"{param}.type", f"{param}.type {kind!r} is not an input content part type.")


def _image(part: dict[str, Any], param: str) -> dict[str, Any]:
    url = part.get("image_url")
    if not isinstance(url, str) or not url:
        raise bad(
            f"{param}.image_url",
            f"{param} needs an image_url (a URL or a data: URL); file ids are OpenAI's own "
            "storage, which latchgate does not have.",
        )
    image: dict[str, Any] = {"url": url}
    detail = part.get("detail")
    if detail not in (None, "low", "high", "auto", "original"):
        raise bad(f"{param}.detail", f"{param}.detail must be low, high, auto or original.")
    if detail in ("low", "high", "auto"):  # "original" has no chat word: the server's default
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def _file(b: _Builder, part: dict[str, Any], param: str) -> dict[str, Any]:
    if not b.options.files:
        raise bad(
            param,
            f"{param} is a file, and this upstream does not take files in a chat request. "
            "Send the file's text as an input_text part instead.",
        )
    file = {
        k: part[k] for k in ("file_data", "file_id", "filename") if isinstance(part.get(k), str)
    }
    return {"type": "file", "file": file}


# -- calls and their outputs -----------------------------------------------------------------


def _call(b: _Builder, item: dict[str, Any], param: str, kind: str) -> None:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise bad(f"{param}.call_id", f"{param}.call_id must be a non-empty string.")
    if kind == "local_shell_call":
        action = item.get("action")
        if not isinstance(action, dict):
            raise bad(f"{param}.action", f"{param}.action must be an object.")
        name = b.tools.chat_name("local_shell")
        try:
            arguments = orjson.dumps({k: v for k, v in action.items() if k != "type"}).decode()
        except orjson.JSONEncodeError:  # orjson reads 1024 levels of nesting, writes 254
            raise too_deep_to_write(f"{param}.action", "the call's arguments") from None
        if isinstance(item.get("id"), str):
            b.shell_ids[item["id"]] = call_id
    else:
        client_name = item.get("name")
        if not isinstance(client_name, str) or not client_name:
            raise bad(f"{param}.name", f"{param}.name must be a non-empty string.")
        namespace = item.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            raise bad(f"{param}.namespace", f"{param}.namespace must be a string.")
        name = b.tools.chat_name(client_name, namespace)
        arguments = _arguments(item, param, kind)
    turn = b.assistant()
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    turn.setdefault("tool_calls", []).append(call)
    b.calls.add(call_id)


def _arguments(item: dict[str, Any], param: str, kind: str) -> str:
    if kind == "custom_tool_call":
        value = item.get("input")
        if not isinstance(value, str):
            raise bad(f"{param}.input", f"{param}.input must be a string.")
        return orjson.dumps({CUSTOM_PARAMETER: value}).decode()
    arguments = item.get("arguments")
    if not isinstance(arguments, str):
        raise bad(f"{param}.arguments", f"{param}.arguments must be a string of JSON.")
    return arguments


def _output(b: _Builder, item: dict[str, Any], param: str) -> None:
    call_id = item.get("call_id")
    if call_id is None and item.get("type") == "local_shell_call_output":
        # The SDK types this output {id, output}: `id` names the call it answers.
        item_id = item.get("id")
        call_id = b.shell_ids.get(item_id, item_id) if isinstance(item_id, str) else item_id
    if not isinstance(call_id, str) or call_id not in b.calls:
        raise bad(
            f"{param}.call_id",
            f"{param}.call_id {call_id!r} matches no call before it in the input: every output "
            "must follow the call it answers (send the call item too).",
        )
    b.open_turn = None
    content = _output_text(b, item.get("output"), f"{param}.output")
    b.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})


def _output_text(b: _Builder, output: object, param: str) -> str:
    if isinstance(output, str):
        return output
    if not isinstance(output, list):
        raise bad(param, f"{param} must be a string or a list of content parts.")
    texts: list[str] = []
    for j, part in enumerate(output):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in ("input_image", "input_file"):
            # A tool message cannot carry an image or a file in chat: said in words instead.
            texts.append(f"[{kind[6:]} omitted: the model server takes none in a tool result]")
            b.dropped.add(f"{kind} in a tool output")
        else:
            raise bad(f"{param}[{j}]", f"{param}[{j}] must be an input_text, input_image or "
                      "input_file part.")  # fmt: skip
    return "\n".join(texts)


def _reasoning(b: _Builder, item: dict[str, Any], param: str) -> None:
    texts: list[str] = []
    content = item.get("content")
    if isinstance(content, list):
        texts = [
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
    token = item.get("encrypted_content")
    if not texts and isinstance(token, str) and token.startswith(REASONING_TOKEN):
        text = _token_text(token)
        if text is None:
            raise bad(f"{param}.encrypted_content", f"{param}.encrypted_content is damaged.")
        texts = [text]
    if not texts:
        if isinstance(token, str) and token:
            b.dropped.add("reasoning (OpenAI's encrypted_content)")
        return
    field_name = b.options.reasoning_field
    if field_name is None:
        return  # the upstream reads no past reasoning: it goes nowhere
    turn = b.open_turn
    if turn is None:
        b.reasoning.extend(texts)  # for the assistant message that comes next
    else:
        # Reasoning between the calls of one turn stays on that turn: splitting it in two
        # assistant messages would leave calls without their outputs right after them.
        turn[field_name] = "\n".join(filter(None, [turn.get(field_name), *texts]))


_ID_PREFIXES = {
    "message": "msg", "function_call": "fc", "function_call_output": "fco",
    "custom_tool_call": "ctc", "custom_tool_call_output": "ctco", "reasoning": "rs",
    "local_shell_call": "lsh", "local_shell_call_output": "lsho",
}  # fmt: skip


def identified(items: list[Any]) -> list[dict[str, Any]]:
    """Input items as the store keeps them: each with an id (`GET .../input_items` lists them
    so) and a type (a message's is optional on input)."""
    out: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type") or ("message" if "role" in item else "item_reference")
        if not (isinstance(item.get("id"), str) and item.get("type")):
            prefix = _ID_PREFIXES.get(kind, "item") if isinstance(kind, str) else "item"
            item = {**item, "type": kind, "id": item.get("id") or new_id(prefix)}
        if kind == "message" and isinstance(item.get("content"), str):
            # Listed as OpenAI lists them: content as parts, even when sent as a string.
            part = "output_text" if item.get("role") == "assistant" else "input_text"
            item = {**item, "content": [{"type": part, "text": item["content"]}]}
        out.append(item)
    return out
