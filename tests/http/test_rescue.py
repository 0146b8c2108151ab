"""Context rescue through the real HTTP path (issue 20): prune and compact instead of refusing.

A scripted upstream with a known window (`context_length`) answers; latchgate's estimate is the
compact JSON of the messages over four characters a token (the fake reports no usage that could
calibrate it), so each test knows exactly what fits. The summary side request of `compact` is
told apart from the client's own request by its instructions, and answered by the script.
"""

from __future__ import annotations

import math
from typing import Any

import anthropic
import openai
import orjson
import pytest

from proxy.agent.rescue import summary
from proxy.agent.rescue.compaction import SUMMARY_HEAD, TAIL
from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream, Json, Recorded, completion

MODEL = "fake-model"
WINDOW = 8192
SYSTEM = {"role": "system", "content": "You are a coding agent. Use the tools."}
TASK = {"role": "user", "content": "Read the files and tell me which one defines main()."}
TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}]
NOTES = "- The user wants the file defining main(). Read mod1..mod3; none defines it yet."


def tokens(messages: list[dict[str, Any]], tools: Any = None) -> int:
    """latchgate's estimate of a request's prompt (ratio 4, nothing calibrated)."""
    chars = len(orjson.dumps(messages)) + (len(orjson.dumps(tools)) if tools else 0)
    return math.ceil(chars / 4)


def turn(k: int, size: int) -> list[dict[str, Any]]:
    """One scripted agent step: a read_file call and its result of `size` characters."""
    call_id = f"call_{k}"
    return [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "src/mod{k}.py"}}'}}]},
        {"role": "tool", "tool_call_id": call_id,
         "content": f"# mod{k}\n" + "x = 1\n" * (size // 6)},
    ]


def run(sizes: list[int]) -> list[dict[str, Any]]:
    messages = [SYSTEM, TASK]
    for k, size in enumerate(sizes, 1):
        messages += turn(k, size)
    return messages


def is_summary(rec: Recorded) -> bool:
    body = rec.json
    first = body["messages"][0]
    return first.get("content") == summary.INSTRUCTIONS


def client_bodies(fake: FakeUpstream) -> list[dict[str, Any]]:
    return [r.json for r in fake.requests if not is_summary(r)]


def summary_bodies(fake: FakeUpstream) -> list[dict[str, Any]]:
    return [r.json for r in fake.requests if is_summary(r)]


def answering(summary_reply: Any = None) -> Any:
    """A script step: the summary request gets `summary_reply` (default: NOTES), every other
    request a plain answer."""

    def reply(rec: Recorded) -> Json:
        if is_summary(rec):
            return summary_reply if summary_reply is not None else Json(completion(NOTES))
        return Json(completion("Still reading."))

    return reply


async def start(start_proxy: StartProxy, fake: FakeUpstream, **cfg: Any) -> Running:
    table: dict[str, Any] = {
        "name": "fake", "base_url": fake.url, "kind": "generic",
        "context_length": {MODEL: WINDOW}, "heal_retries": 0, **cfg,
    }
    return await start_proxy(table)


async def ask(lg: Running, messages: list[dict[str, Any]], **kw: Any) -> tuple[str, Any]:
    """One chat request; (the x-latchgate-context header, the parsed answer)."""
    raw = await lg.client().chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, tools=TOOLS, **kw  # type: ignore[arg-type]
    )
    return raw.headers.get("x-latchgate-context", ""), raw.parse()


def rescues(lg: Running, action: str, outcome: str) -> float:
    value = lg.proxy.metrics.registry.get_sample_value(
        "latchgate_context_rescues_total",
        {"upstream": "fake", "model": MODEL, "action": action, "outcome": outcome},
    )
    return value or 0.0


def stubbed(messages: list[dict[str, Any]]) -> list[int]:
    return [
        i for i, m in enumerate(messages)
        if m["role"] == "tool" and str(m["content"]).startswith("[result cleared, ")
    ]


# -- prune ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
async def test_prune_clears_the_oldest_results_only_as_many_as_needed(
    fake: FakeUpstream, start_proxy: StartProxy, stream: bool
) -> None:
    lg = await start(start_proxy, fake, on_overflow="prune")
    messages = run([4000] * 10)
    before = tokens(messages, TOOLS)
    assert before > WINDOW
    if stream:
        raw = await lg.client().chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, tools=TOOLS, stream=True  # type: ignore[arg-type]
        )
        told = raw.headers.get("x-latchgate-context", "")
        text = "".join([c.choices[0].delta.content or "" async for c in raw.parse() if c.choices])
        assert text == "Hello!"
    else:
        told, answer = await ask(lg, messages)
        assert answer.choices[0].message.content == "Hello!"
    sent = client_bodies(fake)[0]["messages"]
    cleared = stubbed(sent)
    # oldest first, and no more than fitting needs: one fewer would not fit the room left
    tool_positions = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    assert cleared == tool_positions[: len(cleared)]
    room = WINDOW - WINDOW // 8
    assert tokens(sent, TOOLS) <= room
    one_fewer = [m if i not in cleared[-1:] else messages[i] for i, m in enumerate(sent)]
    assert tokens(one_fewer, TOOLS) > room
    assert sent[cleared[0]] == {
        "role": "tool", "tool_call_id": "call_1",
        "content": f"[result cleared, {len(messages[cleared[0]]['content']):,} chars]",
    }
    # everything else as the client sent it
    assert [m for i, m in enumerate(sent) if i not in cleared] == [
        m for i, m in enumerate(messages) if i not in cleared
    ]
    after = tokens(sent, TOOLS)
    assert len(cleared) > 1
    assert told == f"pruned {len(cleared)} results, {before:,} -> {after:,} tokens"
    assert rescues(lg, "pruned", "new") == 1


async def test_prune_never_touches_the_latest_results_small_ones_or_the_prompts(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="prune", prune_keep_last=2,
                     prune_max_chars=1000)
    big_system = {"role": "system", "content": "rules " * 2000}  # 12,000 chars: never cleared
    messages = [big_system, TASK]
    for k, size in enumerate([900, 6000, 6000, 900, 6000, 6000], 1):
        messages += turn(k, size)
    told, _ = await ask(lg, messages)
    sent = client_bodies(fake)[0]["messages"]
    tool_positions = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    # the 900-char results and the latest two are never candidates
    assert set(stubbed(sent)) <= {tool_positions[1], tool_positions[2]}
    assert sent[0] == big_system and sent[1] == TASK
    for i in (tool_positions[0], tool_positions[3], tool_positions[4], tool_positions[5]):
        assert sent[i] == messages[i]
    assert told.startswith("pruned ")


async def test_prune_refuses_what_it_cannot_fit_without_calling_the_upstream(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="prune")
    messages = run([9000] * 6)  # the latest five alone are over the window
    with pytest.raises(openai.BadRequestError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    err = info.value
    assert err.status_code == 400 and err.code == "context_length_exceeded"
    assert "pruned" not in err.message
    assert "even with 1 old tool result(s) cleared" in err.message
    assert 'on_overflow = "compact"' in err.message
    assert fake.requests == []
    assert rescues(lg, "pruned", "refused") == 1


async def test_the_next_turn_is_rewritten_byte_identically(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="prune")
    first = run([4000] * 10)
    await ask(lg, first)
    second = [*first, *turn(11, 300)]
    told, _ = await ask(lg, second)
    sent1, sent2 = (b["messages"] for b in client_bodies(fake))
    # the whole first rewrite is the prefix of the second, byte for byte
    assert orjson.dumps(sent2[: len(sent1)]) == orjson.dumps(sent1)
    assert told.endswith("(as on the previous turn)")
    assert rescues(lg, "pruned", "repeated") == 1
    # a turn that fits as it is but continues a rewritten conversation is rewritten too
    assert stubbed(sent2) == stubbed(sent1)


async def test_an_edited_history_gets_a_new_plan_not_a_wrong_one(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="prune")
    first = run([4000] * 10)
    await ask(lg, first)
    edited = [dict(m) for m in first]
    edited[3] = {**edited[3], "content": "# mod1 (edited)\n" + "y = 2\n" * 600}
    told, _ = await ask(lg, edited)
    sent = client_bodies(fake)[1]["messages"]
    assert "(as on the previous turn)" not in told
    assert sent[3]["content"] == f"[result cleared, {len(edited[3]['content']):,} chars]"


async def test_the_request_header_asks_for_rescue_and_a_bad_one_is_refused(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake)  # on_overflow: refuse
    messages = run([4000] * 10)
    with pytest.raises(openai.BadRequestError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    assert info.value.code == "context_length_exceeded"
    told, _ = await ask(lg, messages, extra_headers={"x-latchgate-context": "prune"})
    assert told.startswith("pruned ")
    with pytest.raises(openai.BadRequestError) as bad:
        await ask(lg, messages, extra_headers={"x-latchgate-context": "squeeze"})
    assert bad.value.code == "invalid_value"
    assert "x-latchgate-context header must be one of refuse, prune, compact" in bad.value.message


async def test_a_request_that_fits_is_sent_untouched(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="compact")
    messages = run([4000] * 3)
    raw = await lg.client().chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, tools=TOOLS  # type: ignore[arg-type]
    )
    assert "x-latchgate-context" not in raw.headers
    assert client_bodies(fake)[0]["messages"] == messages
    assert summary_bodies(fake) == []


# -- compact -------------------------------------------------------------------------------------

async def test_compact_folds_the_oldest_stretch_by_the_packages_rules(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="compact", prune_keep_last=8)
    fake.push(answering(), answering())
    messages = run([12000] * 3 + [300] * 3)
    messages += [{"role": "assistant", "content": "mod1 to mod6 read."},
                 {"role": "user", "content": "Now look for tests."}, *turn(7, 800)]
    before = tokens(messages, TOOLS)
    told, _ = await ask(lg, messages)
    asked = summary_bodies(fake)
    assert len(asked) == 1 and "tools" not in asked[0] and asked[0]["stream"] is False
    transcript = asked[0]["messages"][1]["content"]
    assert "src/mod1.py" in transcript and "Read the files" in transcript
    sent = client_bodies(fake)[0]["messages"]
    # leading system kept; the tail starts on the user message, with the summary in front of it
    anchor = messages.index({"role": "user", "content": "Now look for tests."})
    assert sent[0] == SYSTEM
    assert sent[1]["role"] == "user"
    assert sent[1]["content"].startswith(SUMMARY_HEAD.format(count=anchor - 1))
    assert NOTES in sent[1]["content"]
    assert sent[1]["content"].endswith("\n\nNow look for tests.")
    assert sent[2:] == messages[anchor + 1:]
    assert tokens(messages[anchor:]) <= TAIL * WINDOW
    assert told == (
        f"folded {anchor - 1} messages into a summary, {before:,} -> "
        f"{tokens(sent, TOOLS):,} tokens"
    )
    assert rescues(lg, "compacted", "new") == 1


async def test_an_agent_run_with_one_task_keeps_the_task_and_starts_on_a_turn(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="compact", prune_keep_last=8)
    fake.push(answering(), answering())
    messages = run([5000] * 8)  # one user message, then only tool turns
    await ask(lg, messages)
    sent = client_bodies(fake)[0]["messages"]
    assert sent[0] == SYSTEM
    assert sent[1]["role"] == "user"
    assert sent[1]["content"].startswith(TASK["content"] + "\n\n[latchgate: ")
    assert sent[2]["role"] == "assistant" and sent[2]["tool_calls"]
    assert sent[3]["role"] == "tool" and sent[3]["tool_call_id"] == sent[2]["tool_calls"][0]["id"]
    assert tokens(sent[2:]) <= TAIL * WINDOW


async def test_an_earlier_summary_is_continued_not_summarised_again(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="compact", prune_keep_last=8)
    fake.push(*[answering()] * 8)
    messages = run([5000] * 8)
    await ask(lg, messages)
    first_fold = summary_bodies(fake)[0]["messages"][1]["content"]
    # the run goes on; turns fit until the tail grows past the window again
    for k in range(9, 30):
        messages = [*messages, *turn(k, 5000)]
        told, _ = await ask(lg, messages)
        if len(summary_bodies(fake)) == 2:
            break
    else:
        pytest.fail("the run never compacted a second time")
    second = summary_bodies(fake)[1]["messages"][1]["content"]
    assert second.startswith("Notes so far, on the conversation before this part:\n" + NOTES)
    assert "src/mod1.py" in first_fold and "src/mod1.py" not in second
    assert told.startswith("folded ")
    sent = client_bodies(fake)[-1]["messages"]
    assert sent[1]["content"].count("[latchgate: ") == 1  # one summary, continued


@pytest.mark.parametrize("failure", ["error", "empty"])
async def test_a_failing_summary_falls_back_to_pruning(
    fake: FakeUpstream, start_proxy: StartProxy, failure: str
) -> None:
    lg = await start(start_proxy, fake, on_overflow="compact", prune_keep_last=3)
    bad = Json({"error": {"message": "boom", "type": "server_error"}}, status=500)
    failed = bad if failure == "error" else Json(completion(""))
    fake.push(answering(failed), answering(failed), answering())
    # pruned, it fits, but stays past three quarters: compaction is tried and fails
    messages = run([4000] * 2 + [8500] * 3)
    raw = await lg.client().chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, tools=TOOLS  # type: ignore[arg-type]
    )
    assert raw.parse().choices[0].message.content == "Still reading."
    assert raw.headers["x-latchgate-context"].startswith("pruned ")
    notices = orjson.loads(raw.headers["x-latchgate-notices"])
    assert any(n.startswith("Compaction failed") for n in notices)
    assert rescues(lg, "compacted", "failed") == 1
    assert len(summary_bodies(fake)) == 2  # asked twice, then given up


async def test_a_failing_summary_refuses_when_pruning_cannot_fit(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="compact", prune_keep_last=8)
    fake.push(*[answering(Json({"error": {"message": "boom"}}, status=503))] * 2)
    messages = run([5000] * 8)
    with pytest.raises(openai.BadRequestError) as info:
        await lg.client().chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    assert info.value.code == "context_length_exceeded"
    assert "compaction failed: the model gave no summary (HTTP 503: boom)" in info.value.message
    assert client_bodies(fake) == []
    assert rescues(lg, "compacted", "failed") == 1
    assert rescues(lg, "pruned", "refused") == 1


# -- the upstream's own overflow ----------------------------------------------------------------

async def test_an_overflow_the_upstream_reports_is_fitted_and_resent(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="prune", context_length={})
    limit = 4096

    def llama(rec: Recorded) -> Json:
        n = tokens(rec.json["messages"], rec.json.get("tools"))
        if n > limit:
            return Json({"error": {
                "code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": n,
                "n_ctx": limit,
                "message": f"request ({n} tokens) exceeds the available context size "
                           f"({limit} tokens), try increasing it"}}, status=400)
        return Json(completion("fits now"))

    fake.push(llama, llama, llama)
    messages = run([5000] * 3 + [500] * 5)
    told, answer = await ask(lg, messages)
    assert answer.choices[0].message.content == "fits now"
    assert told.startswith("pruned ")
    assert len(fake.requests) == 2  # refused once, then fitted and answered
    assert tokens(fake.requests[1].json["messages"], TOOLS) <= limit


# -- every front ----------------------------------------------------------------------------------

async def test_the_messages_front_is_rescued_on_the_chat_path(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="prune")
    history: list[dict[str, Any]] = [{"role": "user", "content": TASK["content"]}]
    for k in range(1, 11):
        history += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{k}",
                                               "name": "read_file",
                                               "input": {"path": f"src/mod{k}.py"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{k}",
                                          "content": "x = 1\n" * 700}]},
        ]
    client = anthropic.AsyncAnthropic(base_url=lg.url, api_key="unused", max_retries=0)
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=256, messages=history,  # type: ignore[arg-type]
        tools=[{"name": "read_file", "description": "Read a file.",
                "input_schema": TOOLS[0]["function"]["parameters"]}],
    )
    assert (await raw.parse()).content[0].type == "text"
    assert raw.headers["x-latchgate-context"].startswith("pruned ")
    assert stubbed(client_bodies(fake)[0]["messages"])


async def test_the_responses_front_is_rescued_on_the_chat_path(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="prune")
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK["content"]}]
    for k in range(1, 11):
        items += [
            {"type": "function_call", "call_id": f"call_{k}", "name": "read_file",
             "arguments": f'{{"path": "src/mod{k}.py"}}'},
            {"type": "function_call_output", "call_id": f"call_{k}", "output": "x = 1\n" * 700},
        ]
    raw = await lg.client().responses.with_raw_response.create(
        model=MODEL, input=items,  # type: ignore[arg-type]
        tools=[{"type": "function", "name": "read_file", "description": "Read a file.",
                "parameters": TOOLS[0]["function"]["parameters"]}],  # type: ignore[list-item]
    )
    assert raw.parse().output_text
    assert raw.headers["x-latchgate-context"].startswith("pruned ")
    assert stubbed(client_bodies(fake)[0]["messages"])


async def test_the_models_time_writing_the_summary_is_not_latchgate_overhead(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="compact", prune_keep_last=8)
    fake.push(*[answering(Json(completion(NOTES), delay=0.4))] * 4)
    await ask(lg, run([5000] * 8))
    assert len(summary_bodies(fake)) >= 1
    registry = lg.proxy.metrics.registry
    total = registry.get_sample_value(
        "latchgate_request_duration_seconds_sum",
        {"upstream": "fake", "model": MODEL, "stream": "false"},
    )
    overhead = registry.get_sample_value("latchgate_overhead_seconds_sum", {"route": "chat"})
    assert total is not None and total >= 0.4
    assert overhead is not None and overhead < 0.2


async def test_one_cleared_result_is_said_in_the_singular(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="prune")
    messages = run([30000] + [1000] * 5)  # clearing the one big result is enough
    told, _ = await ask(lg, messages)
    after = tokens(client_bodies(fake)[0]["messages"], TOOLS)
    assert told == f"pruned 1 result, {tokens(messages, TOOLS):,} -> {after:,} tokens"


async def test_a_summary_that_came_back_empty_is_asked_for_once_more(
    fake: FakeUpstream, start_proxy: StartProxy
) -> None:
    lg = await start(start_proxy, fake, on_overflow="compact", prune_keep_last=8)
    fake.push(answering(Json(completion(""))), *[answering()] * 6)
    messages = run([5000] * 8)
    told, _ = await ask(lg, messages)
    assert told.startswith("folded ")
    asked = summary_bodies(fake)
    assert asked[0] == asked[1]  # the same pass, sampled again
    assert NOTES in client_bodies(fake)[0]["messages"][1]["content"]
    assert rescues(lg, "compacted", "failed") == 0
