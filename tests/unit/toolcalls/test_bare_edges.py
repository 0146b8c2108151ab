"""Bare calls with prose around them (issue 18): the cases are in the streamed corpus
(tests/toolcall_families/bare_prose.py); here, that the fallback itself finds them (or refuses
them), that the stream releases what can no longer be a call as soon as it can tell, and that the
line scan stays linear (step counts).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from proxy.toolcalls.formats import FALLBACK, bare
from proxy.toolcalls.recovery import tool_schemas
from proxy.toolcalls.scan import END_TOKENS, split_think, value_end
from proxy.toolcalls.stream import StreamToolProcessor
from tests.steps import growth, needs_traced_scans
from tests.toolcall_case import TOOLS, Case
from tests.toolcall_families.bare_prose import CASES
from tests.unit.toolcalls.test_recovery_linear_time import LINEAR, SMALL
from tests.unit.toolcalls.whole_reply import run

SCHEMAS = tool_schemas(TOOLS)
PARIS = [("get_weather", {"city": "Paris"})]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


@pytest.mark.parametrize("case", [c for c in CASES if c.format], ids=lambda c: c.name)
def test_the_fallback_finds_the_run(case: Case) -> None:
    _, scan, _ = split_think(case.text)
    spans = FALLBACK(scan, SCHEMAS)
    assert [(c[0], c[1]) for sp in spans for c in sp.calls] == case.calls
    assert [sp.format for sp in spans] == [case.format]


@pytest.mark.parametrize("case", [c for c in CASES if not c.format], ids=lambda c: c.name)
def test_the_fallback_refuses_the_text(case: Case) -> None:
    assert FALLBACK(case.text, SCHEMAS) == []


# -- the stream holds only what can still become a call -------------------------------------------


def _held_after(text: str) -> int:
    """How many characters the stream still holds after `text`, fed one character a chunk."""
    proc = StreamToolProcessor(TOOLS)
    for ch in text:
        proc.feed({"choices": [{"index": 0, "delta": {"content": ch}, "finish_reason": None}]})
    return proc.held()


@pytest.mark.parametrize(
    "text",
    [
        'Here is the result:\n{"answer":',  # a first key no call has
        '{"answer":',
        "In Python:\n{'city'",
        'package.json:\n{\n  "name": "my-app"',  # a name no tool has
        "See:\n[the d",  # no pythonic call: a name, then no `(`
        "Values:\n[1",
        # Not ending in the `]`: a `]` last may begin MiniMax M3's `]<]minimax[>[` marker, and
        # is held as a last `<` is.
        "Tasks:\n[ ] done",
        f"{CALL} is",  # prose on the call's line
        f"Sure.\n{CALL} is",
    ],
)
def test_what_cannot_be_a_call_is_released_at_once(text: str) -> None:
    assert _held_after(text) == 0


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("Sure.\n{", 2),  # the newline goes with a call
        ('Sure.\n  {"name": "get_wea', 20),
        (f"Sure.\n{CALL}", len(CALL) + 1),
        (f"{CALL}\nDone", len(CALL) + 5),  # prose after a run: the end decides
        ("Sure.\n[get_weather", 13),
    ],
)
def test_what_may_be_a_call_is_held(text: str, held: int) -> None:
    assert _held_after(text) == held


# -- linear time ----------------------------------------------------------------------------------

# Replies that open with `{` or `[` (so the fallback runs) and open many lines with values that
# never close, or that close but are no call, or calls with prose on their line.
ADVERSARIAL = [
    "{\n",
    "{ a\n",
    "[x(\n",
    "[{\n",
    '{"query": "\n',
    '{"name": "search", "arguments": {}} x\n',
    "[search(query='a') b\n",
    "```json\n{\n",
]


def _repeated(unit: str) -> Callable[[int], Callable[[], object]]:
    def make(size: int) -> Callable[[], object]:
        text = unit * (size // len(unit) + 1)
        return lambda: run(text)

    return make


@pytest.mark.usefixtures("counted")
@pytest.mark.parametrize("unit", ADVERSARIAL)
def test_line_scan_is_linear(unit: str) -> None:
    assert growth(_repeated(unit), SMALL) < LINEAR


@pytest.mark.parametrize("unit", ADVERSARIAL)
def test_adversarial_lines_stay_text(unit: str) -> None:
    text = unit * 5_000
    assert run(text) == (text, [], "stop")


def test_end_tokens_all_open_with_a_bracket() -> None:
    # bare_run looks for end tokens only at a `<` (a failed match at every line would cost a
    # look to the end of the reply in the step count).
    assert all(token.startswith("<") for token in END_TOKENS)


@needs_traced_scans
def test_the_step_count_sees_an_unbounded_line_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    # The yardstick: without the bound at the next line that opens a value, every unclosed
    # brace is scanned to the end of the reply.
    def unbounded(self: bare._LineValues, i: int) -> int | None:
        return value_end(self.s, i)

    monkeypatch.setattr(bare._LineValues, "value", unbounded)
    # A quarter of the usual size: quadratic work under the step counter's trace costs minutes
    # at 16,000 characters, and 500 to 4,000 shows it as plainly.
    assert growth(_repeated("{\n"), SMALL // 4) > 4 * LINEAR


# -- pythonic calls one a line (OLMo 3's `<function_calls>` body) ---------------------------------


def test_pythonic_calls_one_a_line() -> None:
    # No `<function_calls>` marker is read yet (formats/tagged.py); when one is, its body is
    # calls one a line, which pythonic_calls already splits.
    from proxy.toolcalls.pythonic import pythonic_calls

    text = "get_weather(city='Paris')\nget_time(tz=\"UTC\")"
    assert pythonic_calls(text, SCHEMAS) == [(*PARIS[0], False), ("get_time", {"tz": "UTC"}, False)]
    assert pythonic_calls("get_weather(city='Paris')\nsunny", SCHEMAS) is None
