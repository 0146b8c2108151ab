"""Responses tools as chat tools, and the way back from a chat call to the tool it stands for.

The Responses API declares tools flat (`{type: "function", name, parameters}`), adds kinds the
chat API has no word for, and groups tools in namespaces. Every kind a local model can serve
becomes a chat function:

- `function`: nested as chat wants it, `strict` kept exactly as the client sent it (never
  invented: a missing `strict` means false to the SDK's parse helper);
- `custom` (freeform input, such as Codex's `apply_patch` with its Lark grammar): a function with
  one string parameter, `input`, and the grammar in its description; a call comes back as a
  `custom_tool_call` whose `input` is that string, unwrapped;
- `local_shell`: a function taking the command as a list of words;
- `namespace` groups: each member flattened as `<namespace>__<name>`, mapped back on the way out.

Tools the server would have to run itself (web search, file search, code interpreter, image
generation, computer use, hosted MCP, hosted shell and patch, server-side tool search) cannot be
served by a model server: they are removed with a notice, and a `tool_choice` that forces one is
a 400. All of it is pure: a function of the client's body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from proxy import knowntools
from proxy.errors import ProxyError

Kind = Literal["function", "custom", "local_shell"]

# Types the Responses API runs on OpenAI's side; a model server has nothing to run them with.
HOSTED = frozenset({
    "web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26",
    "file_search", "code_interpreter", "image_generation", "computer", "computer_use",
    "computer_use_preview", "mcp", "shell", "apply_patch", "tool_search",
    "programmatic_tool_calling",
})  # fmt: skip

CUSTOM_PARAMETER = "input"
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")
_LOCAL_SHELL = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"}, "description": "argv"},
        "workdir": {"type": "string"},
        "timeout_ms": {"type": "integer"},
    },
    "required": ["command"],
}


@dataclass(frozen=True, slots=True)
class Origin:
    """The client's tool a chat function stands for."""

    kind: Kind
    name: str
    namespace: str | None = None


@dataclass(slots=True)
class Tools:
    """The chat tools for one request and the way back to the client's tools."""

    chat: list[dict[str, Any]] = field(default_factory=list)
    origins: dict[str, Origin] = field(default_factory=dict)  # chat name -> client tool
    names: dict[tuple[str | None, str], str] = field(default_factory=dict)  # (ns, name) -> chat
    removed: list[str] = field(default_factory=list)  # hosted tool types removed

    def chat_name(self, name: str, namespace: str | None = None) -> str:
        """The chat name of a client's tool (a call in the history may name one not declared)."""
        found = self.names.get((namespace, name))
        if found is not None:
            return found
        return name if namespace is None else flat_name(namespace, name)

    def origin(self, chat_name: str) -> Origin:
        return self.origins.get(chat_name) or Origin("function", chat_name)


def bad(param: str, message: str, code: str = "invalid_value") -> ProxyError:
    return ProxyError(400, message, param=param, code=code)


def flat_name(namespace: str, name: str) -> str:
    """A namespaced tool's chat name: `<ns>__<name>`, in the characters chat names allow."""
    return _NAME_OK.sub("_", f"{namespace}__{name}")[:64]


def translate_tools(
    tools: object, notices: list[str], extra: list[tuple[str, object]] | None = None
) -> Tools:
    """The chat tools for a Responses `tools` list (None: no tools) and the `extra` ones
    declared elsewhere (each with the path an error names).

    An agent declares the same tools every turn (Codex CLI: about 60 KB). For a list
    `knowntools` remembers, the translation is made once and shared: its chat list is derived
    from the client's (`knowntools.derived`), so it is keyed once and written as its stored
    bytes, and the `Tools` around it is kept with the notices it gave. Nothing changes a
    `Tools` once made.
    """
    if not extra and knowntools.shared(tools):
        assert isinstance(tools, list)  # only a list is ever remembered
        chat = knowntools.derived(tools, _chat_tools)
        kept = _SHARED.get(id(chat))
        if kept is None or kept[0] is not chat:
            said: list[str] = []
            made = _translate(tools, said, None)
            made.chat = chat  # the shared list, equal to the one just made
            kept = _SHARED[id(chat)] = (chat, made, tuple(said))
            while len(_SHARED) > _SHARED_MAX:
                del _SHARED[next(iter(_SHARED))]
        notices.extend(kept[2])
        return kept[1]
    return _translate(tools, notices, extra)


# The translations of remembered lists, by their chat list's identity (which its entry in
# `knowntools` keeps alive, so an id is never reused while the entry is checked against it).
_SHARED: dict[int, tuple[list[dict[str, Any]], Tools, tuple[str, ...]]] = {}
_SHARED_MAX = 16  # as many as `knowntools` remembers


def _chat_tools(tools: list[Any]) -> list[dict[str, Any]]:
    """The chat list a Responses tools list becomes (a pure function of it, for `derived`)."""
    return _translate(tools, [], None).chat


def _translate(tools: object, notices: list[str], extra: list[tuple[str, object]] | None) -> Tools:
    out = Tools()
    if tools is not None and not isinstance(tools, list):
        raise bad("tools", "'tools' must be a list of tool objects.")
    declared = [(f"tools[{i}]", tool) for i, tool in enumerate(tools or [])]
    for param, tool in [*declared, *(extra or [])]:
        _add_tool(out, tool, param, None, notices)
    if out.removed:
        notices.append(
            f"Removed the tool(s) of type {', '.join(sorted(set(out.removed)))}: they run on "
            "OpenAI's servers (or are unknown to latchgate), and the model server behind "
            "latchgate cannot run them."
        )
    return out


def _add_tool(
    out: Tools, tool: object, param: str, namespace: str | None, notices: list[str]
) -> None:
    if not isinstance(tool, dict):
        raise bad(param, f"{param} must be a tool object with a 'type'.")
    kind = tool.get("type")
    if not isinstance(kind, str):
        raise bad(f"{param}.type", f'{param}.type must be a string such as "function".')
    if kind == "function":
        _declare(out, _function(tool, param), "function", _name(tool, param), namespace)
    elif kind == "custom":
        _declare(out, _custom(tool, param), "custom", _name(tool, param), namespace)
    elif kind == "local_shell" and namespace is None:
        _declare(out, _local_shell(), "local_shell", "local_shell", None)
    elif kind == "namespace" and namespace is None:
        _namespace(out, tool, param, notices)
    elif kind in ("namespace", "local_shell"):
        raise bad(f"{param}.type", f"{param}: a {kind} tool cannot sit inside a namespace.")
    else:
        # Hosted tools, and kinds newer than latchgate (which cannot know how to serve them).
        out.removed.append(kind)


def _name(tool: dict[str, Any], param: str) -> str:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise bad(f"{param}.name", f"{param}.name must be a non-empty string.")
    return name


def _declare(
    out: Tools, function: dict[str, Any], kind: Kind, name: str, namespace: str | None
) -> None:
    chat_name = name if namespace is None else flat_name(namespace, name)
    base, n = chat_name, 2
    while chat_name in out.origins:  # two namespaces flattened to one name: keep both apart
        chat_name, n = f"{base[:60]}_{n}", n + 1
    function["name"] = chat_name
    out.chat.append({"type": "function", "function": function})
    out.origins[chat_name] = Origin(kind, name, namespace)
    out.names[(namespace, name)] = chat_name


def _function(tool: dict[str, Any], param: str) -> dict[str, Any]:
    function: dict[str, Any] = {}
    description = tool.get("description")
    if description is not None:
        if not isinstance(description, str):
            raise bad(f"{param}.description", f"{param}.description must be a string.")
        function["description"] = description
    parameters = tool.get("parameters")
    if parameters is not None:
        if not isinstance(parameters, dict):
            raise bad(f"{param}.parameters", f"{param}.parameters must be a JSON schema object.")
        function["parameters"] = parameters
    strict = tool.get("strict")
    if strict is not None:
        if not isinstance(strict, bool):
            raise bad(f"{param}.strict", f"{param}.strict must be true, false or null.")
        function["strict"] = strict
    return function


def _custom(tool: dict[str, Any], param: str) -> dict[str, Any]:
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        raise bad(f"{param}.description", f"{param}.description must be a string.")
    text = description or ""
    fmt = tool.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "grammar":
        definition = fmt.get("definition")
        if not isinstance(definition, str):
            raise bad(f"{param}.format.definition", f"{param}.format.definition must be a string.")
        syntax = fmt.get("syntax") if isinstance(fmt.get("syntax"), str) else "lark"
        text += (
            f"\n\nThe `{CUSTOM_PARAMETER}` argument is raw text (not JSON) that must follow this "
            f"{syntax} grammar:\n```\n{definition}\n```"
        )
    elif fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise bad(f"{param}.format", f'{param}.format must be {{"type": "text"}} or a grammar.')
    schema = {
        "type": "object",
        "properties": {CUSTOM_PARAMETER: {"type": "string", "description": "the tool's input"}},
        "required": [CUSTOM_PARAMETER],
        "additionalProperties": False,
    }
    return {"description": text.strip(), "parameters": schema}


def _local_shell() -> dict[str, Any]:
    return {"description": "Run a command on the user's machine.", "parameters": _LOCAL_SHELL}


def _namespace(out: Tools, tool: dict[str, Any], param: str, notices: list[str]) -> None:
    namespace = _name(tool, param)
    members = tool.get("tools")
    if not isinstance(members, list):
        raise bad(f"{param}.tools", f"{param}.tools must be a list of tools.")
    for j, member in enumerate(members):
        _add_tool(out, member, f"{param}.tools[{j}]", namespace, notices)


# -- tool_choice ---------------------------------------------------------------------------


def translate_choice(choice: object, tools: Tools) -> object:
    """The chat `tool_choice` for a Responses one (None: leave it out). May narrow `tools`."""
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if not isinstance(choice, dict) or not isinstance(choice.get("type"), str):
        raise bad(
            "tool_choice",
            'tool_choice must be "auto", "none", "required" or an object with a "type".',
        )
    kind = choice["type"]
    if kind in ("function", "custom"):
        return _named_choice(choice, tools)
    if kind == "allowed_tools":
        return _allowed(choice, tools)
    if kind in HOSTED or kind.startswith(("web_search", "computer")) or kind in tools.removed:
        raise bad(
            "tool_choice",
            f"tool_choice forces the hosted tool {kind!r}, which runs on OpenAI's servers; the "
            "model server behind latchgate cannot run it. Force a function tool, or send "
            '"auto".',
        )
    raise bad("tool_choice.type", f"tool_choice.type {kind!r} is not one latchgate knows.")


def _named_choice(choice: dict[str, Any], tools: Tools) -> dict[str, Any]:
    name = choice.get("name")
    if not isinstance(name, str):
        raise bad("tool_choice.name", "tool_choice.name must name one of the declared tools.")
    namespace = choice.get("namespace") if isinstance(choice.get("namespace"), str) else None
    chat_name = tools.names.get((namespace, name))
    if chat_name is None:  # a namespaced tool named without its namespace
        chat_name = next((c for c, o in tools.origins.items() if o.name == name), None)
    if chat_name is None:
        raise bad(
            "tool_choice.name",
            f"tool_choice names {name!r}, which is not among the declared tools.",
        )
    return {"type": "function", "function": {"name": chat_name}}


def _allowed(choice: dict[str, Any], tools: Tools) -> object:
    mode = choice.get("mode", "auto")
    if mode not in ("auto", "required"):
        raise bad("tool_choice.mode", 'tool_choice.mode must be "auto" or "required".')
    allowed = choice.get("tools")
    if not isinstance(allowed, list):
        raise bad("tool_choice.tools", "tool_choice.tools must list the tools allowed.")
    keep: set[str] = set()
    for i, entry in enumerate(allowed):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            # Hosted tools in the list were removed with the rest: nothing to allow.
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("type"), str)
                and (entry["type"] in HOSTED)
            ):
                continue
            raise bad(f"tool_choice.tools[{i}]", f"tool_choice.tools[{i}] must name a tool.")
        namespace = entry.get("namespace") if isinstance(entry.get("namespace"), str) else None
        keep.add(tools.chat_name(entry["name"], namespace))
    tools.chat = [t for t in tools.chat if t["function"]["name"] in keep]
    return mode
