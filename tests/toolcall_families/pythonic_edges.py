"""Pythonic calls' edges (Llama 3.2/4, LFM2 with and without its list or its opener, OLMo 3's
literals): JSON literals inside Python calls, dotted names, raw newlines and quotes inside
strings, and what stays text (leading-zero integers, positional arguments, non-finite numbers,
expressions). Inside a marker an unreadable
call is dropped and its siblings kept; with no marker the list must be nothing but calls.

Sources: vLLM tests/tool_parsers/test_pythonic_tool_parser.py, test_llama4_pythonic_tool_parser.py
and test_olmo3_tool_parser.py (JSON literals, escaped quotes, bad and non-finite siblings);
vLLM vllm/tool_parsers/utils.py (`get_parameter_value`, dotted names); SGLang
test/registered/function_call/test_function_call_parser.py (TestPythonicDetector).
"""

from __future__ import annotations

from tests.toolcall_case import TOOLS, Case, tool

VLLM = "vLLM tests/tool_parsers/test_pythonic_tool_parser.py"
LLAMA4 = "vLLM tests/tool_parsers/test_llama4_pythonic_tool_parser.py"
OLMO3 = "vLLM tests/tool_parsers/test_olmo3_tool_parser.py"
UTILS = "vLLM vllm/tool_parsers/utils.py"
SGLANG = "SGLang test/registered/function_call/test_function_call_parser.py"
OLLAMA_LFM2 = "Ollama model/parsers/lfm2_test.go (TestLFM2Parser_parseToolCallsContent)"
LFM2 = "LM Studio#1979 (LFM2 <|tool_call_start|>), toolcall-formats.md section 5"
WEB = (*TOOLS, tool("web.search", {"query": {"type": "string"}}))
THINK = "<think>\nThe user wants the time.\n</think>"

CASES: list[Case] = [
    Case("pythonic_edges_json_literals",
         "[run(cmd='ls', force=true, limit=null)]",
         None, [("run", {"cmd": "ls", "force": True, "limit": None})], "pythonic", source=OLMO3),
    Case("pythonic_edges_json_literals_nested",
         "[run(cmd='ls', opts={'recursive': true, 'depth': null, 'skip': [false]})]",
         None, [("run", {"cmd": "ls", "opts": {"recursive": True, "depth": None,
                                               "skip": [False]}})], "pythonic", source=UTILS),
    Case("pythonic_edges_two_calls",
         "[get_weather(city='Paris', days=3), get_time(tz=\"Europe/Paris\")]",
         None, [("get_weather", {"city": "Paris", "days": 3}),
                ("get_time", {"tz": "Europe/Paris"})], "pythonic", source=VLLM),
    Case("pythonic_edges_dotted_name",
         "[web.search(query='latchgate')]",
         None, [("web.search", {"query": "latchgate"})], "pythonic", tools=WEB, source=UTILS),
    Case("pythonic_edges_raw_newline_in_string",
         "[write_file(path='a.py', content='x = 1\ny = {\"a\": 2}\n')]",
         None, [("write_file", {"path": "a.py", "content": 'x = 1\ny = {"a": 2}\n'})],
         "pythonic", source=VLLM),
    Case("pythonic_edges_escaped_quotes",
         r"""[search(query='Martha\'s Vineyard'), search(query="say \"cool units\"")]""",
         None, [("search", {"query": "Martha's Vineyard"}),
                ("search", {"query": 'say "cool units"'})], "pythonic", source=VLLM),
    Case("pythonic_edges_nested_quotes",
         """[search(query="It's \\"sunny\\" today"), search(query='a "b" c')]""",
         None, [("search", {"query": 'It\'s "sunny" today'}), ("search", {"query": 'a "b" c'})],
         "pythonic", source=VLLM),
    # Python refuses the apostrophe; it closes the string only before `,)]}:` (toolcalls.scan).
    Case("pythonic_edges_unescaped_apostrophe",
         "[search(query='It's sunny in Paris')]",
         None, [("search", {"query": "It's sunny in Paris"})], "pythonic", source=SGLANG),
    # An escape Python does not know is kept as written (Python's rule, without its warning).
    Case("pythonic_edges_regex_backslashes",
         r"[GrepTool(pattern='\d+\.py$', path='src')]",
         None, [("GrepTool", {"pattern": r"\d+\.py$", "path": "src"})], "pythonic", source=VLLM),
    Case("pythonic_edges_negative_and_float",
         "[run(cmd='x', ratio=-2.5, limit=-3)]",
         None, [("run", {"cmd": "x", "ratio": -2.5, "limit": -3})], "pythonic", source=VLLM),
    Case("pythonic_edges_think_then_calls",
         f"{THINK}\n\n[get_time(tz='UTC')]",
         THINK, [("get_time", {"tz": "UTC"})], "pythonic", source=LLAMA4),
    Case("pythonic_edges_llama4_eot",
         "[get_time(tz='UTC')]<|eot|>",
         None, [("get_time", {"tz": "UTC"})], "pythonic", source=LLAMA4),
    Case("pythonic_edges_llama4_python_start_literals",
         "<|python_start|>[run(cmd='ls', force=true)]<|python_end|><|eom|>",
         None, [("run", {"cmd": "ls", "force": True})], "llama3", source=LLAMA4),
    Case("pythonic_edges_lfm2_prose_im_end",
         'Let me look.\n<|tool_call_start|>[list_directory(path="desktop"), '
         "get_file_info(path='desktop/a.txt')]<|tool_call_end|><|im_end|>",
         "Let me look.", [("list_directory", {"path": "desktop"}),
                          ("get_file_info", {"path": "desktop/a.txt"})], "lfm2", source=LFM2),
    # LFM2's one call with no list around it, and a list whose opener a server ate.
    Case("pythonic_edges_lfm2_unbracketed",
         "<|tool_call_start|>get_time(tz='UTC')<|tool_call_end|>",
         None, [("get_time", {"tz": "UTC"})], "lfm2", source=OLLAMA_LFM2),
    Case("pythonic_edges_lfm2_unbracketed_spaces",
         'Let me look.<|tool_call_start|>get_weather( city = "Paris" , days = 3 )'
         "<|tool_call_end|>",
         "Let me look.", [("get_weather", {"city": "Paris", "days": 3})], "lfm2",
         source=OLLAMA_LFM2),
    Case("pythonic_edges_lfm2_orphan_end",
         "[get_time(tz='UTC')]<|tool_call_end|>",
         None, [("get_time", {"tz": "UTC"})], "lfm2", source=OLLAMA_LFM2),
    Case("pythonic_edges_lfm2_orphan_end_after_think",
         f"{THINK}\n[get_time(tz='UTC')]<|tool_call_end|><|im_end|>",
         THINK, [("get_time", {"tz": "UTC"})], "lfm2", source=OLLAMA_LFM2),
    # A marker vouches for its calls: the unreadable one is dropped, its siblings are kept.
    Case("pythonic_edges_marker_bad_sibling_positional",
         "<|tool_call_start|>[get_weather('Paris'), get_time(tz='UTC')]<|tool_call_end|>",
         None, [("get_time", {"tz": "UTC"})], "lfm2", source=LLAMA4),
    Case("pythonic_edges_marker_bad_sibling_non_finite",
         "<|python_start|>[run(cmd='x', ratio=1e999), get_time(tz='UTC')]<|python_end|>",
         None, [("get_time", {"tz": "UTC"})], "llama3", source=LLAMA4),
    Case("pythonic_edges_marker_bad_sibling_bytes",
         "<|tool_call_start|>[run(cmd=b'z'), get_time(tz='UTC')]<|tool_call_end|>",
         None, [("get_time", {"tz": "UTC"})], "lfm2", source=VLLM),
    # Negatives: the text stays as it was.
    Case("pythonic_edges_leading_zero_integer",
         "[get_weather(city='Paris', days=007)]", None, [], None, source=VLLM),
    Case("pythonic_edges_positional_argument",
         "[get_weather('Paris')]", None, [], None, source=VLLM),
    Case("pythonic_edges_non_finite_alone",
         "[run(cmd='x', ratio=1e999)]", None, [], None, source=VLLM),
    # No marker: a list with one unreadable call is not a list of calls.
    Case("pythonic_edges_bare_bad_sibling",
         "[get_weather('Paris'), get_time(tz='UTC')]", None, [], None, source=VLLM),
    # An unbracketed call must be all its tag holds.
    Case("pythonic_edges_lfm2_unbracketed_then_words",
         "<|tool_call_start|>get_time(tz='UTC') and then more<|tool_call_end|>", None, [], None,
         source=OLLAMA_LFM2),
    Case("pythonic_edges_lfm2_unbracketed_no_parenthesis",
         '<|tool_call_start|>get_weather city="Paris")<|tool_call_end|>', None, [], None,
         source=OLLAMA_LFM2),
    Case("pythonic_edges_marker_only_bad_call",
         "<|tool_call_start|>[get_weather('Paris')]<|tool_call_end|>", None, [], None,
         source=LFM2),
    Case("pythonic_edges_expression_argument",
         "[run(cmd='ls' + ' -la')]", None, [], None, source=UTILS),
    Case("pythonic_edges_set_argument",
         "[run(cmd='x', opts={1, 2})]", None, [], None, source=UTILS),
    Case("pythonic_edges_variable_argument",
         "[run(cmd=command)]", None, [], None, source=UTILS),
    Case("pythonic_edges_kwargs",
         "[run(**{'cmd': 'ls'})]", None, [], None, source=UTILS),
    Case("pythonic_edges_undeclared_dotted",
         "[os.system(cmd='rm -rf /')]", None, [], None, tools=WEB, source=UTILS),
    Case("pythonic_edges_cut_off_stop",
         "[get_weather(city='Par", None, [], None, source=VLLM),
    # SGLang reads a list after prose on the same line; here a call stands on its own lines.
    Case("pythonic_edges_prose_same_line",
         "Here's a tool call: [get_weather(city='Paris')]", None, [], None, source=SGLANG),
    Case("pythonic_edges_marker_in_prose",
         "LFM2 wraps calls in <|tool_call_start|> and <|tool_call_end|>.", None, [], None,
         source=LFM2),
]
