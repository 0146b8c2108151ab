"""Functionary v3.2 (MeetKai, Llama 3 based): every block of a reply is `>>>RECIPIENT\\n` and
its text, `>>>NAME\\n{json}` for a call and `>>>all\\ntext` for words to the user, several blocks
in one reply (`>>>all\\nLet me check.>>>get_weather\\n{"city": "Paris"}`). Label `functionary`.

Checked against meetkai-functionary-medium-v3.2.jinja (llama.cpp models/templates; the assistant
turn is `'>>>all\\n' + content` then `'>>>' + name + '\\n' + arguments` per call, then
`<|eot_id|>`), MeetKai's own parser (functionary/prompt_template/llama3_prompt_template_v3.py:
split on `>>>`, the recipient is the first line) and llama.cpp's test-chat cases for
COMMON_CHAT_FORMAT_FUNCTIONARY_V3_2. Functionary v3.1 (`<function=NAME>{json}</function>`) is
formats/qwen3_coder.py's `function_tag`.

Calls start at `>>>NAME` (NAME a declared tool: `>>>` alone is common in Python REPL prose), each
block one span, so an undeclared recipient among them leaves the others. A `>>>all\\n` block after
a call is the template's framing: it goes with the call, and its text stays content.

The generation prompt ends with `>>>`, so a reply's first block arrives without it: `NAME\\n{json}`
(a call, read only at the reply's start or right after a think block: the family's opener, as
llama.cpp's `function_regex_start_only` reads it, the `{` right after the newline) or `all\\ntext`
(words). With a `python` tool declared, `python\\n` and raw code (no JSON) opening the reply is
a `python` call with {"code": ...}, as llama.cpp's functionary v3.2 parser reads it (test-chat
"python raw code"); raw code after a later `>>>python` is not read. That `all\\n`, or a
`>>>all\\n` opening the reply, is the family's framing: recovery drops it from the content, as
llama.cpp's common_chat_parse_functionary_v3_2 does (`all\\n` at the start matches its
start-only regex, and the `all` recipient is content); never mid-prose, so a reply "all good"
stays as it is.
"""

from __future__ import annotations

from proxy.toolcalls.scan import Scan, skip
from proxy.toolcalls.spans import Ctx, Family, RawCall, Span

_SEP = ">>>"
_ALL = ">>>all\n"
_NAME_MAX = 256  # how far a recipient's newline is looked for
_NOT_IN_NAME = frozenset(" \t\r(){}[]<>\"',;=")
_PYTHON = "python"  # the one recipient whose opening block may be raw code, not JSON


def _recipient(s: str, at: int, limit: int) -> tuple[str, int] | None:
    """The recipient written at s[at] and the index after its newline."""
    nl = s.find("\n", at, min(limit, at + _NAME_MAX))
    if nl <= at:
        return None
    name = s[at:nl]
    if any(c in _NOT_IN_NAME for c in name):
        return None
    return name, nl + 1


def _block(s: str, start: int, ctx: Ctx, scan: Scan) -> tuple[int, RawCall] | None:
    """The call whose block starts at s[start] (at `>>>`), and where its JSON ends."""
    found = _recipient(s, start + len(_SEP), scan.limit(start))
    if found is None or found[0] == "all":
        return None
    name, i = found
    i = skip(s, i)
    if i >= len(s) or s[i] != "{":
        return None  # a recipient with no JSON object: text (raw python: the opening block only)
    return _arguments(s, name, i, ctx, scan)


def _opening(s: str, ctx: Ctx, scan: Scan) -> Span | None:
    """The reply's first block, `NAME\\n{json}` with no `>>>` (the prompt wrote it), NAME a
    declared tool and the `{` right after the newline."""
    start = skip(s, 0)
    found = _recipient(s, start, scan.limit(start))
    if found is None or found[0] not in ctx.schemas:
        return None
    if found[0] == _PYTHON and not s.startswith("{", found[1]):
        return _raw_python(s, start, found[1])
    if not s.startswith("{", found[1]):
        return None
    call = _arguments(s, found[0], found[1], ctx, scan)
    if call is None:
        return None
    return Span(start, _after(s, call[0]), [call[1]], "functionary")


def _raw_python(s: str, start: int, i: int) -> Span | None:
    """Functionary v3.2's raw-code call, `python\n<code>` opening the reply with a `python`
    tool declared: llama.cpp's functionary v3.2 parser makes it a `python` call with
    {"code": ...}. The code runs to the next block's `>>>` or the end; none is no call."""
    end = s.find(_SEP, i)
    end = len(s) if end < 0 else end
    code = s[i:end].rstrip()
    if not code.strip():
        return None
    return Span(start, _after(s, end), [(_PYTHON, {"code": code}, False)], "functionary")


def _arguments(s: str, name: str, i: int, ctx: Ctx, scan: Scan) -> tuple[int, RawCall] | None:
    """The call to `name` whose JSON object opens at s[i], and where it ends."""
    end = scan.value(i)
    if end is None:
        if not (ctx.truncated and scan.limit(i) == len(s)):
            return None
        return len(s), (name, s[i:].rstrip(), False)
    return end, (name, s[i:end], False)


def _after(s: str, end: int) -> int:
    """The span's end past a `>>>all\\n` that opens the text after a call."""
    k = skip(s, end)
    return k + len(_ALL) if s.startswith(_ALL, k) else end


def _find(s: str, ctx: Ctx) -> list[Span]:
    scan = Scan(s, _SEP, None)
    first = _opening(s, ctx, scan) if ctx.schemas else None
    spans: list[Span] = [first] if first else []
    p = s.find(_SEP, first.end if first else 0)
    while p >= 0:
        found = _block(s, p, ctx, scan)
        if found is None:
            p = s.find(_SEP, p + 1)
            continue
        end, raw = found
        spans.append(Span(p, _after(s, end), [raw], "functionary"))
        p = s.find(_SEP, end)
    return spans


FAMILY: Family = Family(
    "functionary",
    _find,
    named=(">>>NAME",),
    # `python\n` is judged at the reply's start for any tool set (the finder reads it only when
    # a `python` tool is declared): openers are templates over every declared name.
    openers=("NAME\n{", "python\n"),
    framing=(_ALL, _ALL[len(_SEP) :]),
)
