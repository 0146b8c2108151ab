"""Capability negotiation: read an upstream's refusal, and build bodies the upstream accepts.

Model servers refuse parts of OpenAI requests in dozens of wordings (`max_tokens` instead of
`max_completion_tokens`, a temperature, an effort value, `stream_options`, an unknown field...).
`classify` turns one refusal into a `Refusal` saying what to latch (BEHAVIOUR 2.3, rules 1-9 in
order), or None for everything that must be returned to the client instead; `build_body` turns the
client's body plus the current latches into the upstream body (BEHAVIOUR 2.6). Both are pure: the
store lives in `proxy.state.latches`, and notices are returned, not recorded. `classify` reads
the error as `upstream_errors` parsed it, once, for every decision about that answer.

Recognition is by wording, not by status: llama.cpp sends several refusals as HTTP 500 and Mistral
as 422. Field names are extracted generically ("a name quoted or listed next to words of refusal")
and then checked against the body that was actually sent, so an unseen server's wording still
works and a name that was never sent is never latched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from proxy.agent.emulation import emulate
from proxy.agent.structured import ask_in_words
from proxy.agent.upstream_errors import UpstreamError
from proxy.state.latches import LADDER, EndpointLatches, ModelLatches, Refusal

DEFAULT_DROPPABLE: frozenset[str] = frozenset(
    {
        # server-specific sampling and runtime extensions
        "min_p", "top_k", "top_a", "typical_p", "tfs_z", "repeat_penalty", "repetition_penalty",
        "mirostat*", "dry_*", "xtc_*", "min_tokens", "ignore_eos", "n_probs", "samplers",
        "id_slot", "cache_prompt", "chat_template_kwargs", "reasoning_budget",
        "reasoning_format", "options", "keep_alive", "think", "num_ctx",
        # metadata a server need not honour
        "user", "metadata", "store", "service_tier", "prompt_cache_key", "seed",
        "parallel_tool_calls", "logit_bias", "logprobs", "top_logprobs", "presence_penalty",
        "frequency_penalty",
    }
)  # fmt: skip

# Never droppable whatever the configuration says (BEHAVIOUR 2.5): other rules own them.
NEVER_DROPPABLE = frozenset(
    {"model", "messages", "stream", "tools", "tool_choice", "response_format", "n", "stop"}
)


def is_droppable(name: str, droppable: frozenset[str]) -> bool:
    """Whether a top-level field may be removed; entries ending in `*` are prefixes."""
    if name in NEVER_DROPPABLE:
        return False
    if name in droppable:
        return True
    return any(entry.endswith("*") and name.startswith(entry[:-1]) for entry in droppable)


# --------------------------------------------------------------------------------------------
# The refusal's notice

# `Refusal` itself lives with the store (`proxy.state.latches`), which defines what can be
# learned; `classify` below builds it. Its wording stays here, as a function rather than a
# method of it: the sentence says what `build_body` sends differently from now on, it shares
# `_field_notice` with build_body's own notices, and the store would otherwise hold (or import
# from above it) the wording of negotiation.


def refusal_notice(refusal: Refusal, model: str, upstream: str) -> str:
    """One plain sentence naming the model or server and what changes from now on."""
    server = upstream or "the upstream"
    who = f"Model {model} on {server}"
    if refusal.capability == "strict_schemas":
        return (
            f"{server} could not build a grammar from a JSON schema, so tool and response "
            "schemas are now sent to it relaxed (without pattern and format)."
        )
    if refusal.capability == "usage_in_stream":
        return (
            f"{server} refused stream_options, so latchgate no longer sends it and streams "
            "from this server carry no usage report."
        )
    if refusal.capability == "effort_value":
        return _effort_notice(refusal, who)
    if refusal.capability == "refused_field":
        return _field_notice(model, upstream, refusal.fields, learned=True)
    return f"{who} {_NOTICES.get(refusal.capability, 'refused part of the request.')}"


def _effort_notice(refusal: Refusal, who: str) -> str:
    if refusal.effort_with_tools:
        return (
            f"{who} refuses function tools together with its reasoning effort, so "
            f"reasoning_effort '{refusal.effort_with_tools}' is sent whenever tools are present."
        )
    return (
        f"{who} refused reasoning_effort '{refusal.refused_effort}', so "
        f"'{refusal.next_effort}' is sent instead."
    )


_NOTICES = {
    "reasoning_effort": "takes no reasoning_effort, so latchgate no longer sends it.",
    "legacy_token_limit": (
        "refused max_tokens, so the reply ceiling is now sent as max_completion_tokens."
    ),
    "chosen_temperature": "accepts only its default temperature, so temperature is not sent.",
    "structured_output": (
        "refused response_format, so JSON output is now asked for in the system prompt."
    ),
    "native_tools": "refused native tool calling, so tools are now described in the prompt.",
}


class Notice(str):
    """A notice sentence that knows which latch it is about (`topic`: a capability, or
    `refused_field:` and the field names), so a request that has just learned that latch, and
    says so in the refusal's own notice, does not say it twice. Compares as the plain string."""

    topic: str

    def __new__(cls, text: str, topic: str) -> Notice:
        made = super().__new__(cls, text)
        made.topic = topic
        return made


def field_topic(fields: Iterable[str]) -> str:
    return "refused_field:" + ",".join(sorted(fields))


def _field_notice(model: str, upstream: str, fields: Iterable[str], *, learned: bool) -> str:
    names = list(fields)
    them = "it" if len(names) == 1 else "them"
    action = "no longer sends" if learned else "removed"
    return (
        f"Model {model} on {upstream or 'the upstream'} refused {', '.join(names)}, so "
        f"latchgate {action} {them}."
    )


# --------------------------------------------------------------------------------------------
# Field names in refusal position

_NAME = r"[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_]+|\[\d+\])*"
_Q = "['\"`]"
_ITEM = re.compile(rf"\s*(?:(?P<q>{_Q})(?P<qn>{_NAME})(?P=q)|(?P<bn>{_NAME}))")
_SEP = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+)")

# Words of refusal followed by a list of names.
_HEADS = re.compile(
    r"(?:\bextra inputs are not permitted,?\s*(?:field|param(?:eter)?)s?"
    r"|\b(?:unrecogni[sz]ed|unknown|unsupported|unexpected|incompatible|disallowed|extra|"
    r"forbidden)\s+(?:request\s+)?(?:parameter|param|argument|field|name|key|property|input)s?"
    r"(?:\(s\))?(?:\s*\([^)]{0,80}\))?(?:\s+supplied)?"
    r"|\b(?:does not|doesn't|do not|cannot) support (?:the )?(?:following )?"
    r"(?:parameter|param|field|argument)s?"
    # xAI: `Argument not supported on this model: presencePenalty`
    r"|\b(?:parameter|param|argument|field)s?\s+(?:is\s+|are\s+)?not supported"
    r"(?:\s+(?:on|by|for|with)\s+(?:this|the)\s+model)?)"
    r"(?P<colon>\s*[:=])?",
    re.IGNORECASE,
)
# xAI: `Model grok-4.20-0309-reasoning does not support parameter stop.` One bare name, then
# the sentence ends: unlike a list after a colon, nothing else can follow it.
_ONE_BARE = re.compile(
    rf"\b(?:does not|doesn't) support (?:the )?(?:parameter|param|argument|field)\s+"
    rf"(?P<n>{_NAME})(?=\s*(?:[.,;!]|$))",
    re.IGNORECASE,
)
# `temperature: this parameter is not supported for this model`: the name, a colon, and the
# refusal words, at the start of a line.
_PREFIXED = re.compile(
    rf"(?:^|\n)\s*{_Q}?(?P<n>{_NAME}){_Q}?\s*:\s*(?:this\s+)?(?:parameter|param|field|argument)"
    r"\s+(?:is\s+)?(?:not supported|unsupported|not allowed|not permitted|deprecated)",
    re.IGNORECASE,
)
# A quoted name followed by words of refusal.
_POSTFIX = re.compile(
    # `The 'prompt' parameter is not supported for this model` (OpenAI realtime) names the
    # kind of thing between the name and the verb.
    rf"{_Q}(?P<n>{_NAME}){_Q}\s+(?:(?:parameter|param|field|argument)\s+)?(?:is|are)\s+"
    r"(?:not\s+(?:supported|allowed|permitted|"
    r"recogni[sz]ed|a valid (?:parameter|field|argument))|unsupported|unknown|unrecogni[sz]ed|"
    r"deprecated|forbidden)",
    re.IGNORECASE,
)
# pydantic: {'type': 'extra_forbidden', 'loc': ('body', 'name', ...), ...}
_LOC = re.compile(rf"{_Q}?loc{_Q}?\s*[:=]\s*[\[(]\s*{_Q}body{_Q}\s*,\s*{_Q}?(?P<n>{_NAME}){_Q}?")
# pydantic's text form: "1 validation error ...\nname.path\n  Extra inputs are not permitted"
_PYDANTIC_TEXT = re.compile(
    rf"^\s*(?P<n>{_NAME})\s*\n\s*extra inputs are not permitted", re.I | re.M
)


def refused_names(text: str) -> tuple[str, ...]:
    """Names that appear in refusal position in an error text, in order, without repeats.

    Forms: a head of refusal words with a list after it (`Unrecognized request arguments
    supplied: a, b`, `Unknown parameter: 'a'`, `Unknown name "a"`, `Unsupported param: a`,
    `does not support parameters: ['a']`, `Extra inputs are not permitted, field: 'a'`,
    `Argument not supported on this model: a`), a quoted name followed by refusal words (`'a' is
    not supported`, `The 'a' parameter is not supported`), one bare name closing a sentence
    (`does not support parameter a.`), `a: this parameter is not supported`, and pydantic
    `extra_forbidden` with its `loc`. Dotted names (`chat_template_kwargs.enable_thinking`) are
    kept whole here.
    """
    found: list[str] = []
    for head in _HEADS.finditer(text):
        found += _list_after(text, head.end(), quoted_only=head.group("colon") is None)
    found += [m.group("n") for m in _POSTFIX.finditer(text)]
    found += [m.group("n") for m in _ONE_BARE.finditer(text)]
    found += [m.group("n") for m in _PREFIXED.finditer(text)]
    found += [m.group("n") for m in _LOC.finditer(text) if _is_extra(text, m.start(), m.end())]
    found += [m.group("n") for m in _PYDANTIC_TEXT.finditer(text)]
    return tuple(dict.fromkeys(found))


def _list_after(text: str, pos: int, *, quoted_only: bool) -> list[str]:
    """Parse `a, 'b' and "c"` (optionally in brackets) starting at `pos`."""
    names: list[str] = []
    bracket = re.compile(r"\s*\[").match(text, pos)
    if bracket:
        pos = bracket.end()
    while True:
        item = _ITEM.match(text, pos)
        if item is None or (quoted_only and item.group("qn") is None):
            return names
        names.append(item.group("qn") or item.group("bn"))
        sep = _SEP.match(text, item.end())
        if sep is None:
            return names
        pos = sep.end()


def _is_extra(text: str, start: int, end: int) -> bool:
    """Whether the pydantic error item around a `loc` is an extra/forbidden-field error."""
    left = text.rfind("{", 0, start)
    right = text.find("}", end)
    item = text[max(left, 0) : right if right >= 0 else len(text)].lower()
    return "extra_forbidden" in item or "extra inputs are not permitted" in item


def _top(name: str) -> str:
    return re.split(r"[.\[]", name, maxsplit=1)[0]


def _spelling(name: str) -> str:
    """A name without case, `_` or `-`: servers written in Go or TypeScript name `presence_penalty`
    as `presencePenalty` (xAI) or `PresencePenalty`."""
    return name.lower().replace("_", "").replace("-", "")


def _sent_names(names: Iterable[str], sent: dict[str, Any]) -> list[str]:
    """Top-level names of `names` that are keys of `sent` (exact, else however spelt)."""
    spelt = {_spelling(key): key for key in sent}
    out: list[str] = []
    for name in names:
        top = _top(name)
        key = top if top in sent else spelt.get(_spelling(top))
        if key is not None and key not in out:
            out.append(key)
    return out


# --------------------------------------------------------------------------------------------
# The rules


def _has(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


_NEVER = (
    r"maximum context length|context (?:length|size)|context[ _]window|too many tokens|"
    r"prompt is too long|maximum number of tokens|n_ctx|input tokens exceed|token limit|"
    r"tokens per min|request too large|rate[ _-]?limit|quota|overloaded|"
    r"exceed(?:s|ed)? the (?:available|maximum)"
)
_GRAMMAR = (
    r"pars(?:e|ing) (?:the )?grammar|grammar pars|invalid grammar|build (?:a )?grammar|"
    r"json[ -]schema conversion|unrecogni[sz]ed schema|schema to grammar|unsupported ref\b|"
    r"error resolving ref|"
    # llama.cpp's newer converter: `JSON schema error at #/...: unsupported $ref ...`,
    # `cannot resolve $ref`, `unrecognized type foo`, `enum must be a non-empty array`.
    r"json schema error at #|unsupported \$ref\b|cannot resolve \$ref"
)
_VALUE_WORDS = (
    r"unsupported value|invalid (?:reasoning(?:[ _]effort)? )?value|supported values|"
    r"input should be|must be one of|does not support ['\"`]|valid values|allowed values|"
    r"expected one of|invalid reasoning[ _]effort:"
)
_TOOLS = (
    r"does not support tools|tools? param requires --jinja|tool_choice param requires --jinja|"
    r"--jinja mode required for tool|tool choice requires --enable-auto-tool-choice|"
    r"does not support function calling|no endpoints found that support tool use|"
    r"no endpoints found that support the provided 'tool_choice'|"
    r"(?:tool calling|tool use|function calling|tools) (?:is|are) not supported|"
    r"only named tools are supported"
)
_TOOL_SCHEMA = (
    r"invalid schema for function|maximum number of items|function\.parameters|"
    r"function_declarations|invalid_function_parameters"
)
_TOOL_FIELDS = {"tools", "tool_choice", "functions", "function_call"}


def classify(
    error: UpstreamError,
    sent: dict[str, Any],
    *,
    droppable: frozenset[str] = DEFAULT_DROPPABLE,
    known: ModelLatches | None = None,
) -> Refusal | None:
    """What to latch for this upstream error, or None when it must go back to the client.

    Rules 1-9 of BEHAVIOUR 2.3 in order, first match wins. `sent` is the body that was sent
    upstream: a latch must change the next body, so a rule only answers when the thing it
    latches was actually sent. `known`, the model's current latches, lets the effort ladder skip
    values already refused and spot a refusal that teaches nothing new. The rules read
    `error.text`, every piece of text the error carries (BEHAVIOUR 2.2).
    """
    status = error.status
    if status in (401, 403, 407, 429, 529):
        return None
    original = error.text
    text = original.lower()
    if status == 404:  # model not found; only OpenRouter's tool-routing 404 is a refusal
        return _tools_rule(text, refused_names(original), sent)
    if _has(_NEVER, text):
        return None
    names = refused_names(original)
    for rule in (_grammar_rule, _stream_options_rule):
        found = rule(text, names, sent)
        if found is not None:
            return found
    effort = _effort_rules(text, names, sent, known)
    if effort is not None:
        return effort
    for rule in (_token_limit_rule, _temperature_rule, _response_format_rule):
        found = rule(text, names, sent)
        if found is not None:
            return found
    return _fields_rule(names, sent, droppable) or _tools_rule(text, names, sent)


def _grammar_rule(text: str, names: tuple[str, ...], sent: dict[str, Any]) -> Refusal | None:
    # Relaxing only changes a body that carries a schema: a failing grammar the client wrote
    # itself (llama.cpp's `grammar` field) is its own error, and must not latch the endpoint.
    if not _carries_schema(sent):
        return None
    if _has(_GRAMMAR, text) and "no user query found" not in text:
        return Refusal("strict_schemas")
    return None


def _carries_schema(sent: dict[str, Any]) -> bool:
    rf = sent.get("response_format")
    structured = isinstance(rf, dict) and rf.get("type") == "json_schema"
    return bool(sent.get("tools") or sent.get("functions") or structured)


def _stream_options_rule(text: str, names: tuple[str, ...], sent: dict[str, Any]) -> Refusal | None:
    # `include_usage` is the only key latchgate puts in stream_options: a server naming just that
    # (`Unknown field include_usage`) refuses the same thing.
    if "stream_options" in sent and _has(r"stream[_ ]?options|include_?usage", text):
        return Refusal("usage_in_stream")
    return None


# Both ceilings however spelt: `max_completion_tokens`, Lightning AI's `MaxCompletionTokens`
# (the text is lowercased before it gets here).
_NEW_CEILING = r"max_?completion_?tokens"
_OLD_CEILING = r"max_?tokens"


def _token_limit_rule(text: str, names: tuple[str, ...], sent: dict[str, Any]) -> Refusal | None:
    if "max_tokens" not in sent or not _has(_NEW_CEILING, text):
        return None
    if _has(r"too large|must be|at most|maximum value|at the same time|valid range", text):
        return None
    q = "['\"`]?"
    instead = (
        rf"(?:use|using|switch to|in favou?r of|replaced by|superseded by){q}\s*{q}{_NEW_CEILING}"
        rf"|{_NEW_CEILING}{q} instead|instead of {q}{_OLD_CEILING}\b"
    )
    if "max_tokens" in _sent_names(names, sent) or _has(instead, text):
        return Refusal("legacy_token_limit")
    return None


# "Only this value is allowed", the ways servers say it (tests/refusal_cases.py, section 2):
# OpenAI `Only the default (1) value is supported`, `non-default values are not supported`,
# Moonshot `invalid temperature: only 0.6 is allowed`, LiteLLM/Bedrock `Only temperature=1 is
# supported`, Anthropic `may only be set to 1 when thinking is enabled`, and the plain `must be
# 1`, `only supports 1.0`, `fixed at 1.0`. Whatever the value, sending none lets the server use
# the one it wants.
_NUM = r"[-+]?\d+(?:\.\d+)?"
_OPEN = r"['\"`(]?"
_ONE_VALUE = re.compile(
    r"only (?:the )?default\b|\bnon-default\b"
    rf"|\bonly\s+(?:(?:supports?|accepts?|allows?)\s+)?(?:temperature\s*(?:=|:|of)?\s*)?{_OPEN}{_NUM}"
    rf"|\b(?:may|can) only be (?:set to |equal to )?{_OPEN}{_NUM}"
    rf"|\bmust (?:be|equal)\s+(?:equal to\s+|exactly\s+|set to\s+)?{_OPEN}{_NUM}"
    rf"|\bfixed (?:at|to)\s+{_OPEN}{_NUM}"
)
# A number that starts a range (`only 0 to 2`, `must be 0 or 1`) is not the one value allowed.
_RANGE_GOES_ON = re.compile(r"['\"`)]?\s*(?:-|–|\.\.|to\b|and\b|or\b)")
# A range error names its bounds: the client's value is wrong, not the field.
_RANGE = (
    r"between|\brange\b|at most|at least|less than|greater than|more than|within|"
    r"non-negative|\bpositive|maximum|minimum|[<>]=?|\[\s*[-+]?\d|\(\s*[-+]?\d+(?:\.\d+)?\s*,"
)
# Fields a value phrase can be about (see _subject): `top_p must be 1 when temperature is set` is
# about top_p, and must not drop temperature.
_SAMPLING_FIELD = re.compile(
    r"temperature|top_[pka]|min_p|typical_p|\w+_penalty|max(?:_completion)?_tokens|seed|"
    r"reasoning_effort|(?:top_)?logprobs"
)


def _temperature_rule(text: str, names: tuple[str, ...], sent: dict[str, Any]) -> Refusal | None:
    if "temperature" not in sent or "temperature" not in text:
        return None
    if _has(_RANGE, text):
        return None
    if _only_one_temperature(text) or "temperature" in _sent_names(names, sent):
        return Refusal("chosen_temperature")
    return None


def _only_one_temperature(text: str) -> bool:
    """Whether the text says temperature takes one value only (see _ONE_VALUE)."""
    for match in _ONE_VALUE.finditer(text):
        if _RANGE_GOES_ON.match(text, match.end()):
            continue
        if "temperature" in match.group(0) or _subject(text, match) == "temperature":
            return True
    return False


_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")
_OBJECT = re.compile(rf"\s*(?:\(\S+\)\s*)?values?\s+(?:of|for)\s+{_Q}?({_SAMPLING_FIELD.pattern})")


def _subject(text: str, match: re.Match[str]) -> str | None:
    """The field a phrase is about: the one it names as its object (`Only the default value of
    temperature is supported`), else the last one named before it in its sentence, else the last
    one named before that (`'temperature' does not support 0. Only the default (1) value is
    supported when reasoning_effort is not 'none'.`). A field named later in the sentence is a
    condition, not the subject. Error texts are short and this runs on errors only."""
    named = _OBJECT.match(text, match.end())
    if named:
        return named.group(1)
    start = max((m.end() for m in _SENTENCE_END.finditer(text, 0, match.start())), default=0)
    before = _SAMPLING_FIELD.findall(text, start, match.start())
    earlier = before or _SAMPLING_FIELD.findall(text, 0, start)
    return str(earlier[-1]) if earlier else None


def _response_format_rule(
    text: str, names: tuple[str, ...], sent: dict[str, Any]
) -> Refusal | None:
    # Groq writes it in words: `This model does not support response format `json_schema``.
    if "response_format" not in sent or not _has(r"response[_ ]format", text):
        return None
    if not _wants_json(sent["response_format"]):
        return None  # the latch only changes JSON requests: anything else is the client's
    if _has(r"invalid schema|invalid_json_schema|must contain the word|and grammar", text):
        return None
    if re.search(r"response_format(?:\.|\[)(?!type\b)\w", text, re.IGNORECASE):
        # A part of it named (`response_format.schema`): the client's mistake. Its `type`
        # named (`response_format.type json_schema is unavailable`) is the server refusing.
        return None
    refused = (
        r"not supported|unsupported|unavailable|must be one of|not valid|not permitted|"
        r"not allowed|unknown|unrecogni[sz]ed|does not support|doesn't support|not available"
    )
    if _has(refused, text) or "response_format" in _sent_names(names, sent):
        return Refusal("structured_output")
    return None


def _fields_rule(
    names: tuple[str, ...], sent: dict[str, Any], droppable: frozenset[str]
) -> Refusal | None:
    fields = tuple(n for n in _sent_names(names, sent) if is_droppable(n, droppable))
    return Refusal("refused_field", fields=fields) if fields else None


def _tools_rule(text: str, names: tuple[str, ...], sent: dict[str, Any]) -> Refusal | None:
    if not (sent.get("tools") or sent.get("functions")) or _has(_TOOL_SCHEMA, text):
        return None
    if _has(_TOOLS, text) or _TOOL_FIELDS & set(_sent_names(names, sent)):
        return Refusal("native_tools")
    return None


# --------------------------------------------------------------------------------------------
# Reasoning effort (rules 3 and 4, and the gpt-5.4 tools case)

_WITH_TOOLS = r"function tools with reasoning[_ ]effort|tools with reasoning[_ ]effort"
_REFUSED_VALUE = (
    re.compile(r"reasoning[_ ]effort['\"`]?\s+does not support\s+['\"`]?([\w-]+)"),
    re.compile(r"invalid reasoning(?:[_ ]effort)? value:?\s*['\"`]?([\w-]+)"),
    re.compile(r"reasoning[_ ]effort\s*=\s*['\"`]?([\w-]+)['\"`]?\s+is\s+(?:only|not)\s+supported"),
    # Gemini: `Invalid reasoning_effort: minimal.`
    re.compile(r"invalid reasoning[_ ]effort:\s*['\"`]?([\w-]+)"),
    # xAI: `does not support `reasoning_effort` value `none``
    re.compile(r"reasoning[_ ]effort['\"`]?\s+value\s+['\"`]?([\w-]+)"),
    # Gemini: `Thinking level MINIMAL is not supported for this model.`
    re.compile(r"thinking level\s+(?!is\b)['\"`]?([\w-]+)['\"`]?\s+is not supported"),
)
# A model that reasons always refuses to be told not to: the value refused is `none`, named or
# not (OpenRouter: `Reasoning is mandatory for this endpoint and cannot be disabled.`).
_NO_OFF = r"reasoning is (?:mandatory|required|always on)|cannot be disabled|can't be disabled"
# The field itself refused in other words than its name: Ollama `"m" does not support thinking`,
# Gemini `Thinking level is not supported for this model.`
_NO_THINKING = (
    r"does not support thinking|thinking level is not supported|thinking is not supported"
)
_LIST_HEAD = re.compile(
    r"supported values are:?|must be(?: one of)?:?|expected one of:?|"
    r"input should be:?|(?:valid|allowed|accepted) values(?: are)?:?"
)
_LIST_END = re.compile(r"\.(?:\s|$)|\)|\n")
_QUOTED = re.compile(r"['\"`]([\w-]+)['\"`]")


def _effort_rules(
    text: str, names: tuple[str, ...], sent: dict[str, Any], known: ModelLatches | None
) -> Refusal | None:
    if _has(_WITH_TOOLS, text) and (sent.get("tools") or sent.get("functions")):
        return _with_tools(text, sent)
    if _has(_NO_THINKING, text):
        return _thinking(sent)
    if "reasoning_effort" not in sent:
        return None
    value = _refused_value(text, sent)
    if value is None and sent["reasoning_effort"] == "none" and _has(_NO_OFF, text):
        value = "none"
    if value is not None:
        return _step_up(value, _published(text), known)
    if "reasoning_effort" in _sent_names(names, sent) and not _has(_VALUE_WORDS, text):
        return Refusal("reasoning_effort")
    return None


def _with_tools(text: str, sent: dict[str, Any]) -> Refusal | None:
    """gpt-5.4 and later: tools + effort refused even with no effort sent; send the fix named."""
    named = re.search(r"reasoning[_ ]effort to ['\"`]?([\w-]+)", text)
    value = named.group(1) if named else "none"
    if sent.get("reasoning_effort") == value:
        return None  # already sent what the server asked for: nothing new to learn
    return Refusal("effort_value", effort_with_tools=value)


def _thinking(sent: dict[str, Any]) -> Refusal | None:
    """Ollama: `"model" does not support thinking`; `think` and `reasoning_effort` both ask."""
    if "think" in sent:
        return Refusal("refused_field", fields=("think",))
    if "reasoning_effort" in sent:
        return Refusal("reasoning_effort")
    return None


def _refused_value(text: str, sent: dict[str, Any]) -> str | None:
    for pattern in _REFUSED_VALUE:
        match = pattern.search(text)
        if match:
            return match.group(1)
    value = sent.get("reasoning_effort")
    if (
        isinstance(value, str)
        and "reasoning_effort" in text
        and _has(_VALUE_WORDS, text)
        # The value sent must itself be named (quoted), or be missing from a list of allowed
        # values the refusal publishes: a refusal of another field that only mentions
        # reasoning_effort in passing must not move the effort.
        and (
            re.search(rf"['\"`]{re.escape(value.lower())}['\"`]", text)
            or value.lower() not in (_published(text) or (value.lower(),))
        )
    ):
        return value.lower()
    return None


def _published(text: str) -> tuple[str, ...] | None:
    """The ladder values of a list the refusal publishes, in the refusal's order."""
    head = _LIST_HEAD.search(text)
    if head is None:
        return None
    end = _LIST_END.search(text, head.end())
    span = text[head.end() : end.start() if end else len(text)]
    # Values are quoted by most servers; Gemini (`Valid values are: high, low, medium, none`)
    # and Groq (`must be one of none or default`) list bare words.
    listed = _QUOTED.findall(span) or re.findall(r"[\w-]+", span)
    values = tuple(dict.fromkeys(v for v in listed if v in LADDER))
    return values or None


def _step_up(
    refused: str, published: tuple[str, ...] | None, known: ModelLatches | None
) -> Refusal | None:
    """BEHAVIOUR 2.4: the cheapest value strictly above the refused one, never stepping down."""
    if refused not in LADDER:
        return None
    already = known.refused_efforts if known else set()
    held = tuple(known.supported_efforts) if known and known.supported_efforts else None
    if refused in already and published in (None, held):
        return None  # the same refusal again, with nothing new
    options = published or held or LADDER
    nxt = next_effort(refused, options, already | {refused})
    if nxt is None:
        return None
    return Refusal(
        "effort_value", refused_effort=refused, next_effort=nxt, supported_efforts=published
    )


def next_effort(value: str, options: Iterable[str], refused: set[str]) -> str | None:
    """The cheapest ladder value in `options` strictly above `value` and not refused."""
    rank = LADDER.index(value)
    above = [v for v in options if v in LADDER and LADDER.index(v) > rank and v not in refused]
    return min(above, key=LADDER.index, default=None)


# --------------------------------------------------------------------------------------------
# Building the upstream body


@dataclass
class BuiltBody:
    """The upstream body and what was changed to get it."""

    body: dict[str, Any]
    changed: bool
    dropped: tuple[str, ...] = ()
    structured_in_words: bool = False
    notices: list[Notice] = field(default_factory=list)
    tools_emulated: bool = False  # tools went into the prompt (native_tools latched off)


def client_wants_usage(client: dict[str, Any]) -> bool:
    """Whether the client itself asked for a usage chunk on its stream."""
    options = client.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def build_body(
    client: dict[str, Any],
    endpoint: EndpointLatches,
    model: ModelLatches,
    *,
    droppable: frozenset[str] = DEFAULT_DROPPABLE,
    sanitise: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> BuiltBody:
    """The upstream body for a client body under the current latches (BEHAVIOUR 2.6).

    Never mutates `client`; when nothing changes, returns `client` itself with changed=False so
    the caller can forward the original bytes. Keys keep the client's order. Schemas are not
    touched here (the schemas module runs after this); `sanitise`, when given, is applied only
    to a schema being moved into the system prompt (section 9).
    """
    name = str(client.get("model", ""))
    notices: list[Notice] = []
    if model.permissive():
        # Nothing latched for the model: of the steps below only two can change the body, the
        # ceiling (when max_completion_tokens is sent) and stream_options (an endpoint matter).
        # tests/unit/agent/test_build_body.py checks this shortcut against the full walk.
        body = (
            _ceiling(client, model, name, notices) if "max_completion_tokens" in client else client
        )
        body = _stream_options(body, endpoint, notices)
        return BuiltBody(body, body is not client, (), False, notices)
    return _build_full(client, endpoint, model, name, notices, droppable, sanitise)


def _build_full(
    client: dict[str, Any],
    endpoint: EndpointLatches,
    model: ModelLatches,
    name: str,
    notices: list[Notice],
    droppable: frozenset[str],
    sanitise: Callable[[dict[str, Any]], dict[str, Any]] | None,
) -> BuiltBody:
    body = _ceiling(client, model, name, notices)
    body = _temperature(body, model, name, notices)
    body = _effort(body, model, name, notices)
    body = _stream_options(body, endpoint, notices)
    dropped = tuple(k for k in body if k in model.refused_fields and is_droppable(k, droppable))
    if dropped:
        body = {k: v for k, v in body.items() if k not in dropped}
        text = _field_notice(name, endpoint.upstream, dropped, learned=False)
        notices.append(Notice(text, field_topic(dropped)))
    emulated = not model.native_tools and bool(body.get("tools") or body.get("functions"))
    if emulated:
        body = emulate(body)
        notices.append(
            Notice(
                f"Model {name} takes no native tools, so latchgate described them in the system "
                "prompt and recovers the calls from the reply.",
                "native_tools",
            )
        )
    in_words = not model.structured_output and _wants_json(body.get("response_format"))
    if in_words:
        body = ask_in_words(body, sanitise)
        notices.append(
            Notice(
                f"Model {name} takes no response_format, so latchgate asked for JSON in the system "
                "prompt and will extract it from the reply.",
                "structured_output",
            )
        )
    return BuiltBody(body, body is not client, dropped, in_words, notices, emulated)


def _replace(body: dict[str, Any], key: str, new_key: str, value: Any) -> dict[str, Any]:
    """A copy of `body` with `key` replaced by `new_key: value` at the same position."""
    return {(new_key if k == key else k): (value if k == key else v) for k, v in body.items()}


def _without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def _ceiling(
    body: dict[str, Any], model: ModelLatches, name: str, notices: list[Notice]
) -> dict[str, Any]:
    """The client's ceiling, under the one name this model takes."""
    target = "max_tokens" if model.legacy_token_limit else "max_completion_tokens"
    other = "max_completion_tokens" if target == "max_tokens" else "max_tokens"
    if other not in body:
        return body
    if target in body:
        # Both sent: keep the newer field's value, at the place of the first of the two.
        return _one_ceiling(body, target, other, body["max_completion_tokens"])
    if not model.legacy_token_limit:
        notices.append(
            Notice(
                f"Model {name} refuses max_tokens, so the reply ceiling was sent as "
                "max_completion_tokens.",
                "legacy_token_limit",
            )
        )
    # The ceiling goes out as max_tokens by default (the package's choice), which every server
    # knows; a model that refuses it latches legacy_token_limit once and is sent the new name.
    return _replace(body, other, target, body[other])


def _one_ceiling(body: dict[str, Any], target: str, other: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in body.items():
        if key in (target, other):
            out.setdefault(target, value)
        else:
            out[key] = item
    return out


def _temperature(
    body: dict[str, Any], model: ModelLatches, name: str, notices: list[Notice]
) -> dict[str, Any]:
    if model.chosen_temperature or "temperature" not in body:
        return body
    notices.append(
        Notice(
            f"Model {name} accepts only its default temperature, so none was sent.",
            "chosen_temperature",
        )
    )
    return _without(body, "temperature")


def _effort(
    body: dict[str, Any], model: ModelLatches, name: str, notices: list[Notice]
) -> dict[str, Any]:
    asked = body.get("reasoning_effort")
    if model.effort_with_tools and (body.get("tools") or body.get("functions")):
        if asked == model.effort_with_tools:
            return body
        notices.append(
            Notice(
                f"Model {name} refuses function tools with a reasoning effort, so reasoning_effort "
                f"'{model.effort_with_tools}' was sent.",
                "effort_value",
            )
        )
        if "reasoning_effort" in body:
            return _replace(body, "reasoning_effort", "reasoning_effort", model.effort_with_tools)
        return {**body, "reasoning_effort": model.effort_with_tools}
    if "reasoning_effort" not in body:
        return body
    if not model.reasoning_effort:
        notices.append(
            Notice(f"Model {name} takes no reasoning_effort, so none was sent.", "reasoning_effort")
        )
        return _without(body, "reasoning_effort")
    value = _effort_to_send(asked, model)
    if value == asked:
        return body
    notices.append(
        Notice(
            f"Model {name} refuses reasoning_effort '{asked}', so '{value}' was sent instead.",
            "effort_value",
        )
    )
    return _replace(body, "reasoning_effort", "reasoning_effort", value)


def _effort_to_send(asked: object, model: ModelLatches) -> object:
    """The client's effort, or the next rung up when this model refuses it (never down)."""
    if not isinstance(asked, str) or asked not in LADDER:
        return asked  # off the ladder (xhigh, ...): sent as asked
    supported = model.supported_efforts
    refused = set(model.refused_efforts)
    if supported is not None:
        refused |= {v for v in LADDER if v not in supported}
    if asked not in refused:
        return asked
    nxt = next_effort(asked, supported if supported is not None else LADDER, refused)
    return asked if nxt is None else nxt


def _stream_options(
    body: dict[str, Any], endpoint: EndpointLatches, notices: list[Notice]
) -> dict[str, Any]:
    options = body.get("stream_options")
    if body.get("stream") is not True:
        # stream_options on a non-streaming request is refused by OpenAI and vLLM and means
        # nothing anyway; removing it quietly avoids latching usage_in_stream off for a server
        # that handles it fine on streams.
        return body if options is None else _without(body, "stream_options")
    if not endpoint.usage_in_stream:
        if options is None:
            return body
        notices.append(
            Notice(
                f"{endpoint.upstream or 'The upstream'} refuses stream_options, so it was removed "
                "and the stream carries no usage report.",
                "usage_in_stream",
            )
        )
        return _without(body, "stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return body
    kept = options if isinstance(options, dict) else {}
    wanted = {**kept, "include_usage": True}
    if "stream_options" in body:
        return _replace(body, "stream_options", "stream_options", wanted)
    return {**body, "stream_options": wanted}


def _wants_json(response_format: object) -> bool:
    return isinstance(response_format, dict) and response_format.get("type") in (
        "json_schema",
        "json_object",
    )
