"""A chat stream as Responses events (`proxy.fronts.responses.events`): the order and shape of
the events, sequence numbers, one item at a time, parallel and custom calls, ids that agree
everywhere, terminal events and nothing after them."""

from __future__ import annotations

import json
from typing import Any

from proxy.fronts.responses.events import EventWriter
from proxy.fronts.responses.output import Context
from proxy.fronts.responses.tools import translate_tools

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

TEXT_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


def context() -> Context:
    tools = translate_tools(
        [
            {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
            {"type": "function", "name": "get_time", "parameters": {"type": "object"}},
            {"type": "custom", "name": "apply_patch"},
            {
                "type": "namespace",
                "name": "agents",
                "tools": [{"type": "function", "name": "spawn"}],
            },
        ],
        [],
    )
    return Context("m", {"tool_choice": "auto", "tools": [], "store": True}, tools)


def parse(data: bytes) -> list[dict[str, Any]]:
    """The events in `data`, each framed `event: X\\ndata: {json}\\n\\n` with X its type."""
    if not data:
        return []
    assert data.endswith(b"\n\n")
    events = []
    for block in data[:-2].split(b"\n\n"):
        lines = block.split(b"\n")
        assert len(lines) == 2, block
        assert lines[0].startswith(b"event: ") and lines[1].startswith(b"data: ")
        event = json.loads(lines[1][len(b"data: ") :])
        assert event["type"] == lines[0][len(b"event: ") :].decode()
        events.append(event)
    return events


def delta(**fields: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def finish(reason: str) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def usage_chunk() -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [], "usage": USAGE}


def fragment(
    index: int, arguments: str = "", call_id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    piece: dict[str, Any] = {"index": index, "type": "function", "function": function}
    if call_id is not None:
        piece["id"] = call_id
    return piece


def calls(*fragments: dict[str, Any]) -> dict[str, Any]:
    return delta(tool_calls=list(fragments))


def stream(
    chunks: list[dict[str, Any]], writer: EventWriter | None = None, end: bool = True
) -> list[dict[str, Any]]:
    writer = writer or EventWriter(context())
    data = b"".join(writer.chunk(c) for c in chunks)
    if end:
        data += writer.done()
    return parse(data)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def of_item(events: list[dict[str, Any]], item_id: str) -> list[dict[str, Any]]:
    return [
        e for e in events if e.get("item_id") == item_id or e.get("item", {}).get("id") == item_id
    ]


def done_items(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["item"] for e in events if e["type"] == "response.output_item.done"]


def assert_sequential(events: list[dict[str, Any]]) -> None:
    """Each item's events lie between its added and its done, no other item's among them."""
    open_id: str | None = None
    for event in events:
        kind = event["type"]
        if kind == "response.output_item.added":
            assert open_id is None, f"{event['item']['id']} opened inside {open_id}"
            open_id = event["item"]["id"]
        elif kind == "response.output_item.done":
            assert event["item"]["id"] == open_id
            open_id = None
        elif "item_id" in event:
            assert event["item_id"] == open_id, kind
    assert open_id is None


def text_chunks() -> list[dict[str, Any]]:
    return [
        delta(role="assistant", content=""),
        delta(content="Hel"),
        delta(content="lo."),
        finish("stop"),
        usage_chunk(),
    ]


# -- text ------------------------------------------------------------------------------------------


def test_text_event_order_and_shapes() -> None:
    writer = EventWriter(context())
    events = stream(text_chunks(), writer)
    assert types(events) == TEXT_EVENTS
    created, in_progress, added, part_added, d1, d2, text_done, part_done, item_done, completed = (
        events
    )
    for start in (created, in_progress):
        assert start["response"]["status"] == "in_progress"
        assert start["response"]["output"] == []
        assert start["response"]["usage"] is None
        assert start["response"]["id"] == writer.ctx.id
    item_id = added["item"]["id"]
    assert item_id.startswith("msg_")
    assert added["output_index"] == 0
    assert added["item"] == {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    assert part_added == {
        "type": "response.content_part.added",
        "sequence_number": 3,
        "item_id": item_id,
        "output_index": 0,
        "content_index": 0,
        "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []},
    }
    assert [d1["delta"], d2["delta"]] == ["Hel", "lo."]
    for d in (d1, d2):
        assert (d["item_id"], d["output_index"], d["content_index"], d["logprobs"]) == (
            item_id,
            0,
            0,
            [],
        )
    assert text_done["text"] == "Hello." and text_done["logprobs"] == []
    part = {"type": "output_text", "text": "Hello.", "annotations": [], "logprobs": []}
    assert part_done["part"] == part
    assert item_done["item"] == {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }
    assert completed["response"]["status"] == "completed"
    assert completed["response"]["output"] == [item_done["item"]]
    assert completed["response"]["usage"]["input_tokens"] == 10
    assert completed["response"]["usage"]["total_tokens"] == 15
    assert writer.final == completed["response"]


def test_sequence_numbers_increase_from_zero_across_calls() -> None:
    writer = EventWriter(context())
    pieces = [writer.chunk(c) for c in text_chunks()] + [writer.done()]
    events = [e for piece in pieces for e in parse(piece)]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_nothing_before_the_first_chunk() -> None:
    writer = EventWriter(context())
    assert writer.started is False
    assert types(parse(writer.chunk(delta(role="assistant")))) == [
        "response.created",
        "response.in_progress",
    ]


def test_usage_missing_gives_null_usage() -> None:
    events = stream([delta(content="x"), finish("stop")])
    assert events[-1]["response"]["usage"] is None


# -- reasoning -------------------------------------------------------------------------------------


def test_reasoning_then_text_are_two_items_reasoning_closed_first() -> None:
    events = stream(
        [
            delta(reasoning_content="Let me "),
            delta(reasoning_content="think."),
            delta(content="Hi."),
            finish("stop"),
        ]
    )
    assert types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert_sequential(events)
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert added[0]["item"] == {
        "id": added[0]["item"]["id"],
        "type": "reasoning",
        "status": "in_progress",
        "summary": [],
        "content": [],
    }
    assert [a["output_index"] for a in added] == [0, 1]
    assert events[3]["part"] == {"type": "reasoning_text", "text": ""}
    assert events[4]["content_index"] == 0
    assert events[6]["text"] == "Let me think."
    reasoning, message = done_items(events)
    assert reasoning["type"] == "reasoning" and reasoning["summary"] == []
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "Let me think."}]
    assert message["type"] == "message"
    assert events[-1]["response"]["output"] == [reasoning, message]


def test_reasoning_after_text_opens_a_new_item() -> None:
    events = stream(
        [delta(content="A"), delta(reasoning_content="R"), delta(content="B"), finish("stop")]
    )
    assert_sequential(events)
    assert [i["type"] for i in done_items(events)] == ["message", "reasoning", "message"]
    ids = [i["id"] for i in done_items(events)]
    assert len(set(ids)) == 3


def test_reasoning_gets_encrypted_content_when_asked() -> None:
    ctx = context()
    ctx.encrypted_reasoning = True
    events = stream([delta(reasoning_content="R"), finish("stop")], EventWriter(ctx))
    assert done_items(events)[0]["encrypted_content"].startswith("lg1:")


# -- calls -----------------------------------------------------------------------------------------


def test_text_then_a_tool_call() -> None:
    writer = EventWriter(context())
    events = stream(
        [
            delta(content="Checking."),
            calls(fragment(0, "", "call_Qx81", "get_weather")),
            calls(fragment(0, '{"city":')),
            calls(fragment(0, '"Paris"}')),
            finish("tool_calls"),
            usage_chunk(),
        ],
        writer,
    )
    assert types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert_sequential(events)
    added = events[8]
    fc_id = added["item"]["id"]
    assert fc_id.startswith("fc_")
    assert added["output_index"] == 1
    assert added["item"] == {
        "id": fc_id,
        "type": "function_call",
        "status": "in_progress",
        "call_id": "call_Qx81",
        "name": "get_weather",
        "arguments": "",
    }
    assert [e["delta"] for e in events[9:11]] == ['{"city":', '"Paris"}']
    assert all(e["item_id"] == fc_id and e["output_index"] == 1 for e in events[9:12])
    assert events[11]["name"] == "get_weather"
    assert events[11]["arguments"] == '{"city":"Paris"}'
    assert events[12]["item"] == {
        "id": fc_id,
        "type": "function_call",
        "status": "completed",
        "call_id": "call_Qx81",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    }
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert final["output"] == done_items(events)
    assert final["usage"]["output_tokens"] == 5


def test_name_known_late_opens_the_call_then() -> None:
    events = stream(
        [
            calls(fragment(0, '{"a"', "call_1")),
            calls(fragment(0, ":1}", name="get_time")),
            finish("tool_calls"),
        ]
    )
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert len(added) == 1 and added[0]["item"]["name"] == "get_time"
    assert_sequential(events)
    assert (
        "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
        == '{"a":1}'
    )
    assert done_items(events)[0]["arguments"] == '{"a":1}'


def test_two_parallel_calls_come_out_one_after_the_other() -> None:
    events = stream(
        [
            calls(fragment(0, "", "call_a", "get_weather"), fragment(1, "", "call_b", "get_time")),
            calls(fragment(0, '{"city":')),
            calls(fragment(1, '{"tz":')),
            calls(fragment(0, '"Paris"}')),
            calls(fragment(1, '"UTC"}')),
            finish("tool_calls"),
        ],
    )
    assert_sequential(events)
    first, second = done_items(events)
    assert (first["call_id"], first["name"], first["arguments"]) == (
        "call_a",
        "get_weather",
        '{"city":"Paris"}',
    )
    assert (second["call_id"], second["name"], second["arguments"]) == (
        "call_b",
        "get_time",
        '{"tz":"UTC"}',
    )
    assert first["id"] != second["id"]
    for index, item in enumerate((first, second)):
        mine = of_item(events, item["id"])
        assert mine[0]["type"] == "response.output_item.added"
        assert mine[-1]["type"] == "response.output_item.done"
        assert all(e["output_index"] == index for e in mine)
        deltas = [e["delta"] for e in mine if e["type"] == "response.function_call_arguments.delta"]
        assert "".join(deltas) == item["arguments"]
        arguments_done = [e for e in mine if e["type"] == "response.function_call_arguments.done"]
        assert len(arguments_done) == 1 and arguments_done[0]["arguments"] == item["arguments"]
    assert events[-1]["response"]["output"] == [first, second]


def test_custom_tool_call_streams_as_custom_input() -> None:
    patch = "*** Begin Patch\n*** End Patch"
    wrapped = json.dumps({"input": patch})
    writer = EventWriter(context())
    early = parse(writer.chunk(calls(fragment(0, wrapped[:10], "call_p", "apply_patch"))))
    early += parse(writer.chunk(calls(fragment(0, wrapped[10:]))))
    assert types(early) == ["response.created", "response.in_progress"]  # held until whole
    events = early + parse(writer.chunk(finish("tool_calls")) + writer.done())
    assert types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, input_delta, input_done, item_done = events[2:6]
    ctc_id = added["item"]["id"]
    assert ctc_id.startswith("ctc_")
    assert added["item"]["type"] == "custom_tool_call"
    assert added["item"]["input"] == ""
    assert added["item"]["call_id"] == "call_p"
    assert added["item"]["status"] == "in_progress"
    assert input_delta["delta"] == patch and input_delta["item_id"] == ctc_id
    assert input_done["input"] == patch and input_done["item_id"] == ctc_id
    assert item_done["item"] == {
        "id": ctc_id,
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "call_p",
        "name": "apply_patch",
        "input": patch,
    }
    assert not any(e["type"].startswith("response.function_call_arguments") for e in events)
    assert events[-1]["response"]["output"] == [item_done["item"]]


def test_namespaced_call_streams_with_its_namespace() -> None:
    events = stream([calls(fragment(0, "{}", "call_n", "agents__spawn")), finish("tool_calls")])
    added = next(e for e in events if e["type"] == "response.output_item.added")
    assert added["item"]["name"] == "spawn" and added["item"]["namespace"] == "agents"
    item = done_items(events)[0]
    assert (item["name"], item["namespace"], item["arguments"]) == ("spawn", "agents", "{}")
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert done["name"] == "spawn"


def test_ids_and_call_ids_agree_everywhere() -> None:
    events = stream(
        [
            delta(reasoning_content="R"),
            delta(content="T"),
            calls(
                fragment(0, "{}", "call_recovered_0", "get_weather"),
                fragment(1, "{}", "call_recovered_1", "get_time"),
            ),
            calls(fragment(2, '{"input":"p"}', None, "apply_patch")),
            finish("tool_calls"),
        ],
    )
    assert_sequential(events)
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    done = done_items(events)
    final = events[-1]["response"]["output"]
    assert [i["id"] for i in added] == [i["id"] for i in done] == [i["id"] for i in final]
    assert len({i["id"] for i in done}) == 5
    call_ids = [i.get("call_id") for i in done[2:]]
    assert [i.get("call_id") for i in added[2:]] == call_ids
    assert [i.get("call_id") for i in final[2:]] == call_ids
    assert all(isinstance(c, str) and c.startswith("call_") for c in call_ids)
    assert not any(c.startswith("call_recovered_") for c in call_ids)
    assert len(set(call_ids)) == 3
    assert final == done


def test_text_after_a_call_closes_the_call_first() -> None:
    events = stream(
        [calls(fragment(0, "{}", "call_1", "get_time")), delta(content="after"), finish("stop")]
    )
    assert_sequential(events)
    assert [i["type"] for i in done_items(events)] == ["function_call", "message"]


# -- terminal events -------------------------------------------------------------------------------


def test_length_finish_is_incomplete() -> None:
    events = stream([delta(content="Once upon"), finish("length")])
    assert events[-1]["type"] == "response.incomplete"
    response = events[-1]["response"]
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert done_items(events)[-1]["status"] == "incomplete"
    assert "response.completed" not in types(events)


def test_failed_mid_stream() -> None:
    writer = EventWriter(context())
    data = writer.chunk(delta(content="partial"))
    data += writer.failed(
        {
            "code": "context_length_exceeded",
            "message": "too long",
            "type": "invalid_request_error",
            "param": "input",
        }
    )
    events = parse(data)
    assert types(events)[-4:] == [
        "response.content_part.done",
        "response.output_item.done",
        "response.failed",
        "error",
    ]
    assert done_items(events)[0]["status"] == "incomplete"
    failed, error = events[-2:]
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": "context_length_exceeded", "message": "too long"}
    assert failed["response"]["output"] == done_items(events)
    assert error["code"] == "context_length_exceeded"
    assert error["message"] == "too long"
    assert error["param"] == "input"
    assert error["error"] == {
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
        "message": "too long",
        "param": "input",
    }
    assert error["sequence_number"] == failed["sequence_number"] + 1
    assert "response.completed" not in types(events)
    assert writer.final is not None and writer.final["status"] == "failed"


def test_failed_before_any_chunk() -> None:
    events = parse(EventWriter(context()).failed({"message": "upstream cut"}))
    assert types(events) == ["response.created", "response.in_progress", "response.failed", "error"]
    assert events[2]["response"]["error"] == {"code": "server_error", "message": "upstream cut"}
    assert events[3]["error"]["type"] == "server_error"
    assert events[3]["error"]["code"] == "server_error"
    assert events[3]["error"]["param"] is None
    assert [e["sequence_number"] for e in events] == [0, 1, 2, 3]


def test_nothing_after_done() -> None:
    writer = EventWriter(context())
    for c in text_chunks():
        writer.chunk(c)
    assert writer.done() != b""
    assert writer.ended is True
    assert writer.chunk(delta(content="more")) == b""
    assert writer.done() == b""
    assert writer.failed({"code": "x", "message": "y"}) == b""
    assert writer.final is not None and writer.final["status"] == "completed"


def test_nothing_after_failed() -> None:
    writer = EventWriter(context())
    writer.chunk(delta(content="x"))
    assert writer.failed({"code": "server_error", "message": "boom"}) != b""
    assert writer.chunk(delta(content="more")) == b""
    assert writer.done() == b""
    assert writer.failed({"code": "x", "message": "y"}) == b""
    assert writer.final is not None and writer.final["status"] == "failed"


def test_done_without_chunks_still_frames_a_response() -> None:
    events = parse(EventWriter(context()).done())
    assert types(events) == ["response.created", "response.in_progress", "response.completed"]
    assert events[-1]["response"]["output"] == []


def test_calls_one_after_another_each_come_whole() -> None:
    events = stream(
        [
            calls(fragment(0, "", "call_a", "get_weather")),
            calls(fragment(0, '{"city":"Oslo"}')),
            calls(fragment(1, "", "call_b", "get_time")),
            calls(fragment(1, '{"tz":"CET"}')),
            finish("tool_calls"),
        ],
    )
    assert_sequential(events)
    assert [(i["call_id"], i["arguments"]) for i in done_items(events)] == [
        ("call_a", '{"city":"Oslo"}'),
        ("call_b", '{"tz":"CET"}'),
    ]


def test_text_logprobs_stream_and_stay_on_the_part() -> None:
    tokens = [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105], "top_logprobs": []}]
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {"content": "Hi"},
                "logprobs": {"content": tokens},
                "finish_reason": None,
            }
        ]
    }
    events = stream([chunk, finish("stop")])
    text_delta = next(e for e in events if e["type"] == "response.output_text.delta")
    assert text_delta["logprobs"] == tokens
    assert done_items(events)[0]["content"][0]["logprobs"] == tokens


def test_other_choices_are_ignored() -> None:
    chunk = {"choices": [{"index": 1, "delta": {"content": "other"}, "finish_reason": None}]}
    events = stream([chunk, delta(content="mine"), finish("stop")])
    assert [i["content"][0]["text"] for i in done_items(events)] == ["mine"]


def test_calls_as_the_chat_path_writes_them_whole_after_the_text() -> None:
    # The chat path's tool-call layer sends each call whole, in its own chunk, with the usage
    # on the finish chunk.
    whole = [
        {
            "index": k,
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": name, "arguments": args},
        }
        for k, (name, args) in enumerate(
            [("get_weather", '{"city":"Oslo"}'), ("get_time", '{"tz":"CET"}')]
        )
    ]
    last = {**finish("tool_calls"), "usage": USAGE}
    events = stream([delta(content="Both."), calls(whole[0]), calls(whole[1]), last])
    assert_sequential(events)
    items = done_items(events)
    assert [i["type"] for i in items] == ["message", "function_call", "function_call"]
    assert [(i["call_id"], i["arguments"]) for i in items[1:]] == [
        ("call_0", '{"city":"Oslo"}'),
        ("call_1", '{"tz":"CET"}'),
    ]
    assert [e["output_index"] for e in events if e["type"] == "response.output_item.added"] == [
        0,
        1,
        2,
    ]
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output"] == items
    assert events[-1]["response"]["usage"]["total_tokens"] == 15
