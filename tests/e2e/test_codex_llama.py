"""Codex CLI through latchgate in front of the real llama-server with the e2e model (issue 15).

One `codex exec` turn, Codex -> latchgate's Responses front -> the chat path -> llama-server,
must complete: exit 0, a non-empty last message, and latchgate counting a `responses` request
answered 200. The model is tiny and its words vary, so nothing is asserted on the text.

Codex's own prompt for a model it does not know is about 10k tokens (20k characters of base
instructions, the multi-agent and goal tools, skills): more than a slot holds. The run swaps the
base instructions for two lines and turns the optional tool groups off, which leaves about 2k
tokens (Codex's shell tools kept), and uses the 8192-token slots of `llama_wide` so the prompt
and an answer fit with room to spare, and prompt processing on a CPU stays short.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.codexcli import require_codex, run_codex
from tests.conftest import StartProxy
from tests.e2e.conftest import LlamaServer
from tests.e2e.test_llama import front, metrics, total

pytestmark = pytest.mark.e2e

INSTRUCTIONS = "You are a helpful assistant in a terminal. Answer briefly and plainly.\n"


def small_prompt_config(instructions: Path) -> str:
    """Codex settings that shrink the prompt to what a small local model can take."""
    return "\n".join([
        f"model_instructions_file = {str(instructions)!r}",
        'web_search = "disabled"',
        "include_apply_patch_tool = false",
        "features.multi_agent = false",
        "features.goals = false",
        "features.skills = false",
        "features.apps = false",
        "features.memories = false",
        "model_context_window = 8192",
    ])  # fmt: skip


async def test_a_codex_exec_turn_completes_against_llama_server(
    llama_wide: LlamaServer, start_proxy: StartProxy, tmp_path: Path
) -> None:
    require_codex()
    lg = await front(start_proxy, llama_wide)
    instructions = tmp_path / "instructions.md"
    instructions.write_text(INSTRUCTIONS)
    run = await asyncio.to_thread(
        run_codex,
        lg.base_url,
        "Reply with the single word: pong",
        model="qwen2.5-coder-0.5b-instruct",
        workdir=tmp_path / "work",
        timeout=300,
        extra_config=small_prompt_config(instructions),
    )
    detail = f"exit {run.returncode}\n--- stderr\n{run.stderr[-4000:]}\n--- stdout\n{run.stdout}"
    assert run.returncode == 0, detail
    assert run.last_message is not None and run.last_message.strip(), detail
    samples = await metrics(lg)
    answered = total(samples, "latchgate_requests_total", route="responses", status="200")
    assert answered >= 1, samples
    not_ok = {
        dict(labels)["status"]: value
        for (name, labels), value in samples.items()
        if name == "latchgate_requests_total"
        and dict(labels).get("route") == "responses"
        and dict(labels).get("status") != "200"
    }
    assert not_ok == {}, detail  # Codex retries nothing here: one failure would be the run
