"""The real Claude Code CLI through latchgate's Messages front, in front of the scripted fake.

Issue 16, "How it is checked": `claude -p` (npm @anthropic-ai/claude-code 2.1.332, installed by
scripts/install-claude.sh; skipped when missing, a failure with LATCHGATE_REQUIRE_CLAUDE=1)
points at latchgate, which translates its `POST /v1/messages?beta=true` onto the chat path of a
scripted chat upstream. The upstream writes Claude Code's `Read` call as text (Hermes JSON,
Qwen3-Coder XML) or as a native streamed call; latchgate must hand it to Claude Code as a
`tool_use` block, Claude Code must read the file and send a `tool_result` back (a `tool` message
on the chat side), and print the upstream's final answer. Also: an upstream cut mid-stream is an
API error to Claude Code, not a short answer; a prompt over the configured window is refused
before it is sent, in words Claude Code shows with the sizes; and the first chat request carries
the translations that matter (sanitised tool schemas, the late system message, the effort).
A recording relay between Claude Code and latchgate keeps the Messages bodies Claude Code sends
and the SSE latchgate streams back, for the explanation when a run goes wrong.

Claude Code runs as a subprocess (in a thread, so this event loop keeps serving latchgate and
the fake); it retries nothing and has no non-streaming fallback (tests/claudecli.py). Each
scripted reply is a callable that picks the turn from the request itself, so a resent request
gets the same answer instead of desynchronising a queue.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.claudecli import ClaudeRun, require_claude, run_claude
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Recorded, Stream, chunk, text_stream

FINAL = "The file says the-secret-word-is-latchgate."
SECRET = "the-secret-word-is-latchgate"
TIMEOUT = 180.0  # a loaded 2-core machine: a Claude Code turn is about a second, the cap generous


class Relay:
    """A recording hop between Claude Code and latchgate: it keeps the Messages bodies Claude
    Code POSTs and the bytes latchgate answers, streamed back byte for byte."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.bodies: list[dict[str, Any]] = []
        self.answers: list[tuple[int, bytes]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> Relay:
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"  # Claude Code appends /v1/messages itself
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if raw:
            self.bodies.append(json.loads(raw))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        got = bytearray()
        async with (
            aiohttp.ClientSession(auto_decompress=False) as http,
            http.request(
                request.method, self.target + request.path_qs, data=raw or None, headers=headers
            ) as up,
        ):
            resp = web.StreamResponse(status=up.status, headers={
                k: v for k, v in up.headers.items() if k.lower() not in _HOP})  # fmt: skip
            await resp.prepare(request)
            try:
                async for data in up.content.iter_any():
                    got += data
                    await resp.write(data)
            finally:
                self.answers.append((up.status, bytes(got)))
            await resp.write_eof()
            return resp


_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


@pytest.fixture(autouse=True)
def _claude_installed() -> None:
    require_claude()


@pytest.fixture
async def relay(lg: Running) -> AsyncIterator[Relay]:
    async with Relay(lg.url) as hop:
        yield hop


async def claude(base_url: str, prompt: str, workdir: Path, **kw: Any) -> ClaudeRun:
    kw.setdefault("model", "fake-model")
    return await asyncio.to_thread(
        run_claude, base_url, prompt, workdir=workdir, timeout=TIMEOUT, **kw
    )


def explain(run: ClaudeRun, fake: FakeUpstream, relay: Relay | None = None) -> str:
    """What to read when a run went wrong: Claude Code's own account, what latchgate sent the
    upstream, and (with a relay) what latchgate answered Claude Code."""
    # The messages only: the tool list is long and the same in every request.
    sent = json.dumps([b.get("messages")[-3:] for b in fake.bodies()], indent=1)[-6000:]
    out = (
        f"exit {run.returncode}\n--- stderr\n{run.stderr[-4000:]}\n"
        f"--- stdout\n{run.stdout[-2000:]}\n"
        f"--- chat bodies latchgate sent (tail)\n{sent}"
    )
    if relay is not None:
        answers = "\n".join(f"[{s}] {b.decode(errors='replace')[-3000:]}" for s, b in relay.answers)
        out += f"\n--- what latchgate answered Claude Code\n{answers}"
    return out


def has_tool_result(rec: Recorded) -> bool:
    return any(m.get("role") == "tool" for m in rec.json.get("messages", []))


def text_call(text: str) -> Stream:
    """A streamed answer whose whole content is `text`, cut in pieces as a model writes."""
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    return text_stream(*pieces)


def scripted(first: Stream, final: str = FINAL) -> Any:
    """Turn 1 (no tool result yet): `first`; turn 2 (the file's text is back): `final`."""

    def reply(rec: Recorded) -> Stream:
        return text_call(final) if has_tool_result(rec) else first

    return reply


def secret_file(workdir: Path) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "notes.txt"
    path.write_text(f"{SECRET}\n")
    return path


def tool_round_trip(fake: FakeUpstream, marker: str) -> dict[str, Any]:
    """The assistant call and the tool message of the second chat request; asserts both exist."""
    bodies = fake.bodies()
    assert len(bodies) >= 2, f"latchgate sent {len(bodies)} chat request(s)"
    messages = bodies[1]["messages"]
    calls = [c for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    assert len(calls) == 1, messages
    call = calls[0]
    assert call["function"]["name"] == "Read"
    results = [m for m in messages if m.get("role") == "tool"]
    assert len(results) == 1, messages
    assert results[0]["tool_call_id"] == call["id"]
    content = results[0]["content"]
    text = content if isinstance(content, str) else json.dumps(content)
    assert marker in text, results[0]
    return call


def claude_sent_back(relay: Relay, path: Path) -> None:
    """Claude Code's second request holds the tool_use latchgate gave it and the tool_result
    for it, under the same id, with the file's text."""
    assert len(relay.bodies) == 2, [len(b["messages"]) for b in relay.bodies]
    blocks = [
        (m["role"], b)
        for m in relay.bodies[1]["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict)
    ]
    uses = [b for role, b in blocks if role == "assistant" and b.get("type") == "tool_use"]
    results = [b for role, b in blocks if role == "user" and b.get("type") == "tool_result"]
    assert len(uses) == 1 and len(results) == 1, blocks
    assert uses[0]["name"] == "Read"
    assert uses[0]["id"].startswith("toolu_")
    assert uses[0]["input"]["file_path"] == str(path)
    assert results[0]["tool_use_id"] == uses[0]["id"]
    assert not results[0].get("is_error"), results[0]
    assert SECRET in json.dumps(results[0]["content"])


# -- 1. a Read call written as text, recovered ---------------------------------------------------


async def test_claude_code_runs_a_read_call_written_as_hermes_text(
    relay: Relay, fake: FakeUpstream, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    path = secret_file(work)
    call = {"name": "Read", "arguments": {"file_path": str(path)}}
    fake.push(*[scripted(text_call(f"<tool_call>\n{json.dumps(call)}\n</tool_call>"))] * 4)
    run = await claude(relay.url, "What does notes.txt say?", work)
    assert run.returncode == 0, explain(run, fake, relay)
    sent = tool_round_trip(fake, SECRET)
    assert json.loads(sent["function"]["arguments"]) == {"file_path": str(path)}
    assert FINAL in run.stdout, explain(run, fake, relay)
    assert "<tool_call>" not in run.stdout
    assert len(fake.bodies()) == 2
    claude_sent_back(relay, path)


async def test_claude_code_runs_a_read_call_written_as_qwen3_coder_xml(
    lg: Running, fake: FakeUpstream, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    path = secret_file(work)
    xml = (
        "I will read it.\n<tool_call>\n<function=Read>\n<parameter=file_path>\n"
        f"{path}\n</parameter>\n</function>\n</tool_call>"
    )
    fake.push(*[scripted(text_call(xml), "It says the-secret-word-is-latchgate (xml).")] * 4)
    run = await claude(lg.url, "What does notes.txt say?", work)
    assert run.returncode == 0, explain(run, fake)
    sent = tool_round_trip(fake, SECRET)
    assert json.loads(sent["function"]["arguments"])["file_path"].strip() == str(path)
    assert "It says the-secret-word-is-latchgate (xml)." in run.stdout, explain(run, fake)
    assert "<function=Read>" not in run.stdout


async def test_claude_code_runs_a_native_streamed_tool_call(
    lg: Running, fake: FakeUpstream, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    path = secret_file(work)
    args = json.dumps({"file_path": str(path)})
    first = Stream([
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call_up_1", "type": "function",
                               "function": {"name": "Read", "arguments": ""}}]}),
        *[chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i : i + 5]}}]})
          for i in range(0, len(args), 5)],
        chunk({}, "tool_calls"),
        "[DONE]",
    ])  # fmt: skip
    fake.push(*[scripted(first, "It says the-secret-word-is-latchgate (native).")] * 4)
    run = await claude(lg.url, "What does notes.txt say?", work)
    assert run.returncode == 0, explain(run, fake)
    sent = tool_round_trip(fake, SECRET)
    # Claude Code answers with the toolu_ id it was given; latchgate maps it back to the chat id.
    assert sent["id"] == "call_up_1"
    assert "It says the-secret-word-is-latchgate (native)." in run.stdout, explain(run, fake)


# -- 2. the upstream cut mid-stream ----------------------------------------------------------


async def test_an_upstream_cut_mid_stream_is_an_api_error_to_claude_code(
    relay: Relay, fake: FakeUpstream, tmp_path: Path
) -> None:
    partial = "The answer is forty"
    cut = Stream(
        [chunk({"role": "assistant", "content": ""}), chunk({"content": partial})], then="drop"
    )
    fake.push(*[cut] * 4)
    run = await claude(relay.url, "What is six times seven?", tmp_path / "work")
    assert run.returncode != 0, explain(run, fake, relay)
    assert "API Error" in run.stdout + run.stderr, explain(run, fake, relay)
    assert len(fake.bodies()) == 1  # no retry, no non-streaming fallback hid the failure
    # latchgate ended the started stream with an `event: error`, not a clean message_stop.
    assert len(relay.answers) == 1, explain(run, fake, relay)
    status, sse = relay.answers[0]
    assert status == 200
    assert b"event: message_start" in sse
    assert b"event: error" in sse, explain(run, fake, relay)
    assert b"event: message_stop" not in sse


# -- 3. a prompt over the window, refused before sending ----------------------------------------


async def test_a_prompt_over_the_window_is_refused_with_the_sizes(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    """Claude Code's first request is about 18,700 tokens; with an 8192-token window latchgate
    refuses it without sending, as Anthropic's `prompt is too long: N tokens > W maximum`,
    which Claude Code turns into "Prompt is too long · the request is ~N tokens (limit W)"."""
    lg = await start_proxy(
        {
            "name": "fake",
            "base_url": fake.url,
            "kind": "generic",
            "context_length": {"fake-model": 8192},
        }
    )
    async with Relay(lg.url) as hop:
        run = await claude(hop.url, "hi", tmp_path / "work")
    assert run.returncode != 0, explain(run, fake, hop)
    assert fake.requests == [], explain(run, fake, hop)  # nothing reached the upstream
    assert len(hop.answers) == 1, explain(run, fake, hop)
    status, raw = hop.answers[0]
    assert status == 400
    err = json.loads(raw)
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    said = re.match(r"prompt is too long: (\d+) tokens > 8192 maximum", err["error"]["message"])
    assert said is not None, err
    # Claude Code read the sizes out of that message and shows them.
    shown = re.search(r"~(\d+) tokens \(limit (\d+)\)", run.stdout)
    assert shown is not None, explain(run, fake, hop)
    assert shown.groups() == (said.group(1), "8192")
    assert int(said.group(1)) > 8192


# -- 4. what the first chat request carries ------------------------------------------------------

UPSTREAMS = pytest.mark.parametrize(
    ("kind", "schema_mode"),
    [("generic", "sanitise"), ("llama.cpp", "auto")],
    ids=["generic-sanitised", "llama.cpp"],
)


async def first_request(
    fake: FakeUpstream, start_proxy: StartProxy, workdir: Path, kind: str, schema_mode: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One plain `claude -p` turn: (the Messages body Claude Code sent, the chat body latchgate
    sent the upstream for it). A generic upstream gets its schemas as they are unless told to
    sanitise (`auto` sanitises for the local kinds only), so the generic case sets it."""
    lg = await start_proxy(
        {"name": "fake", "base_url": fake.url, "kind": kind, "schema_mode": schema_mode}
    )
    fake.push(*[lambda rec: text_call("pong")] * 4)
    async with Relay(lg.url) as relay:
        run = await claude(relay.url, "Reply with the word pong.", workdir)
    assert run.returncode == 0, explain(run, fake, relay)
    assert "pong" in run.stdout
    assert len(relay.bodies) == 1 and len(fake.bodies()) == 1, explain(run, fake, relay)
    return relay.bodies[0], fake.bodies()[0]


@UPSTREAMS
async def test_the_first_request_is_translated_for_the_chat_upstream(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path, kind: str, schema_mode: str
) -> None:
    sent, chat = await first_request(fake, start_proxy, tmp_path / "work", kind, schema_mode)
    assert sent["stream"] is True and sent["max_tokens"] == 32000
    assert chat["stream"] is True and chat["max_tokens"] == 32000
    assert chat["model"] == "fake-model"

    # Tools: every Messages tool a chat function, in order, input_schema as the parameters.
    names = [t["name"] for t in sent["tools"]]
    assert {"Read", "Bash"} <= set(names)
    assert all(t["type"] == "function" for t in chat["tools"])
    assert [t["function"]["name"] for t in chat["tools"]] == names
    functions = {t["function"]["name"]: t["function"] for t in chat["tools"]}
    assert "file_path" in functions["Read"]["parameters"]["required"]
    assert "command" in functions["Bash"]["parameters"]["required"]

    # Messages: the system blocks lead as the one system message; the `role: "system"` message
    # inside Claude Code's messages goes out as a user message marked [system].
    messages = chat["messages"]
    assert messages[0]["role"] == "system"
    assert "Claude" in messages[0]["content"]
    assert [m["role"] for m in sent["messages"]].count("system") == 1
    assert [m["role"] for m in messages[1:]] == ["user"] * (len(messages) - 1), messages
    marked = [m for m in messages[1:] if str(m["content"]).startswith("[system]")]
    assert len(marked) == 1, [str(m["content"])[:60] for m in messages]

    # The reasoning switch per kind: output_config.effort "high" (adaptive thinking, so on) as
    # a generic upstream's reasoning effort, and llama.cpp's chat-template thinking switch.
    assert sent["output_config"] == {"effort": "high"}
    assert sent["thinking"]["type"] == "adaptive"
    if kind == "generic":
        assert chat["reasoning_effort"] == "high"
        assert "chat_template_kwargs" not in chat
    else:
        assert chat["chat_template_kwargs"] == {"enable_thinking": True}
    # Anthropic-only fields do not go upstream.
    for name in ("thinking", "output_config", "context_management", "metadata", "system"):
        assert name not in chat, name
    assert "cache_control" not in json.dumps(chat)


def schema_keys(node: Any) -> set[str]:
    """Every key anywhere in a JSON schema."""
    if isinstance(node, dict):
        return set(node).union(*(schema_keys(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(schema_keys(v) for v in node))
    return set()


@UPSTREAMS
async def test_the_tool_schemas_go_out_sanitised(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path, kind: str, schema_mode: str
) -> None:
    """Claude Code's draft 2020-12 schemas carry `$schema`; the sanitiser's output has none."""
    sent, chat = await first_request(fake, start_proxy, tmp_path / "work", kind, schema_mode)
    assert any("$schema" in schema_keys(t["input_schema"]) for t in sent["tools"])
    kept = [
        t["function"]["name"]
        for t in chat["tools"]
        if "$schema" in schema_keys(t["function"]["parameters"])
    ]
    assert kept == [], f"$schema still in the parameters of {kept}"
