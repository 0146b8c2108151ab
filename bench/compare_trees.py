"""Behaviour identity of two latchgate trees: the same random exchanges, byte for byte.

Issue 14 restructures the request path and promises no behaviour change: "the client-visible
bytes of a few thousand random exchanges ... are identical before and after". This script is
that check. It starts one latchgate per tree as a subprocess (`python -m proxy --config ...
--port 0`, `PYTHONPATH` set to the tree, a fresh state file each), both in front of one scripted
fake upstream that runs in this process, and plays N seeded random exchanges against both:

- the same client request to each tree (chat whole and streamed, with and without tools, with
  `response_format`, usage asked or not; `/v1/completions`; `/v1/embeddings`; odd requests: bad
  JSON, wrong types, unknown models and routes, bad keys, gzip bodies, bodies too big or too
  deep; and the GET routes);
- the same scripted upstream replies for each tree (a list: one reply per upstream attempt, a
  plain answer once the list runs out): whole answers, SSE streams cut at random byte positions
  and split across writes, comments and named events, CRLF line ends, `data:` without a space,
  multi-line data, usage-only chunks, error events before and after content, streams without
  `[DONE]`, streams dropped mid-way, tool calls written as text in many formats and native
  tool-call fragments with almost-JSON arguments, HTML and broken 200 bodies, whole answers to
  stream requests, real refusal wordings (latchgate latches and resends, so the trees' latches
  evolve: each has its own fresh state and sees the same sequence), 5xx and 429 (retries 0 or 1,
  `Retry-After: 0`), a loading model, context overflows, keys echoed in errors.

Exchanges run one after the other, in the same order for both trees (the two trees of one
exchange run at the same time). For each, it compares what the client received: the status,
the headers and the body bytes; and what the upstream received (path and body of every attempt),
since a latch that stops working shows there first (`--client-only` skips that part).

What is normalised, and why:
- `Date`, `Server`, `Content-Length` and `Transfer-Encoding` are not compared: the clock, and
  framing (the body is compared whole, after de-chunking). Header order is not compared, except
  among repeated headers (the notice headers keep their order).
- latchgate mints request ids as a random per-process prefix and a counter: `lg-<16 hex>` is
  replaced, the counter is kept (both trees see the same requests in the same order). The ids
  latchgate gives recovered tool calls (`call_recovered_N`, `call_N`) are deterministic and
  compared as they are.
- A retry without a server-given wait sleeps a random backoff (0.25-0.5 s for the first retry)
  and says so in its notice ("waiting 0.37 s"); such waits are replaced. Scripted error
  replies carry `Retry-After: 0`, so their notices say "waiting 0.00 s" and are compared as
  they are.
- The tree's path prefix on the fake upstream (`/t0/`, `/t1/`) and each latchgate's own port.

Nothing else is: notably not where a notice goes. latchgate's stream relay depends on how its
reads of the upstream fall (a notice that arises mid-stream is a header while the client's
headers are unsent, else an SSE comment before that read's events), so the fake writes in
lockstep: each write of an SSE reply waits until latchgate has read the previous one (its
socket's receive queue in /proc/net/tcp is empty), which no fixed pause can promise on a busy
machine. Measured on two cores, the same tree against itself: without pauses 24 exchanges of
3000 differed, with a 1 ms pause 1 to 5, in lockstep none (in every run of 3000 so far).

Run from the repo (or anywhere; the default --after is the repo this file lives in):

    .venv/bin/python bench/compare_trees.py --before /work/before-14 --exchanges 3000 --seed 1

3000 exchanges take one to three minutes on two cores. Exchange `i` of seed `s` is generated
from (`s`, `i`) alone, so `--start i --exchanges 1` replays it, against fresh latches (an
exchange whose answer depends on what earlier ones latched needs the run from 0 instead).

Exit status 0 when every exchange is identical, 1 when any differs (each difference is printed
with its seed and index, the request, the scripted replies and a diff of the two answers), 2
when a tree cannot be started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import gzip
import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

REPO = Path(__file__).resolve().parents[1]
DEFAULT_BEFORE = Path("/work/before-14")

CLIENT_KEY = "client-key-harness-0123456789"
UPSTREAM_KEY = "sk-harness-upstream-0123456789abcdef"
ENV_CLIENT_KEYS = "HARNESS_CLIENT_KEYS"
ENV_UPSTREAM_KEY = "HARNESS_UPSTREAM_KEY"
KEY_PLACEHOLDER = b"@@KEY@@"  # a reply body holding it echoes the key the upstream was sent

CREATED = 1700000000


# == the upstreams latchgate is configured with ==================================================

# name -> (kind, models, extra TOML lines). One fake serves them all under /t<tree>/<name>/.
UPSTREAMS: dict[str, tuple[str, list[str], list[str]]] = {
    "local": (
        "llama.cpp",
        ["qwen*", "llama*"],
        [
            "retries = 0",
            "loading_timeout = 0.2",
            "exact_token_count = true",
            "holdback_limit = 4096",
        ],
    ),
    "hosted": (
        "openai",
        ["gpt-*", "o*"],
        ["retries = 1", "loading_timeout = 0.1", f'api_key_env = "{ENV_UPSTREAM_KEY}"'],
    ),
    "vllm": (
        "vllm",
        ["mistral*", "deepseek*"],
        [
            "retries = 1",
            "loading_timeout = 0",
            "holdback_limit = 256",
            'droppable_add = ["my_field"]',
        ],
    ),
    "auto": (
        "auto",
        ["auto-*"],
        [
            "retries = 0",
            "loading_timeout = 0.3",
            "forward_client_auth = true",
            'droppable_remove = ["seed"]',
        ],
    ),
}
CONFIGURED_WINDOWS = {"local": {"qwen-tiny": 1024}, "vllm": {"mistral-small*": 2048}}

MODELS: dict[str, list[str]] = {
    "local": ["qwen-1", "qwen-2", "qwen-3", "qwen-4", "qwen-tiny", "llama-a", "llama-big"],
    "hosted": ["gpt-4o", "gpt-5-a", "gpt-5-b", "o3-mini", "o4-x"],
    "vllm": ["mistral-large", "mistral-small-1", "deepseek-r", "deepseek-v"],
    "auto": ["auto-gemma", "auto-qwen", "auto-x"],
}
ALL_MODELS = [m for models in MODELS.values() for m in models]


def upstream_of(model: str) -> str:
    return next((name for name, models in MODELS.items() if model in models), "none")


def config_toml(fake_port: int, tree: int, state_file: Path) -> str:
    lines = [
        "[server]",
        'host = "127.0.0.1"',
        "port = 0",
        f'state_file = "{state_file}"',
        f'client_keys_env = "{ENV_CLIENT_KEYS}"',
        "max_body_bytes = 1048576",
        'log_level = "info"',
        "probe_interval = 3600",
        "shutdown_grace = 0",
    ]
    for name, (kind, models, extra) in UPSTREAMS.items():
        lines += [
            "",
            "[[upstreams]]",
            f'name = "{name}"',
            f'base_url = "http://127.0.0.1:{fake_port}/t{tree}/{name}/v1"',
            f'kind = "{kind}"',
            f"models = {json.dumps(models)}",
            "idle_timeout = 30",
            *extra,
        ]
        if name in CONFIGURED_WINDOWS:
            lines.append("[upstreams.context_length]")
            lines += [f'"{m}" = {n}' for m, n in CONFIGURED_WINDOWS[name].items()]
    return "\n".join(lines) + "\n"


# == scripted replies ============================================================================


@dataclass
class Whole:
    """A whole reply: status, headers, body bytes."""

    body: bytes
    status: int = 200
    content_type: str | None = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    label: str = ""


@dataclass
class Stream:
    """An SSE reply, written in `writes` (cut anywhere), then ended or dropped."""

    writes: list[bytes]
    status: int = 200
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    then: str = "end"  # "end" (a clean end of the body) or "drop" (the connection is cut)
    label: str = ""


@dataclass
class Drop:
    """The connection is closed before any answer."""

    label: str = "drop before the answer"


Reply = Whole | Stream | Drop


def describe(reply: Reply, limit: int = 1500) -> str:
    if isinstance(reply, Drop):
        return f"[{reply.label}]"
    if isinstance(reply, Whole):
        head = f"whole {reply.status} {reply.content_type} {reply.headers or ''} ({reply.label})"
        return f"{head}\n      {_clip(reply.body, limit)}"
    cuts = [len(w) for w in reply.writes]
    head = (
        f"stream {reply.status} {reply.content_type} {reply.headers or ''} then={reply.then} "
        f"({reply.label}); {len(cuts)} writes of {cuts[:40]}{'...' if len(cuts) > 40 else ''}"
    )
    return f"{head}\n      {_clip(b''.join(reply.writes), limit)}"


def _clip(data: bytes, limit: int) -> str:
    text = repr(data[:limit])
    return text + (f" ... ({len(data)} bytes)" if len(data) > limit else "")


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


# == what models say: text, tool calls, JSON =====================================================

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "Paris",
         "is", "sunny", "and", "21", "degrees", "{", "}", "<b>", "é", "🙂"]  # fmt: skip

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "get_weather": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
    "get_time": {"type": "object", "properties": {"tz": {"type": "string"}}},
    "write_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
    "search": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "pattern": "^.+$"},
            "limit": {"type": ["integer", "null"]},
        },
    },
    "run": {
        "type": "object",
        "properties": {
            "cmd": {"type": "string"},
            "force": {"type": "boolean"},
            "opts": {"type": "object"},
        },
    },
}
# Schemas that make sanitising, relaxing or refusing run (sanitise mode on local servers,
# passthrough on hosted ones).
ODD_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"a": {"type": "array", "minItems": 5, "maxItems": 2}}},
    {
        "$ref": "#/$defs/x",
        "$defs": {
            "x": {"type": "object", "properties": {"v": {"type": "string", "format": "date-time"}}}
        },
    },
    {
        "type": "object",
        "properties": {
            "u": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "p": {"type": "string", "pattern": "(?=x)y"},
        },
    },
    {"type": ["object", 5]},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 9, "maximum": 1}}},
    {"allOf": [{"type": "object"}, {"properties": {"k": {"type": "string"}}}]},
]


def text(rng: random.Random, low: int = 1, high: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def tool_args(rng: random.Random, name: str) -> dict[str, Any]:
    if name == "get_weather":
        args: dict[str, Any] = {"city": rng.choice(["Paris", "Rome", "北京", "Leeds"])}
        if rng.random() < 0.6:
            args["days"] = rng.randint(1, 7)
        return args
    if name == "get_time":
        return {"tz": rng.choice(["UTC", "Europe/Paris", "CET"])} if rng.random() < 0.8 else {}
    if name == "write_file":
        body = rng.choice(["print(1)\n", "a < b && c > d", 'say "hi" {x}', "use </tool_call>"])
        return {"path": rng.choice(["a.py", "notes.md", "x.xml"]), "content": body}
    if name == "search":
        return {"query": text(rng, 1, 4)}
    return {"cmd": rng.choice(["ls", "echo ]]", "make"]), "force": rng.random() < 0.5}


Call = tuple[str, dict[str, Any]]


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _hermes(calls: list[Call]) -> str:
    return "\n".join(
        f'<tool_call>\n{{"name": "{n}", "arguments": {_j(a)}}}\n</tool_call>' for n, a in calls
    )


def _qwen_xml(calls: list[Call]) -> str:
    def params(args: dict[str, Any]) -> str:
        return "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())

    return "\n".join(
        f"<tool_call>\n<function={n}>\n{params(a)}</function>\n</tool_call>" for n, a in calls
    )


def _mistral(calls: list[Call]) -> str:
    return "".join(f"[TOOL_CALLS]{n}[ARGS]{_j(a)}" for n, a in calls)


def _mistral_array(calls: list[Call]) -> str:
    return "[TOOL_CALLS] " + _j([{"name": n, "arguments": a} for n, a in calls])


def _llama3(calls: list[Call]) -> str:
    return "<|python_tag|>" + "; ".join(_j({"name": n, "parameters": a}) for n, a in calls)


def _pythonic(calls: list[Call]) -> str:
    def kw(args: dict[str, Any]) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in args.items())

    return "[" + ", ".join(f"{n}({kw(a)})" for n, a in calls) + "]"


def _deepseek(calls: list[Call]) -> str:
    body = "".join(
        f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{_j(a)}<｜tool▁call▁end｜>" for n, a in calls
    )
    return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


def _harmony(calls: list[Call]) -> str:
    return "".join(
        f"<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json"
        f"<|message|>{_j(a)}<|call|>"
        for n, a in calls
    )


def _glm(calls: list[Call]) -> str:
    def pairs(args: dict[str, Any]) -> str:
        return "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in args.items()
        )

    return "".join(f"<tool_call>{n}\n{pairs(a)}</tool_call>" for n, a in calls)


def _granite(calls: list[Call]) -> str:
    return "<|tool_call|>" + _j([{"name": n, "arguments": a} for n, a in calls])


def _gemma(calls: list[Call]) -> str:
    def args(a: dict[str, Any]) -> str:
        return ",".join(
            f"{k}:<escape>{v}<escape>" if isinstance(v, str) else f"{k}:{_j(v)}"
            for k, v in a.items()
        )

    return "".join(
        f"<start_function_call>call:{n}{{{args(a)}}}<end_function_call>" for n, a in calls
    )


def _bare(calls: list[Call]) -> str:
    objs = [{"name": n, "arguments": a} for n, a in calls]
    return _j(objs[0] if len(objs) == 1 else objs)


def _fenced(calls: list[Call]) -> str:
    return "```json\n" + _bare(calls) + "\n```"


def _generic(calls: list[Call]) -> str:
    n, a = calls[0]
    return _j({"tool_call": {"name": n, "arguments": a}})


FORMATS: list[tuple[Callable[[list[Call]], str], bool]] = [  # renderer, may follow prose
    (_hermes, True),
    (_qwen_xml, True),
    (_mistral, True),
    (_mistral_array, True),
    (_llama3, True),
    (_pythonic, False),
    (_deepseek, True),
    (_harmony, True),
    (_glm, True),
    (_granite, True),
    (_gemma, True),
    (_bare, False),
    (_fenced, True),
    (_generic, False),
]
END_TOKENS = ["<|eot_id|>", "<|eom_id|>", "</s>", "<|im_end|>", "<|return|>", "<|end_of_text|>"]
NOT_CALLS = [
    "The answer is {mostly} sunny; use {x: 1} style.",
    "Here is code:\n```python\ndef f(x):\n    return {'a': x}\n```\nDone.",
    '{"city": "Paris", "days": 3}',
    '{"name": "delete_all", "arguments": {"force": true}}',
    "Models write <tool_call> tags when the parser is missing.",
    '<think>maybe <tool_call>{"name": "get_time", "arguments": {}}</tool_call></think>No.',
    "[1, 2, 3] are the numbers",
    '{"name": "get_time", "arguments": {}} is how you would call it.',
]


def calls_as_text(rng: random.Random, tools: list[str]) -> str:
    """A reply that writes tool calls as text (or, sometimes, looks like one and is not)."""
    if rng.random() < 0.15:
        return rng.choice(NOT_CALLS)
    calls = [(name, tool_args(rng, name)) for name in rng.sample(tools, min(len(tools), 2))]
    calls = calls[: rng.choice([1, 1, 2])]
    if rng.random() < 0.1:  # a call to a tool that was not declared
        calls = [("delete_all", {"force": True})]
    render, prose_ok = rng.choice(FORMATS)
    out = render(calls)
    if rng.random() < 0.1 and len(out) > 12:  # cut off mid-way
        out = out[: rng.randint(len(out) // 2, len(out) - 1)]
    if prose_ok and rng.random() < 0.3:
        out = "Let me check.\n\n" + out
    if rng.random() < 0.15:
        out = "<think>\nThe user wants tools.\n</think>\n\n" + out
    if rng.random() < 0.2:
        out += rng.choice(END_TOKENS)
    if rng.random() < 0.1:
        out += "\nDone."
    return out


def almost_json(rng: random.Random, args: dict[str, Any]) -> str:
    """Arguments as a model writes them: JSON, or nearly."""
    good = json.dumps(args, ensure_ascii=False)
    kind = rng.randrange(8)
    if kind == 0:
        return good.replace('"', "'")
    if kind == 1 and good.endswith("}") and len(good) > 2:
        return good[:-1] + ",}"
    if kind == 2:
        return re.sub(r'"(\w+)":', r"\1:", good)
    if kind == 3 and len(good) > 3:
        return good[: rng.randint(1, len(good) - 1)]
    if kind == 4:
        return "```json\n" + good + "\n```"
    if kind == 5:
        return good + " trailing words"
    if kind == 6:
        return ""
    return good


def json_reply(rng: random.Random) -> str:
    """Content for a request that asked for JSON: clean, fenced, in prose, or broken."""
    value = {"answer": text(rng, 1, 3), "n": rng.randint(0, 9)}
    good = json.dumps(value)
    return rng.choice(
        [
            good,
            f"```json\n{good}\n```",
            f"Sure! Here it is: {good} Hope that helps.",
            "<think>hmm</think>" + good,
            good[:-2],
            "no json at all",
            "{'answer': 'x', 'n': 1,}",
        ]
    )


# == replies: whole answers ======================================================================


def usage(rng: random.Random) -> dict[str, Any]:
    prompt, completion = rng.randint(5, 3000), rng.randint(1, 200)
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if rng.random() < 0.3:
        out["prompt_tokens_details"] = {"cached_tokens": rng.randint(0, prompt)}
    return out


def upstream_headers(rng: random.Random) -> dict[str, str]:
    if rng.random() < 0.8:
        return {}
    return rng.choice(
        [
            {"x-request-id": f"up-{rng.randint(1, 999)}"},
            {"x-ratelimit-remaining-requests": "42", "openai-processing-ms": "17"},
            {"set-cookie": "lb=abc; Path=/", "x-should-retry": "false"},
            {"retry-after": "0"},
        ]
    )


def message(rng: random.Random, ctx: Ctx) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant"}
    roll = rng.random()
    if ctx.tools and roll < 0.35:
        msg["content"] = calls_as_text(rng, ctx.tools)
    elif ctx.tools and roll < 0.6:
        msg["content"] = None if rng.random() < 0.7 else text(rng, 1, 3)
        msg["tool_calls"] = [
            {
                "id": f"call_up{i}" if rng.random() < 0.8 else "",
                "type": "function",
                "function": {
                    "name": name if rng.random() < 0.95 else "undeclared",
                    "arguments": almost_json(rng, tool_args(rng, name)),
                },
            }
            for i, name in enumerate(rng.sample(ctx.tools, min(2, len(ctx.tools))))
        ]
    elif ctx.wants_json:
        msg["content"] = json_reply(rng)
    else:
        msg["content"] = text(rng)
    if rng.random() < 0.1:
        msg["reasoning_content"] = text(rng, 2, 6)
    return msg


def chat_completion(rng: random.Random, ctx: Ctx) -> dict[str, Any]:
    choices = []
    for index in range(ctx.choices):
        msg = message(rng, ctx)
        finish = "tool_calls" if msg.get("tool_calls") else rng.choice(["stop", "stop", "length"])
        choices.append({"index": index, "message": msg, "finish_reason": finish})
    body: dict[str, Any] = {
        "id": f"chatcmpl-{rng.randint(1, 10**6)}",
        "object": "chat.completion",
        "created": CREATED,
        "model": ctx.model,
        "choices": choices,
    }
    if rng.random() < 0.8:
        body["usage"] = usage(rng)
    if rng.random() < 0.2:
        body["timings"] = {"cache_n": rng.randint(0, 50), "prompt_n": 3}
    if rng.random() < 0.2:
        body["system_fingerprint"] = "fp_harness"
    return body


def whole_ok(rng: random.Random, ctx: Ctx) -> Whole:
    if ctx.route == "embeddings":
        body: dict[str, Any] = {
            "object": "list",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 1.0]}],
            "model": ctx.model,
        }
        if rng.random() < 0.5:
            body["usage"] = {"prompt_tokens": 3, "total_tokens": 3}
        return Whole(dumps(body), headers=upstream_headers(rng), label="embeddings")
    if ctx.route == "completions":
        body = {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": CREATED,
            "model": ctx.model,
            "choices": [{"index": 0, "text": text(rng), "finish_reason": "stop"}],
        }
        if rng.random() < 0.5:
            body["usage"] = usage(rng)
        return Whole(dumps(body), headers=upstream_headers(rng), label="completion")
    raw = dumps(chat_completion(rng, ctx))
    if rng.random() < 0.1:
        raw = json.dumps(json.loads(raw), indent=2).encode()  # pretty-printed, as some servers
    return Whole(raw, headers=upstream_headers(rng), label="chat completion")


def whole_broken(rng: random.Random, ctx: Ctx) -> Whole:
    """A 200 that is not an answer: HTML, empty, cut JSON, no choices, an error object..."""
    kind = rng.randrange(8)
    if kind == 0:
        return Whole(b"<html><body>502 Bad Gateway</body></html>", 200, "text/html", label="html")
    if kind == 1:
        return Whole(b"", 200, "application/json", label="empty 200")
    if kind == 2:
        raw = dumps(chat_completion(rng, ctx))
        return Whole(raw[: rng.randint(1, len(raw) - 1)], label="cut JSON")
    if kind == 3:
        return Whole(dumps({"object": "chat.completion", "model": ctx.model}), label="no choices")
    if kind == 4:
        code = rng.choice([429, 400, 503, "server_error", None])
        err = {"error": {"message": rng.choice(REFUSALS)[2].decode(errors="replace")[:200]}}
        err["error"]["code"] = code
        return Whole(dumps(err), label=f"error object in a 200 (code {code})")
    if kind == 5:
        return Whole(b"[1, 2, 3]", label="a JSON list")
    if kind == 6:
        return Whole(b"plain words", 200, "text/plain", label="text/plain 200")
    return Whole(b"data: {}\n\ndata: [DONE]\n\n", 200, "text/event-stream", label="SSE to whole")


# == replies: streams ============================================================================


def chunk(ctx: Ctx, delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict:
    body: dict[str, Any] = {
        "id": "chatcmpl-s1",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": ctx.model,
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }
    if ctx.null_usage:
        body["usage"] = None
    return body


def pieces(rng: random.Random, value: str) -> list[str]:
    """`value` cut into pieces at random places (a model's tokens)."""
    if not value:
        return []
    cuts = sorted(rng.sample(range(1, len(value)), min(len(value) - 1, rng.randint(0, 12))))
    bounds = [0, *cuts, len(value)]
    return [value[a:b] for a, b in itertools.pairwise(bounds)]


def chat_events(rng: random.Random, ctx: Ctx) -> list[Any]:
    """The data events of a chat stream (dicts, or raw bytes for odd ones), without [DONE]."""
    events: list[Any] = []
    for index in range(ctx.choices):
        events.append(chunk(ctx, {"role": "assistant", "content": ""}, index=index))
        if rng.random() < 0.1:
            events += [
                chunk(ctx, {"reasoning_content": p}, index=index) for p in pieces(rng, text(rng))
            ]
        roll = rng.random()
        finish = "stop"
        if ctx.tools and roll < 0.4:
            content = calls_as_text(rng, ctx.tools)
            events += [chunk(ctx, {"content": p}, index=index) for p in pieces(rng, content)]
        elif ctx.tools and roll < 0.65:
            events += native_call_events(rng, ctx, index)
            finish = "tool_calls"
        else:
            content = json_reply(rng) if ctx.wants_json else text(rng)
            events += [chunk(ctx, {"content": p}, index=index) for p in pieces(rng, content)]
        events.append(chunk(ctx, {}, rng.choice([finish, finish, "length"]), index=index))
    if rng.random() < 0.7:
        last = {**chunk(ctx, {}), "choices": [], "usage": usage(rng)}
        if rng.random() < 0.3:  # usage on the last chunk with choices instead
            events[-1] = {**events[-1], "usage": usage(rng)}
        else:
            events.append(last)
    return events


def native_call_events(rng: random.Random, ctx: Ctx, index: int) -> list[dict[str, Any]]:
    events = []
    for n, name in enumerate(rng.sample(ctx.tools, min(len(ctx.tools), rng.choice([1, 1, 2])))):
        head = {"index": n, "id": f"call_s{n}", "type": "function"}
        if rng.random() < 0.1:
            del head["id"]
        head["function"] = {"name": name, "arguments": ""}
        events.append(chunk(ctx, {"tool_calls": [head]}, index=index))
        for part in pieces(rng, almost_json(rng, tool_args(rng, name))):
            call = {"index": n, "function": {"arguments": part}}
            events.append(chunk(ctx, {"tool_calls": [call]}, index=index))
    return events


def completion_events(rng: random.Random, ctx: Ctx) -> list[Any]:
    events: list[Any] = []
    for p in pieces(rng, text(rng)):
        events.append(
            {
                "id": "cmpl-s",
                "object": "text_completion",
                "created": CREATED,
                "model": ctx.model,
                "choices": [{"index": 0, "text": p, "finish_reason": None}],
            }
        )
    events.append(
        {
            "id": "cmpl-s",
            "object": "text_completion",
            "created": CREATED,
            "model": ctx.model,
            "choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
        }
    )
    return events


def frame(rng: random.Random, item: Any, style: str) -> bytes:
    """One event on the wire in `style`."""
    if isinstance(item, bytes):
        return item
    if style == "multiline" and isinstance(item, dict):
        spaced = json.dumps(item, ensure_ascii=False)  # ", " and ": " to break lines at
        parts = spaced.split(", ")
        cut = rng.randint(1, max(1, len(parts) - 1))
        lines = [", ".join(parts[:cut]), ", ".join(parts[cut:])]
        return b"".join(b"data: " + line.encode() + b"\n" for line in lines if line) + b"\n"
    data = dumps(item) if not isinstance(item, str) else item.encode()
    if style == "nospace":
        return b"data:" + data + b"\n\n"
    if style == "crlf":
        return b"data: " + data + b"\r\n\r\n"
    if style == "named":
        return b"event: message\ndata: " + data + b"\n\n"
    if style == "id":
        return b"id: 7\nretry: 100\ndata: " + data + b"\n\n"
    return b"data: " + data + b"\n\n"


STYLES = ["plain"] * 6 + ["nospace", "crlf", "named", "id", "multiline", "mixed"]
NOISE = [b": ping\n\n", b":\n\n", b"\n\n", b"event: keepalive\n\n", b": OPENROUTER PROCESSING\n\n"]


def wire(rng: random.Random, events: list[Any], *, done: bool) -> bytes:
    style = rng.choice(STYLES)
    out = []
    for item in events:
        if rng.random() < 0.05:
            out.append(rng.choice(NOISE))
        here = rng.choice(STYLES[:-1]) if style == "mixed" else style
        out.append(frame(rng, item, here))
    if done:
        out.append(b"data: [DONE]\r\n\r\n" if style == "crlf" else b"data: [DONE]\n\n")
    raw = b"".join(out)
    if rng.random() < 0.05:
        raw = raw.rstrip(b"\r\n")  # the last event ends without its blank line
    return raw


def cut(rng: random.Random, raw: bytes) -> list[bytes]:
    """The bytes as the server writes them: in one go, per event, or cut anywhere."""
    mode = rng.choice(["one", "events", "events", "cuts", "cuts", "bytes"])
    if mode == "one" or len(raw) < 2:
        return [raw]
    if mode == "events":
        parts = re.split(rb"(?<=\n\n)", raw)
        return [p for p in parts if p]
    if mode == "bytes":  # a stretch of tiny writes, somewhere
        head = rng.randint(0, max(0, len(raw) - 60))
        tail = min(len(raw), head + 60)
        return [raw[:head], *(raw[i : i + 3] for i in range(head, tail, 3)), raw[tail:]]
    n = rng.randint(1, min(8, len(raw) - 1))
    bounds = [0, *sorted(rng.sample(range(1, len(raw)), n)), len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]


def stream_reply(rng: random.Random, ctx: Ctx) -> Reply:
    """A stream, well-formed or odd."""
    events = completion_events(rng, ctx) if ctx.route == "completions" else chat_events(rng, ctx)
    done = True
    then = "end"
    label = "stream"
    roll = rng.random()
    if roll < 0.06:
        done, label = False, "no [DONE]"
    elif roll < 0.1:
        done, label = False, "no [DONE], no finish"
        events = [e for e in events if not _finishes(e)]
    elif roll < 0.15:
        keep = rng.randint(0, len(events))
        events, done, then, label = events[:keep], False, "drop", f"dropped after {keep} events"
    elif roll < 0.22:
        where = rng.randint(0, len(events))
        events = [*events[:where], error_event(rng), *events[where:]]
        label = f"error event at {where}"
    elif roll < 0.26:
        where = rng.randint(0, len(events))
        odd = rng.choice([b"data: hello\n\n", b"data: [1, 2]\n\n", b'data: {"choices": 5}\n\n'])
        events = [*events[:where], odd, *events[where:]]
        label = f"odd data event at {where}"
    elif roll < 0.28:
        events, label = [], "only [DONE]"
    raw = wire(rng, events, done=done)
    ctype = rng.choice(["text/event-stream"] * 4 + ["text/event-stream; charset=utf-8"])
    return Stream(
        cut(rng, raw), content_type=ctype, headers=upstream_headers(rng), then=then, label=label
    )


def _finishes(event: Any) -> bool:
    if not isinstance(event, dict):
        return False
    return any(isinstance(c, dict) and c.get("finish_reason") for c in event.get("choices", []))


def error_event(rng: random.Random) -> bytes:
    _, status, body, _ = rng.choice(REFUSALS)
    try:
        err = json.loads(body)
    except ValueError:
        err = {"error": {"message": body.decode(errors="replace")}}
    if not isinstance(err, dict) or "error" not in err:
        err = {"error": {"message": str(err)[:300]}}
    if isinstance(err["error"], dict) and rng.random() < 0.5:
        err["error"]["code"] = status
    return b"data: " + dumps(err) + b"\n\n"


# == replies: errors =============================================================================


def _err(message: str, **extra: Any) -> bytes:
    return dumps({"error": {"message": message, **extra}})


# (name, status, body, fields the request must carry for the wording to be a refusal)
REFUSALS: list[tuple[str, int, bytes, dict[str, Any]]] = [
    ("max_tokens", 400, _err("Unsupported parameter: 'max_tokens' is not supported with this "
     "model. Use 'max_completion_tokens' instead.", type="invalid_request_error",
     param="max_tokens", code="unsupported_parameter"), {"max_tokens": 64}),
    ("max_tokens camel", 400, _err("this model is not supported MaxTokens, please use "
     "MaxCompletionTokens"), {"max_tokens": 32}),
    ("max_tokens too large", 400, _err("max_tokens is too large: 8192. This model supports at "
     "most 4096 completion tokens, whereas you provided 8192.", param="max_tokens"),
     {"max_tokens": 8192}),
    ("temperature default", 400, _err("Unsupported value: 'temperature' does not support 0.2 "
     "with this model. Only the default (1) value is supported.", param="temperature",
     code="unsupported_value"), {"temperature": 0.2}),
    ("temperature only 1", 400, _err("invalid temperature: only 1 is allowed for this model"),
     {"temperature": 0.7}),
    ("temperature range", 400, _err("Unsupported value: 'temperature' does not support 5. "
     "Supported values are between 0 and 2.", param="temperature"), {"temperature": 5}),
    ("bedrock temperature", 400, dumps({"message": "Only temperature=1 is supported"}),
     {"temperature": 0}),
    ("presence_penalty", 400, _err("Unsupported parameter: 'presence_penalty' is not supported "
     "with this model."), {"presence_penalty": 0.5}),
    ("logprobs", 400, _err("Unsupported parameter: 'logprobs' is not supported with this model.",
     code="unsupported_parameter"), {"logprobs": True}),
    ("stop never dropped", 400, _err("Unsupported parameter: 'stop' is not supported with this "
     "model."), {"stop": ["\n"]}),
    ("effort unrecognized", 400, _err("Unrecognized request argument supplied: reasoning_effort",
     type="invalid_request_error"), {"reasoning_effort": "low"}),
    ("effort minimal with list", 400, _err("Unsupported value: 'reasoning_effort' does not "
     "support 'minimal' with this model. Supported values are: 'none', 'low', 'medium', 'high', "
     "and 'xhigh'.", code="unsupported_value"), {"reasoning_effort": "minimal"}),
    ("effort none with list", 400, _err("Unsupported value: 'reasoning_effort' does not support "
     "'none' with this model. Supported values are: 'minimal', 'low', 'medium', and 'high'."),
     {"reasoning_effort": "none"}),
    ("tools with effort", 400, _err("Function tools with reasoning_effort are not supported for "
     "gpt-5.4 in /v1/chat/completions. Please use /v1/responses instead.",
     param="reasoning_effort"), {"reasoning_effort": "medium", "tools": ["get_time"]}),
    ("gemini effort", 400, dumps([{"error": {"code": 400, "message": "Invalid JSON payload "
     'received. Unknown name "reasoning_effort": Cannot find field.', "status":
     "INVALID_ARGUMENT"}}]), {"reasoning_effort": "high"}),
    ("stream_options", 400, _err("Unrecognized request argument supplied: stream_options"),
     {"stream": True}),
    ("stream_options fireworks", 400, b"Error: 400 Extra inputs are not permitted, field: "
     b"'stream_options'", {"stream": True}),
    ("parallel_tool_calls", 400, _err("Unsupported parameter: 'parallel_tool_calls' is not "
     "supported with this model.", param="parallel_tool_calls", code="unsupported_parameter"),
     {"parallel_tool_calls": True, "tools": ["get_weather"]}),
    ("top_k", 400, _err("Unrecognized request argument supplied: top_k"), {"top_k": 40}),
    ("seed mistral 422", 422, dumps({"object": "error", "message": {"detail": [{"type":
     "extra_forbidden", "loc": ["body", "seed"], "msg": "Extra inputs are not permitted",
     "input": 7}]}, "type": "invalid_request_error"}), {"seed": 7}),
    ("my_field", 400, _err("Unrecognized request argument supplied: my_field"), {"my_field": 1}),
    ("user xai", 400, _err("Argument not supported on this model: user."), {"user": "u1"}),
    ("json_schema unsupported", 400, _err("Invalid parameter: 'response_format' of type "
     "'json_schema' is not supported with this model."), {"response_format": "json_schema"}),
    ("json_object unsupported", 400, _err("Invalid parameter: 'response_format' of type "
     "'json_object' is not supported with this model.", param="response_format"),
     {"response_format": "json_object"}),
    ("llama.cpp response_format", 500, dumps({"error": {"code": 500, "message": 'Illegal param: '
     '"response_format" must be one of "text" or "json_object", but got: json_schema', "type":
     "server_error"}}), {"response_format": "json_schema"}),
    ("deepseek 422 plain", 422, b"Failed to deserialize the JSON body into the target type: "
     b"response_format: response_format.type `json_schema` is unavailable now at line 1 "
     b"column 12440", {"response_format": "json_schema"}),
    ("grammar 500", 500, b'{"error": {"code": 500, "message": "JSON schema conversion failed:'
     b'\\nUnrecognized schema: {\\"required\\":[\\"x\\"]}\\n", "type": "server_error"}}',
     {"tools": ["search"]}),
    ("grammar parse", 500, _err("failed to parse grammar", type="server_error"),
     {"response_format": "json_schema"}),
    ("grammar pattern", 400, _err("Unable to generate parser for this template. Automatic "
     "parser generation failed: JSON schema conversion failed:\nPattern must start with '^' "
     "and end with '$'", type="invalid_request_error"), {"tools": ["search"]}),
    ("ollama no tools", 400, dumps({"error": "registry.ollama.ai/library/gemma3:4b does not "
     "support tools"}), {"tools": ["get_time"]}),
    ("invalid schema", 400, _err("Invalid schema for response_format 'default': In context=(), "
     "'additionalProperties' is required to be supplied and to be false.",
     param="response_format"), {"response_format": "json_schema"}),
    ("overflow openai", 400, _err("This model's maximum context length is 8192 tokens. However, "
     "you requested 8256 tokens (64 in the messages, 8192 in the completion). Please reduce the "
     "length of the messages or completion.", param="messages", code="context_length_exceeded"),
     {}),
    ("overflow llama.cpp", 400, dumps({"error": {"code": 400, "message": "request (4476 tokens) "
     "exceeds the available context size (4096 tokens), try increasing it", "type":
     "exceed_context_size_error", "n_prompt_tokens": 4476, "n_ctx": 4096}}), {}),
    ("overflow ollama", 400, dumps({"error": "the prompt is longer than the context length "
     "currently available to the model; shorten the prompt"}), {}),
    ("tpm too large", 429, _err("Request too large for gpt-4o in organization org-x on tokens "
     "per min (TPM): Limit 30000, Requested 36278.", type="tokens", code="rate_limit_exceeded"),
     {}),
    ("quota", 429, _err("You exceeded your current quota, please check your plan and billing "
     "details.", type="insufficient_quota", code="insufficient_quota"), {}),
    ("auth 401", 401, _err("Incorrect API key provided: @@KEY@@. You can find your API key at "
     "https://platform.openai.com/account/api-keys.", code="invalid_api_key"), {}),
    ("model 404", 404, _err("The model `gpt-9` does not exist or you do not have access to it.",
     code="model_not_found"), {}),
    ("developer role", 400, b"Failed to deserialize the JSON body into the target type: "
     b"messages[0].role: unknown variant `developer`", {}),
    ("n at most 1", 400, _err("n must be at most 1", type="invalid_request_error"), {"n": 2}),
]  # fmt: skip

TRANSIENTS: list[tuple[str, int, bytes]] = [
    ("rate limit", 429, _err("Rate limit reached for gpt-4o: Limit 30000, Used 14567, "
     "Requested 24754. Please try again in 0s.", type="tokens", code="rate_limit_exceeded")),
    ("overloaded 529", 529, dumps({"type": "error", "error": {"type": "overloaded_error",
     "message": "Overloaded"}})),
    ("busy 503", 503, _err("server busy, please try again.", type="api_error")),
    ("internal 500", 500, _err("Internal server error", type="InternalServerError", code=500)),
    ("bad gateway 502", 502, b"<html><body><h1>502 Bad Gateway</h1></body></html>"),
    ("plain 500", 500, b"Internal Server Error"),
    ("conflict 409", 409, _err("conflict, retry")),
    ("echo key 500", 500, _err("upstream auth failed for key @@KEY@@")),
]  # fmt: skip

LOADING = (503, dumps({"error": {"code": 503, "message": "Loading model",
                                 "type": "unavailable_error"}}))  # fmt: skip


def refusal_reply(spec: tuple[str, int, bytes, dict[str, Any]]) -> Whole:
    name, status, body, _ = spec
    ctype = "application/json" if body[:1] in (b"{", b"[") else "text/plain"
    return Whole(body, status, ctype, label=f"refusal: {name}")


def transient_reply(rng: random.Random) -> Whole:
    name, status, body = rng.choice(TRANSIENTS)
    ctype = "application/json" if body[:1] in (b"{", b"[") else "text/html"
    headers = rng.choice([{"Retry-After": "0"}, {"retry-after-ms": "0"}, {"Retry-After": "0"}])
    return Whole(body, status, ctype, headers=headers, label=f"transient: {name}")


# == requests ====================================================================================


@dataclass
class Ctx:
    """What the reply generators need to know about the request."""

    route: str  # chat, completions, embeddings
    model: str
    stream: bool
    tools: list[str] = field(default_factory=list)
    wants_json: bool = False
    choices: int = 1
    null_usage: bool = False


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    note: str = ""


@dataclass
class Exchange:
    index: int
    kind: str
    request: Request
    script: list[Reply]
    ctx: Ctx | None


def client_headers(rng: random.Random, index: int) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    roll = rng.random()
    if roll < 0.96:
        headers["Authorization"] = f"Bearer {CLIENT_KEY}"
    elif roll < 0.98:
        headers["Authorization"] = "Bearer wrong-key-0123456789"
    if rng.random() < 0.85:
        headers["x-request-id"] = f"ex-{index}"
    elif rng.random() < 0.5:
        headers["x-request-id"] = "not a sane id!"
    return headers


LONG_DESCRIPTION = "Use this tool with care: \"quoted\" words, [brackets], {braces}, é. " * 40


def tool_defs(rng: random.Random, names: list[str]) -> list[dict[str, Any]]:
    tools = []
    for name in names:
        params = TOOL_SCHEMAS[name]
        if rng.random() < 0.08:
            params = rng.choice(ODD_SCHEMAS)
        fn: dict[str, Any] = {"name": name, "parameters": params}
        roll = rng.random()
        if roll < 0.25:
            # An agent-sized description: bodies of several KB whose tools list recurs, which
            # latchgate parses once and then takes as it was (proxy.knowntools).
            fn["description"] = LONG_DESCRIPTION
        elif roll < 0.6:
            fn["description"] = f"The {name} tool."
        tools.append({"type": "function", "function": fn})
    return tools


def response_format(rng: random.Random, kind: str) -> dict[str, Any]:
    if kind == "json_object":
        return {"type": "json_object"}
    schema = rng.choice(
        [
            {"type": "object", "properties": {"answer": {"type": "string"}}},
            {"type": "object", "properties": {"n": {"type": "integer", "format": "int32"}}},
            rng.choice(ODD_SCHEMAS),
        ]
    )
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def messages(rng: random.Random, *, tools: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if rng.random() < 0.4:
        out.append({"role": rng.choice(["system", "developer"]), "content": "Be brief."})
    size = rng.random()
    if size < 0.05:
        content: Any = "word " * rng.randint(8000, 12000)  # over most windows
    elif size < 0.1:
        content = "word " * rng.randint(900, 2500)  # over the small windows
    elif size < 0.2:
        content = [{"type": "text", "text": text(rng)}, "a bare string part"]
    else:
        content = text(rng, 1, 20)
    out.append({"role": "user", "content": content})
    if tools and rng.random() < 0.3:
        call = {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
        out += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
        ]
    return out


OPTIONAL_FIELDS: list[tuple[str, Callable[[random.Random], Any]]] = [
    ("max_tokens", lambda r: r.choice([16, 256, 4096, 8192])),
    ("max_completion_tokens", lambda r: r.choice([16, 512])),
    ("temperature", lambda r: r.choice([0, 0.2, 0.7, 1])),
    ("top_p", lambda r: 0.9),
    ("reasoning_effort", lambda r: r.choice(["none", "minimal", "low", "medium", "high", "xhigh"])),
    ("top_k", lambda r: 40),
    ("seed", lambda r: 7),
    ("user", lambda r: "u1"),
    ("logprobs", lambda r: True),
    ("presence_penalty", lambda r: 0.5),
    ("my_field", lambda r: 1),
    ("stop", lambda r: ["\n"]),
    ("cache_prompt", lambda r: True),
]


def chat_request(rng: random.Random, index: int, model: str, needs: dict[str, Any]) -> tuple:
    """A chat body and its reply context; `needs` are fields a scripted refusal names."""
    stream = needs.get("stream", rng.random() < 0.55)
    wanted_tools = list(needs.get("tools", []))
    if rng.random() < 0.35 or wanted_tools:
        names = rng.sample(sorted(TOOL_SCHEMAS), rng.randint(1, 3))
        wanted_tools = sorted(set(names) | set(wanted_tools))
    body: dict[str, Any] = {"model": model, "messages": messages(rng, tools=bool(wanted_tools))}
    if stream or rng.random() < 0.05:
        body["stream"] = stream
    for name, make in OPTIONAL_FIELDS:
        if rng.random() < 0.12:
            body[name] = make(rng)
    if wanted_tools:
        body["tools"] = tool_defs(rng, wanted_tools)
        if rng.random() < 0.3:
            body["tool_choice"] = rng.choice(["auto", "required", "none"])
        if rng.random() < 0.2:
            body["parallel_tool_calls"] = rng.random() < 0.5
    rf = needs.get("response_format")
    if rf or rng.random() < 0.12:
        body["response_format"] = response_format(rng, rf or rng.choice(["json_object", "x"]))
    if stream and rng.random() < 0.5:
        body["stream_options"] = {"include_usage": rng.random() < 0.8}
    for key, value in needs.items():
        if key not in ("tools", "response_format", "stream"):
            body[key] = value
    if rng.random() < 0.03:
        body["n"] = 2
    if rng.random() < 0.01:
        body["metadata"] = _deep(300)  # read fine, but too deep to write again if rebuilt
    ctx = Ctx(
        "chat",
        model,
        bool(stream),
        tools=wanted_tools,
        wants_json="response_format" in body,
        choices=body.get("n", 1) if isinstance(body.get("n"), int) else 1,
        null_usage=rng.random() < 0.2,
    )
    return body, ctx


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def make_exchange(seed: int, index: int) -> Exchange:
    rng = random.Random(f"{seed}/{index}")
    roll = rng.random()
    if roll < 0.72:
        return chat_exchange(rng, index)
    if roll < 0.8:
        return plain_exchange(rng, index, "completions")
    if roll < 0.86:
        return plain_exchange(rng, index, "embeddings")
    if roll < 0.96:
        return odd_exchange(rng, index)
    return get_exchange(rng, index)


def chat_exchange(rng: random.Random, index: int) -> Exchange:
    model = rng.choice(ALL_MODELS)
    roll = rng.random()
    refusal = rng.choice(REFUSALS) if roll < 0.25 else None
    needs = dict(refusal[3]) if refusal else {}
    body, ctx = chat_request(rng, index, model, needs)
    script: list[Reply] = []
    kind = "chat"
    if refusal is not None:
        script.append(refusal_reply(refusal))
        kind = f"chat after refusal: {refusal[0]}"
        if rng.random() < 0.3:
            script.append(refusal_reply(rng.choice(REFUSALS)))
    elif roll < 0.35:
        script.append(transient_reply(rng))
        kind = "chat after a transient error"
    elif roll < 0.37:
        script += [Whole(LOADING[1], LOADING[0], label="loading")] * rng.randint(1, 3)
        kind = "chat while loading"
    elif roll < 0.39:
        script.append(Drop())
        kind = "chat after a dropped connection"
    script.append(chat_answer(rng, ctx))
    if rng.random() < 0.1:
        script.append(chat_answer(rng, ctx))
    kind += " (stream)" if ctx.stream else " (whole)"
    path = rng.choice(["/v1/chat/completions"] * 9 + ["/chat/completions"])
    request = Request("POST", path, client_headers(rng, index), dumps(body))
    return Exchange(index, kind, request, script, ctx)


def chat_answer(rng: random.Random, ctx: Ctx) -> Reply:
    roll = rng.random()
    if roll < 0.06:
        return whole_broken(rng, ctx)
    if ctx.stream:
        if roll < 0.12:
            return whole_ok(rng, ctx)  # a whole answer to a stream request
        return stream_reply(rng, ctx)
    if roll < 0.08:
        return stream_reply(rng, ctx)  # a stream to a whole request
    return whole_ok(rng, ctx)


def plain_exchange(rng: random.Random, index: int, route: str) -> Exchange:
    model = rng.choice(ALL_MODELS)
    stream = rng.random() < 0.5
    body: dict[str, Any] = {"model": model}
    if route == "completions":
        body["prompt"] = text(rng)
        if rng.random() < 0.3:
            body["max_tokens"] = 16
    else:
        body["input"] = rng.choice([text(rng), [text(rng), text(rng)]])
    if stream or rng.random() < 0.1:
        body["stream"] = stream
    ctx = Ctx(route, model, stream and route == "completions")
    script: list[Reply] = []
    roll = rng.random()
    if roll < 0.1:
        script.append(transient_reply(rng))
    elif roll < 0.16:
        script.append(refusal_reply(rng.choice(REFUSALS)))
    elif roll < 0.18:
        script.append(Drop())
    if rng.random() < 0.08:
        script.append(whole_broken(rng, ctx))
    elif ctx.stream and rng.random() < 0.85:
        script.append(stream_reply(rng, ctx))
    else:
        script.append(whole_ok(rng, ctx))
    request = Request("POST", f"/v1/{route}", client_headers(rng, index), dumps(body))
    kind = f"{route} ({'stream' if stream else 'whole'})"
    return Exchange(index, kind, request, script, ctx)


BAD_BODIES: list[tuple[str, bytes]] = [
    ("not JSON", b"{not json"),
    ("empty body", b""),
    ("a JSON list", b"[1, 2]"),
    ("a JSON string", b'"hello"'),
    ("null", b"null"),
    ("not UTF-8", b'{"model": "\xff\xfe"}'),
    ("too deep", b"[" * 1100 + b"]" * 1100),
    ("no model", dumps({"messages": [{"role": "user", "content": "hi"}]})),
    ("model a number", dumps({"model": 5, "messages": [{"role": "user", "content": "hi"}]})),
    ("empty model", dumps({"model": " ", "messages": [{"role": "user", "content": "hi"}]})),
    ("no messages", dumps({"model": "qwen-1"})),
    ("messages an object", dumps({"model": "qwen-1", "messages": {}})),
    ("messages empty", dumps({"model": "qwen-1", "messages": []})),
    ("message a number", dumps({"model": "qwen-1", "messages": [5]})),
    ("role a number", dumps({"model": "qwen-1", "messages": [{"role": 5, "content": "x"}]})),
    ("content a number", dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": 5}]})),
    ("part a number", dumps({"model": "qwen-2", "messages": [{"role": "user", "content": [5]}]})),
    ("tool_calls a string",
     dumps({"model": "qwen-2", "messages": [{"role": "assistant", "tool_calls": "x"}]})),
    ("unknown model", dumps({"model": "nope-1", "messages": [{"role": "user", "content": "x"}]})),
]  # fmt: skip
BAD_FIELDS: list[tuple[str, Any]] = [
    ("stream", "yes"),
    ("max_tokens", "10"),
    ("max_tokens", -1),
    ("max_tokens", True),
    ("temperature", "hot"),
    ("n", 1.5),
    ("stream_options", []),
    ("response_format", "json"),
    ("reasoning_effort", 3),
    ("tools", {}),
    ("tools", [5]),
    ("tools", [{"type": "function", "function": {"description": "no name"}}]),
]


def odd_exchange(rng: random.Random, index: int) -> Exchange:
    headers = client_headers(rng, index)
    path = "/v1/chat/completions"
    roll = rng.random()
    if roll < 0.45:
        note, body = rng.choice(BAD_BODIES)
    elif roll < 0.8:
        name, value = rng.choice(BAD_FIELDS)
        note = f"{name} = {value!r}"
        model = rng.choice(ALL_MODELS)
        body = dumps({"model": model, "messages": [{"role": "user", "content": "x"}], name: value})
    elif roll < 0.88:
        note = "gzip body"
        body = gzip.compress(
            dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "zip"}]})
        )
        headers["Content-Encoding"] = "gzip"
    elif roll < 0.92:
        note, body = "body over max_body_bytes", b'{"model": "qwen-1", "x": "' + b"a" * 1100000
        body += b'"}'
    elif roll < 0.96:
        note, body = "unknown route", dumps({"model": "qwen-1"})
        path = rng.choice(["/v1/nothing", "/v1/responses", "/admin/unknown"])
    else:
        note, body = "unknown content encoding", b"xxxx"
        headers["Content-Encoding"] = "br"
    if rng.random() < 0.15:
        path = rng.choice(["/v1/completions", "/v1/embeddings"])
    request = Request("POST", path, headers, body, note)
    return Exchange(index, f"odd request: {note}", request, [], None)


def get_exchange(rng: random.Random, index: int) -> Exchange:
    path = rng.choice(
        ["/v1/models", "/models", "/v1/models/qwen-1", "/v1/models/gpt-4o", "/v1/models/none",
         "/healthz", "/readyz", "/v1/chat/completions"]
    )  # fmt: skip
    request = Request("GET", path, client_headers(rng, index), b"")
    return Exchange(index, f"GET {path}", request, [], None)


# == the fake upstream ===========================================================================


def default_reply(path: str, body: bytes) -> Reply:
    """What the fake answers once an exchange's script has run out: a plain answer."""
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = {}
    parsed = parsed if isinstance(parsed, dict) else {}
    model = str(parsed.get("model", "m"))
    if path.endswith("/embeddings"):
        data = [{"object": "embedding", "index": 0, "embedding": [0.5]}]
        return Whole(dumps({"object": "list", "data": data, "model": model}), label="default")
    chat = path.endswith("/chat/completions")
    if parsed.get("stream") is True:
        if chat:
            events = [
                {"id": "d", "object": "chat.completion.chunk", "created": CREATED, "model": model,
                 "choices": [{"index": 0, "delta": {"content": "OK"}, "finish_reason": None}]},
                {"id": "d", "object": "chat.completion.chunk", "created": CREATED, "model": model,
                 "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ]  # fmt: skip
        else:
            events = [{"id": "d", "object": "text_completion", "created": CREATED,
                       "model": model, "choices": [{"index": 0, "text": "OK",
                                                    "finish_reason": "stop"}]}]  # fmt: skip
        raw = b"".join(b"data: " + dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
        return Stream([raw], label="default")
    if chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": "OK"},
                  "finish_reason": "stop"}  # fmt: skip
        body_out = {"id": "d", "object": "chat.completion", "created": CREATED, "model": model,
                    "choices": [choice]}  # fmt: skip
    else:
        body_out = {"id": "d", "object": "text_completion", "created": CREATED, "model": model,
                    "choices": [{"index": 0, "text": "OK", "finish_reason": "stop"}]}  # fmt: skip
    return Whole(dumps(body_out), label="default")


@dataclass
class Seen:
    """A request the fake answered from a script: what the upstream received."""

    path: str
    body: bytes
    auth: str

    def __str__(self) -> str:
        return f"POST {self.path} auth={self.auth!r}\n      {_clip(self.body, 1500)}"


def _unread(addresses: str) -> bool:
    """Whether the socket with these local and remote addresses (as /proc/net/tcp writes them)
    holds bytes its process has not read yet. A socket that is gone holds none."""
    with open("/proc/net/tcp") as table:
        for line in table:
            if addresses in line:
                fields = line.split()
                if f"{fields[1]} {fields[2]}" == addresses:
                    return int(fields[4].split(":")[1], 16) > 0
    return False


class FakeUpstream:
    """One aiohttp server for every upstream of every tree: /t<tree>/<upstream>/<path>."""

    def __init__(self, trees: int, pace: float) -> None:
        self.scripts: list[deque[Reply]] = [deque() for _ in range(trees)]
        self.seen: list[list[Seen]] = [[] for _ in range(trees)]
        self.pace = pace
        self.lockstep = Path("/proc/net/tcp").is_file()
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/t{tree:\\d+}/{up}/{tail:.*}", self.handle)
        self.runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, keepalive_timeout=3600
        )
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    def load(self, tree: int, script: list[Reply]) -> None:
        self.scripts[tree] = deque(script)
        self.seen[tree] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        tree, up, tail = int(request.match_info["tree"]), request.match_info["up"], "/"
        tail += request.match_info["tail"]
        raw = await request.read()
        if not tail.endswith(("/chat/completions", "/completions", "/embeddings")):
            return self.probe(up, tail, raw)
        auth = request.headers.get("Authorization", "")
        self.seen[tree].append(Seen(tail, raw, auth))
        script = self.scripts[tree]
        reply = script.popleft() if script else default_reply(tail, raw)
        key = auth.removeprefix("Bearer ").encode()
        try:
            return await self.play(request, reply, key)
        except (ConnectionResetError, ConnectionError):
            return web.Response(status=500)  # latchgate stopped reading; nobody sees this

    def probe(self, up: str, tail: str, raw: bytes) -> web.StreamResponse:
        """The GETs and helper POSTs latchgate sends on its own: fixed answers."""
        if tail == "/v1/models":
            data = []
            for model in MODELS.get(up, []):
                entry: dict[str, Any] = {"id": model, "object": "model", "owned_by": up}
                if model == "llama-big":
                    entry["context_length"] = 32768
                if model == "mistral-large":
                    entry["max_model_len"] = 16384
                data.append(entry)
            return web.json_response({"object": "list", "data": data})
        if up == "local" and tail == "/props":
            return web.json_response(
                {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1}
            )
        if up == "local" and tail == "/apply-template":
            try:
                messages = json.loads(raw).get("messages", [])
            except (ValueError, AttributeError):
                messages = []
            return web.json_response({"prompt": json.dumps(messages)})
        if up == "local" and tail == "/tokenize":
            try:
                content = str(json.loads(raw).get("content", ""))
            except (ValueError, AttributeError):
                content = ""
            return web.json_response({"tokens": list(range(len(content) // 3))})
        if up == "auto" and tail == "/api/version":
            return web.json_response({"version": "0.6.0"})
        if up == "auto" and tail == "/api/show":
            model = str(json.loads(raw or b"{}").get("model", ""))
            if model.endswith("-x"):
                return web.json_response({"error": f"model '{model}' not found"}, status=404)
            return web.json_response({"parameters": "num_ctx 4096\nstop <end>"})
        return web.json_response({"error": {"message": "File Not Found", "code": 404}}, status=404)

    async def play(self, request: web.Request, reply: Reply, key: bytes) -> web.StreamResponse:
        if isinstance(reply, Drop):
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        if isinstance(reply, Whole):
            resp = web.Response(
                status=reply.status,
                body=reply.body.replace(KEY_PLACEHOLDER, key),
                headers=reply.headers,
            )
            if reply.content_type:
                resp.content_type = reply.content_type
            return resp
        resp = web.StreamResponse(status=reply.status, headers=reply.headers)
        resp.headers["Content-Type"] = reply.content_type
        await resp.prepare(request)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        for piece in reply.writes:
            await self.settle(peer)
            if piece:
                await resp.write(piece)
        await self.settle(peer)
        if reply.then == "drop":
            assert request.transport is not None
            request.transport.close()
            return resp
        await resp.write_eof()
        return resp

    async def settle(self, peer: tuple[str, int] | None) -> None:
        """Wait until latchgate has read everything written to it so far, then `pace`.

        latchgate's relay depends on how its reads fall: a notice that arises mid-stream goes
        out as a header when the stream's headers have not been sent yet, else as an SSE
        comment before that read's events; a connection cut while events are still unread
        loses them. So that both trees see the same reads, each write waits until the previous
        one has left latchgate's socket (its receive queue in /proc/net/tcp is empty), which
        a fixed pause cannot promise on a busy machine. Where /proc/net/tcp cannot be read,
        only the pause is left.
        """
        if peer is not None and self.lockstep:
            wanted = f"0100007F:{peer[1]:04X} 0100007F:{self.port:04X}"
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and _unread(wanted):
                await asyncio.sleep(0.0002)
        if self.pace:
            await asyncio.sleep(self.pace)


# == the trees under test ========================================================================


class TreeError(Exception):
    """A tree could not be started (exit status 2)."""


class Tree:
    """One latchgate process serving one tree's code."""

    def __init__(self, number: int, path: Path, workdir: Path, python: str) -> None:
        self.number = number
        self.path = path
        self.workdir = workdir / f"t{number}"
        self.workdir.mkdir(parents=True)
        self.python = python
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log = self.workdir / "latchgate.log"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LATCHGATE_")}
        env.update(
            {
                "PYTHONPATH": str(self.path),
                "PYTHONDONTWRITEBYTECODE": "1",  # leave the trees as they are
                "PYTHONHASHSEED": "0",
                ENV_CLIENT_KEYS: CLIENT_KEY,
                ENV_UPSTREAM_KEY: UPSTREAM_KEY,
            }
        )
        return env

    def check_import(self) -> None:
        """The tree's own `proxy` must be the one imported (not an installed copy)."""
        found = subprocess.run(
            [self.python, "-c", "import proxy; print(proxy.__file__)"],
            env=self.env(),
            cwd=self.workdir,
            capture_output=True,
            text=True,
            check=False,
        )
        where = Path(found.stdout.strip() or "?").resolve()
        if found.returncode or not where.is_relative_to(self.path.resolve()):
            raise TreeError(
                f"tree {self.path}: `import proxy` gives {where} ({found.stderr.strip()[-300:]})"
            )

    async def start(self, fake_port: int) -> None:
        self.check_import()
        config = self.workdir / "latchgate.toml"
        config.write_text(config_toml(fake_port, self.number, self.workdir / "state.json"))
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [self.python, "-m", "proxy", "--config", str(config), "--port", "0"],
                env=self.env(),
                cwd=self.workdir,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise TreeError(f"tree {self.path} exited at start:\n{self.log.read_text()}")
            for line in self.log.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if isinstance(entry, dict) and entry.get("event") == "listening":
                        self.port = int(entry["port"])
                        return
            await asyncio.sleep(0.05)
        raise TreeError(f"tree {self.path}: no 'listening' line within 30 s ({self.log})")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def logged_errors(self) -> Counter[str]:
        """Error lines in the tree's log, by event (internal errors are worth knowing)."""
        found: Counter[str] = Counter()
        for line in self.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if (
                    isinstance(entry, dict)
                    and entry.get("level") in ("error", "critical")
                    and entry.get("event") != "request"  # a 5xx answer's own log line
                ):
                    found[str(entry.get("event"))] += 1
        return found


# == answers and their comparison ================================================================


@dataclass
class Answer:
    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    failure: str = ""  # the client could not read an answer: how it failed
    seen: list[Seen] = field(default_factory=list)


IGNORED_HEADERS = frozenset({"date", "server", "content-length", "transfer-encoding"})
_MINTED_ID = re.compile(rb"lg-[0-9a-f]{16}(?=[0-9a-f]{16})")
_BACKOFF = re.compile(rb"\(waiting 0\.(?:2[5-9]|[34]\d|50) s\)")
_TREE_PREFIX = re.compile(rb"/t\d+/")


def normalise(data: bytes, ports: list[int]) -> bytes:
    data = _MINTED_ID.sub(b"lg-<prefix>", data)
    data = _BACKOFF.sub(b"(waiting <backoff> s)", data)
    data = _TREE_PREFIX.sub(b"/t<tree>/", data)
    for port in ports:
        data = data.replace(b"127.0.0.1:%d" % port, b"127.0.0.1:<latchgate>")
    return data


def rendering(answer: Answer, ports: list[int]) -> list[str]:
    """The answer as lines of text, normalised: what two trees must agree on."""
    if answer.failure:
        return [f"no answer: {answer.failure}"]
    kept = [(k.lower(), v) for k, v in answer.headers if k.lower() not in IGNORED_HEADERS]
    kept.sort(key=lambda kv: kv[0])  # stable: repeated headers keep their order
    lines = [f"HTTP {answer.status}"]
    lines += [f"{k}: {normalise(v.encode(), ports).decode(errors='replace')}" for k, v in kept]
    lines.append("")
    body = normalise(answer.body, ports).decode("utf-8", errors="backslashreplace")
    lines += body.split("\n")
    return lines


def upstream_rendering(answer: Answer) -> list[str]:
    lines = []
    for seen in answer.seen:
        lines.append(f"POST {_TREE_PREFIX.sub(b'/t<tree>/', seen.path.encode()).decode()}")
        lines.append(f"authorization: {seen.auth}")
        lines.append(seen.body.decode("utf-8", errors="backslashreplace"))
    return lines


async def ask(session: aiohttp.ClientSession, port: int, request: Request) -> Answer:
    url = f"http://127.0.0.1:{port}{request.path}"
    try:
        async with session.request(
            request.method, url, data=request.body or None, headers=request.headers
        ) as resp:
            body = await resp.read()
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
            return Answer(resp.status, headers, body)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return Answer(failure=f"{type(exc).__name__}: {exc}")


@dataclass
class Difference:
    exchange: Exchange
    client: list[str]
    upstream: list[str]


def diff(a: list[str], b: list[str], names: tuple[str, str], limit: int = 120) -> list[str]:
    out = list(difflib.unified_diff(a, b, names[0], names[1], lineterm="", n=2))
    if len(out) > limit:
        out = [*out[:limit], f"... ({len(out) - limit} more diff lines)"]
    return out


def report(diff_: Difference, seed: int, names: tuple[str, str]) -> str:
    ex = diff_.exchange
    req = ex.request
    lines = [
        "=" * 100,
        f"exchange {ex.index} (seed {seed}): {ex.kind}",
        f"  request: {req.method} {req.path} {req.note}",
        f"    headers: {req.headers}",
        f"    body: {_clip(req.body, 2000)}",
        "  scripted upstream replies (then a plain answer):",
        *(f"    {n}. {describe(r)}" for n, r in enumerate(ex.script, 1)),
    ]
    if diff_.client:
        lines += ["  client-visible answer differs:", *(f"    {d}" for d in diff_.client)]
    if diff_.upstream:
        lines += ["  what the upstream received differs:", *(f"    {d}" for d in diff_.upstream)]
    return "\n".join(lines)


# == running =====================================================================================


async def run(args: argparse.Namespace) -> int:
    trees_paths = [Path(args.before).resolve(), Path(args.after).resolve()]
    names = (f"before ({trees_paths[0]})", f"after ({trees_paths[1]})")
    fake = FakeUpstream(len(trees_paths), args.pace / 1000)
    await fake.start()
    workdir = Path(tempfile.mkdtemp(prefix="compare-trees-"))
    trees = [Tree(n, path, workdir, args.python) for n, path in enumerate(trees_paths)]
    differences: list[Difference] = []
    kinds: Counter[str] = Counter()
    coverage: Counter[str] = Counter()
    started = time.monotonic()
    try:
        await asyncio.gather(*(tree.start(fake.port) for tree in trees))
        ports = [tree.port for tree in trees]
        timeout = aiohttp.ClientTimeout(total=args.timeout)
        sessions = [aiohttp.ClientSession(timeout=timeout, auto_decompress=False) for _ in trees]
        try:
            for index in range(args.start, args.start + args.exchanges):
                exchange = make_exchange(args.seed, index)
                kinds[exchange.kind.split(":")[0].split(" (")[0]] += 1
                answers = await play(fake, sessions, trees, exchange, not args.sequential)
                coverage.update(exercised(answers[0]))
                found = compare(exchange, answers, ports, names, args.client_only)
                if found is not None:
                    differences.append(found)
                    if len(differences) <= args.show:
                        print(report(found, args.seed, names), flush=True)
                done = index - args.start + 1
                if done % 500 == 0:
                    rate = done / (time.monotonic() - started)
                    print(
                        f"... {done} exchanges, {len(differences)} differing ({rate:.0f}/s)",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            for session in sessions:
                await session.close()
    finally:
        for tree in trees:
            tree.stop()
        await fake.close()
    if args.report:
        Path(args.report).write_text(
            "\n".join(report(d, args.seed, names) for d in differences) + "\n"
        )
    summary(args, trees, kinds, coverage, differences, time.monotonic() - started, workdir)
    return 1 if differences else 0


async def play(
    fake: FakeUpstream,
    sessions: list[aiohttp.ClientSession],
    trees: list[Tree],
    ex: Exchange,
    together: bool = False,
) -> list[Answer]:
    for tree in trees:
        fake.load(tree.number, ex.script)
    pairs = list(zip(sessions, trees, strict=True))
    if together:
        answers = await asyncio.gather(*(ask(s, tree.port, ex.request) for s, tree in pairs))
    else:
        answers = [await ask(s, tree.port, ex.request) for s, tree in pairs]
    for tree, answer in zip(trees, answers, strict=True):
        answer.seen = fake.seen[tree.number]
    return list(answers)


def compare(
    ex: Exchange, answers: list[Answer], ports: list[int], names: tuple[str, str], client_only: bool
) -> Difference | None:
    a, b = (rendering(x, ports) for x in answers)
    client = diff(a, b, names) if a != b else []
    upstream: list[str] = []
    if not client_only:
        ua, ub = (upstream_rendering(x) for x in answers)
        upstream = diff(ua, ub, names) if ua != ub else []
    if client or upstream:
        return Difference(ex, client, upstream)
    return None


def exercised(answer: Answer) -> Counter[str]:
    """What one answer shows latchgate did: for the summary, to see the exchanges bite."""
    found: Counter[str] = Counter()
    if answer.failure:
        found["no answer"] += 1
        return found
    found[f"HTTP {answer.status // 100}xx"] += 1
    names = [k.lower() for k, _ in answer.headers]
    body = answer.body
    checks = {
        "with notice headers": "x-latchgate-notice" in names,
        "with dropped fields": "x-latchgate-dropped-fields" in names,
        "streams": any(
            k.lower() == "content-type" and "event-stream" in v for k, v in answer.headers
        ),
        "notices as SSE comments": b"\n: latchgate: " in body or body.startswith(b": latchgate"),
        "error events in streams": b'data: {"error"' in body,
        "tool calls recovered from text": b"call_recovered_" in body,
        "latch notices": b"so latchgate" in b" ".join(v.encode() for _, v in answer.headers),
        "upstream_bad_answer": b"upstream_bad_answer" in body,
        "upstream_incomplete": b"upstream_incomplete" in body,
        "context_length_exceeded": b"context_length_exceeded" in body,
        "keys masked": b"[REDACTED]" in body,
    }
    found.update(name for name, hit in checks.items() if hit)
    return found


def _latches(path: Path) -> int:
    """Latches in a state file: capabilities refused (false), fields and efforts refused."""
    try:
        endpoints = json.loads(path.read_text()).get("endpoints", {})
    except (OSError, ValueError, AttributeError):
        return 0
    held = 0
    for endpoint in endpoints.values():
        held += sum(endpoint.get(k) is False for k in ("strict_schemas", "usage_in_stream"))
        for model in endpoint.get("models", {}).values():
            held += sum(v is False for v in model.values())
            held += len(model.get("refused_fields") or []) + len(model.get("refused_efforts") or [])
            held += model.get("effort_with_tools") is not None
    return held


def summary(
    args: argparse.Namespace,
    trees: list[Tree],
    kinds: Counter[str],
    coverage: Counter[str],
    differences: list[Difference],
    seconds: float,
    workdir: Path,
) -> None:
    total = sum(kinds.values())
    client = sum(1 for d in differences if d.client)
    upstream = sum(1 for d in differences if d.upstream)
    print("=" * 100)
    print(f"before: {trees[0].path}\nafter:  {trees[1].path}")
    print(f"seed {args.seed}, exchanges {args.start}..{args.start + total - 1}, {seconds:.0f} s")
    print("exchanges by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    print(
        "what they exercised (answers of the first tree): "
        + ", ".join(f"{k} {n}" for k, n in sorted(coverage.items()))
    )
    latches = _latches(trees[0].workdir / "state.json")
    print(f"latches held at the end (first tree's state file): {latches}")
    print(f"exchanges: {total}")
    print(f"identical: {total - len(differences)}")
    print(f"differing: {len(differences)} (client-visible {client}, upstream-side {upstream})")
    if differences:
        shown = min(len(differences), args.show)
        print(f"  (the first {shown} are printed above; --report FILE writes all of them)")
        print("  indexes: " + " ".join(str(d.exchange.index) for d in differences[:200]))
    for tree in trees:
        errors = tree.logged_errors()
        if errors:
            print(f"error log lines in {tree.path}: {dict(errors)} (log: {tree.log})")
    print(f"logs and configs: {workdir}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=str(DEFAULT_BEFORE), help="the tree before")
    parser.add_argument("--after", default=str(REPO), help="the tree after (default: this repo)")
    parser.add_argument("--exchanges", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0, help="index of the first exchange")
    parser.add_argument("--show", type=int, default=20, help="differences printed in full")
    parser.add_argument("--report", help="write every difference to this file")
    parser.add_argument(
        "--pace",
        type=float,
        default=0.0,
        help="milliseconds to pause after each write of an SSE reply, once latchgate read it",
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="run the two trees of an exchange one after the other (default: at the same time)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per client request")
    parser.add_argument(
        "--client-only", action="store_true", help="compare only what the client received"
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter for the trees")
    args = parser.parse_args(argv)
    for tree in (args.before, args.after):
        if not (Path(tree) / "proxy" / "__main__.py").is_file():
            parser.error(f"{tree} has no proxy/__main__.py")
    try:
        return asyncio.run(run(args))
    except TreeError as exc:
        print(f"compare_trees: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
