"""Request sizing: how many tokens a request is, and whether it can fit the model's window.

A request that cannot fit is refused here with OpenAI's own 400 `context_length_exceeded` shape,
before the upstream is called (BEHAVIOUR.md 5.2, 5.3). The estimate is characters over a
chars-per-token ratio; the characters are the length of the compact JSON of `messages` plus
`tools`, summed part by part rather than by serialising the request (a request with a 20 MB
base64 image must not be copied to be measured, and image and audio parts count nothing).
The ratio starts at four and is calibrated per (endpoint, model) from the `prompt_tokens` the
upstream reports.

Everything here is pure except `Calibration`, which the caller owns (one per process).
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict, deque

import orjson

from proxy import knowntools

# Parts whose payload is not text the tokenizer reads (base64 images, audio, files): they count
# nothing. Files are included although 5.2 names only images and audio: a base64 PDF counted as
# text would be refused as "too long" when the server would have taken it, and a false refusal
# is worse than a missed pre-flight (the upstream's own overflow error still reaches the client).
SKIPPED_PART_TYPES = frozenset(
    {"image_url", "image", "input_image", "input_audio", "audio", "file", "input_file"}
)

DEFAULT_CHARS_PER_TOKEN = 4.0
MIN_RATIO = 1.0
MAX_RATIO = 8.0
MIN_TRUSTED_WINDOW = 8192

# Control characters JSON writes as `\u00XX` (six bytes instead of one); the five common ones
# (\b \t \n \f \r) are two-byte escapes and counted separately with str.count, which is faster.
_LONG_ESCAPES = re.compile(r"[\x00-\x07\x0b\x0e-\x1f]")
_SHORT_ESCAPES = ('"', "\\", "\n", "\r", "\t", "\b", "\f")


def _string_len(text: str) -> int:
    """Bytes of `text` as a JSON string the way orjson writes it (UTF-8, quotes, escapes)."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    size += 2 + sum(text.count(char) for char in _SHORT_ESCAPES)
    if not text.isprintable():
        size += 5 * len(_LONG_ESCAPES.findall(text))
    return size


def _scalar_len(value: object) -> int:
    """Bytes of a JSON scalar; anything that is not JSON data counts nothing."""
    if value is None:
        return 4
    if isinstance(value, bool):
        return 4 if value else 5
    if isinstance(value, int):
        return len(str(value))
    if isinstance(value, float):
        return len(orjson.dumps(value))
    return 0


def _is_skipped_part(value: dict[object, object]) -> bool:
    kind = value.get("type")
    return isinstance(kind, str) and kind in SKIPPED_PART_TYPES


def _json_len(root: object) -> int:
    """Length of the compact JSON of `root`, walked iteratively (no recursion limit to hit)."""
    total = 0
    stack: list[object] = [root]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            total += _string_len(value)
        elif isinstance(value, dict):
            if _is_skipped_part(value):
                continue
            # braces, one colon per entry, commas between entries
            total += 2 + 2 * len(value) - 1 if value else 2
            for key, item in value.items():
                total += _string_len(key) if isinstance(key, str) else 0
                stack.append(item)
        elif isinstance(value, list | tuple):
            total += 1 + len(value) if value else 2
            stack.extend(value)
        else:
            total += _scalar_len(value)
    return total


def _part_len(part: object) -> int:
    """Bytes of one message or content part, measured alone (the walker if orjson refuses it)."""
    try:
        return len(orjson.dumps(part))
    except (TypeError, orjson.JSONEncodeError):
        # lone surrogates, non-JSON objects: count what the walker can
        return _json_len(part)


def message_chars(message: object) -> int:
    """Bytes of one message's compact JSON, its image/audio/file parts left out entirely."""
    if not isinstance(message, dict):
        return _part_len(message)
    content = message.get("content")
    if not isinstance(content, list) or not any(
        isinstance(part, dict) and _is_skipped_part(part) for part in content
    ):
        return _part_len(message)
    kept = [p for p in content if not (isinstance(p, dict) and _is_skipped_part(p))]
    rest = {key: value for key, value in message.items() if key != "content"}
    parts = sum(_part_len(part) for part in kept) + (len(kept) + 1 if kept else 2)
    # `"content":` plus the comma joining it to the other keys (if any)
    return _part_len(rest) + len('"content":') + (1 if rest else 0) + parts


def estimate_chars(messages: object, tools: object) -> int:
    """Bytes of the compact JSON of `messages` plus `tools`, image/audio/file parts left out.

    Equal to `len(orjson.dumps(messages)) + len(orjson.dumps(tools))` for requests without such
    parts (a missing `tools` counts nothing); with them, equal to the same request with those
    parts removed. Each message is measured on its own (orjson, fast and exact) so the body is
    never serialised whole and a base64 image is never copied.
    """
    total = 0
    if isinstance(messages, list):
        total += sum(message_chars(message) for message in messages) + (
            len(messages) + 1 if messages else 2
        )
    elif messages is not None:
        total += _part_len(messages)
    return total + (_tools_len(tools) if tools is not None else 0)


def _tools_len(tools: object) -> int:
    """Bytes of a tools list's compact JSON: the length of its cache key, which a list an agent
    sends every turn has stored (`knowntools`); serialising a 60 KB list again for its length
    cost more than the rest of sizing the request."""
    if type(tools) is list:
        key = knowntools.KNOWN.key_of(tools)
        if key is not None:
            return len(key)
    return _part_len(tools)


class Calibration:
    """Chars-per-token ratios learned per (endpoint, model) from reported `prompt_tokens`.

    Keeps the last four ratios within [1, 8] and uses the highest: the highest ratio gives the
    smallest estimate, and a pre-flight check must never refuse what the server would take.
    The number of keys is bounded (least recently observed forgotten first).
    """

    def __init__(self, keep: int = 4, max_keys: int = 4096) -> None:
        self._keep = keep
        self._max_keys = max_keys
        self._ratios: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()

    def observe(self, key: tuple[str, str], chars: int, prompt_tokens: int) -> None:
        """Record one request's `chars` against the `prompt_tokens` the upstream reported."""
        if chars <= 0 or prompt_tokens <= 0:
            return
        ratio = chars / prompt_tokens
        if not MIN_RATIO <= ratio <= MAX_RATIO:
            # Outside [1, 8] the report is not about this text (a silently truncated prompt, a
            # cached prefix reported as zero...): ignore it rather than clamp it.
            return
        ratios = self._ratios.pop(key, None) or deque(maxlen=self._keep)
        ratios.append(ratio)
        self._ratios[key] = ratios
        while len(self._ratios) > self._max_keys:
            self._ratios.popitem(last=False)

    def ratio(self, key: tuple[str, str]) -> float:
        """The chars-per-token ratio in use for `key` (4 until something was observed)."""
        ratios = self._ratios.get(key)
        return max(ratios) if ratios else DEFAULT_CHARS_PER_TOKEN

    def tokens(self, key: tuple[str, str], chars: int) -> int:
        """Estimated tokens for `chars` characters sent to `key` (rounded up)."""
        return math.ceil(max(chars, 0) / self.ratio(key))


def reply_ceiling(body: dict[str, object]) -> int:
    """Tokens reserved for the reply: `max_completion_tokens`, else `max_tokens`, else 0."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def preflight(
    estimate_tokens: int, ceiling: int, window: int | None, *, trust_small: bool = False
) -> str | None:
    """The refusal message when the request cannot fit, else None.

    None too when the window is unknown or under 8192 tokens: small reported windows are often
    a per-slot or default figure rather than the real limit, so they are not trusted to refuse.
    `trust_small` is for servers that do not refuse an overflow but cut the prompt silently
    (Ollama): there a known window of any size is the only guard the client has.
    """
    if window is None or estimate_tokens + ceiling <= window:
        return None
    if window < MIN_TRUSTED_WINDOW and not trust_small:
        return None
    reply = f" plus {ceiling} reserved for the reply" if ceiling else ""
    head = (
        f"latchgate did not send this request: it is about {estimate_tokens} tokens{reply}, "
        f"over this model's {window}-token context window. "
    )
    if estimate_tokens < window:
        return head + (
            f"Lower max_tokens/max_completion_tokens to at most {window - estimate_tokens}, "
            "or shorten the messages."
        )
    return head + (
        "Shorten the messages (drop or summarise older turns, trim long tool results), "
        "or use a model with a larger context window."
    )


def overflow_body(message: str) -> dict[str, dict[str, str]]:
    """OpenAI's 400 body for a request over the context window."""
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
