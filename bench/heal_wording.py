"""Which second request gets a small model to fix its own failed tool call: measured, not guessed.

Self-healing tool calls send a failed turn back to the model once, with the conversation, the
model's own reply and a message saying what was wrong. Whether a 0.5B model follows that
message depends on where it sits (a `tool` result answering the bad call, or a `user` turn after
the reply as text) and on its words, so this tries candidates on the real
Qwen2.5-Coder-0.5B-Instruct and counts how often the second answer is a valid call.

1. First answers, through latchgate (so calls the model writes as text are recovered, as they
   will be when healing runs), for three failure kinds:
   - `unknown`: a call naming an undeclared tool (this model names files: `src/main.py`);
   - `invalid`: arguments that do not parse, miss a required key, break an enum or a type. The
     model rarely does this on the e2e tools, so these replies are written here in its style
     (a fenced JSON call), beside any it produced itself;
   - `no_call`: prose although `tool_choice` was "required" or named a function.
2. For each failure, every candidate second request (shape x wording, see CANDIDATES), sent at
   temperature 0 and at 0.3, max_tokens 128; the answer is valid when it has a
   call and tests/e2e/test_llama.call_problems finds nothing (and names the forced function).
3. A table per kind x candidate, in markdown, for bench/RESULTS.md.

It also records what this llama-server build does itself with tool_choice "required" and a
named function. Needs `bash scripts/install-llama.sh`; set LATCHGATE_MODEL_DIR when the model
is not under this tree's .cache/models. From the project root (2 CPUs: about 10 minutes):

    .venv/bin/python bench/heal_wording.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_healing import heal_option_exists, llama, upstream  # noqa: E402
from proxy.agent import healing  # noqa: E402
from proxy.http.server import start  # noqa: E402
from proxy.observe import logs  # noqa: E402
from proxy.settings import Settings  # noqa: E402
from tests.e2e.conftest import LlamaServer, find_binary, model_path  # noqa: E402
from tests.e2e.test_llama import MAX_TOKENS, TOOLS, call_problems  # noqa: E402
from tests.e2e.tool_turns import SYSTEM, Message, Tool, ToolChoice, named  # noqa: E402

# (temperature, seed): temperature 0 alone is too deterministic to tell candidates apart.
SAMPLES = [(0.0, 0), (0.3, 1)]

FILE_PROMPTS = [
    "Show me the contents of src/main.py.",
    "What does the file src/main.py contain?",
    "Open README.md and tell me what it says.",
    "What is inside package.json?",
    "Print config.yaml for me.",
]
# Realistic bad arguments, one per way a schema refuses them: (prompt, tool, arguments text).
CONSTRUCTED = [
    ("Email alice@example.com and ask if she is free at noon.", "send_email",
     '{"to": "alice@example.com", "body": "Are you free at noon?"}'),  # missing required
    ("What's the temperature in Tokyo in kelvin?", "get_weather",
     '{"city": "Tokyo", "unit": "kelvin"}'),  # not in the enum
    ("Find 'TODO' in the files, five results at most.", "search_files",
     '{"query": "TODO", "max_results": "five"}'),  # wrong type
    ("Read the file docs/setup.md.", "read_file", '{"file": "docs/setup.md"}'),  # wrong key
    ("Run `ls -la` in the current directory.", "run_command",
     '{"command": "ls -la"'),  # does not parse
]
NO_CALL_PROMPTS: list[tuple[str, ToolChoice]] = [
    ("Hello! How are you today?", "required"),
    ("Can you help me with my project?", "required"),
    ("I am flying to Berlin tomorrow.", named("get_weather")),
    ("What is in setup.cfg?", named("read_file")),
]


@dataclass
class Failure:
    """A failed first answer: the request, the reply as text and as calls, what was wrong."""

    kind: str  # unknown | invalid | no_call
    prompt: str
    tools: list[Tool]
    tool_choice: ToolChoice
    text: str  # the reply as the model wrote it
    calls: list[dict[str, Any]] = field(default_factory=list)  # {"name", "arguments"}
    origin: str = "model"  # model | constructed

    @property
    def forced(self) -> str | None:
        if isinstance(self.tool_choice, dict):
            return str(self.tool_choice["function"]["name"])
        return None


# -- how a tool is described in a wording ----------------------------------------------------
def _type(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "properties" in schema:
        return "object with " + ", ".join(schema["properties"])
    return str(kind)


def signature(tool: Tool) -> str:
    """`get_weather(city, unit)`: the name and its parameters' names."""
    fn = tool["function"]
    return f"{fn['name']}({', '.join(fn['parameters'].get('properties', {}))})"


def listing(tool: Tool) -> str:
    """One line per tool: its description, then required and optional parameters with types."""
    fn = tool["function"]
    props = fn["parameters"].get("properties", {})
    required = fn["parameters"].get("required", [])
    need = ", ".join(f"{p} ({_type(props[p])})" for p in required)
    rest = ", ".join(f"{p} ({_type(s)})" for p, s in props.items() if p not in required)
    line = f"- {fn['name']}: {fn.get('description', '')} Required: {need or 'none'}."
    return line + (f" Optional: {rest}." if rest else "")


def _names(tools: list[Tool]) -> str:
    return ", ".join(t["function"]["name"] for t in tools)


def _problem(call: dict[str, Any], tools: list[Tool]) -> str:
    """What is wrong with one call, in call_problems' words without the tool name."""
    problems = call_problems([{"function": call}], tools)
    if not problems:
        return ""
    head = problems[0]
    prefix = f"{call['name']}: "
    head = head.removeprefix(prefix)
    return head.replace("arguments do not parse", "the arguments are not valid JSON")


# -- the wordings: kind -> wording -> template ----------------------------------------------
Wording = Callable[[Failure, dict[str, Any] | None], str]


def _unknown(style: str) -> Wording:
    def text(f: Failure, call: dict[str, Any] | None) -> str:
        name = call["name"] if call else "?"
        if style == "terse":
            return f"Error: unknown tool '{name}'. Available tools: {_names(f.tools)}."
        if style == "instructive":
            sigs = ", ".join(signature(t) for t in f.tools)
            return (f"The tool '{name}' does not exist. Call one of these tools instead: "
                    f"{sigs}. Answer with the tool call only.")
        lines = "\n".join(listing(t) for t in f.tools)
        return (f"The tool '{name}' does not exist. Call one of these tools instead:\n{lines}\n"
                "Answer with the tool call only.")
    return text


def _invalid(style: str) -> Wording:
    def text(f: Failure, call: dict[str, Any] | None) -> str:
        assert call is not None
        name, problem = call["name"], _problem(call, f.tools)
        tool = next(t for t in f.tools if t["function"]["name"] == name)
        if style == "terse":
            return f"Error: invalid arguments for '{name}': {problem}."
        if style == "instructive":
            return (f"The arguments of your call to '{name}' are not valid: {problem}. Call "
                    f"'{name}' again with arguments that match its parameters: "
                    f"{signature(tool)}. Answer with the tool call only.")
        return (f"The arguments of your call to '{name}' are not valid: {problem}. Call "
                f"'{name}' again with these parameters:\n{listing(tool)}\n"
                "Answer with the tool call only.")
    return text


def _no_call(style: str) -> Wording:
    def text(f: Failure, call: dict[str, Any] | None) -> str:
        forced = f.forced
        tools = [t for t in f.tools if t["function"]["name"] == forced] if forced else f.tools
        if style == "terse":
            if forced:
                return f"Error: a call to the tool '{forced}' is required."
            return f"Error: a tool call is required. Available tools: {_names(tools)}."
        what = f"the tool '{forced}'" if forced else "one of these tools"
        if style == "instructive":
            sigs = ", ".join(signature(t) for t in tools)
            return (f"You must call {what} now instead of answering in text: {sigs}. "
                    "Answer with the tool call only.")
        lines = "\n".join(listing(t) for t in tools)
        return (f"You must call {what} now instead of answering in text:\n{lines}\n"
                "Answer with the tool call only.")
    return text


WORDINGS: dict[str, Callable[[str], Wording]] = {
    "unknown": _unknown, "invalid": _invalid, "no_call": _no_call}


@dataclass(frozen=True)
class Candidate:
    """Where the error goes (shape) and how it is worded; keep: resend the client's tool_choice."""

    shape: str  # tool | user | system
    wording: str  # terse | instructive | params
    keep_choice: bool = False

    @property
    def label(self) -> str:
        return f"{self.shape}/{self.wording}" + ("/keep tool_choice" if self.keep_choice else "")


CANDIDATES: dict[str, list[Candidate]] = {
    kind: [Candidate(s, w) for s in ("tool", "user") for w in ("terse", "instructive", "params")]
    for kind in ("unknown", "invalid")
}
CANDIDATES["no_call"] = [
    *(Candidate("user", w) for w in ("terse", "instructive", "params")),
    Candidate("system", "instructive"),
    Candidate("user", "instructive", keep_choice=True),
]


# What latchgate itself sends (proxy.agent.healing), and the same with the example call's
# placeholders naming their parameter ("<path>") instead of "...".
for _kind in CANDIDATES:
    CANDIDATES[_kind] += [Candidate("user", "latchgate"), Candidate("user", "latchgate-named")]


def latchgate_request(f: Failure, named: bool) -> list[Message]:
    """The re-ask proxy.agent.healing builds for this failure (what the client would get)."""
    names = {t["function"]["name"] for t in f.tools}
    native = bool(f.calls) and all(c["name"] in names for c in f.calls)
    message: Message = {"role": "assistant", "content": None if native else f.text}
    if native:
        message["tool_calls"] = [{"id": f"c{i}", "type": "function", "function": c}
                                 for i, c in enumerate(f.calls)]
    choice = healing.read_choice(f.tool_choice)
    verdict = healing.judge(message, f.tools, choice)
    said, correction = healing.heal_messages(message, verdict, f.tools, choice)
    if named:
        text, _, example = correction["content"].rpartition("\nFor example: ")
        call = json.loads(example)
        call["arguments"] = {k: f"<{k}>" for k in call["arguments"]}
        correction = {**correction, "content": f"{text}\nFor example: {json.dumps(call)}"}
    return [said, correction]


def second_request(f: Failure, c: Candidate) -> tuple[list[Message], ToolChoice]:
    """The conversation, the model's reply, and the error message, in the candidate's shape."""
    history: list[Message] = [{"role": "system", "content": SYSTEM},
                              {"role": "user", "content": f.prompt}]
    if c.wording.startswith("latchgate"):
        return [*history, *latchgate_request(f, c.wording.endswith("named"))], None
    wording = WORDINGS[f.kind](c.wording)
    if c.shape == "tool" and f.calls:
        ids = [f"call_heal_{i}" for i in range(len(f.calls))]
        history.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": call} for i, call in zip(ids, f.calls,
                                                                                strict=True)]})
        for i, call in zip(ids, f.calls, strict=True):
            bad = bool(_problem(call, f.tools))
            content = wording(f, call) if bad else "Not run: another call of this turn failed."
            history.append({"role": "tool", "tool_call_id": i, "content": content})
    else:
        history.append({"role": "assistant", "content": f.text})
        bad_call = next((call for call in f.calls if _problem(call, f.tools)), None)
        history.append({"role": c.shape, "content": wording(f, bad_call)})
    return history, (f.tool_choice if c.keep_choice else None)


# -- talking to the model --------------------------------------------------------------------
async def ask(client: openai.AsyncOpenAI, messages: list[Message], tools: list[Tool],
              tool_choice: ToolChoice, temperature: float = 0.0, seed: int = 0
              ) -> tuple[list[dict[str, Any]], str, str | None, float]:
    extra: dict[str, Any] = {} if tool_choice is None else {"tool_choice": tool_choice}
    t0 = time.monotonic()
    resp = await client.chat.completions.create(
        model="llama", messages=messages, tools=tools,  # type: ignore[arg-type]
        temperature=temperature, seed=seed, max_tokens=MAX_TOKENS, **extra)
    choice = resp.choices[0]
    calls = [c.model_dump()["function"] for c in choice.message.tool_calls or []]
    return calls, choice.message.content or "", choice.finish_reason, time.monotonic() - t0


def text_call(text: str) -> dict[str, Any] | None:
    """A call the model wrote as JSON text that latchgate left as text (an undeclared name)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        obj = json.loads(text[start:end + 1])
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    return {"name": obj["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}


def valid(calls: list[dict[str, Any]], tools: list[Tool], forced: str | None) -> bool:
    if call_problems([{"function": c} for c in calls], tools):
        return False
    if any(re.search(r'"(\.\.\.|<\w+>)"', str(c.get("arguments"))) for c in calls):
        return False  # the example's placeholder copied: valid by the schema, and useless
    return forced is None or all(c["name"] == forced for c in calls)


async def collect(client: openai.AsyncOpenAI, per_list: int | None) -> list[Failure]:
    """The failing first answers, each kind, from the model (and the constructed ones)."""
    found: list[Failure] = []
    for prompt in FILE_PROMPTS[:per_list]:
        calls, text, _, _ = await ask(client, _first(prompt), TOOLS, None)
        calls = calls or [c for c in [text_call(text)] if c]
        if calls and not valid(calls, TOOLS, None):
            undeclared = any("undeclared" in _problem(c, TOOLS) for c in calls)
            found.append(Failure("unknown" if undeclared else "invalid", prompt, TOOLS, None,
                                 text or _fenced(calls[0]), calls))
    for prompt, name, arguments in CONSTRUCTED[:per_list]:
        call = {"name": name, "arguments": arguments}
        found.append(Failure("invalid", prompt, TOOLS, None, _fenced(call), [call],
                             "constructed"))
    for prompt, choice in NO_CALL_PROMPTS[:per_list]:
        calls, text, _, _ = await ask(client, _first(prompt), TOOLS, choice)
        if not calls and not text_call(text):
            found.append(Failure("no_call", prompt, TOOLS, choice, text))
    return found


def _first(prompt: str) -> list[Message]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def _fenced(call: dict[str, Any]) -> str:
    """A call written as this model writes one: a fenced JSON object, arguments inline."""
    try:
        args: Any = json.loads(call["arguments"])
    except ValueError:
        return f'```json\n{{"name": "{call["name"]}", "arguments": {call["arguments"]}\n```'
    return "```json\n" + json.dumps({"name": call["name"], "arguments": args}, indent=2) + "\n```"


@dataclass
class Cell:
    """One kind x candidate: each second answer's temperature, validity, seconds, and gist."""

    runs: list[tuple[float, bool, float, str]] = field(default_factory=list)

    def share(self, temperature: float | None = None) -> str:
        got = [ok for t, ok, _, _ in self.runs if temperature in (None, t)]
        if not got:
            return "-"
        return f"{sum(got)}/{len(got)} ({100 * sum(got) / len(got):.0f}%)"

    @property
    def rate(self) -> float:
        return sum(ok for _, ok, _, _ in self.runs) / len(self.runs)


async def trial(client: openai.AsyncOpenAI, failures: list[Failure],
                samples: list[tuple[float, int]]) -> dict[tuple[str, str], Cell]:
    """Every failure x candidate x sample, two at a time (the server has two slots)."""
    cells: dict[tuple[str, str], Cell] = {}
    gate = asyncio.Semaphore(2)

    async def one(f: Failure, c: Candidate, temperature: float, seed: int) -> None:
        messages, choice = second_request(f, c)
        async with gate:
            try:
                calls, text, _, seconds = await ask(client, messages, f.tools, choice,
                                                    temperature, seed)
            except openai.APIStatusError as exc:
                # llama-server refuses a history whose tool_calls carry arguments that are not
                # JSON ("Failed to parse tool call arguments as JSON"): that shape cannot work.
                calls, text, seconds = [], f"HTTP {exc.status_code}: {exc.message}", 0.0
        calls = calls or [c for c in [text_call(text)] if c]
        ok = bool(calls) and valid(calls, f.tools, f.forced)
        gist = json.dumps(calls) if calls else text[:80]
        cells.setdefault((f.kind, c.label), Cell()).runs.append((temperature, ok, seconds, gist))
        print(f"{f.kind} {c.label} t={temperature}: {'ok' if ok else 'bad'} {gist[:60]!r}",
              file=sys.stderr, flush=True)

    await asyncio.gather(*(one(f, c, t, s) for f in failures for c in CANDIDATES[f.kind]
                           for t, s in samples))
    return cells


async def tool_choice_probe(server: LlamaServer) -> list[str]:
    """What llama-server itself does with tool_choice "required" and a named function."""
    lines = []
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0) as raw:
        for label, choice in (("auto", "auto"), ("required", "required"),
                              ("named read_file", named("read_file"))):
            mark = server.log.stat().st_size
            calls, text, finish, seconds = await ask(
                raw, _first("Hello! How are you today?"), TOOLS, choice)
            warned = re.findall(r"W (Wrong type supplied for parameter 'tool_choice'[^\n]*)",
                                server.log.read_bytes()[mark:].decode(errors="replace"))
            lines.append(f"- direct, tool_choice {label}: finish_reason {finish!r}, "
                         f"{len(calls)} tool_calls, {len(text)} chars of text in {seconds:.1f} s"
                         + (f"; server log: `{warned[0]}`" if warned else ""))
    return lines


def table(failures: list[Failure], cells: dict[tuple[str, str], Cell]) -> list[str]:
    rows = ["| kind | failures | candidate | valid second answers | at t=0 | at t=0.3 (2 seeds) "
            "| mean s |", "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for kind in ("unknown", "invalid", "no_call"):
        mine = [f for f in failures if f.kind == kind]
        for c in CANDIDATES[kind]:
            cell = cells.get((kind, c.label))
            if cell is None:
                continue
            seconds = statistics.mean(s for _, _, s, _ in cell.runs)
            rows.append(f"| {kind} | {len(mine)} | {c.label} | {cell.share()} "
                        f"| {cell.share(0.0)} | {cell.share(0.3)} | {seconds:.1f} |")
    return rows


def describe(failures: list[Failure]) -> list[str]:
    """The failures tried, one line each, so the table can be read against them."""
    lines = []
    for f in failures:
        why = "; ".join(_problem(c, f.tools) for c in f.calls) or "prose, no call"
        choice = f" tool_choice {json.dumps(f.tool_choice)}" if f.tool_choice else ""
        lines.append(f"- {f.kind} ({f.origin}){choice}: {f.prompt!r} -> {why}")
    return lines


async def run(dump: Path | None, quick: bool) -> str:
    samples = SAMPLES[:1] if quick else SAMPLES
    binary, model = find_binary(), model_path()
    if binary is None or not model.is_file():
        raise SystemExit("llama-server or the model is missing: run bash scripts/install-llama.sh"
                         " (or set LATCHGATE_MODEL_DIR)")
    logs.configure("warning")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, \
            llama(binary, model, Path(tmp) / "llama.log", jinja=True) as server:
        probe = await tool_choice_probe(server)
        # Healing off when the option exists, so the first answers are the model's own.
        up = upstream(server.base_url, 0 if heal_option_exists() else None)
        runner, port = await start(Settings(upstreams=[up], port=0, probe_interval=3600,
                                            state_file=Path(tmp) / "state.json"))
        try:
            async with openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1",
                                          api_key="x", max_retries=0) as client:
                failures = await collect(client, 3 if quick else None)
                cells = await trial(client, failures, samples)
        finally:
            await runner.cleanup()
    if dump is not None:
        dump.write_text(json.dumps({f"{k[0]} {k[1]}": v.runs for k, v in cells.items()},
                                   indent=1))
    lines = [*table(failures, cells), "", "Failures tried:", "", *describe(failures), "",
             "What the server does itself:", "", *probe, "",
             f"- {len(samples)} sample(s) per failure x candidate: " + ", ".join(
                 f"t={t} seed {s}" for t, s in samples) + f"; max_tokens {MAX_TOKENS}; "
             f"{time.monotonic() - t0:.0f} s in all",
             f"- machine: {os.cpu_count()} CPUs (nproc); llama-server -c 4096 --parallel 2 -t 2",
             f"- command: `.venv/bin/python bench/{Path(sys.argv[0]).name} "
             f"{' '.join(sys.argv[1:])}`"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, help="write every second answer here (JSON)")
    parser.add_argument("--quick", action="store_true",
                        help="3 failures of each list, temperature 0 only (a loaded machine)")
    parser.add_argument("--wordings", help="only these wordings, comma-separated (e.g. "
                        "params,latchgate,latchgate+example)")
    args = parser.parse_args()
    if args.wordings:
        keep = set(args.wordings.split(","))
        for kind, listed in CANDIDATES.items():
            CANDIDATES[kind] = [c for c in listed if c.wording in keep]
    print(asyncio.run(run(args.dump, args.quick)))


if __name__ == "__main__":
    main()
