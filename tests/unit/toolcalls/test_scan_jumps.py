"""`value_end`, `string_end` and the top-level key reader jump between quotes and brackets with
regular expressions; the character-by-character loops they replaced are kept here as the
reference, and random texts over the characters that matter must give the same answers under
both, at every start and limit. `json_calls` skips the key reader for valid JSON without escapes;
it must judge every such value as the reader does.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.toolcalls import values
from proxy.toolcalls.arguments import loads_lenient
from proxy.toolcalls.scan import skip, string_end, value_end
from proxy.toolcalls.values import _top_keys


def reference_value_end(s: str, i: int, limit: int | None = None) -> int | None:
    depth = 0
    n = len(s) if limit is None else min(limit, len(s))
    prev = ""
    while i < n:
        c = s[i]
        if c == '"' or (c == "'" and prev in "{[(,:="):
            i = reference_string_end(s, i, n)
            if i < 0:
                return None
            prev = '"'
            continue
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                return i + 1
        if not c.isspace():
            prev = c
        i += 1
    return None


def reference_string_end(s: str, i: int, n: int | None = None) -> int:
    quote = s[i]
    j = i + 1
    n = len(s) if n is None else n
    while j < n:
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == quote:
            if quote == '"':
                return j + 1
            rest = s[j + 1 : j + 40].lstrip()
            if not rest or rest[0] in ",}]):":
                return j + 1
        j += 1
    return -1


def reference_top_keys(text: str) -> dict[str, int]:
    keys: dict[str, int] = {}
    if not text.startswith("{"):
        return keys
    depth, i, prev, n = 0, 0, "", len(text)
    while i < n:
        c = text[i]
        if c == '"' or (c == "'" and prev in "{[,:"):
            j = reference_string_end(text, i)
            if j < 0:
                break
            k = skip(text, j)
            if depth == 1 and k < n and text[k] == ":":
                keys.setdefault(text[i + 1 : j - 1], skip(text, k + 1))
            i, prev = j, '"'
            continue
        depth += 1 if c in "{[" else -1 if c in "}]" else 0
        if depth == 0:
            break
        prev = c if not c.isspace() else prev
        i += 1
    return keys


# Every character either scan treats apart, some whitespace (Unicode's too) and some prose.
TEXTS = st.text(alphabet=list("{}[]()\"'\\,:= \n\t\u00a0\u2003ab"), max_size=40)


@settings(max_examples=3000, deadline=None)
@given(TEXTS, st.integers(min_value=0, max_value=45))
def test_value_end_ends_where_the_loop_did(s: str, limit: int) -> None:
    for i in range(len(s)):
        assert value_end(s, i) == reference_value_end(s, i)
        assert value_end(s, i, limit) == reference_value_end(s, i, limit)


@settings(max_examples=3000, deadline=None)
@given(TEXTS, st.integers(min_value=0, max_value=45))
def test_string_end_ends_where_the_loop_did(s: str, n: int) -> None:
    n = min(n, len(s))  # callers never scan past the text
    for i, c in enumerate(s):
        if c in "\"'":
            assert string_end(s, i) == reference_string_end(s, i)
            assert string_end(s, i, n) == reference_string_end(s, i, n)


@settings(max_examples=3000, deadline=None)
@given(TEXTS)
def test_top_keys_are_the_loops(s: str) -> None:
    for text in (s, "{" + s):
        assert _top_keys(text) == reference_top_keys(text)


def test_the_cases_that_matter_by_hand() -> None:
    call = '{"name": "f", "arguments": {"a": "}\\"{", "b": [1, (2)]}} after'
    assert value_end(call, 0) == call.index(" after")
    assert value_end("{'it''s': 1}", 0) == reference_value_end("{'it''s': 1}", 0)
    assert value_end("{ it's }", 0) == 8  # an apostrophe in prose opens no string
    assert value_end('{"a": "\\', 0) is None  # a backslash at the end escapes nothing
    assert string_end('"ab\\"c"', 0) == 7
    assert string_end('"abc"', 0, 3) == -1  # the quote past the limit does not count
    keys = _top_keys('{"name": "f", "arguments": {"name": "inner"}, \'x\' : 1}')
    assert keys == {"name": 9, "arguments": 27, "x": 52}  # depth 1 only, where values start


_KEYS = ["name", "tool", "function", "tool_calls", "tool_call", "get_weather", "arguments", "x"]
_SCHEMAS: dict[str, dict[str, object]] = {"get_weather": {}}
_LEAVES = st.sampled_from([0, 1, 1.0, -2, True, False, None, "s", "a'b", "{[", 'q"', "\\n"])
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(value=_VALUES, indent=st.sampled_from([None, 1]))
def test_a_valid_json_value_is_judged_on_its_keys_as_the_scan_of_its_text_judges_it(
    value: object, indent: int | None
) -> None:
    # json_calls reads a valid JSON value without escapes from its parsed keys, skipping the
    # scan of its text and the lenient parse: both halves of the shortcut agree with what they
    # skip. (Checked piece by piece: the compiled build calls `_plain_json` natively, so
    # replacing it on the module would change nothing there.)
    text = json.dumps(value, indent=indent)
    parsed = values._plain_json(text)
    if "\\" in text:
        assert parsed is None
        return
    assert parsed == loads_lenient(text)
    assert values._value_may_be_call(value, _SCHEMAS) == values._may_be_call(text, _SCHEMAS)
