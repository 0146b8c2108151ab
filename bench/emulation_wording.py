"""Which instruction wording makes a real model write tool calls that latchgate recovers.

Tool emulation (proxy/agent/emulation.py) describes the tools in the system prompt when a server
refuses `tools`. This starts its own llama-server WITHOUT jinja (`--no-jinja`: on this build jinja
is on by default, and only without it does the server refuse `tools` with "tools param requires
--jinja flag", which is checked first), sends it bodies built by `emulate` for each wording, and
counts the turns whose reply `proxy.toolcalls.recovery.process_response` turns into valid tool
calls (a declared tool, arguments that parse and validate against its schema; the name expected
for the case is counted too). Cases: the e2e test's six prompts, six follow-up turns with a call
and its result in the history, three with `tool_choice` required or named, and three turns that
should be answered in text (a result is in, nothing more to do), where a call is a false call.

Needs `bash scripts/install-llama.sh` first. From the project root:

    .venv/bin/python bench/emulation_wording.py [--wordings qwen,plain,qwen-stop,terse] [--rounds 1]

(`LATCHGATE_MODEL_DIR=...` when the model is not in this tree's .cache/models, e.g. in a git
worktree) and copy the printed table into bench/RESULTS.md ("Tool emulation wording"). The
server is stopped on exit; each miss is printed with --verbose.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy.agent.emulation import WORDING, Wording, emulate  # noqa: E402
from proxy.toolcalls.recovery import process_response  # noqa: E402
from tests.e2e.conftest import find_binary, free_port, health_ok, model_path, stop  # noqa: E402
from tests.e2e.test_llama import MAX_TOKENS, PROMPTS, TOOLS, call_problems  # noqa: E402

SYSTEM = "You are a helpful assistant. Use the tools."

WORDINGS: dict[str, Wording] = {
    # Qwen's own tool-template text, which this model family was trained on.
    "qwen": WORDING,
    # Plain imperative English, with a placeholder call and an explicit "text otherwise".
    "plain": replace(
        WORDING,
        intro=(
            "You can use the tools below. Each line is one tool: its name, what it does, and "
            "its parameters as a JSON schema."
        ),
        format=(
            "To use a tool, reply with one block per call, exactly in this form, and write "
            "nothing after the last block:\n<tool_call>\n"
            '{"name": "TOOL_NAME", "arguments": {"PARAMETER": "VALUE"}}\n</tool_call>\n'
            "When no tool is needed, answer in plain text."
        ),
    ),
    # Qwen's text plus a reminder aimed at what the model did wrong with it: after a call in the
    # history it wrote bare JSON lines and went on inventing results and further calls.
    "qwen-stop": replace(
        WORDING,
        format=WORDING.format + (
            "\nAlways write each call inside <tool_call></tool_call> tags, and stop after the "
            "last </tool_call>: the results come back in the next message."
        ),
    ),
    # The shortest form: a heading, the list, one line on the format.
    "terse": replace(
        WORDING,
        intro="Tools:",
        format=(
            'Call a tool by writing <tool_call>{"name": NAME, "arguments": {...}}</tool_call>, '
            "one block per call."
        ),
    ),
}

# (prompt of the first turn, the call made, its result, the follow-up, the tool it should call)
FOLLOW_UPS: list[tuple[str, str, dict[str, Any], str, str, str]] = [
    (PROMPTS[0], "get_weather", {"city": "Paris"}, '{"temperature": 18, "sky": "cloudy"}',
     "And in London?", "get_weather"),
    (PROMPTS[1], "search_files", {"query": "TODO"}, "src/app.py:12: # TODO: retry\n",
     "Now read src/app.py.", "read_file"),
    (PROMPTS[2], "read_file", {"path": "docs/setup.md"}, "# Setup\nRun make install.",
     "Run `make install` for me.", "run_command"),
    (PROMPTS[3], "send_email", {"to": "alice@example.com", "subject": "Lunch",
                                "body": "Are you free at noon?"}, '{"status": "sent"}',
     "Also email bob@example.com with the subject 'Lunch' and the same question.",
     "send_email"),
    (PROMPTS[4], "run_command", {"command": "ls -la"}, "total 8\n-rw-r--r-- 1 u u 42 a.txt\n",
     "Now show me what is in a.txt with cat.", "run_command"),
    (PROMPTS[5], "convert_currency", {"amount": 250, "from_currency": "USD",
                                      "to_currency": "EUR"}, '{"result": 231.5}',
     "And 100 euros in Japanese yen?", "convert_currency"),
]


@dataclass(frozen=True)
class Case:
    name: str
    messages: list[dict[str, Any]]
    expect: str | None  # the tool that should be called; None when the turn should be text
    tool_choice: Any = None


def _history(prompt: str, tool: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function",
            "function": {"name": tool, "arguments": json.dumps(args)}}
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": result}]


FIRST_TOOLS = ["get_weather", "search_files", "read_file", "send_email", "run_command",
               "convert_currency"]


def cases() -> list[Case]:
    out = [Case(f"first {i}", [{"role": "system", "content": SYSTEM},
                               {"role": "user", "content": p}], FIRST_TOOLS[i])
           for i, p in enumerate(PROMPTS)]
    for i, (prompt, tool, args, result, follow, expect) in enumerate(FOLLOW_UPS):
        out.append(Case(f"follow-up {i}", [*_history(prompt, tool, args, result),
                                           {"role": "user", "content": follow}], expect))
    out.append(Case("required", [{"role": "system", "content": SYSTEM},
                                 {"role": "user", "content": "Is it raining in Oslo?"}],
                    "get_weather", "required"))
    out.append(Case("required 2", [{"role": "system", "content": SYSTEM},
                                   {"role": "user", "content": "I need the setup notes."}],
                    "read_file", "required"))
    out.append(Case("named", [{"role": "system", "content": SYSTEM},
                              {"role": "user", "content": "Where is the config loaded?"}],
                    "search_files", {"type": "function", "function": {"name": "search_files"}}))
    for i in (0, 5, 3):
        prompt, tool, args, result, _, _ = FOLLOW_UPS[i]
        out.append(Case(f"answer {i}", _history(prompt, tool, args, result), None))
    return out


@dataclass
class Tally:
    calls_ok: int = 0
    right_tool: int = 0
    call_turns: int = 0
    text_ok: int = 0
    text_turns: int = 0
    seconds: float = 0.0
    misses: list[str] = field(default_factory=list)


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def run_case(url: str, case: Case, wording: Wording, tally: Tally) -> None:
    body: dict[str, Any] = {"model": "llama", "messages": case.messages, "tools": TOOLS,
                            "temperature": 0, "max_tokens": MAX_TOKENS}
    if case.tool_choice is not None:
        body["tool_choice"] = case.tool_choice
    t0 = time.monotonic()
    status, reply = post(url, emulate(body, wording))
    tally.seconds += time.monotonic() - t0
    recovered, _ = process_response(reply, TOOLS) if status == 200 else (None, [])
    message = (recovered or reply).get("choices", [{}])[0].get("message", {})
    calls = message.get("tool_calls") or []
    text = str(message.get("content"))[:80].replace("\n", "\\n")
    if case.expect is None:
        tally.text_turns += 1
        tally.text_ok += not calls
        if calls:
            tally.misses.append(f"{case.name}: false call {calls[0]['function']['name']}")
        return
    tally.call_turns += 1
    problems = call_problems(calls, TOOLS) if status == 200 else [f"HTTP {status}"]
    tally.calls_ok += not problems
    tally.right_tool += not problems and calls[0]["function"]["name"] == case.expect
    if problems:
        tally.misses.append(f"{case.name}: {problems[0]} | {text}")


def start_server(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary, model = find_binary(), model_path()
    if binary is None or not model.is_file():
        sys.exit("llama-server or the model is missing: run bash scripts/install-llama.sh")
    port = free_port()
    command = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
               "-c", "4096", "--parallel", "1", "-t", "2", "--no-ui", "--no-jinja"]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not health_ok(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            sys.exit(f"llama-server did not start; log: {log}")
        time.sleep(0.2)
    return proc, url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wordings", default=",".join(WORDINGS))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="print each miss")
    args = parser.parse_args()
    log = Path(tempfile.mkdtemp()) / "llama-server.log"
    proc, url = start_server(log)
    try:
        status, refusal = post(url, {"messages": [{"role": "user", "content": "hi"}],
                                     "tools": TOOLS, "max_tokens": 8})
        print(f"native tools: HTTP {status} {json.dumps(refusal)}")
        print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
        print("| wording | valid call | expected tool | text turns without a call | s/turn |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name in args.wordings.split(","):
            tally = Tally()
            for _ in range(args.rounds):
                for case in cases():
                    run_case(url, case, WORDINGS[name], tally)
            turns = tally.call_turns + tally.text_turns
            print(f"| {name} | {tally.calls_ok}/{tally.call_turns} | "
                  f"{tally.right_tool}/{tally.call_turns} | {tally.text_ok}/{tally.text_turns} | "
                  f"{tally.seconds / turns:.1f} |", flush=True)
            if args.verbose:
                for miss in tally.misses:
                    print(f"    {name}: {miss}")
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
