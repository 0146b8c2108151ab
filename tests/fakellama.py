#!/usr/bin/env python3
"""A fake `llama-server` that starts in a blink and misbehaves on request.

latchgate's managed upstreams start llama.cpp's `llama-server` as a child process, wait for its
`/health`, restart it when it dies, stop it when idle and swap models. The supervision tests need
a stand-in for the binary: one that takes the same command line, prints the same log lines
(`--log-prefix` style: `0.00.006.196 I srv  llama_server: initializing ...`, the timestamp being
minutes, seconds, milliseconds and microseconds since start), binds its port at once and answers
503 "Loading model" while it "loads", then serves `/health`, `/props`, `/v1/models`, `/metrics`,
`/v1/chat/completions` (whole, streamed, and a native `get_weather` tool call when the request has
`tools` and the last user message says "weather"), `/apply-template` and `/tokenize`. The real
binary is tested elsewhere (`tests/e2e/`); this one is fast and scripted.

Run it as `python tests/fakellama.py -m model.gguf --port N ...`, or directly (the shebang needs
a `python3` with aiohttp on PATH). The model file must exist and start with `GGUF`; nothing else
of it is read. Unknown flags are accepted and ignored, with or without a value.

Scripted misbehaviour comes from the environment, so a test can set it on the process latchgate
starts (all optional):

- `FAKE_LLAMA_LOAD_SECONDS` (float, default 0.05): how long "loading the model" takes.
- `FAKE_LLAMA_EXIT_AT_START=<code>`: print the loading lines and a "model is corrupted" error,
  then exit with that code before becoming ready.
- `FAKE_LLAMA_DELAY` (float seconds, default 0): wait this long before answering each whole chat
  completion, and between the chunks of a streamed one.
- `FAKE_LLAMA_PIDFILE=<path>`: append `<pid>\\n` to it at start.
- `FAKE_LLAMA_STARTS=<path>`: a counter file; each start reads it (0 if missing), adds one and
  writes it back.
- `FAKE_LLAMA_FAIL_STARTS=<n>`: the first n starts (as counted in `FAKE_LLAMA_STARTS`; without a
  counter file every start is the first) print an error and exit 1 before becoming ready.
- `FAKE_LLAMA_IGNORE_SIGTERM=1`: SIGTERM prints a warning and the server keeps serving (only
  SIGKILL, or SIGINT, ends it).

Otherwise SIGTERM and SIGINT print `cleaning up before exit...` and exit 0 at once. aiohttp is
imported only after the port is bound, so a port in use is reported without it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web

    Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

STARTED = time.monotonic()
N_CTX_TRAIN = 32768  # the window the fake model "was trained with" (`-c 0` takes it)
AUTO_SLOTS = 4  # `--parallel -1` (auto), as llama-server picks with a unified KV cache
COMPLETION_TOKENS = 4
FINGERPRINT = "b0-fake"
CORRUPT = (
    "llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' data is not within the "
    "file bounds, model is corrupted or incomplete"
)
WEATHER = re.compile(r"\bweather\b", re.IGNORECASE)
TOOL_ARGUMENTS = ('{"city":', '"Paris"}')  # streamed in these two pieces
NUMBER = re.compile(r"-\d+(\.\d*)?")
SHORT_FLAGS = {"-m", "-c", "-a", "-t", "-np", "-h"}

PREFIX = True  # --log-prefix; set once the command line is read


# -- logging ------------------------------------------------------------------------------------


def log(level: str, text: str) -> None:
    """One llama.cpp log line on stderr, written at once (also safe inside a signal handler)."""
    us = int((time.monotonic() - STARTED) * 1_000_000)
    stamp = f"{us // 60_000_000}.{us // 1_000_000 % 60:02d}.{us // 1000 % 1000:03d}.{us % 1000:03d}"
    line = f"{stamp} {level} {text}\n" if PREFIX else f"{text}\n"
    with contextlib.suppress(OSError):  # nobody reads the log any more: keep serving
        os.write(2, line.encode())


def srv(func: str, text: str) -> str:
    """A server line as llama.cpp's SRV_* macros print it: the function right-aligned in 12."""
    return f"srv  {func:>12.12}: {text}"


# -- the command line and the script ------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="llama-server", allow_abbrev=False)
    p.add_argument("-m", "--model", default="models/7B/ggml-model-f16.gguf")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("-c", "--ctx-size", type=int, default=0)
    p.add_argument("-np", "--parallel", type=int, default=-1)
    p.add_argument("-a", "--alias", default=None)
    p.add_argument("-t", "--threads", type=int, default=-1)
    p.add_argument("--metrics", action="store_true")
    p.add_argument("--jinja", action="store_true")
    p.add_argument("--log-prefix", action="store_true")
    p.add_argument("--log-colors", nargs="?", const="on", choices=["on", "off", "auto"])
    p.add_argument("--no-ui", action="store_true")
    return p


def _shielded(argv: list[str]) -> list[str]:
    """Unknown one-dash flags made long, so argparse cannot read `-ctk` as `-c tk` or `-mg` as
    `-m g` (llama-server has many such flags and no glued values)."""
    out = []
    for arg in argv:
        glued = arg.startswith("-") and not arg.startswith("--") and len(arg) > 2
        if glued and arg not in SHORT_FLAGS and not NUMBER.fullmatch(arg):
            arg = "-" + arg
        out.append(arg)
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    """llama-server's flags that matter here; every other flag (and its value) is ignored."""
    opts, _ignored = _parser().parse_known_args(_shielded(argv))
    return opts


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        log("E", f"fake: {name}={raw!r} is not a number")
        raise SystemExit(2) from None


class Script:
    """The misbehaviour asked for in the environment (see the module docstring)."""

    def __init__(self) -> None:
        self.load_seconds = _env_number("FAKE_LLAMA_LOAD_SECONDS", 0.05)
        exit_at_start = _env_number("FAKE_LLAMA_EXIT_AT_START", -1.0)
        self.exit_at_start = int(exit_at_start) if exit_at_start >= 0 else None
        self.delay = _env_number("FAKE_LLAMA_DELAY", 0.0)
        self.pidfile = os.environ.get("FAKE_LLAMA_PIDFILE") or None
        self.starts = os.environ.get("FAKE_LLAMA_STARTS") or None
        self.fail_starts = int(_env_number("FAKE_LLAMA_FAIL_STARTS", 0))
        self.ignore_sigterm = os.environ.get("FAKE_LLAMA_IGNORE_SIGTERM", "") not in ("", "0")


def count_start(path: str | None) -> int:
    """This start's number (1 for the first), kept in the counter file at `path`."""
    if path is None:
        return 1
    try:
        with open(path, encoding="ascii") as f:
            before = int(f.read().strip() or 0)
    except FileNotFoundError:
        before = 0
    with open(path, "w", encoding="ascii") as f:
        f.write(f"{before + 1}\n")
    return before + 1


# -- signals ------------------------------------------------------------------------------------


def _exit_now(signum: int, frame: object) -> None:
    log("I", srv("operator()", "operator(): cleaning up before exit..."))
    os._exit(0)  # at once: no in-flight request or stream holds the exit up


def _ignore_term(signum: int, frame: object) -> None:
    log("W", srv("signal_hand", "received SIGTERM, ignoring it (FAKE_LLAMA_IGNORE_SIGTERM)"))


def install_signals(script: Script) -> None:
    signal.signal(signal.SIGINT, _exit_now)
    signal.signal(signal.SIGTERM, _ignore_term if script.ignore_sigterm else _exit_now)


# -- the model ----------------------------------------------------------------------------------


class Model:
    """What the server knows of its model and its slots, and the counters /metrics shows."""

    def __init__(self, opts: argparse.Namespace) -> None:
        self.path: str = opts.model
        self.name: str = opts.alias.split(",")[0] if opts.alias else opts.model
        self.ctx: int = opts.ctx_size if opts.ctx_size > 0 else N_CTX_TRAIN
        self.unified = opts.parallel <= 0
        self.slots: int = AUTO_SLOTS if self.unified else opts.parallel
        self.n_ctx_slot = self.ctx if self.unified else self.ctx // self.slots
        self.metrics: bool = opts.metrics
        self.ready = False
        self.tasks = 0
        self.prompt_tokens = 0
        self.predicted_tokens = 0
        self.processing = 0


def model_problem(path: str) -> list[str]:
    """The error lines of a model file that cannot be loaded (none for a good one)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        first = f"gguf_init_from_file: failed to open GGUF file '{path}' ({exc.strerror})"
    else:
        if magic == b"GGUF":
            return []
        shown = magic.decode("latin-1")
        first = f"gguf_init_from_reader: invalid magic characters: '{shown}', expected 'GGUF'"
    return [
        first,
        f"llama_model_load: error loading model: llama_model_loader: failed to load model from "
        f"{path}",
        srv("load_model", f"failed to load model, '{path}'"),
    ]


def bind(host: str, port: int) -> socket.socket | None:
    """The listening socket, bound now as llama-server binds before it loads; None if taken."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.bind((host, port))
        sock.listen(512)
    except OSError:
        sock.close()
        return None
    sock.setblocking(False)
    return sock


# -- replies ------------------------------------------------------------------------------------


def _json(body: Any, status: int = 200) -> web.Response:
    from aiohttp import web

    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        charset="utf-8",
    )


def error(status: int, message: str, kind: str) -> web.Response:
    """llama.cpp's error body."""
    return _json({"error": {"code": status, "message": message, "type": kind}}, status)


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def contents(messages: list[Any]) -> list[str]:
    return [text_of(m.get("content")) for m in messages if isinstance(m, dict)]


def token_count(text: str) -> int:
    return max(1, len(text) // 4)


def wants_weather(body: dict[str, Any], messages: list[Any]) -> bool:
    """A request with tools whose last user message asks about the weather."""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return (
        bool(body.get("tools"))
        and bool(users)
        and bool(WEATHER.search(text_of(users[-1].get("content"))))
    )


class Reply:
    """One chat completion: its id, model, prompt size, and whether it is the tool call."""

    def __init__(self, model: Model, task: int, body: dict[str, Any], messages: list[Any]) -> None:
        self.id = f"chatcmpl-fake{task:06d}"
        self.call_id = f"call_fake{task:06d}"
        self.model = model.name
        self.prompt_tokens = token_count("".join(contents(messages)))
        self.tool = wants_weather(body, messages)
        self.content = f"fake answer from {model.name}"

    @property
    def finish(self) -> str:
        return "tool_calls" if self.tool else "stop"

    def usage(self) -> dict[str, int]:
        total = self.prompt_tokens + COMPLETION_TOKENS
        return {
            "completion_tokens": COMPLETION_TOKENS,
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": total,
        }

    def _head(self, obj: str) -> dict[str, Any]:
        return {
            "created": int(time.time()),
            "model": self.model,
            "system_fingerprint": FINGERPRINT,
            "object": obj,
            "id": self.id,
        }

    def whole(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool:
            function = {"name": "get_weather", "arguments": "".join(TOOL_ARGUMENTS)}
            call = {"type": "function", "function": function, "id": self.call_id}
            message = {"role": "assistant", "content": "", "tool_calls": [call]}
        choice = {"finish_reason": self.finish, "index": 0, "message": message}
        return {"choices": [choice], **self._head("chat.completion"), "usage": self.usage()}

    def deltas(self) -> list[tuple[dict[str, Any], str | None]]:
        """The streamed deltas, each with its finish_reason."""
        pieces: list[dict[str, Any]]
        if self.tool:
            named = {"name": "get_weather", "arguments": ""}
            first = {"index": 0, "id": self.call_id, "type": "function", "function": named}
            pieces = [{"tool_calls": [first]}]
            pieces += [
                {"tool_calls": [{"index": 0, "function": {"arguments": part}}]}
                for part in TOOL_ARGUMENTS
            ]
        else:
            split = self.content.index(" from ")
            pieces = [{"content": self.content[:split]}, {"content": self.content[split:]}]
        role: dict[str, Any] = {"role": "assistant", "content": None}
        return [(role, None), *((p, None) for p in pieces), ({}, self.finish)]

    def chunk(self, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        choice = {"finish_reason": finish, "index": 0, "delta": delta}
        return {"choices": [choice], **self._head("chat.completion.chunk")}

    def usage_chunk(self) -> dict[str, Any]:
        return {"choices": [], **self._head("chat.completion.chunk"), "usage": self.usage()}


def sse(event: Any) -> bytes:
    data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


# -- the HTTP server ----------------------------------------------------------------------------


async def _body(request: web.Request) -> dict[str, Any] | web.Response:
    try:
        body = json.loads(await request.read() or b"{}")
    except ValueError as exc:
        return error(400, f"parse error: {exc}", "invalid_request_error")
    if not isinstance(body, dict):
        return error(400, "the request body must be a JSON object", "invalid_request_error")
    return body


class Server:
    """The routes, over one Model."""

    def __init__(self, model: Model, script: Script) -> None:
        self.model = model
        self.script = script

    def app(self) -> web.Application:
        from aiohttp import web

        @web.middleware
        async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
            return await self.gate(request, handler)

        app = web.Application(middlewares=[gate])
        get = [
            ("/health", self.health),
            ("/props", self.props),
            ("/v1/models", self.models),
            ("/models", self.models),
            ("/metrics", self.metrics),
        ]
        post = [
            ("/v1/chat/completions", self.chat),
            ("/chat/completions", self.chat),
            ("/apply-template", self.apply_template),
            ("/tokenize", self.tokenize),
        ]
        app.add_routes([web.get(path, handler) for path, handler in get])
        app.add_routes([web.post(path, handler) for path, handler in post])
        return app

    async def gate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """503 for every route while loading, and llama.cpp's 404 body for unknown paths."""
        from aiohttp import web

        if not self.model.ready:
            return error(503, "Loading model", "unavailable_error")
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return error(404, "File Not Found", "not_found_error")

    async def health(self, request: web.Request) -> web.StreamResponse:
        return _json({"status": "ok"})

    async def props(self, request: web.Request) -> web.StreamResponse:
        m = self.model
        settings = {"n_ctx": m.n_ctx_slot}
        return _json(
            {
                "default_generation_settings": settings,
                "total_slots": m.slots,
                "model_path": m.path,
                "model_alias": m.name,
                "chat_template": "x",
                "build_info": FINGERPRINT,
            }
        )

    async def models(self, request: web.Request) -> web.StreamResponse:
        meta = {"n_ctx_train": N_CTX_TRAIN, "n_ctx": self.model.n_ctx_slot}
        entry = {
            "id": self.model.name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "llamacpp",
            "meta": meta,
        }
        return _json({"object": "list", "data": [entry]})

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        if not self.model.metrics:
            return error(
                501,
                "This server does not support metrics endpoint. Start it with `--metrics`",
                "not_supported_error",
            )
        families = [
            (
                "prompt_tokens_total",
                "counter",
                "Number of prompt tokens processed, excluding cached tokens",
                self.model.prompt_tokens,
            ),
            (
                "tokens_predicted_total",
                "counter",
                "Number of generation tokens processed",
                self.model.predicted_tokens,
            ),
            (
                "requests_processing",
                "gauge",
                "Number of requests processing",
                self.model.processing,
            ),
        ]
        lines = []
        for name, kind, help_text, value in families:
            lines += [
                f"# HELP llamacpp:{name} {help_text}",
                f"# TYPE llamacpp:{name} {kind}",
                f"llamacpp:{name} {value}",
            ]
        text = "\n".join(lines) + "\n"
        return web.Response(
            body=text.encode(), headers={"Content-Type": "text/plain; version=0.0.4"}
        )

    async def apply_template(self, request: web.Request) -> web.StreamResponse:
        body = await _body(request)
        if not isinstance(body, dict):
            return body
        messages = body.get("messages")
        return _json(
            {"prompt": "\n".join(contents(messages if isinstance(messages, list) else []))}
        )

    async def tokenize(self, request: web.Request) -> web.StreamResponse:
        body = await _body(request)
        if not isinstance(body, dict):
            return body
        content = body.get("content")
        text = content if isinstance(content, str) else ""
        n = token_count(text)
        return _json({"tokens": [sum(map(ord, text[i * 4 : i * 4 + 4])) for i in range(n)]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await _body(request)
        if not isinstance(body, dict):
            return body
        messages = body.get("messages")
        if not isinstance(messages, list):
            return error(400, "'messages' is required", "invalid_request_error")
        m = self.model
        task, m.tasks = m.tasks, m.tasks + 1
        slot = f"id {task % m.slots:2d} | task {task}"
        log("I", f"slot launch_slot_: {slot} | processing task, is_child = 0")
        reply = Reply(m, task, body, messages)
        m.processing += 1
        try:
            if body.get("stream"):
                options = body.get("stream_options")
                usage = isinstance(options, dict) and bool(options.get("include_usage"))
                return await self.stream(request, reply, usage, task)
            await asyncio.sleep(self.script.delay)
            m.prompt_tokens += reply.prompt_tokens
            m.predicted_tokens += COMPLETION_TOKENS
            return _json(reply.whole())
        finally:
            m.processing -= 1
            n_tokens = reply.prompt_tokens + COMPLETION_TOKENS
            log(
                "I",
                f"slot      release: {slot} | stop processing: n_tokens = {n_tokens}, "
                "truncated = 0",
            )

    async def stream(
        self, request: web.Request, reply: Reply, usage: bool, task: int
    ) -> web.StreamResponse:
        """The reply as SSE; `usage` adds the usage chunk (`stream_options.include_usage`)."""
        from aiohttp import web

        headers = {"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}
        resp = web.StreamResponse(headers=headers)
        await resp.prepare(request)
        events: list[Any] = [reply.chunk(delta, finish) for delta, finish in reply.deltas()]
        events += [reply.usage_chunk()] if usage else []
        try:
            for i, event in enumerate([*events, "[DONE]"]):
                if i:
                    await asyncio.sleep(self.script.delay)
                await resp.write(sse(event))
            await resp.write_eof()
        except ConnectionError:
            log("I", srv("stop", f"cancel task, id_task = {task}"))
            return resp
        self.model.prompt_tokens += reply.prompt_tokens
        self.model.predicted_tokens += COMPLETION_TOKENS
        return resp


# -- starting -----------------------------------------------------------------------------------


def load_failure(model: Model, script: Script, start: int) -> tuple[list[str], int] | None:
    """The error lines and exit status of a start scripted or doomed to fail, else None."""
    problem = model_problem(model.path)
    if problem:
        return problem, 1
    log(
        "W",
        "load: control-looking token: 128247 '</s>' was not control-type; this is "
        "probably a bug in the model. its type will be overridden",
    )
    if script.exit_at_start is not None:
        return [CORRUPT], script.exit_at_start
    if start <= script.fail_starts:
        why = f"scripted failure, start {start} of the first {script.fail_starts} that fail"
        return [
            f"llama_model_load: error loading model: {why}",
            srv("load_model", f"failed to load model, '{model.path}'"),
        ], 1
    return None


async def serve(opts: argparse.Namespace, sock: socket.socket, script: Script, start: int) -> int:
    """Answer 503 while the model "loads", then serve until a signal ends the process."""
    from aiohttp import web

    model = Model(opts)
    runner = web.AppRunner(Server(model, script).app(), access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    log("I", srv("load_model", f"loading model '{model.path}'"))
    await asyncio.sleep(script.load_seconds)
    failure = load_failure(model, script, start)
    if failure is not None:
        lines, status = failure
        for line in lines:
            log("E", line)
        log("I", srv("operator()", "operator(): cleaning up before exit..."))
        log("E", srv("llama_server", "exiting due to model loading error"))
        await runner.cleanup()
        return status
    unified = "true" if model.unified else "false"
    log(
        "I",
        srv(
            "load_model",
            f"initializing, n_slots = {model.slots}, n_ctx_slot = "
            f"{model.n_ctx_slot}, kv_unified = '{unified}'",
        ),
    )
    model.ready = True
    log("I", srv("llama_server", "model loaded"))
    port = sock.getsockname()[1]  # `--port 0`: the one the kernel chose
    log("I", srv("llama_server", f"listening on http://{opts.host}:{port}"))
    await asyncio.Event().wait()  # until SIGTERM or SIGINT ends the process
    return 0


def main(argv: list[str] | None = None) -> int:
    global PREFIX
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    PREFIX = opts.log_prefix
    script = Script()
    install_signals(script)
    if script.pidfile:
        with open(script.pidfile, "a", encoding="ascii") as f:
            f.write(f"{os.getpid()}\n")
    start = count_start(script.starts)
    log("I", srv("llama_server", "initializing ..."))
    if opts.no_ui:
        log("I", srv("init_listener", "The UI is disabled"))
    sock = bind(opts.host, opts.port)
    if sock is None:
        log(
            "E",
            srv(
                "start",
                f"couldn't bind HTTP server socket, hostname: {opts.host}, port: {opts.port}",
            ),
        )
        log("I", srv("operator()", "operator(): cleaning up before exit..."))
        log("E", srv("llama_server", "exiting due to HTTP server error"))
        return 1
    return asyncio.run(serve(opts, sock, script, start))


def unshadow() -> None:
    """Drop this file's folder from sys.path: run as a script, `tests/` comes first there, and
    its `tests/http` package would hide the standard library's `http` from aiohttp."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]


if __name__ == "__main__":
    unshadow()
    sys.exit(main())
