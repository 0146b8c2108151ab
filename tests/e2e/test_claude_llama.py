"""Claude Code through latchgate in front of the real llama-server with the e2e model (issue 16).

Claude Code's first request is about 18,700 tokens (its system prompt and tool definitions):
more than the 8192-token slots of `llama_wide` (-c 16384 --parallel 2) hold. latchgate
discovers that window from the server and refuses the request before sending it, in Anthropic's
words (`prompt is too long: N tokens > 8192 maximum`); Claude Code turns that into "Prompt is
too long · the request is ~N tokens (limit 8192)" for the user and exits non-zero. The metrics
show the `messages` request answered 400, the pre-flight overflow counted, and nothing sent to
the server. Nothing depends on the model's words: no answer is generated.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests.claudecli import require_claude, run_claude
from tests.conftest import StartProxy
from tests.e2e.conftest import LlamaServer
from tests.e2e.test_llama import front, metrics, total

pytestmark = pytest.mark.e2e

MODEL = "qwen2.5-coder-0.5b-instruct"


async def test_claude_codes_first_request_is_refused_with_the_sizes(
    llama_wide: LlamaServer, start_proxy: StartProxy, tmp_path: Path
) -> None:
    require_claude()
    lg = await front(start_proxy, llama_wide)
    run = await asyncio.to_thread(
        run_claude, lg.url, "hi", model=MODEL, workdir=tmp_path / "work", timeout=300
    )
    detail = f"exit {run.returncode}\n--- stderr\n{run.stderr[-4000:]}\n--- stdout\n{run.stdout}"
    assert run.returncode != 0, detail
    # The sizes reach the user: the request's estimate and the window discovered per slot.
    shown = re.search(r"~(\d+) tokens \(limit (\d+)\)", run.stdout)
    assert shown is not None, detail
    tokens, limit = int(shown.group(1)), int(shown.group(2))
    assert limit == 8192, detail
    assert tokens > 8192, detail
    assert "Prompt is too long" in run.stdout, detail

    samples = await metrics(lg)
    refused = total(samples, "latchgate_requests_total", route="messages", status="400")
    assert refused == 1, samples
    answered = {
        dict(labels)["status"]: value
        for (name, labels), value in samples.items()
        if name == "latchgate_requests_total" and dict(labels).get("route") == "messages"
    }
    assert answered == {"400": 1}, detail  # Claude Code retried nothing, fell back to nothing
    assert total(samples, "latchgate_context_overflow_total", where="preflight") == 1
    assert total(samples, "latchgate_context_overflow_total", where="upstream") == 0
    assert total(samples, "latchgate_upstream_requests_total", upstream="llama") == 0
