"""Fenced JSON calls after prose with Llama 3's `parameters` (Ollama#13519, llama3.2:3b): the
key's variants (a JSON string, beside an empty `arguments`, with `type: function`), the fence's
info strings, pretty-printed and `;`-separated calls, end tokens and prose after the fence; and
what stays text (a schema echoed, a non-finite number, an empty name, two blocks).

Sources: Ollama#13519 (research/toolcall-formats.md section 9), the Llama 3.1/3.2 JSON prompt
(`{"name": function name, "parameters": dictionary of argument name and its value}`, section 4),
SGLang's `parameters or arguments` and vLLM's `arguments` then `parameters` (section 4).
"""

from __future__ import annotations

from tests.toolcall_case import Case

OLLAMA = "Ollama#13519 (llama3.2:3b fenced JSON), toolcall-formats.md section 9"
LLAMA = "Llama 3.1/3.2 JSON tool prompt, toolcall-formats.md section 4"
SGLANG = "SGLang llama32_detector (`parameters` or `arguments`), toolcall-formats.md section 4"
PRE = "I'll check the weather.\n"
PARIS = [("get_weather", {"city": "Paris"})]


def _fence(body: str, info: str = "json") -> str:
    return f"{PRE}```{info}\n{body}\n```"


CASES: list[Case] = [
    Case("fenced_edges_parameters_string",
         _fence('{"name": "get_weather", "parameters": "{\\"city\\": \\"Paris\\"}"}'),
         PRE.strip(), PARIS, "fenced_json", source=OLLAMA),
    # Both keys: the one that holds the arguments wins, not the empty one.
    Case("fenced_edges_parameters_beside_empty_arguments",
         _fence('{"name": "get_weather", "arguments": {}, "parameters": {"city": "Paris"}}'),
         PRE.strip(), PARIS, "fenced_json", source=SGLANG),
    Case("fenced_edges_parameters_beside_null_arguments",
         _fence('{"name": "get_weather", "parameters": {"city": "Paris"}, "arguments": null}'),
         PRE.strip(), PARIS, "fenced_json", source=SGLANG),
    Case("fenced_edges_type_function_parameters",
         _fence('{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}'),
         PRE.strip(), PARIS, "fenced_json", source=LLAMA),
    Case("fenced_edges_no_info_string",
         _fence('{"name": "get_weather", "parameters": {"city": "Paris"}}', ""),
         PRE.strip(), PARIS, "fenced_json", source=OLLAMA),
    Case("fenced_edges_uppercase_info_string",
         _fence('{"name": "get_weather", "parameters": {"city": "Paris"}}', "JSON"),
         PRE.strip(), PARIS, "fenced_json", source=OLLAMA),
    Case("fenced_edges_pretty_printed",
         _fence('{\n  "name": "get_weather",\n  "parameters": {\n    "city": "Paris",\n'
                '    "days": 2\n  }\n}'),
         PRE.strip(), [("get_weather", {"city": "Paris", "days": 2})], "fenced_json",
         source=OLLAMA),
    Case("fenced_edges_semicolon_separated",
         _fence('{"name": "get_weather", "parameters": {"city": "Paris"}}; '
                '{"name": "get_time", "parameters": {"tz": "Europe/Paris"}}'),
         PRE.strip(), [*PARIS, ("get_time", {"tz": "Europe/Paris"})], "fenced_json",
         source=LLAMA),
    Case("fenced_edges_single_quotes",
         _fence("{'name': 'get_weather', 'parameters': {'city': 'Paris'}}"),
         PRE.strip(), PARIS, "fenced_json", source=OLLAMA),
    Case("fenced_edges_prose_after_and_eot",
         _fence('{"name": "get_weather", "parameters": {"city": "Paris"}}')
         + "\nI'll report back.<|eot_id|>",
         PRE + "I'll report back.", PARIS, "fenced_json", source=OLLAMA),
    Case("fenced_edges_think_then_prose_then_fence",
         "<think>\nWeather tool.\n</think>\n" + _fence(
             '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
         "<think>\nWeather tool.\n</think>\n" + PRE.strip(), PARIS, "fenced_json",
         source=OLLAMA),
    # Negatives: the text stays as it was.
    Case("fenced_edges_schema_echo",
         _fence('{"name": "get_weather", "parameters": {"type": "object", "properties": '
                '{"city": {"type": "string"}}}}'), None, [], None, source=LLAMA),
    Case("fenced_edges_non_finite_parameter",
         _fence('{"name": "run", "parameters": {"cmd": "x", "ratio": NaN}}'), None, [], None,
         source=OLLAMA),
    Case("fenced_edges_overflowing_number",
         _fence('{"name": "run", "parameters": {"cmd": "x", "ratio": 1e999}}'), None, [], None,
         source=OLLAMA),
    Case("fenced_edges_empty_name",
         _fence('{"name": " ", "parameters": {"city": "Paris"}}'), None, [], None,
         source=OLLAMA),
    Case("fenced_edges_undeclared",
         _fence('{"name": "delete_all", "parameters": {"force": true}}'), None, [], None,
         source=OLLAMA),
    Case("fenced_edges_name_only",
         _fence('{"name": "get_weather"}'), None, [], None, source=LLAMA),
    Case("fenced_edges_two_blocks",
         _fence('{"name": "get_weather", "parameters": {"city": "Paris"}}')
         + "\nor\n```json\n"
         '{"name": "get_weather", "parameters": {"city": "Rome"}}\n```', None, [], None,
         source=OLLAMA),
    Case("fenced_edges_call_then_data_in_block",
         _fence('{"name": "get_weather", "parameters": {"city": "Paris"}}\n{"city": "Rome"}'),
         None, [], None, source=OLLAMA),
]
