"""Self-healing tool calls: what is wrong with a reply's calls, and the turn that asks again.

A tool call can be present and still be useless to the client: a tool name that was never
declared, arguments that are not an object or do not validate against the tool's schema, or no
call at all when `tool_choice` demanded one. Agent frameworks answer this by sending the error
back to the model (instructor's retries, pydantic-ai's `ModelRetry`); latchgate does it once for
every client and every front, before the client sees anything (BEHAVIOUR 10).

This module is pure: `read_choice` reads the client's `tool_choice`, `judge` finds what is wrong
with one reply's message, `heal_messages` writes the turn sent back to the model, and
`calls_as_text` turns calls the client forbade (`tool_choice: "none"`) back into text. The agent
layer's healing step decides when to use them (`proxy.path.reask`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from proxy.jsontext import compact
from proxy.toolcalls.validation import (
    INVALID,
    UNKNOWN_TOOL,
    Problem,
    check_calls,
    declared_names,
    schema_of,
    unknown_tool_detail,
)

Mode = Literal["auto", "none", "required", "function"]
# How many declared tools a correction lists with their parameters (the rest by name only): an
# agent with hundreds would drown a small model's context in tools it does not need.
_LISTED = 20


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


_AUTO = Choice()
_WORDS = {"none": Choice("none"), "required": Choice("required")}


def read_choice(tool_choice: object) -> Choice:
    """The chat `tool_choice` as a `Choice`; anything unreadable counts as `auto` (the server
    judged the request before latchgate sees its answer)."""
    # One shared `Choice` for each word (it is frozen): one is read for every tools request.
    if tool_choice is None:
        return _AUTO
    if isinstance(tool_choice, str):
        return _WORDS.get(tool_choice, _AUTO)
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            return Choice("function", name)
    return _AUTO


@dataclass(frozen=True, slots=True, init=False)  # its own __init__: see proxy/compiled.py
class Verdict:
    """What is wrong with one reply: its calls' problems, the `tool_choice` it did not honour,
    and the tools whose schema could not be compiled (their calls were not validated)."""

    problems: tuple[Problem, ...]
    choice: str  # the sentence saying how tool_choice was not honoured ("": it was)
    skipped: tuple[str, ...]
    calls: int  # how many calls the reply made

    def __init__(
        self,
        problems: tuple[Problem, ...] = (),
        choice: str = "",
        skipped: tuple[str, ...] = (),
        calls: int = 0,
    ) -> None:
        object.__setattr__(self, "problems", problems)
        object.__setattr__(self, "choice", choice)
        object.__setattr__(self, "skipped", skipped)
        object.__setattr__(self, "calls", calls)

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


def judge(message: object, tools: list[Any], choice: Choice, *, asked: bool = False) -> Verdict:
    """What is wrong with a reply's `message` under the request's `tools` and `choice`;
    `asked`: the reply answers a correction, whose example call it may have copied. `tools` is
    the list as the client sent it, entries of any shape (typed so: compiled, a narrower type
    is checked at run time, and an odd entry would raise where it is now skipped).

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
        detail = unknown_tool_detail(written, declared_names(tools))
        return Verdict((Problem(0, written, UNKNOWN_TOOL, detail),), "", calls=1)
    checked = check_calls(calls, tools)
    problems = checked.problems
    if asked:
        problems = (*problems, *_copied(calls, {p.index for p in problems}))
    problem = _choice_problem(calls, choice)
    return Verdict(problems, problem, checked.skipped, len(calls))


PLACEHOLDER = "..."  # the example call's values (`_example`)


def _copied(calls: list[Any], known: set[int]) -> list[Problem]:
    """Calls whose arguments hold the example's placeholder as a value: the model copied the
    example instead of filling it in (the test model did, bench/RESULTS.md), so the call is
    schema-valid and useless."""
    out: list[Problem] = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        raw = function.get("arguments") if isinstance(function, dict) else None
        if index in known or not isinstance(raw, str) or f'"{PLACEHOLDER}"' not in raw:
            continue
        try:
            arguments = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        values = arguments.values() if isinstance(arguments, dict) else ()
        if PLACEHOLDER in values:
            detail = (
                f"The arguments copy the example's placeholder {PLACEHOLDER!r} instead of "
                "real values."
            )
            out.append(Problem(index, _name(call), INVALID, detail))
    return out


_CALL_TEXT = re.compile(
    r"\A\s*(?:```[\w-]*\s*|<tool_call>\s*)?(\{.*\})\s*(?:```|</tool_call>)?\s*\Z", re.DOTALL
)


def written_call(message: object, tools: list[Any]) -> str | None:
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
    if not isinstance(name, str) or not name or name in declared_names(tools):
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


# -- the turn sent back ----------------------------------------------------------------------


def heal_messages(
    message: dict[str, Any], verdict: Verdict, tools: list[Any], choice: Choice
) -> list[dict[str, Any]]:
    """The messages appended to the conversation to ask the model again: its own reply, as
    text, then a user message saying what was wrong and listing the tools to call.

    Chosen by measurement on the test model (bench/heal_wording.py, bench/RESULTS.md) against
    the usual shape of one `tool` result per call carrying its error: a user turn after the
    reply did as well or better, and works where the other cannot: llama-server refuses a
    history whose `tool_calls` carry arguments that are not JSON, and templates without tool
    support refuse `tool` roles. Listing each tool's parameters (required ones with their
    types, enums spelt out) beat naming the tools, and far beat a bare "Error: ..." line.
    """
    said = {"role": "assistant", "content": reply_text(message)}
    return [said, {"role": "user", "content": correction(verdict, tools, choice)}]


def reply_text(message: dict[str, Any]) -> str:
    """A reply as the text the model would have written: its content, then each call as a
    `{"name", "arguments"}` JSON line (arguments that do not parse kept as written)."""
    lines = [_call_line(call) for call in tool_calls(message)]
    content = _text(message.get("content")) or ""
    return "\n".join([content, *lines] if content else lines)


def correction(verdict: Verdict, tools: list[Any], choice: Choice) -> str:
    """What was wrong, and what to call now with which parameters (the measured wording)."""
    parts = [_problem_sentence(p) for p in verdict.problems]
    wanted = _tools_to_list(verdict, tools, choice)
    in_text = "" if verdict.calls else " instead of answering in text"
    if choice.mode == "function":
        lead = f"You must call the tool {choice.name!r} now{in_text}:"
    elif verdict.choice and not verdict.problems:
        lead = "You must call one of these tools now instead of answering in text:"
    elif all(p.kind != UNKNOWN_TOOL for p in verdict.problems) and len(wanted) == 1:
        lead = f"Call {wanted[0][0]!r} again with these parameters:"
    else:
        lead = "Call one of these tools instead:"
    listing = "\n".join(line for _, line in wanted[:_LISTED])
    rest = [name for name, _ in wanted[_LISTED:]]
    if rest:
        listing += f"\n- and {len(rest)} more: {', '.join(rest[:200])}"
    example = _example(wanted[0][0], tools) if wanted else ""
    parts.append(f"{lead}\n{listing}\nAnswer with the tool call only.{example}")
    return "\n\n".join(parts)


def _example(name: str, tools: list[Any]) -> str:
    """`For example: {"name": "read_file", "arguments": {"path": "..."}}`: the first tool the
    correction lists (`name`, always a declared one), its required parameters as placeholders.
    Measured on the test model with copied placeholders counted as failures, this line took a
    forced call from 0 of 6 to 4 of 6 and an undeclared tool from 0 of 2 to 2 of 2
    (bench/RESULTS.md)."""
    schema = schema_of(tools, name)
    required = schema.get("required") if isinstance(schema, dict) else None
    listed = required if isinstance(required, list) else []
    names = [p for p in listed if isinstance(p, str)]
    example = {"name": name, "arguments": dict.fromkeys(names, PLACEHOLDER)}
    return "\nFor example: " + json.dumps(example)


def _problem_sentence(problem: Problem) -> str:
    if problem.kind == UNKNOWN_TOOL:
        return f"The tool {problem.name!r} does not exist."
    return problem.detail


def _tools_to_list(verdict: Verdict, tools: list[Any], choice: Choice) -> list[tuple[str, str]]:
    """(name, listing line) of the tools the correction lists: the forced one; else the ones
    whose calls had bad arguments, when that is all that was wrong; else every declared tool."""
    lines = [(name, line) for name, line in (_listing(t) for t in tools) if name]
    if choice.mode == "function":
        return [item for item in lines if item[0] == choice.name] or lines
    if verdict.problems and all(p.kind != UNKNOWN_TOOL for p in verdict.problems):
        named = {p.name for p in verdict.problems}
        return [item for item in lines if item[0] in named] or lines
    return lines


def _listing(tool: object) -> tuple[str, str]:
    """One tool as one line: `- name: description Required: a (string). Optional: b (one of
    x, y).` ("" as the name when it is not a function tool)."""
    function = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return "", ""
    name = function["name"]
    description = function.get("description")
    about = f" {description.strip()[:300]}" if isinstance(description, str) else ""
    schema = function.get("parameters")
    props = schema.get("properties") if isinstance(schema, dict) else None
    props = props if isinstance(props, dict) else {}
    required = schema.get("required") if isinstance(schema, dict) else None
    need = [p for p in required if p in props] if isinstance(required, list) else []
    given = ", ".join(f"{p} ({_kind(props[p])})" for p in need) or "none"
    line = f"- {name}:{about} Required: {given}."
    optional = [f"{p} ({_kind(v)})" for p, v in props.items() if p not in need]
    return name, line + (f" Optional: {', '.join(optional)}." if optional else "")


def _kind(schema: object) -> str:
    """A parameter's type in a few words: `string`, `one of "a", "b"`, `array of string`.

    Arrays of arrays are followed in a loop, not by a call per level: the nesting is the
    client's, and compiled code does not count the recursion limit (proxy/compiled.py)."""
    arrays = 0
    while isinstance(schema, dict) and schema.get("type") == "array" and not _enum(schema):
        arrays += 1
        schema = schema.get("items")
    return "array of " * arrays + _item_kind(schema)


def _item_kind(schema: object) -> str:
    """`_kind` of a schema that is no array (or one with an enum)."""
    if not isinstance(schema, dict):
        return "any"
    enum = _enum(schema)
    if enum:
        return "one of " + ", ".join(compact(v) for v in enum[:12])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return kind if isinstance(kind, str) else "any"


def _enum(schema: dict[str, Any]) -> list[Any]:
    enum = schema.get("enum")
    return enum if isinstance(enum, list) else []


def _text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str)) or None
    return None


# -- calls the client forbade ----------------------------------------------------------------


def calls_as_text(message: dict[str, Any]) -> dict[str, Any]:
    """The message with its tool calls turned into text after its content (`tool_choice:
    "none"` answered with calls): one JSON object per call, `{"name", "arguments"}`, the form a
    reader recognises and a client that forbade calls can show or ignore."""
    out = {k: v for k, v in message.items() if k != "tool_calls"}
    out["content"] = reply_text(message)
    return out


def _call_line(call: object) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    raw = function.get("arguments") if isinstance(function, dict) else None
    name = orjson.dumps(_name(call)).decode()
    if isinstance(raw, str):
        try:
            arguments = orjson.loads(raw)
        except orjson.JSONDecodeError:
            # Kept as the model wrote it, not as a JSON string: shown a string there, the test
            # model answered with string arguments (bench/heal_wording.py).
            return f'{{"name": {name}, "arguments": {raw}}}'
    else:
        arguments = raw
    # compact: arguments nested past what orjson writes (254 levels) are written all the same
    return f'{{"name": {name}, "arguments": {compact(arguments)}}}'


def summary(verdict: Verdict) -> str:
    """The problems in one clause, for notices: `unknown tool 'x'; read_file: 'path' ...`."""
    parts = [_problem_clause(p) for p in verdict.problems]
    if verdict.choice:
        parts.append(verdict.choice)
    return "; ".join(parts)


def _problem_clause(problem: Problem) -> str:
    if problem.kind == UNKNOWN_TOOL:
        return f"a call to the undeclared tool {problem.name!r}"
    return f"{problem.name}: {problem.detail}"
