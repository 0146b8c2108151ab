"""A reply with no call still loses the end-of-turn tokens a server left at its end, and a
closing tag whose opening tag is nowhere in it (issue 18; BEHAVIOUR.md 4.1): they are the
template's, not the model's words. Only at the end, only after the think block, and only with
tools declared (the path that reads replies for calls); whole and streamed alike, the finish
reason unchanged."""

from __future__ import annotations

import pytest

from proxy.toolcalls.recovery import recover
from tests.unit.toolcalls.test_stream import client_view, run, split_random
from tests.unit.toolcalls.whole_reply import TOOLS
from tests.unit.toolcalls.whole_reply import run as whole

TRIMMED = [
    ("Paris is sunny.<|eot_id|>", "Paris is sunny."),
    ("Paris is sunny.\n<|im_end|>\n", "Paris is sunny."),
    ("Done.<|eom_id|><|eot_id|>", "Done."),
    ("Hi</s></s>", "Hi"),
    ("It is 21 degrees.<end_of_turn>", "It is 21 degrees."),
    ("Sunny.<｜end▁of▁sentence｜>", "Sunny."),
    ("Sunny.<|end|><|return|>", "Sunny."),
    ("<|START_RESPONSE|>Sunny.<|END_RESPONSE|><|END_OF_TURN_TOKEN|>",
     "<|START_RESPONSE|>Sunny.<|END_RESPONSE|>"),
    # Stray closing tags: a server took the call and its opening tag, and left these.
    ("Done.</tool_call>", "Done."),
    ("Done.\n</tool_call>\n<|im_end|>", "Done."),
    ("All set.<|tool_call_end|><|im_end|>", "All set."),
    # After a think block only; the block is kept as it came.
    ("<think>\nEasy.\n</think>\nParis.<|im_end|>", "<think>\nEasy.\n</think>\nParis."),
    ("<|im_end|>", None),
]  # fmt: skip

KEPT = [
    "Use <|im_end|> to end a ChatML turn.",
    "<|eot_id|> then more text",
    "Paris is sunny.",
    # A closing tag whose opening tag's word is in the reply: a block that is not a call.
    '<tool_call>\n{"name": "delete_all", "arguments": {}}\n</tool_call>',
    "<|action_start|><|interpreter|>\n```python\nprint(1)\n```<|action_end|>",
    "The function ends here: </function>",
    # Inside an unclosed think block: the model's reasoning, kept.
    "<think>\nI will answer.<|im_end|>",
]


def _streamed(pieces: list[str]) -> tuple[str | None, list[tuple[str, str, str]], str]:
    out, _ = run(pieces, TOOLS)
    return client_view(out)


@pytest.mark.parametrize(("text", "content"), TRIMMED)
def test_trimmed_whole(text: str, content: str | None) -> None:
    assert whole(text) == (content, [], "stop")
    rec = recover(text, TOOLS)  # no call: only the content changes
    assert rec is not None and (rec.content, rec.calls, rec.format) == (content, [], "end_tokens")


@pytest.mark.parametrize(("text", "content"), TRIMMED)
def test_trimmed_streamed_at_every_chunking(text: str, content: str | None) -> None:
    want = (content, [], "stop")
    assert _streamed([text]) == want
    assert _streamed(list(text)) == want
    for seed in range(5):
        assert _streamed(split_random(text, seed)) == want, seed
    for cut in range(1, len(text)):
        assert _streamed([text[:cut], text[cut:]]) == want, cut


@pytest.mark.parametrize("text", KEPT)
def test_kept_whole_and_streamed(text: str) -> None:
    assert whole(text) == (text, [], "stop")
    assert recover(text, TOOLS) is None
    assert _streamed(list(text)) == (text, [], "stop")
    assert _streamed([text]) == (text, [], "stop")


def test_no_tools_declared_no_change() -> None:
    out, _ = run(list("Paris.<|im_end|>"), None)
    assert client_view(out) == ("Paris.<|im_end|>", [], "stop")


def test_the_text_before_the_tokens_is_not_held() -> None:
    """Prose goes out as it comes; only the tokens (and the whitespace before them) wait."""
    out, _ = run(["Paris is sunny.", "\n<|im_", "end|>"], TOOLS)
    texts = [c["choices"][0]["delta"].get("content") for c in out if c.get("choices")]
    assert texts[1] == "Paris is sunny."  # the first chunk, released as it came
    assert client_view(out)[0] == "Paris is sunny."
