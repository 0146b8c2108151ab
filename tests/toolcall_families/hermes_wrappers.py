"""Hermes 2 Pro's other wrappers around its JSON call (formats/tagged.py, label hermes): `<tool>`,
`<response>`, `<json>`, `<JSON>`, `<xml>`, a ```` ```xml ````/```` ```json ```` fence around a
tagged call, and `<function name="NAME">{json}</function>` (formats/qwen3_coder.py, label
function_tag), as llama.cpp's Hermes 2 Pro parser takes them (common/chat.cpp, test-chat.cpp
Hermes-2-Pro cases). The wrapper goes with the call only when it holds nothing but calls.
"""

from __future__ import annotations

from tests.toolcall_case import ONE, PROSE, Case, j

SRC = "llama.cpp common/chat.cpp Hermes 2 Pro parser, tests/test-chat.cpp"
_CALL = j({"name": "get_weather", "arguments": ONE[0][1]})

CASES = [
    *(
        Case(f"hermes_wrapper_{tag.lower()}{'_upper' if tag.isupper() else ''}",
             f"<{tag}>\n  {_CALL}\n</{tag}>", None, ONE, "hermes", source=SRC)
        for tag in ("tool", "response", "json", "JSON", "xml")
    ),
    Case("hermes_wrapper_after_prose", f"{PROSE}\n<response>{_CALL}</response>", PROSE, ONE,
         "hermes", source=SRC),
    Case("hermes_wrapper_xml_fence", f"```xml\n<response>\n    {_CALL}\n</response>\n```", None,
         ONE, "hermes", source=SRC),
    Case("hermes_wrapper_json_fence_function_call",
         f"```json\n\n    <function_call> {_CALL} \n    </function_call> \n``` ", None, ONE,
         "granite", source=SRC),
    Case("hermes_function_name_attr", f'<function name="get_weather">\n{j(ONE[0][1])}\n</function>',
         None, ONE, "function_tag", source=SRC),
    # A wrapper holding more than calls, or no call, is the reply's own text.
    Case("hermes_wrapper_with_words_inside", f"<response>{_CALL} is the call.</response>",
         f"<response>{_CALL} is the call.</response>", [], None, source=SRC),
    Case("hermes_wrapper_answer", "<response>The weather is fine.</response>",
         "<response>The weather is fine.</response>", [], None, source=SRC),
    Case("hermes_wrapper_json_value", '<json>{"city": "Paris"}</json>',
         '<json>{"city": "Paris"}</json>', [], None, source=SRC),
    Case("hermes_wrapper_unclosed", f"<xml>{_CALL} and then", f"<xml>{_CALL} and then", [],
         None, source=SRC),
    Case("hermes_function_name_attr_prose", '<function name="get_weather"> is how it starts.',
         '<function name="get_weather"> is how it starts.', [], None, source=SRC),
]  # fmt: skip
