"""FunctionGemma's and Gemma 4's call edges: arguments (and list items) without the comma
between them, a space before the brace, single-quoted values with a stray delimiter after
them, a last string whose closing delimiter is missing, quotes inside strings, and a call
whose close tag the server's stop sequence ate; negatives that stay text.

Sources: vLLM tests/tool_parsers/test_functiongemma_tool_parser.py (arguments streamed without
commas), Ollama model/parsers/functiongemma_test.go and gemma4_test.go (repairs from
ollama#15315), llama.cpp's FunctionGemma handler (`<end_function_call>` is a stop sequence).
"""

from __future__ import annotations

from tests.toolcall_case import Case

VLLM = "vLLM tests/tool_parsers/test_functiongemma_tool_parser.py"
OLLAMA = "Ollama model/parsers/gemma4_test.go"
OLLAMA_FG = "Ollama model/parsers/functiongemma_test.go"
LLAMACPP = "llama.cpp common/chat FunctionGemma handler (additional_stops <end_function_call>)"
FG = ("<start_function_call>", "<end_function_call>")
G4 = ("<|tool_call>", "<tool_call|>")


def _fg(body: str) -> str:
    return f"{FG[0]}{body}{FG[1]}"


def _g4(body: str) -> str:
    return f"{G4[0]}{body}{G4[1]}"


CASES: list[Case] = [
    Case("gemma_edges_no_comma_between_strings",
         _fg("call:write_file{path:<escape>a.txt<escape>content:<escape>hi<escape>}"),
         None, [("write_file", {"path": "a.txt", "content": "hi"})], "functiongemma",
         source=VLLM),
    Case("gemma_edges_no_comma_string_then_number",
         _fg("call:get_weather{city:<escape>Paris<escape>days:3}"),
         None, [("get_weather", {"city": "Paris", "days": 3})], "functiongemma", source=VLLM),
    Case("gemma_edges_no_comma_number_then_string",
         _fg("call:get_weather{days:3 city:<escape>Paris<escape>}"),
         None, [("get_weather", {"days": 3, "city": "Paris"})], "functiongemma", source=VLLM),
    Case("gemma_edges_no_comma_newline_between",
         _fg("call:write_file{path:<escape>a.txt<escape>\ncontent:<escape>hi<escape>\n}"),
         None, [("write_file", {"path": "a.txt", "content": "hi"})], "functiongemma",
         source=VLLM),
    Case("gemma_edges_no_comma_in_list_and_object",
         _g4('call:run{cmd:<|"|>x<|"|>opts:{tags:[<|"|>a<|"|><|"|>b<|"|>]n:2}}'),
         None, [("run", {"cmd": "x", "opts": {"tags": ["a", "b"], "n": 2}})], "functiongemma",
         source=VLLM),
    Case("gemma_edges_two_calls_no_commas",
         _fg("call:get_weather{city:<escape>Paris<escape>days:3}")
         + _fg("call:get_time{tz:<escape>Europe/Paris<escape>}"),
         None, [("get_weather", {"city": "Paris", "days": 3}),
                ("get_time", {"tz": "Europe/Paris"})], "functiongemma", source=VLLM),
    Case("gemma_edges_space_before_brace",
         _fg("call:get_time {tz:<escape>UTC<escape>}"),
         None, [("get_time", {"tz": "UTC"})], "functiongemma", source=OLLAMA),
    # llama.cpp stops generation at <end_function_call>: the close tag never reaches the text.
    Case("gemma_edges_close_tag_eaten_by_stop",
         "<start_function_call>call:get_time{tz:<escape>UTC<escape>}",
         None, [("get_time", {"tz": "UTC"})], "functiongemma", source=LLAMACPP),
    Case("gemma_edges_single_quoted_value",
         _g4("call:search{query:'latchgate docs'}"),
         None, [("search", {"query": "latchgate docs"})], "functiongemma", source=OLLAMA),
    Case("gemma_edges_single_quoted_dangling_delimiter",
         _g4(r'''call:GrepTool{path:<|"|>/data/exp1<|"|>,pattern:':\s*\w+'<|"|>}'''),
         None, [("GrepTool", {"path": "/data/exp1", "pattern": r":\s*\w+"})], "functiongemma",
         source=OLLAMA),
    Case("gemma_edges_unclosed_last_string",
         _g4('call:write_file{path:<|"|>run.sh<|"|>,content:<|"|>ls -la}'),
         None, [("write_file", {"path": "run.sh", "content": "ls -la"})], "functiongemma",
         source=OLLAMA),
    Case("gemma_edges_unescaped_quotes_in_string",
         _g4('call:search{query:<|"|>say "hello", then "goodbye"<|"|>}'),
         None, [("search", {"query": 'say "hello", then "goodbye"'})], "functiongemma",
         source=OLLAMA),
    Case("gemma_edges_raw_and_gemma_quoted",
         _g4('call:write_file{path:"raw \\"quoted\\"",content:<|"|>gemma "quoted"<|"|>}'),
         None, [("write_file", {"path": 'raw "quoted"', "content": 'gemma "quoted"'})],
         "functiongemma", source=OLLAMA),
    Case("gemma_edges_quoted_scalars_stay_strings",
         _g4('call:write_file{path:<|"|>1<|"|>,content:<|"|>true<|"|>}'),
         None, [("write_file", {"path": "1", "content": "true"})], "functiongemma",
         source=OLLAMA),
    Case("gemma_edges_nested_nulls",
         _g4('call:run{cmd:<|"|>ls<|"|>,opts:{value:null,nested:{value:null}}}'),
         None, [("run", {"cmd": "ls", "opts": {"value": None, "nested": {"value": None}}})],
         "functiongemma", source=OLLAMA),
    Case("gemma_edges_multiline_code",
         _fg('call:write_file{path:<escape>a.py<escape>,content:<escape>def f():\n'
             '    return {"a": [1, 2]}\n<escape>}'),
         None, [("write_file", {"path": "a.py",
                                "content": 'def f():\n    return {"a": [1, 2]}\n'})],
         "functiongemma", source=OLLAMA_FG),
    Case("gemma_edges_think_then_call_end_tokens",
         "<think>\nTime zone first.\n</think>\n"
         + _fg("call:get_time{tz:<escape>UTC<escape>}") + "<start_function_response>",
         "<think>\nTime zone first.\n</think>", [("get_time", {"tz": "UTC"})], "functiongemma",
         source=OLLAMA_FG),
    Case("gemma_edges_prose_then_call",
         "Let me check that for you." + _g4('call:get_weather{city:<|"|>Paris<|"|>}'),
         "Let me check that for you.", [("get_weather", {"city": "Paris"})], "functiongemma",
         source=OLLAMA),
    # Negatives: the text stays as it was.
    # A delimiter out of place, not at a value's start: Ollama does not repair it either.
    Case("gemma_edges_misplaced_delimiter",
         _g4('call:write_file{path:<|"|>one,content:<|"|>two<|"|>}'), None, [], None,
         source=OLLAMA),
    # Without the close tag nothing says where the string would have ended.
    Case("gemma_edges_unclosed_string_no_close_tag",
         '<|tool_call>call:write_file{path:<|"|>a.sh<|"|>,content:<|"|>ls}', None, [], None,
         source=OLLAMA),
    Case("gemma_edges_residue_unclosed_string",
         'call:write_file{content:<|"|>ls}', None, [], None, source=OLLAMA),
    Case("gemma_edges_cut_off_stop",
         "<start_function_call>call:write_file{path:<escape>a.txt<escape>,content:<escape>he",
         None, [], None, source=OLLAMA_FG),
    Case("gemma_edges_undeclared",
         _fg("call:delete_all{force:true}"), None, [], None, source=OLLAMA_FG),
    Case("gemma_edges_markers_in_prose",
         "FunctionGemma wraps calls in <start_function_call> and <end_function_call> tags.",
         None, [], None, source=OLLAMA_FG),
]
