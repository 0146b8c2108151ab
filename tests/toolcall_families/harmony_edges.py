"""gpt-oss harmony edges (`harmony`, proxy/toolcalls/formats/harmony.py): LLM-jp 4.1's space
after each special token, and the final message's header right after a call."""

from __future__ import annotations

from tests.toolcall_case import ONE, PROSE, TWO, Case, j

LLM_JP = ("llama.cpp tests/test-chat.cpp llm-jp-llm-jp-4.1-8b-thinking "
          "(models/templates/llm-jp-llm-jp-4.1-8b-thinking.jinja)")
VLLM = "vLLM tests/tool_parsers/test_openai_tool_parser.py test_extract_tool_calls_with_content"
ANALYSIS = "<|channel|> analysis<|message|> The user wants the weather.<|end|>"


def spaced(name: str, args: str) -> str:
    """A call as LLM-jp 4.1 writes it: a space after each special token."""
    return (f"<|start|> assistant to=functions.{name}<|channel|> commentary <|constrain|>  json"
            f"<|message|> {args}")


def call(name: str, args: str, start: str = "<|start|>assistant") -> str:
    return (f"{start}<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
            f"{args}<|call|>")


FINAL = "<|start|>assistant<|channel|>final<|message|>"

CASES: list[Case] = [
    Case("harmony_spaced_role_header", ANALYSIS + spaced(*ONE[0][:1], j(ONE[0][1])), ANALYSIS,
         ONE, "harmony", source=LLM_JP),
    Case("harmony_spaced_channel_header",
         f"<|channel|> commentary to=functions.get_weather<|message|> {j(ONE[0][1])}", None, ONE,
         "harmony", source=LLM_JP),
    Case("harmony_spaced_calls_end_separated",
         ANALYSIS + spaced("get_weather", j(TWO[0][1])) + "<|end|>"
         + spaced("get_time", j(TWO[1][1])), ANALYSIS, TWO, "harmony", source=LLM_JP),
    Case("harmony_final_message_after_call",
         call("get_weather", j(ONE[0][1]), "") + FINAL + PROSE + "<|return|>", PROSE, ONE,
         "harmony", source=VLLM),
    Case("harmony_final_message_after_calls_with_analysis",
         "<|channel|>analysis<|message|>Two tools.<|end|>" + call("get_weather", j(TWO[0][1]))
         + call("get_time", j(TWO[1][1])) + FINAL + PROSE,
         "<|channel|>analysis<|message|>Two tools.<|end|>\n" + PROSE, TWO, "harmony",
         source=VLLM),
    # Negatives: the role word alone, and a final header with no call before it, are text.
    Case("harmony_final_message_without_call_stays",
         "<|channel|>analysis<|message|>Easy.<|end|>" + FINAL + PROSE, None, [], None,
         source=VLLM),
]
