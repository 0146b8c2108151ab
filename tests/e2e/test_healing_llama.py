"""Self-healing and tool emulation against the real llama-server and the test model (issue 19).

The turns of tests/e2e/tool_turns.py (one and several tools, nested, enum and array arguments,
required and named `tool_choice`, follow-ups after a tool result, and turns where this model
names a tool after a file) go through two latchgates in front of one llama-server, one with
healing off and one with it on, turn by turn; healing must never lower the valid-call rate, and
each heal must be visible (a notice and a counter). The same turns then go to a llama-server
started with `--no-jinja`, which refuses `tools`: latchgate latches `native_tools` off and
emulates them, and calls must still come back as `tool_calls`. The model's output varies a
little even at temperature 0, so the assertions are on rates and structure, never on text;
bench/bench_healing.py measures the same turns with timings.
"""

from __future__ import annotations

import pytest

from tests.conftest import Running, StartProxy
from tests.e2e.conftest import LlamaServer
from tests.e2e.tool_turns import TURNS, Outcome, rate, run_turn

pytestmark = pytest.mark.e2e


async def latchgate(start_proxy: StartProxy, server: LlamaServer, heal_retries: int) -> Running:
    return await start_proxy({"name": "llama", "base_url": server.base_url,
                              "kind": "llama.cpp", "heal_retries": heal_retries})


def counter(lg: Running, name: str, **labels: str) -> float:
    registry = lg.proxy.metrics.registry
    total = 0.0
    for metric in registry.collect():
        for sample in metric.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                total += sample.value
    return total


async def test_healing_never_lowers_the_valid_call_rate(
    llama: LlamaServer, start_proxy: StartProxy
) -> None:
    off, on = await latchgate(start_proxy, llama, 0), await latchgate(start_proxy, llama, 1)
    clients = off.client(), on.client()
    results: tuple[list[Outcome], list[Outcome]] = ([], [])
    try:
        for turn in TURNS:  # interleaved: whatever the server's state, both see it alike
            for client, got in zip(clients, results, strict=True):
                got.append(await run_turn(client, turn, stream=False))
    finally:
        for client in clients:
            await client.close()
    without, with_ = rate(results[0]), rate(results[1])
    report = "\n".join(
        f"{a.turn.name}: off {'ok' if a.ok else a.problems[:1]} / on "
        f"{'ok' if b.ok else b.problems[:1]}"
        for a, b in zip(*results, strict=True)
    )
    assert with_ >= without, report
    # Text turns stay text-fine: healing never turns a good answer in words into a bad call.
    assert rate(results[1], expects_call=False) >= rate(results[0], expects_call=False), report
    # Healing happened, and said so: every re-ask is counted by its outcome.
    asked = counter(on, "latchgate_tool_calls_healed_total") + counter(
        on, "latchgate_tool_choice_enforced_total")
    assert asked > 0, report
    assert counter(off, "latchgate_tool_calls_healed_total") == 0


async def test_a_streamed_heal_reaches_the_client_as_a_valid_call(
    llama: LlamaServer, start_proxy: StartProxy
) -> None:
    # The turns where this model names a tool after a file: whatever it does, a streamed
    # answer through latchgate is never worse than the same turn with healing off.
    hard = [t for t in TURNS if "hard" in t.tags]
    assert hard
    off, on = await latchgate(start_proxy, llama, 0), await latchgate(start_proxy, llama, 1)
    clients = off.client(), on.client()
    results: tuple[list[Outcome], list[Outcome]] = ([], [])
    try:
        for turn in hard:
            for client, got in zip(clients, results, strict=True):
                got.append(await run_turn(client, turn, stream=True))
    finally:
        for client in clients:
            await client.close()
    assert rate(results[1]) >= rate(results[0])
    for outcome in results[1]:
        if outcome.calls:  # a call that reached the client names a declared tool
            names = {t["function"]["name"] for t in outcome.turn.tools}
            assert {c["function"]["name"] for c in outcome.calls} <= names, outcome.problems


async def test_tools_refused_without_jinja_are_emulated(
    llama_nojinja: LlamaServer, start_proxy: StartProxy
) -> None:
    lg = await latchgate(start_proxy, llama_nojinja, 1)
    client = lg.client()
    firsts = [t for t in TURNS if "follow-up" not in t.tags][:12]
    followups = [t for t in TURNS if "follow-up" in t.tags][:3]
    try:
        got = [await run_turn(client, turn, stream=False) for turn in firsts + followups]
        streamed = [await run_turn(client, turn, stream=True) for turn in firsts[:3]]
    finally:
        await client.close()
    report = "\n".join(f"{o.turn.name}: {'ok' if o.ok else o.problems[:1]}" for o in got)
    # Not one HTTP error: the refusal was latched and every request went out emulated.
    assert not [o for o in got + streamed if o.error], report
    assert counter(lg, "latchgate_refusals_total", capability="native_tools") == 1
    assert counter(lg, "latchgate_tools_emulated_total") == len(got) + len(streamed)
    # Calls come back as tool_calls although the server never saw a tool.
    assert rate(got) >= 0.5, report
    assert any(o.calls for o in streamed), [o.problems for o in streamed]
