"""The fake llama-server (`tests/fakellama.py`) that the managed-upstream tests supervise.

Each test starts the script as a process on a free port, as latchgate would start the real
binary, and talks to it with `urllib`: it loads (503, then 200), answers chat whole, streamed and
as a tool call, counts on `/metrics`, and misbehaves as its environment says (exit at start, fail
the first starts, ignore SIGTERM). Waits poll with a generous timeout; nothing is timed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "fakellama.py"
WAIT = 30.0  # seconds any wait may take before the test fails
PREFIXED = re.compile(r"\d+\.\d{2}\.\d{3}\.\d{3} [DIWE] \S")
CORRUPT = "tensor 'blk.0.attn_q.weight' data is not within the file bounds"
FLAGS = ["--jinja", "--no-ui", "--log-prefix", "--log-colors", "off", "-t", "2"]
# flags the fake does not know, some of which argparse would misread as `-c tk` or `-m g`
UNKNOWN = ["-ngl", "99", "-ctk", "q8_0", "-mg", "0", "-cb", "--no-mmap", "--n-predict", "-1"]
FAKE_ENV = [name for name in os.environ if name.startswith("FAKE_LLAMA_")]
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def call(url: str, body: Any = None) -> tuple[int, bytes]:
    """(status, body) of a GET, or of a POST of `body` as JSON."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with _NO_PROXY.open(request, timeout=WAIT) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_for(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {WAIT} s: {what}")
        time.sleep(0.02)


class Fake:
    """One started fakellama: its process, port and log."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path, model: Path) -> None:
        self.proc = proc
        self.port = port
        self.log_path = log
        self.model = str(model)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def lines(self) -> list[str]:
        return self.log().splitlines()

    def first_answer(self, path: str = "/health") -> tuple[int, bytes]:
        """The first HTTP answer at `path`, retried while the port is not bound yet."""
        while True:
            try:
                return call(self.url + path)
            except urllib.error.URLError:
                if self.proc.poll() is not None:
                    pytest.fail(f"exited {self.proc.returncode}:\n{self.log()}")
                time.sleep(0.02)

    def wait_ready(self) -> None:
        wait_for(f"healthy; log:\n{self.log()}", lambda: self.first_answer()[0] == 200)

    def wait_exit(self) -> int:
        return self.proc.wait(timeout=WAIT)

    def wait_log(self, needle: str) -> None:
        wait_for(f"{needle!r} in the log", lambda: needle in self.log())

    def chat(self, body: dict[str, Any], path: str = "/v1/chat/completions") -> Any:
        status, raw = call(self.url + path, body)
        assert status == 200, raw
        return json.loads(raw)

    def stream(self, body: dict[str, Any]) -> list[Any]:
        """The SSE events of a streamed chat: each `data:` parsed, `[DONE]` as the string."""
        status, raw = call(self.url + "/v1/chat/completions", {**body, "stream": True})
        assert status == 200, raw
        events = raw.decode().split("\n\n")
        assert events[-1] == "", "the stream ends with a blank line"
        assert all(e.startswith("data: ") for e in events[:-1]), raw
        data = [e.removeprefix("data: ") for e in events[:-1]]
        return [d if d == "[DONE]" else json.loads(d) for d in data]

    def metrics(self) -> dict[str, float]:
        status, raw = call(self.url + "/metrics")
        assert status == 200, raw
        samples = [line.split() for line in raw.decode().splitlines() if not line.startswith("#")]
        return {name: float(value) for name, value in samples}


Launch = Callable[..., Fake]


def _launch(
    where: Path,
    started: list[subprocess.Popen[bytes]],
    *args: str,
    env: dict[str, str] | None = None,
    model: Path | None = None,
    port: int | None = None,
    direct: bool = False,
) -> Fake:
    """Start the fake: `model` (default: a small GGUF file), `args` after the usual flags,
    `env` added to a clean FAKE_LLAMA_* environment; `direct` runs it by its shebang."""
    if model is None:
        model = where / "model.gguf"
        model.write_bytes(b"GGUF" + bytes(60))
    port = port or free_port()
    log = where / f"fake-{len(started)}.log"
    environ = {k: v for k, v in os.environ.items() if k not in FAKE_ENV}
    environ.update(env or {})
    if direct:  # `python3` on PATH must be the one with aiohttp
        environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}"
    argv = [str(SCRIPT)] if direct else [sys.executable, str(SCRIPT)]
    argv += ["-m", str(model), "--host", "127.0.0.1", "--port", str(port), *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=environ)
    started.append(proc)
    return Fake(proc, port, log, model)


def _stop_all(started: list[subprocess.Popen[bytes]]) -> None:
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT)


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launch]:
    started: list[subprocess.Popen[bytes]] = []
    yield lambda *args, **kw: _launch(tmp_path, started, *args, **kw)
    _stop_all(started)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fake]:
    """One ready fake with an alias, two slots of 2048, metrics on, and unknown flags."""
    started: list[subprocess.Popen[bytes]] = []
    where = tmp_path_factory.mktemp("served")
    args = ["-a", "fake-alias", "-c", "4096", "-np", "2", "--metrics", *FLAGS, *UNKNOWN]
    fake = _launch(where, started, *args)
    fake.wait_ready()
    yield fake
    _stop_all(started)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fake]:
    """One ready fake given only a model, host and port: every default."""
    started: list[subprocess.Popen[bytes]] = []
    fake = _launch(tmp_path_factory.mktemp("bare"), started)
    fake.wait_ready()
    yield fake
    _stop_all(started)


USER = {"role": "user", "content": "Say hello to me"}  # 15 characters
SYSTEM = {"role": "system", "content": "You are brief."}  # 14: with USER, 29 // 4 = 7 tokens
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
ASK_WEATHER = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}]}


# -- loading ------------------------------------------------------------------------------------


def test_it_answers_503_while_loading_then_200(launch: Launch) -> None:
    long_flags = ["--ctx-size", "4096", "--parallel", "2", "--alias", "long-alias", "--metrics"]
    fake = launch(*long_flags, *FLAGS, env={"FAKE_LLAMA_LOAD_SECONDS": "3"})
    status, raw = fake.first_answer()
    assert status == 503
    assert json.loads(raw) == {
        "error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}
    }
    fake.wait_ready()
    assert call(fake.url + "/health") == (200, b'{"status":"ok"}')
    assert json.loads(call(fake.url + "/v1/models")[1])["data"][0]["id"] == "long-alias"
    texts = [line.split(" ", 2)[2] for line in fake.lines()]
    expected = [
        "srv  llama_server: initializing ...",
        f"srv    load_model: loading model '{fake.model}'",
        "load: control-looking token: 128247 '</s>' was not control-type; this is probably a "
        "bug in the model. its type will be overridden",
        "srv    load_model: initializing, n_slots = 2, n_ctx_slot = 2048, kv_unified = 'false'",
        "srv  llama_server: model loaded",
        f"srv  llama_server: listening on http://127.0.0.1:{fake.port}",
    ]
    assert [t for t in texts if t in expected] == expected
    assert all(PREFIXED.match(line) for line in fake.lines()), fake.log()
    assert [line.split()[1] for line in fake.lines() if "control-looking" in line] == ["W"]


def test_every_route_is_503_while_loading(launch: Launch) -> None:
    fake = launch("--metrics", *FLAGS, env={"FAKE_LLAMA_LOAD_SECONDS": "600"})
    assert fake.first_answer()[0] == 503
    for path in ("/health", "/v1/models", "/props", "/metrics", "/no/such/path"):
        assert call(fake.url + path)[0] == 503, path
    status, raw = call(fake.url + "/v1/chat/completions", {"messages": [USER]})
    assert (status, json.loads(raw)["error"]["message"]) == (503, "Loading model")


def test_it_runs_by_its_shebang(launch: Launch) -> None:
    assert os.access(SCRIPT, os.X_OK)
    assert SCRIPT.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")
    fake = launch(*FLAGS, direct=True)
    fake.wait_ready()


# -- what it serves -----------------------------------------------------------------------------


def test_props_and_models_report_the_slots_window(served: Fake) -> None:
    status, raw = call(served.url + "/props")
    props = json.loads(raw)
    assert status == 200
    assert props["default_generation_settings"]["n_ctx"] == 2048  # -c 4096 over -np 2
    assert props["total_slots"] == 2
    assert props["model_path"] == served.model
    assert props["chat_template"] == "x"
    for path in ("/v1/models", "/models"):
        models = json.loads(call(served.url + path)[1])
        assert models["object"] == "list"
        [entry] = models["data"]
        assert entry["id"] == "fake-alias"
        assert (entry["object"], entry["owned_by"]) == ("model", "llamacpp")
        assert entry["meta"]["n_ctx_train"] == 32768


def test_defaults_without_flags(bare: Fake) -> None:
    """No -c (the trained window), no -np (4 slots sharing it), no alias (the path), no
    --log-prefix (bare lines), no --metrics (501)."""
    props = json.loads(call(bare.url + "/props")[1])
    assert props["default_generation_settings"]["n_ctx"] == 32768
    assert props["total_slots"] == 4
    path = bare.model
    assert json.loads(call(bare.url + "/v1/models")[1])["data"][0]["id"] == path
    answer = bare.chat({"messages": [USER]})
    assert answer["model"] == path
    assert answer["choices"][0]["message"]["content"] == f"fake answer from {path}"
    assert "srv  llama_server: model loaded" in bare.lines()


def test_chat_whole(served: Fake) -> None:
    for path in ("/v1/chat/completions", "/chat/completions"):
        answer = served.chat({"model": "whatever", "messages": [SYSTEM, USER]}, path)
        assert answer["object"] == "chat.completion"
        assert answer["model"] == "fake-alias"
        [choice] = answer["choices"]
        assert choice["message"] == {"role": "assistant", "content": "fake answer from fake-alias"}
        assert choice["finish_reason"] == "stop"
        assert answer["usage"] == {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}
    assert re.search(r" I slot launch_slot_: id +\d+ \| task \d+ \| processing task", served.log())


def test_prompt_tokens_are_at_least_one(served: Fake) -> None:
    answer = served.chat({"messages": [{"role": "user", "content": ""}]})
    assert answer["usage"]["prompt_tokens"] == 1
    parts = [{"type": "text", "text": "12345678"}]  # content parts count by their text
    answer = served.chat({"messages": [{"role": "user", "content": parts}]})
    assert answer["usage"]["prompt_tokens"] == 2


def test_chat_streamed(served: Fake) -> None:
    events = served.stream({"messages": [USER]})
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all(c["model"] == "fake-alias" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    deltas = [c["choices"][0]["delta"] for c in chunks]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks]
    assert deltas[0]["role"] == "assistant"
    texts = [d["content"] for d in deltas[1:-1]]
    assert len(texts) == 2
    assert "".join(texts) == "fake answer from fake-alias"
    assert finishes == [None, None, None, "stop"]
    assert deltas[-1] == {}


def test_stream_usage_only_when_asked(served: Fake) -> None:
    plain = served.stream({"messages": [USER]})
    assert not any("usage" in c for c in plain[:-1])
    asked = served.stream({"messages": [USER], "stream_options": {"include_usage": True}})
    last = asked[-2]
    assert last["choices"] == []
    assert last["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_tool_call_whole(served: Fake) -> None:
    answer = served.chat({**ASK_WEATHER, "tools": [WEATHER_TOOL]})
    [choice] = answer["choices"]
    assert choice["finish_reason"] == "tool_calls"
    [tool_call] = choice["message"]["tool_calls"]
    assert tool_call["type"] == "function"
    assert tool_call["id"]
    assert tool_call["function"]["name"] == "get_weather"
    assert json.loads(tool_call["function"]["arguments"]) == {"city": "Paris"}


def test_tool_call_streamed(served: Fake) -> None:
    events = served.stream({**ASK_WEATHER, "tools": [WEATHER_TOOL]})
    assert events[-1] == "[DONE]"
    deltas = [c["choices"][0]["delta"] for c in events[:-1]]
    finishes = [c["choices"][0]["finish_reason"] for c in events[:-1]]
    assert finishes[-1] == "tool_calls"
    calls = [call for d in deltas for call in d.get("tool_calls", [])]
    assert all(c["index"] == 0 for c in calls)
    head, *rest = calls
    assert head["id"]
    assert head["type"] == "function"
    assert head["function"]["name"] == "get_weather"
    pieces = [head["function"].get("arguments", "")] + [c["function"]["arguments"] for c in rest]
    assert len([p for p in pieces if p]) == 2
    assert json.loads("".join(pieces)) == {"city": "Paris"}
    assert all("name" not in c["function"] and "id" not in c for c in rest)


@pytest.mark.parametrize(
    "body",
    [
        ASK_WEATHER,  # no tools
        {"messages": [USER], "tools": [WEATHER_TOOL]},  # no weather
        {  # the weather, but not in the last user message
            "messages": [*ASK_WEATHER["messages"], {"role": "user", "content": "never mind"}],
            "tools": [WEATHER_TOOL],
        },
        {"messages": [{"role": "user", "content": "weathering"}], "tools": [WEATHER_TOOL]},
    ],
    ids=["no-tools", "no-weather", "earlier-message", "not-the-word"],
)
def test_text_answer_unless_tools_and_weather(served: Fake, body: dict[str, Any]) -> None:
    choice = served.chat(body)["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert "tool_calls" not in choice["message"]


def test_apply_template_and_tokenize(served: Fake) -> None:
    status, raw = call(served.url + "/apply-template", {"messages": [SYSTEM, USER]})
    assert (status, json.loads(raw)) == (200, {"prompt": "You are brief.\nSay hello to me"})
    for content, count in (("Hello world", 2), ("", 1), ("a" * 40, 10)):
        status, raw = call(served.url + "/tokenize", {"content": content})
        tokens = json.loads(raw)["tokens"]
        assert status == 200
        assert len(tokens) == count
        assert all(isinstance(t, int) for t in tokens)


def test_unknown_path_is_404(served: Fake) -> None:
    status, raw = call(served.url + "/no/such/path")
    assert status == 404
    assert json.loads(raw)["error"]["type"] == "not_found_error"


# -- /metrics -----------------------------------------------------------------------------------


def test_metrics_is_501_without_the_flag(bare: Fake) -> None:
    status, raw = call(bare.url + "/metrics")
    assert status == 501
    assert json.loads(raw) == {
        "error": {
            "code": 501,
            "message": "This server does not support metrics endpoint. Start it with `--metrics`",
            "type": "not_supported_error",
        }
    }


def test_metrics_exposition(served: Fake) -> None:
    status, raw = call(served.url + "/metrics")
    assert status == 200
    text = raw.decode()
    for name, kind in (
        ("prompt_tokens_total", "counter"),
        ("tokens_predicted_total", "counter"),
        ("requests_processing", "gauge"),
    ):
        assert f"# HELP llamacpp:{name} " in text
        assert f"# TYPE llamacpp:{name} {kind}\n" in text
        assert re.search(rf"^llamacpp:{name} \d+$", text, re.MULTILINE)


def test_metrics_count_what_was_served(served: Fake) -> None:
    before = served.metrics()
    served.chat({"messages": [SYSTEM, USER]})  # 7 prompt tokens
    served.stream({"messages": [USER]})  # 3
    after = served.metrics()
    assert after["llamacpp:prompt_tokens_total"] - before["llamacpp:prompt_tokens_total"] == 10
    assert after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"] == 8
    assert after["llamacpp:requests_processing"] == 0


def test_requests_processing_while_a_delayed_answer_waits(launch: Launch) -> None:
    fake = launch("--metrics", *FLAGS, env={"FAKE_LLAMA_DELAY": "2"})
    fake.wait_ready()
    answers: list[Any] = []
    asking = threading.Thread(target=lambda: answers.append(fake.chat({"messages": [USER]})))
    asking.start()
    try:
        processing = "llamacpp:requests_processing"
        wait_for("a request in flight", lambda: fake.metrics()[processing] == 1)
    finally:
        asking.join(WAIT)
    assert answers[0]["choices"][0]["message"]["content"].startswith("fake answer from ")
    assert fake.metrics()[processing] == 0
    assert fake.metrics()["llamacpp:tokens_predicted_total"] == 4


# -- failing to start ---------------------------------------------------------------------------


def test_exit_at_start(launch: Launch) -> None:
    fake = launch(*FLAGS, env={"FAKE_LLAMA_EXIT_AT_START": "3"})
    assert fake.wait_exit() == 3
    errors = [line for line in fake.lines() if line.split()[1:2] == ["E"]]
    assert any(f"llama_model_load: error loading model: {CORRUPT}" in e for e in errors), errors
    assert "loading model" in fake.log()
    assert "model loaded" not in fake.log()


def test_port_in_use(launch: Launch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        fake = launch(*FLAGS, port=port)
        assert fake.wait_exit() == 1
    expected = f"couldn't bind HTTP server socket, hostname: 127.0.0.1, port: {port}"
    assert any(line.split()[1] == "E" and expected in line for line in fake.lines()), fake.log()


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "failed to open GGUF file"),
        (b"PK\x03\x04 not a model", "invalid magic characters: 'PK\x03\x04', expected 'GGUF'"),
    ],
    ids=["missing", "not-gguf"],
)
def test_a_bad_model_exits_1(
    launch: Launch, tmp_path: Path, content: bytes | None, error: str
) -> None:
    model = tmp_path / "broken.gguf"
    if content is not None:
        model.write_bytes(content)
    fake = launch(*FLAGS, model=model)
    assert fake.wait_exit() == 1
    errors = [line for line in fake.lines() if line.split()[1:2] == ["E"]]
    assert any(error in e for e in errors), fake.log()
    assert any("llama_model_load: error loading model: " in e for e in errors)
    assert any(f"srv    load_model: failed to load model, '{model}'" in e for e in errors)


def test_the_first_starts_fail_then_it_works(launch: Launch, tmp_path: Path) -> None:
    counter, pids = tmp_path / "starts", tmp_path / "pids"
    env = {
        "FAKE_LLAMA_STARTS": str(counter),
        "FAKE_LLAMA_FAIL_STARTS": "2",
        "FAKE_LLAMA_PIDFILE": str(pids),
    }
    fakes = []
    for _ in range(2):  # one after the other, as a supervisor restarts
        fakes.append(launch(*FLAGS, env=env))
        assert fakes[-1].wait_exit() == 1
        assert "model loaded" not in fakes[-1].log()
        assert any(line.split()[1] == "E" for line in fakes[-1].lines())
    assert counter.read_text().strip() == "2"
    fakes.append(launch(*FLAGS, env=env))
    fakes[-1].wait_ready()
    assert counter.read_text().strip() == "3"
    assert pids.read_text().split() == [str(f.proc.pid) for f in fakes]


def test_the_start_counter_alone_fails_nothing(launch: Launch, tmp_path: Path) -> None:
    counter = tmp_path / "starts"
    counter.write_text("41\n")
    fake = launch(*FLAGS, env={"FAKE_LLAMA_STARTS": str(counter)})
    fake.wait_ready()
    assert counter.read_text().strip() == "42"


# -- stopping -----------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_it_with_status_0(launch: Launch, signum: signal.Signals) -> None:
    fake = launch(*FLAGS)
    fake.wait_ready()
    fake.proc.send_signal(signum)
    assert fake.wait_exit() == 0
    assert "cleaning up before exit..." in fake.lines()[-1]


def test_sigterm_does_not_wait_for_a_stream(launch: Launch) -> None:
    """A stream in flight (an hour between its chunks) does not hold the exit up."""
    fake = launch(*FLAGS, env={"FAKE_LLAMA_DELAY": "3600"})
    fake.wait_ready()
    request = urllib.request.Request(
        fake.url + "/v1/chat/completions",
        data=json.dumps({"messages": [USER], "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with _NO_PROXY.open(request, timeout=WAIT) as resp:
        assert resp.readline().startswith(b"data: ")  # the first chunk; the next is an hour off
        fake.proc.send_signal(signal.SIGTERM)
        assert fake.wait_exit() == 0


def test_sigterm_can_be_ignored_then_sigkill_ends_it(launch: Launch) -> None:
    fake = launch(*FLAGS, env={"FAKE_LLAMA_IGNORE_SIGTERM": "1"})
    fake.wait_ready()
    fake.proc.send_signal(signal.SIGTERM)
    fake.wait_log("SIGTERM")
    assert [line.split()[1] for line in fake.lines() if "SIGTERM" in line] == ["W"]
    assert call(fake.url + "/health")[0] == 200
    assert fake.proc.poll() is None
    fake.proc.kill()
    assert fake.wait_exit() == -signal.SIGKILL
