"""Self-healing tool calls: what is wrong with a reply's calls, and the turn that asks again.

A tool call can be present and still be useless to the client: a tool name that was never
declared, arguments that are not an object or do not validate against the tool's schema, or no
call at all when `tool_choice` demanded one. Agent frameworks answer this by sending the error
back to the model (instructor's retries, pydantic-ai's `ModelRetry`); latchgate does it once for
every client and every front, before the client sees anything (BEHAVIOUR 10).

This module is pure: `read_choice` reads the client's `tool_choice`, `judge` finds what is wrong
with one reply's message, `heal_messages` writes the turn sent back to the model, and
`calls_as_text` turns calls the client forbade (`tool_choice: "none"`) back into text. The agent
layer decides when to use them (`proxy.path.layer`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from proxy.toolcalls.validation import UNKNOWN_TOOL, Problem, check_calls, unknown_tool_detail

Mode = Literal["auto", "none", "required", "function"]
# How many declared tools a correction lists by name; an agent with hundreds would drown a
# small model's context in names it does not need.
_LISTED = 40


@dataclass(frozen=True, slots=True)
class Choice:
    """The client's `tool_choice`, read once: `auto` (or absent), `none`, `required`, or a
    `function` named `name`."""

    mode: Mode = "auto"
    name: str = ""

    @property
    def forces(self) -> bool:
        """Whether the reply must carry a call."""
        return self.mode in ("required", "function")


def read_choice(tool_choice: object) -> Choice:
    """The chat `tool_choice` as a `Choice`; anything unreadable counts as `auto` (the server
    judged the request before latchgate sees its answer)."""
    if tool_choice in ("none", "required"):
        return Choice(tool_choice)
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            return Choice("function", name)
    return Choice()


@dataclass(frozen=True, slots=True)
class Verdict:
    """What is wrong with one reply: its calls' problems, the `tool_choice` it did not honour,
    and the tools whose schema could not be compiled (their calls were not validated)."""

    problems: tuple[Problem, ...] = ()
    choice: str = ""  # the sentence saying how tool_choice was not honoured ("": it was)
    skipped: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems and not self.choice

    @property
    def score(self) -> int:
        """How bad the reply is: 0 when valid; of two replies the lower score is better."""
        return len(self.problems) + (1 if self.choice else 0)


def tool_calls(message: object) -> list[Any]:
    """The message's tool calls (an empty list when it has none or they are not a list)."""
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return calls if isinstance(calls, list) else []


def judge(message: object, tools: list[dict[str, Any]], choice: Choice) -> Verdict:
    """What is wrong with a reply's `message` under the request's `tools` and `choice`.

    A reply that is only text is valid unless the choice forced a call: nothing is ever re-asked
    for answering in words when words were allowed.
    """
    calls = tool_calls(message)
    if not calls:
        written = written_call(message, tools)
        if written is None:
            return Verdict((), _choice_problem(calls, choice))
        # A call to a tool that does not exist, written as text: recovery leaves it as text
        # (only declared tools count), and the reply is asked for again like a native one.
        detail = unknown_tool_detail(written, declared(tools))
        return Verdict((Problem(0, written, UNKNOWN_TOOL, detail),), "")
    checked = check_calls(calls, tools)
    return Verdict(checked.problems, _choice_problem(calls, choice), checked.skipped)


_CALL_TEXT = re.compile(
    r"\A\s*(?:```[\w-]*\s*|<tool_call>\s*)?(\{.*\})\s*(?:```|</tool_call>)?\s*\Z", re.DOTALL
)


def written_call(message: object, tools: list[dict[str, Any]]) -> str | None:
    """The tool a text reply calls when it is nothing but a call to an undeclared tool (a JSON
    object with `name` and `arguments` or `parameters`, bare, fenced or in `<tool_call>`), as
    small models write one for a tool named after a file; None otherwise."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or len(content) > _WRITTEN_MAX or "{" not in content:
        return None
    found = _CALL_TEXT.match(content)
    if found is None:
        return None
    try:
        value = orjson.loads(found.group(1))
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not ({"arguments", "parameters"} & value.keys()):
        return None
    name = value.get("name")
    if not isinstance(name, str) or not name or name in declared(tools):
        return None
    return name


_WRITTEN_MAX = 64 * 1024  # a reply longer than this is not one call


def _choice_problem(calls: list[Any], choice: Choice) -> str:
    if not choice.forces:
        return ""
    if not calls:
        if choice.mode == "function":
            return f"tool_choice required a call to {choice.name}, and the reply had none"
        return "tool_choice required a tool call, and the reply had none"
    if choice.mode == "function":
        names = {_name(call) for call in calls}
        if names != {choice.name}:
            other = ", ".join(sorted(n for n in names if n != choice.name)) or "another tool"
            return f"tool_choice required a call to {choice.name}, and the reply called {other}"
    return ""


def _name(call: object) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else ""


def declared(tools: list[dict[str, Any]]) -> list[str]:
    """The names of the declared function tools, in order."""
    names: list[str] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            names.append(name)
    return names


# -- the turn sent back ----------------------------------------------------------------------


def heal_messages(
    message: dict[str, Any], verdict: Verdict, tools: list[dict[str, Any]], choice: Choice
) -> list[dict[str, Any]]:
    """The messages appended to the conversation to ask the model again: its own reply, then
    what was wrong with it.

    A reply with calls goes back as the model wrote it (its calls included), followed by one
    `tool` message per call: the error for each failing call, and for the others a note that
    they were not run (a template that renders tool results keeps each next to its call, the
    way the model saw results in training). A reply without calls goes back as text, followed by
    a user message restating the choice. Both end with the instruction to answer again.
    """
    calls = tool_calls(message)
    if not calls:
        said = {"role": "assistant", "content": _text(message.get("content")) or ""}
        errors = " ".join(p.detail for p in verdict.problems)
        text = correction(verdict, tools, choice)
        return [said, {"role": "user", "content": f"{errors}\n\n{text}" if errors else text}]
    ids = [_call_id(call, i) for i, call in enumerate(calls)]
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": _text(message.get("content")),
        "tool_calls": [_with_id(call, ids[i]) for i, call in enumerate(calls)],
    }
    out: list[dict[str, Any]] = [reply]
    by_call: dict[int, list[Problem]] = {}
    for problem in verdict.problems:
        by_call.setdefault(problem.index, []).append(problem)
    # A call with nothing wrong of its own was not run either: the reply is asked for again.
    not_run = (
        "This call was not run, because another call of the same reply was invalid."
        if verdict.problems
        else f"This call was not run: {verdict.choice}."
    )
    last = len(calls) - 1
    for i in range(len(calls)):
        found = by_call.get(i)
        text = "Error: " + " ".join(p.detail for p in found) if found else not_run
        if i == last:
            text = f"{text}\n\n{correction(verdict, tools, choice)}"
        out.append({"role": "tool", "tool_call_id": ids[i], "content": text})
    return out


def correction(verdict: Verdict, tools: list[dict[str, Any]], choice: Choice) -> str:
    """The instruction that follows the errors: what to do now, with the tools that exist."""
    if choice.mode == "function":
        return (
            f"You must call the tool {choice.name} now. Answer with only the tool call to "
            f"{choice.name}, with arguments that match its parameters."
        )
    lead = f"{_first_upper(verdict.choice)}. " if verdict.choice else ""
    names = declared(tools)
    listed = ", ".join(names[:_LISTED]) + (", ..." if len(names) > _LISTED else "")
    return (
        f"{lead}Call one of the available tools: {listed}. Answer with only the corrected "
        "tool call, with arguments that match the tool's parameters."
    )


def _first_upper(text: str) -> str:
    return text[:1].upper() + text[1:]


def _text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str)) or None
    return None


def _call_id(call: object, index: int) -> str:
    found = call.get("id") if isinstance(call, dict) else None
    return found if isinstance(found, str) and found else f"call_heal_{index}"


def _with_id(call: object, call_id: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    function = function if isinstance(function, dict) else {}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = orjson.dumps(arguments if arguments is not None else {}).decode()
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": _name(call), "arguments": arguments},
    }


# -- calls the client forbade ----------------------------------------------------------------


def calls_as_text(message: dict[str, Any]) -> dict[str, Any]:
    """The message with its tool calls turned into text after its content (`tool_choice:
    "none"` answered with calls): one JSON object per call, `{"name", "arguments"}`, the form a
    reader recognises and a client that forbade calls can show or ignore."""
    lines = [_call_line(call) for call in tool_calls(message)]
    content = _text(message.get("content")) or ""
    text = "\n".join([content, *lines] if content else lines)
    out = {k: v for k, v in message.items() if k != "tool_calls"}
    out["content"] = text
    return out


def _call_line(call: object) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    raw = function.get("arguments") if isinstance(function, dict) else None
    arguments: Any = raw
    if isinstance(raw, str):
        try:
            arguments = orjson.loads(raw)
        except orjson.JSONDecodeError:
            arguments = raw  # kept as the model wrote it
    return orjson.dumps({"name": _name(call), "arguments": arguments}).decode()


def summary(verdict: Verdict) -> str:
    """The problems in one clause, for notices: `unknown tool 'x'; read_file: 'path' ...`."""
    parts = [_problem_clause(p) for p in verdict.problems]
    if verdict.choice:
        parts.append(verdict.choice)
    return "; ".join(parts)


def _problem_clause(problem: Problem) -> str:
    if problem.kind == "unknown_tool":
        return f"a call to the undeclared tool {problem.name!r}"
    return f"{problem.name}: {problem.detail}"
