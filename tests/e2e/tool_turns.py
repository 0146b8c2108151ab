"""Tool-use turns for the real small model, and a helper that scores a client on them.

The e2e tool test (tests/e2e/test_llama.py) asks six one-line questions with six tools declared;
self-healing tool calls need more: turns where the model names a tool that does not exist,
writes arguments its schema refuses, or answers in prose when `tool_choice` demanded a call.
This module is only data and a scorer, so the e2e test that asserts on healing and
bench/bench_healing.py measure the same turns the same way. Nothing here asserts on timing.

Each turn says whether a call is expected. Where a text answer is fine (the model was given a
tool result and should answer it), a turn counts as handled unless it returns an invalid call;
those turns are scored apart from the ones that demand a call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import openai

from tests.e2e.test_llama import MAX_TOKENS, TOOLS, call_problems

Message = dict[str, Any]
Tool = dict[str, Any]
ToolChoice = str | dict[str, Any] | None

SYSTEM = "You are a helpful assistant. Use the tools."


def _tool(name: str, description: str, properties: dict[str, Any],
          required: list[str]) -> Tool:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required}}}


def named(tool: str) -> dict[str, Any]:
    """The OpenAI `tool_choice` that forces one function."""
    return {"type": "function", "function": {"name": tool}}


def by_name(*names: str, pool: Sequence[Tool] | None = None) -> list[Tool]:
    """The declared tools with these names, in the order given."""
    table = {t["function"]["name"]: t for t in (pool if pool is not None else ALL_TOOLS)}
    return [table[n] for n in names]


# Schemas TOOLS lacks: a nested object, enums, arrays of strings and of objects.
CREATE_EVENT = _tool("create_event", "Add an event to the calendar.", {
    "title": {"type": "string"},
    "when": {"type": "object", "properties": {
        "date": {"type": "string", "description": "YYYY-MM-DD"},
        "time": {"type": "string", "description": "HH:MM, 24-hour"},
    }, "required": ["date", "time"]},
    "attendees": {"type": "array", "items": {"type": "string"},
                  "description": "Email addresses"},
    "priority": {"type": "string", "enum": ["low", "normal", "high"]},
}, ["title", "when"])
SET_THERMOSTAT = _tool("set_thermostat", "Set the home thermostat.", {
    "mode": {"type": "string", "enum": ["heat", "cool", "off"]},
    "temperature": {"type": "number", "description": "Target in degrees Celsius"},
}, ["mode"])
ADD_TODOS = _tool("add_todos", "Add items to the to-do list.", {
    "items": {"type": "array", "minItems": 1, "items": {
        "type": "object", "properties": {
            "title": {"type": "string"},
            "due": {"type": "string", "description": "YYYY-MM-DD"},
        }, "required": ["title"]}},
}, ["items"])
QUERY_ORDERS = _tool("query_orders", "Find orders in the shop's database.", {
    "filter": {"type": "object", "properties": {
        "status": {"type": "string", "enum": ["open", "shipped", "cancelled"]},
        "customer": {"type": "string"},
    }, "required": ["status"]},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
}, ["filter"])
WRITE_FILE = _tool("write_file", "Write text to a file of the project.", {
    "path": {"type": "string", "description": "Path relative to the project root"},
    "content": {"type": "string"},
}, ["path", "content"])

EXTRA_TOOLS = [CREATE_EVENT, SET_THERMOSTAT, ADD_TODOS, QUERY_ORDERS, WRITE_FILE]
ALL_TOOLS = [*TOOLS, *EXTRA_TOOLS]


@dataclass(frozen=True)
class ToolTurn:
    """One request: its messages, its tools and tool_choice, and whether a call must come back.

    `tags` name what the turn exercises (single, several, nested, enum, array, required, named,
    follow-up, hard) so a report can group them.
    """

    name: str
    messages: list[Message]
    tools: list[Tool]
    tool_choice: ToolChoice = None
    expects_call: bool = True
    tags: tuple[str, ...] = ()

    @property
    def forced(self) -> str | None:
        """The function a named tool_choice forces, if any."""
        if isinstance(self.tool_choice, dict):
            return str(self.tool_choice["function"]["name"])
        return None


def ask(prompt: str) -> list[Message]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def after(prompt: str, tool: str, arguments: str, result: str,
          then: str | None = None) -> list[Message]:
    """A history where the assistant called `tool` and got `result`; `then` a user follow-up."""
    call_id = f"call_{tool}_1"
    history: list[Message] = [
        *ask(prompt),
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": tool, "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]
    if then is not None:
        history.append({"role": "user", "content": then})
    return history


def _turn(name: str, prompt: str, tools: list[Tool], *tags: str,
          tool_choice: ToolChoice = None) -> ToolTurn:
    return ToolTurn(name, ask(prompt), tools, tool_choice, True, tags)


TURNS: list[ToolTurn] = [
    # -- one tool declared
    _turn("one-weather", "What is the weather in Paris right now?",
          by_name("get_weather"), "single"),
    _turn("one-read", "Read the file docs/setup.md.", by_name("read_file"), "single"),
    _turn("one-command", "Run `git status` for me.", by_name("run_command"), "single"),
    _turn("one-currency", "Convert 100 British pounds to Japanese yen.",
          by_name("convert_currency"), "single"),
    _turn("one-thermostat", "Set the thermostat to cool at 21 degrees.",
          by_name("set_thermostat"), "single", "enum"),
    _turn("one-event", "Put 'Dentist' in my calendar on 2025-05-02 at 14:30.",
          by_name("create_event"), "single", "nested"),
    # -- several tools declared (the e2e test's six, then the wider set)
    _turn("many-weather", "What is the weather in Paris right now?", TOOLS, "several"),
    _turn("many-search", "Find every file in the project that mentions 'TODO'.", TOOLS,
          "several"),
    _turn("many-read", "Read the file docs/setup.md.", TOOLS, "several"),
    _turn("many-email", "Email alice@example.com with the subject 'Lunch' and ask if she is "
          "free at noon.", TOOLS, "several"),
    _turn("many-command", "Run `ls -la` in the current directory.", TOOLS, "several"),
    _turn("many-currency", "How much is 250 US dollars in euros?", TOOLS, "several"),
    _turn("many-weather-unit", "What's the temperature in Tokyo in fahrenheit?", TOOLS,
          "several", "enum"),
    _turn("many-search-limit", "Search the files for 'deprecated', at most 5 results.", TOOLS,
          "several"),
    _turn("wide-event", "Schedule 'Team sync' on 2025-03-14 at 10:00 with bob@example.com and "
          "carol@example.com, high priority.", ALL_TOOLS, "several", "nested", "array", "enum"),
    _turn("wide-todos", "Add two to-dos: 'buy milk' and 'call mum' due 2025-04-01.", ALL_TOOLS,
          "several", "array", "nested"),
    _turn("wide-thermostat", "Turn the heating on, 19 degrees.", ALL_TOOLS, "several", "enum"),
    _turn("wide-orders", "List up to 10 open orders for the customer ACME.", ALL_TOOLS,
          "several", "nested", "enum"),
    # -- tool_choice "required" and a named function
    _turn("required-weather", "Paris weather, please.", TOOLS, "required",
          tool_choice="required"),
    _turn("required-greeting", "Hello! How are you today?", by_name("get_weather"), "required",
          tool_choice="required"),
    _turn("required-vague", "Can you help me with my project?", TOOLS, "required",
          tool_choice="required"),
    _turn("required-readme", "I need to check README.md.", TOOLS, "required", "hard",
          tool_choice="required"),
    _turn("named-read", "What is in setup.cfg?", TOOLS, "named",
          tool_choice=named("read_file")),
    _turn("named-weather", "I am flying to Berlin tomorrow.", TOOLS, "named",
          tool_choice=named("get_weather")),
    _turn("named-command", "List the files here.", TOOLS, "named",
          tool_choice=named("run_command")),
    # -- follow-ups after a tool result
    ToolTurn("follow-london", after(
        "What is the weather in Paris?", "get_weather", '{"city": "Paris"}',
        '{"city": "Paris", "temperature": 18, "unit": "celsius", "sky": "cloudy"}',
        "And in London?"), TOOLS, None, True, ("follow-up",)),
    ToolTurn("follow-open-match", after(
        "Find the files that mention 'TODO'.", "search_files", '{"query": "TODO"}',
        '["src/app.py:12: # TODO fix the retry", "src/db.py:40: # TODO index"]',
        "Open the first match."), TOOLS, None, True, ("follow-up",)),
    ToolTurn("follow-second-city", after(
        "Compare the weather in Paris and in Rome.", "get_weather", '{"city": "Paris"}',
        '{"city": "Paris", "temperature": 18, "unit": "celsius"}'),
        TOOLS, None, True, ("follow-up",)),
    ToolTurn("follow-then-read", after(
        "What files are here?", "run_command", '{"command": "ls"}', "README.md\nsrc\ntests",
        "Now show me README.md."), TOOLS, None, True, ("follow-up", "hard")),
    ToolTurn("follow-answer-weather", after(
        "What is the weather in Paris?", "get_weather", '{"city": "Paris"}',
        '{"city": "Paris", "temperature": 18, "unit": "celsius", "sky": "cloudy"}'),
        TOOLS, None, False, ("follow-up", "text")),
    ToolTurn("follow-answer-currency", after(
        "How much is 250 US dollars in euros?", "convert_currency",
        '{"amount": 250, "from_currency": "USD", "to_currency": "EUR"}', '{"result": 231.4}'),
        TOOLS, None, False, ("follow-up", "text")),
    # -- where this model tends to fail: tools named after files, prose answers
    _turn("hard-main", "Show me the contents of src/main.py.", TOOLS, "hard"),
    _turn("hard-main-contain", "What does the file src/main.py contain?", TOOLS, "hard"),
    _turn("hard-readme", "Open README.md and tell me what it says.", TOOLS, "hard"),
    _turn("hard-write", "Write the word 'hello' into notes.txt.", ALL_TOOLS, "hard"),
    _turn("hard-package", "What is inside package.json?", TOOLS, "hard"),
    # -- no call needed
    ToolTurn("text-arithmetic", ask("What is 2 + 2? Answer in one word."), TOOLS, None, False,
             ("text",)),
]


@dataclass
class Outcome:
    """What one turn got back: its calls, text, finish reason, problems and time taken."""

    turn: ToolTurn
    calls: list[dict[str, Any]] = field(default_factory=list)
    content: str = ""
    finish: str | None = None
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None  # the HTTP error's message when the request was refused

    @property
    def ok(self) -> bool:
        """A call-expecting turn: valid calls. A text-fine turn: no invalid call, no error."""
        return not self.problems


def problems_of(turn: ToolTurn, calls: list[dict[str, Any]]) -> list[str]:
    """Why a turn's answer does not count (empty when it does), per tests/e2e call_problems."""
    if not turn.expects_call and not calls:
        return []
    problems = call_problems(calls, turn.tools)
    forced = turn.forced
    if not problems and forced is not None:
        problems = [f"called {c['function']['name']!r}, not the forced {forced!r}"
                    for c in calls if c["function"]["name"] != forced]
    return problems


def _request(turn: ToolTurn, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "llama", "messages": turn.messages, "tools": turn.tools,
                            "temperature": 0, "max_tokens": MAX_TOKENS, **extra}
    if turn.tool_choice is not None:
        body["tool_choice"] = turn.tool_choice
    return body


async def _whole(client: openai.AsyncOpenAI, turn: ToolTurn
                 ) -> tuple[list[dict[str, Any]], str, str | None]:
    resp = await client.chat.completions.create(**_request(turn))
    choice = resp.choices[0]
    calls = [c.model_dump() for c in choice.message.tool_calls or []]
    return calls, choice.message.content or "", choice.finish_reason


async def _streamed(client: openai.AsyncOpenAI, turn: ToolTurn
                    ) -> tuple[list[dict[str, Any]], str, str | None]:
    stream = await client.chat.completions.create(**_request(turn, stream=True))
    calls: dict[int, dict[str, Any]] = {}
    text: list[str] = []
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            text.append(choice.delta.content or "")
            for frag in choice.delta.tool_calls or []:
                call = calls.setdefault(frag.index, {"id": None, "type": "function",
                                                     "function": {"name": "", "arguments": ""}})
                call["id"] = frag.id or call["id"]
                if frag.function is not None:
                    call["function"]["name"] += frag.function.name or ""
                    call["function"]["arguments"] += frag.function.arguments or ""
    return [calls[i] for i in sorted(calls)], "".join(text), finish


async def run_turn(client: openai.AsyncOpenAI, turn: ToolTurn, *, stream: bool) -> Outcome:
    """Send one turn (temperature 0, MAX_TOKENS) and score what comes back.

    A refused request (an HTTP error, e.g. a server without tool support) is an outcome, not an
    exception, so a pass over every turn always finishes.
    """
    t0 = time.monotonic()
    try:
        calls, content, finish = await (_streamed if stream else _whole)(client, turn)
    except openai.APIStatusError as exc:
        message = exc.message
        return Outcome(turn, problems=[f"HTTP {exc.status_code}: {message}"],
                       seconds=time.monotonic() - t0, error=message)
    return Outcome(turn, calls, content, finish, problems_of(turn, calls),
                   time.monotonic() - t0)


async def outcomes(client: openai.AsyncOpenAI, turns: Sequence[ToolTurn], *,
                   stream: bool) -> list[Outcome]:
    """Every turn's outcome, one after another (the server's slots are not shared)."""
    return [await run_turn(client, turn, stream=stream) for turn in turns]


def rate(results: Sequence[Outcome], *, expects_call: bool = True) -> float:
    """The share of outcomes that count, among turns that expect a call (or the text-fine ones)."""
    chosen = [r for r in results if r.turn.expects_call == expects_call]
    return sum(r.ok for r in chosen) / len(chosen) if chosen else 0.0


async def valid_rate(client: openai.AsyncOpenAI, turns: Sequence[ToolTurn], *,
                     stream: bool) -> float:
    """The share of call-expecting turns answered with valid calls (text-fine turns left out)."""
    return rate(await outcomes(client, turns, stream=stream))
