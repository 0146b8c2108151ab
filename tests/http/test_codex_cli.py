"""The real Codex CLI through latchgate's Responses front, in front of the scripted fake upstream.

Issue 15, "How it is checked": `codex exec` (npm @openai/codex 0.169.0, installed by
scripts/install-codex.sh; skipped when missing, a failure with LATCHGATE_REQUIRE_CODEX=1) points
at latchgate, which translates its `POST /v1/responses` onto the chat path of a scripted chat
upstream. The upstream writes Codex's shell call as text (Hermes JSON, Qwen3-Coder XML) or as a
native streamed call; latchgate must hand it to Codex as a `function_call`, Codex must run the
command and send the output back (a `tool` message on the chat side), and print the upstream's
final answer. Also: an upstream cut mid-stream is an error to Codex, not a short answer; a known
model (gpt-5.5: a `custom` apply_patch tool, flattened to a one-string-parameter function) writes
a file in the work directory; and the default model (gpt-6.1-sol: tools inside an
`additional_tools` input item, a `custom` `exec` tool in the `functions` namespace) runs a script.
A recording relay between Codex and latchgate shows the Responses items Codex sends back
(`function_call_output`, `custom_tool_call_output`).

Codex runs as a subprocess (in a thread, so this event loop keeps serving latchgate and the
fake); it retries nothing (tests/codexcli.py sets both retry counts to 0). Each scripted reply
is a callable that picks the turn from the request itself, so a resent request gets the same
answer instead of desynchronising a queue.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.codexcli import CodexRun, require_codex, run_codex
from tests.conftest import Running
from tests.fakeupstream import FakeUpstream, Recorded, Stream, chunk, text_stream

FINAL = "The command printed hello-from-codex."
TIMEOUT = 180.0  # a loaded 2-core machine: a Codex turn is a few seconds, the cap is generous


class Relay:
    """A recording hop between Codex and latchgate: it keeps the Responses bodies Codex POSTs
    and streams latchgate's answer back byte for byte (the fake sees only the chat side)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.bodies: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.base_url = ""

    async def __aenter__(self) -> Relay:
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if raw:
            self.bodies.append(json.loads(raw))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with (
            aiohttp.ClientSession(auto_decompress=False) as http,
            http.request(
                request.method, self.target + request.path_qs, data=raw or None, headers=headers
            ) as up,
        ):
            resp = web.StreamResponse(status=up.status, headers={
                k: v for k, v in up.headers.items() if k.lower() not in _HOP})  # fmt: skip
            await resp.prepare(request)
            async for data in up.content.iter_any():
                await resp.write(data)
            await resp.write_eof()
            return resp


_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


@pytest.fixture(autouse=True)
def _codex_installed() -> None:
    require_codex()


@pytest.fixture
async def relay(lg: Running) -> AsyncIterator[Relay]:
    async with Relay(lg.url) as hop:
        yield hop


async def codex(base_url: str, prompt: str, workdir: Path, **kw: Any) -> CodexRun:
    kw.setdefault("model", "fake-model")
    return await asyncio.to_thread(
        run_codex, base_url, prompt, workdir=workdir, timeout=TIMEOUT, **kw
    )


def items_of(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in body.get("input", []) if isinstance(i, dict) and i.get("type") == kind]


def codex_sent_back(relay: Relay, call: str, output: str, marker: str) -> None:
    """Codex's second request holds the call latchgate gave it (`call` items) and the result
    (`output` items) under the same call_id, the result containing `marker`."""
    assert len(relay.bodies) == 2, [[i.get("type") for i in b["input"]] for b in relay.bodies]
    body = relay.bodies[1]
    calls, outputs = items_of(body, call), items_of(body, output)
    assert len(calls) == 1 and len(outputs) == 1, [i.get("type") for i in body["input"]]
    assert calls[0]["call_id"] == outputs[0]["call_id"]
    assert marker in json.dumps(outputs[0]["output"])


def explain(run: CodexRun, fake: FakeUpstream) -> str:
    """What to read when a run went wrong: Codex's own account and what latchgate sent."""
    # The messages only: the tool list is long and the same in every request.
    sent = json.dumps([b.get("messages")[-3:] for b in fake.bodies()], indent=1)[-6000:]
    return (
        f"exit {run.returncode}; last message {run.last_message!r}\n"
        f"--- stderr\n{run.stderr[-4000:]}\n--- stdout\n{run.stdout[-2000:]}\n"
        f"--- chat bodies latchgate sent (tail)\n{sent}"
    )


def has_tool_result(rec: Recorded) -> bool:
    return any(m.get("role") == "tool" for m in rec.json.get("messages", []))


def text_call(text: str) -> Stream:
    """A streamed answer whose whole content is `text`, cut in pieces as a model writes."""
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    return text_stream(*pieces)


def scripted(first: Stream, final: str = FINAL) -> Any:
    """Turn 1 (no tool result yet): `first`; turn 2 (the output is back): `final` as text."""

    def reply(rec: Recorded) -> Stream:
        return text_call(final) if has_tool_result(rec) else first

    return reply


def tool_round_trip(fake: FakeUpstream, output_marker: str) -> dict[str, Any]:
    """The assistant call and the tool message of the second chat request; asserts both exist."""
    bodies = fake.bodies()
    assert len(bodies) >= 2, f"latchgate sent {len(bodies)} chat request(s)"
    messages = bodies[1]["messages"]
    calls = [c for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    assert len(calls) == 1, messages
    call = calls[0]
    assert call["function"]["name"] == "exec_command"
    results = [m for m in messages if m.get("role") == "tool"]
    assert len(results) == 1, messages
    assert results[0]["tool_call_id"] == call["id"]
    content = results[0]["content"]
    text = content if isinstance(content, str) else json.dumps(content)
    assert output_marker in text
    return call


# -- 1. a shell call written as text, recovered --------------------------------------------------


async def test_codex_runs_a_shell_call_written_as_hermes_text(
    relay: Relay, fake: FakeUpstream, tmp_path: Path
) -> None:
    call = {"name": "exec_command", "arguments": {"cmd": "echo hello-from-codex"}}
    fake.push(*[scripted(text_call(f"<tool_call>\n{json.dumps(call)}\n</tool_call>"))] * 4)
    prompt = "Run `echo hello-from-codex` and tell me what it printed."
    run = await codex(relay.base_url, prompt, tmp_path)
    assert run.returncode == 0, explain(run, fake)
    sent = tool_round_trip(fake, "hello-from-codex")
    assert json.loads(sent["function"]["arguments"]) == {"cmd": "echo hello-from-codex"}
    assert run.last_message is not None
    assert run.last_message.strip() == FINAL, explain(run, fake)
    assert len(fake.bodies()) == 2
    codex_sent_back(relay, "function_call", "function_call_output", "hello-from-codex")


async def test_codex_runs_a_shell_call_written_as_qwen3_coder_xml(
    lg: Running, fake: FakeUpstream, tmp_path: Path
) -> None:
    xml = (
        "I will run it.\n<tool_call>\n<function=exec_command>\n<parameter=cmd>\n"
        "echo hi-from-xml\n</parameter>\n</function>\n</tool_call>"
    )
    fake.push(*[scripted(text_call(xml), "It printed hi-from-xml.")] * 4)
    run = await codex(lg.base_url, "Run `echo hi-from-xml`.", tmp_path)
    assert run.returncode == 0, explain(run, fake)
    sent = tool_round_trip(fake, "hi-from-xml")
    assert json.loads(sent["function"]["arguments"])["cmd"].strip() == "echo hi-from-xml"
    assert run.last_message is not None
    assert run.last_message.strip() == "It printed hi-from-xml."


async def test_codex_runs_a_native_streamed_tool_call(
    lg: Running, fake: FakeUpstream, tmp_path: Path
) -> None:
    args = json.dumps({"cmd": "echo native-call"})
    first = Stream([
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call_up_1", "type": "function",
                               "function": {"name": "exec_command", "arguments": ""}}]}),
        *[chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i : i + 5]}}]})
          for i in range(0, len(args), 5)],
        chunk({}, "tool_calls"),
        "[DONE]",
    ])  # fmt: skip
    fake.push(*[scripted(first, "It printed native-call.")] * 4)
    run = await codex(lg.base_url, "Run `echo native-call`.", tmp_path)
    assert run.returncode == 0, explain(run, fake)
    sent = tool_round_trip(fake, "native-call")
    assert sent["id"] == "call_up_1"  # Codex pairs the output by the call id it was given
    assert run.last_message is not None
    assert run.last_message.strip() == "It printed native-call."


# -- 2. the upstream cut mid-stream ----------------------------------------------------------


async def test_an_upstream_cut_mid_stream_is_an_error_to_codex(
    lg: Running, fake: FakeUpstream, tmp_path: Path
) -> None:
    partial = "The answer is forty"
    cut = Stream(
        [chunk({"role": "assistant", "content": ""}), chunk({"content": partial})], then="drop"
    )
    fake.push(*[cut] * 4)
    run = await codex(lg.base_url, "What is six times seven?", tmp_path)
    assert run.returncode != 0, explain(run, fake)
    assert not (run.last_message or "").strip(), explain(run, fake)
    assert "ERROR" in run.stderr, explain(run, fake)
    assert len(fake.bodies()) == 1  # no retry hid the failure


# -- 3. a known model: the custom apply_patch tool -------------------------------------------


async def test_codex_applies_a_patch_through_the_flattened_custom_tool(
    relay: Relay, fake: FakeUpstream, tmp_path: Path
) -> None:
    """For a model it knows (gpt-5.5) Codex declares `apply_patch` as a `custom` (freeform)
    tool; latchgate offers it as a function with one string parameter, `input`, and turns the
    model's call back into a `custom_tool_call` whose input is the patch itself."""
    patch = (
        "*** Begin Patch\n*** Add File: notes/hello.txt\n+hello from apply_patch\n*** End Patch\n"
    )
    call = {"name": "apply_patch", "arguments": {"input": patch}}
    first = text_call(f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
    fake.push(*[scripted(first, "Created notes/hello.txt.")] * 4)
    prompt = "Create notes/hello.txt saying hello."
    run = await codex(relay.base_url, prompt, tmp_path, model="gpt-5.5")
    assert run.returncode == 0, explain(run, fake)

    tools = {t["function"]["name"]: t["function"] for t in fake.bodies()[0]["tools"]}
    assert tools["apply_patch"]["parameters"]["properties"] == {
        "input": {"type": "string", "description": "the tool's input"}
    }
    assert (tmp_path / "notes" / "hello.txt").read_text() == "hello from apply_patch\n"
    bodies = fake.bodies()
    assert len(bodies) == 2, explain(run, fake)
    messages = bodies[1]["messages"]
    calls = [c for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == ["apply_patch"], messages
    assert json.loads(calls[0]["function"]["arguments"]) == {"input": patch}
    results = [m for m in messages if m.get("role") == "tool"]  # the custom_tool_call_output
    assert [r["tool_call_id"] for r in results] == [calls[0]["id"]], messages
    assert "notes/hello.txt" in json.dumps(results[0]["content"])
    codex_sent_back(relay, "custom_tool_call", "custom_tool_call_output", "notes/hello.txt")
    assert items_of(relay.bodies[1], "custom_tool_call")[0]["input"] == patch
    assert run.last_message is not None
    assert run.last_message.strip() == "Created notes/hello.txt."


# -- 4. the default model: tools inside the input, a custom tool in a namespace ------------------


async def test_codex_runs_code_mode_exec_from_a_namespaced_custom_tool(
    relay: Relay, fake: FakeUpstream, tmp_path: Path
) -> None:
    """Codex's default model (gpt-6.1-sol) gets no `tools` field: its tools come in an
    `additional_tools` input item, grouped in namespaces, the main one a `custom` `exec` tool
    in the `functions` namespace that runs JavaScript. latchgate flattens it to the chat
    function `functions__exec` (one string parameter) and maps the call back to the member."""
    js = 'const r = await tools.exec_command({cmd: "echo js-says-hi"});\ntext(r);\n'
    call = {"name": "functions__exec", "arguments": {"input": js}}
    first = text_call(f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
    fake.push(*[scripted(first, "The script printed js-says-hi.")] * 4)
    run = await codex(relay.base_url, "Say hi from a script.", tmp_path, model="gpt-6.1-sol")
    assert run.returncode == 0, explain(run, fake)

    assert "tools" not in relay.bodies[0]  # the tools came inside the input
    assert items_of(relay.bodies[0], "additional_tools")
    tools = {t["function"]["name"]: t["function"] for t in fake.bodies()[0]["tools"]}
    assert list(tools["functions__exec"]["parameters"]["properties"]) == ["input"]
    messages = fake.bodies()[1]["messages"]
    calls = [c for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == ["functions__exec"], messages
    codex_sent_back(relay, "custom_tool_call", "custom_tool_call_output", "js-says-hi")
    sent = items_of(relay.bodies[1], "custom_tool_call")[0]
    assert (sent["namespace"], sent["name"], sent["input"]) == ("functions", "exec", js)
    assert run.last_message is not None
    assert run.last_message.strip() == "The script printed js-says-hi."
