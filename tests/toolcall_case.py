"""One tool-call recovery case as data, and the tools most cases declare: shared by the main
corpus (tests/toolcall_corpus.py) and the per-family corpora (tests/toolcall_families/)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Call = tuple[str, dict[str, Any]]


def tool(name: str, props: dict[str, Any]) -> dict[str, Any]:
    params = {"type": "object", "properties": props}
    return {"type": "function", "function": {"name": name, "parameters": params}}


S = {"type": "string"}
TOOLS = [
    tool("get_weather", {"city": S, "days": {"type": "integer"}}),
    tool("get_time", {"tz": S}),
    tool("write_file", {"path": S, "content": S}),
    tool("search", {"query": S}),
    tool("query_web_search", {"query": S}),
    tool("GrepTool", {"pattern": S, "path": S}),
    tool("get_current_traffic", {"location": S}),
    tool("list_directory", {"path": S}),
    tool("get_file_info", {"path": S}),
    tool("run", {"cmd": S, "opts": {"type": "object"}, "force": {"type": "boolean"},
                  "limit": {"type": ["integer", "null"]}, "ratio": {"type": "number"}}),
]


@dataclass(frozen=True)
class Case:
    """A reply's text, the tools declared, and what recovery must make of it: the content left,
    the calls as (name, arguments), the format label (None: nothing recovered, the content is
    the text unchanged), and where the format was documented."""

    name: str
    text: str
    content: str | None
    calls: list[Call]
    format: str | None
    tools: tuple[dict[str, Any], ...] = tuple(TOOLS)
    source: str = ""


ONE: list[Call] = [("get_weather", {"city": "Paris", "days": 3})]
TWO: list[Call] = [*ONE, ("get_time", {"tz": "Europe/Paris"})]
PROSE = "Let me check."
THINK = "<think>\nThe user wants the weather. I'll call the tools.\n</think>"


def j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def block_basics(
    case: Callable[[str, str, str | None, list[Call]], Case], render: Callable[[list[Call]], str]
) -> list[Case]:
    """The cases a block family's corpus opens with, `render` writing its block of calls and
    `case` making a named case: one call, two, prose before them, a think block before them."""
    return [
        case("one", render(ONE), None, ONE),
        case("two", render(TWO), None, TWO),
        case("prose", f"{PROSE}\n\n{render(TWO)}", PROSE, TWO),
        case("think", f"{THINK}\n\n{render(TWO)}", THINK, TWO),
    ]
