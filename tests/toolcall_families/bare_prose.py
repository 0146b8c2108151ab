"""Bare calls with prose around them (issue 18): a JSON call or a pythonic list standing on its own
lines, prose before or after it staying content (formats/bare.py's third form), a fenced call
whose arguments hold fences, and what stays text: a call on a line with prose, two runs, a JSON
value next to the run, a fence in the prose, and JSON answers, configs, dict literals and bullet
lists that open a line with `{` or `[` and are no call. Streamed, these show that the stream
holds a line-opening value after prose until it can be judged, and a run followed by prose to
the end (proxy/toolcalls/stream.py).

Sources: SGLang's pythonic detector tests (test_function_call_parser.py: text before and after
`[f(a=1)]`), the Llama 3.1/3.2 JSON tool prompt (research/toolcall-formats.md section 4) and
Ollama#13519 (fenced JSON after prose, section 9).
"""

from __future__ import annotations

from tests.toolcall_case import Case

SGLANG = "SGLang test_function_call_parser.py (pythonic detector, text around the list)"
LLAMA = "Llama 3.1/3.2 JSON tool prompt, toolcall-formats.md section 4"
OLLAMA = "Ollama#13519 (llama3.2:3b fenced JSON), toolcall-formats.md section 9"
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
ROME = CALL.replace("Paris", "Rome")
PARIS = [("get_weather", {"city": "Paris"})]
PYTHONIC = "[get_weather(city='Paris'), get_time(tz='UTC')]"
BOTH = [*PARIS, ("get_time", {"tz": "UTC"})]
README = "# Demo\\n```bash\\nmake\\n```\\n"


def _pos(name: str, text: str, content: str | None, calls: list, fmt: str, src: str) -> Case:
    return Case(f"bare_prose_{name}", text, content, calls, fmt, source=src)


def _neg(name: str, text: str) -> Case:
    return Case(f"bare_prose_{name}", text, None, [], None, source=LLAMA)


_AFTER = [
    _pos(
        "after",
        f"{CALL}\n\nLet me know if you need more.",
        "Let me know if you need more.",
        PARIS,
        "bare_json",
        LLAMA,
    ),
    _pos(
        "after_pythonic",
        f"{PYTHONIC}\nChecking both now.",
        "Checking both now.",
        BOTH,
        "pythonic",
        SGLANG,
    ),
    _pos(
        "after_two_lines",
        f"{CALL}\n{CALL}\nBoth sent.",
        "Both sent.",
        PARIS * 2,
        "bare_json",
        LLAMA,
    ),
    _pos(
        "after_semicolon_and_eot",
        f'{CALL}; {{"name": "get_time", "arguments": {{"tz": "UTC"}}}}\nDone.<|eot_id|>',
        "Done.",
        BOTH,
        "bare_json",
        LLAMA,
    ),
    _pos(
        "after_blank_line_and_list",
        f"{CALL}\n  \nMore below:\n- a\n- b",
        "More below:\n- a\n- b",
        PARIS,
        "bare_json",
        LLAMA,
    ),
    _pos("after_eot_then_prose", f"{CALL}<|eot_id|>\nDone.", "Done.", PARIS, "bare_json", LLAMA),
]

_BEFORE = [
    _pos(
        "before",
        f"I'll check the weather.\n{CALL}",
        "I'll check the weather.",
        PARIS,
        "bare_json",
        LLAMA,
    ),
    _pos("before_pythonic", f"I'll check.\n\n{PYTHONIC}", "I'll check.", BOTH, "pythonic", SGLANG),
    _pos(
        "around_pretty",
        'Sure.\n{\n  "name": "get_weather",\n  "parameters": {\n    "city": "Paris"\n  }\n}\nDone.',
        "Sure.\nDone.",
        PARIS,
        "bare_json",
        LLAMA,
    ),
    # A JSON value that is no call, then prose, then the call: only the call is one.
    _pos(
        "config_then_call",
        f'Config first:\n{{"city": "Rome"}}\nNow the call:\n  {CALL}\n<|eot_id|>',
        'Config first:\n{"city": "Rome"}\nNow the call:',
        PARIS,
        "bare_json",
        LLAMA,
    ),
    _pos(
        "think_then_prose_then_call",
        f"<think>\nWeather.\n</think>\nOne moment.\n{CALL}",
        "<think>\nWeather.\n</think>\nOne moment.",
        PARIS,
        "bare_json",
        LLAMA,
    ),
    _pos(
        "before_and_after",
        f"Checking.\n{PYTHONIC}\nI'll report back.",
        "Checking.\nI'll report back.",
        BOTH,
        "pythonic",
        SGLANG,
    ),
    _pos("before_indented_list", f"Calling:\n    {PYTHONIC}", "Calling:", BOTH, "pythonic", SGLANG),
    _pos(
        "fenced_call_with_fences_in_arguments",
        "Writing the README.\n```json\n"
        f'{{"name": "write_file", "parameters": {{"path": "README.md", "content": "{README}"}}}}'
        "\n```\nDone.",
        "Writing the README.\nDone.",
        [("write_file", {"path": "README.md", "content": "# Demo\n```bash\nmake\n```\n"})],
        "fenced_json",
        OLLAMA,
    ),
    _pos(
        "whole_call_with_fences_in_arguments",
        f'{{"name": "write_file", "arguments": {{"path": "R.md", "content": "{README}"}}}}',
        None,
        [("write_file", {"path": "R.md", "content": "# Demo\n```bash\nmake\n```\n"})],
        "bare_json",
        LLAMA,
    ),
]

_TEXT = [
    # On the same line as prose the call is an example ("... is how you would call it").
    _neg("same_line_after", f"{CALL} is how you would call it."),
    _neg("same_line_before", f"Call it like this: {CALL}"),
    _neg("same_line_pythonic", f"Here's a tool call: {PYTHONIC}"),
    _neg("semicolon_then_prose", f"{CALL};\nDone."),
    # Two runs are two examples, as two fenced blocks are.
    _neg("two_runs", f"Either\n{CALL}\nor\n{ROME}"),
    _neg("two_runs_from_start", f"{CALL}\nor, for Rome:\n{ROME}"),
    # A JSON value right before or after the run: values in a row are all calls or none is.
    _neg("value_before_run", f'{{"city": "Rome"}}\n{CALL}\nDone.'),
    _neg("value_after_run", f'Sure.\n{CALL}\n{{"city": "Rome"}}'),
    # Lines inside a JSON document are not runs of their own.
    _neg("inside_a_document", f'{{"examples": [\n  {CALL}\n]}}'),
    _neg(
        "inside_a_document_after_prose", f'Example:\n{{"examples": [\n  {CALL}\n]}}\nThat is all.'
    ),
    # A fence in the prose: the reply shows code, and the call is one more example.
    _neg("fence_in_prose_before", f"Wrap code in ``` fences, like:\n{CALL}"),
    _neg("fence_in_prose_after", f"Like this:\n{CALL}\nor in a ```json block."),
    _neg(
        "fenced_block_then_another_fence",
        f"Call:\n```json\n{CALL}\n```\nand run:\n```bash\nls\n```",
    ),
    # Undeclared tools, incomplete shapes, a list with anything but calls.
    _neg("undeclared", 'Sure.\n{"name": "delete_all", "arguments": {"force": true}}'),
    _neg("name_alone", 'Sure.\n{"name": "get_weather"}'),
    _neg(
        "schema_echoed",
        'Sure.\n{"name": "search", "parameters": {"type": "object", "properties": {}}}',
    ),
    _neg("positional_pythonic", "Sure.\n[get_weather('Paris'), get_time(tz='UTC')]\nDone."),
    _neg("list_with_data", f'Sure.\n[{CALL}, {{"city": "Rome"}}]'),
    _neg("cut_off_stop", f"Sure.\n{CALL.replace('Paris', 'Par')[:-3]}"),
    # JSON answers and code in prose that open a line with `{` or `[`: released once judged.
    _neg("json_answer_after_prose", 'Here is the result:\n{"answer": 42, "unit": "km"}\nDone.'),
    _neg("json_config_named", 'package.json:\n{\n  "name": "my-app",\n  "version": "1.0.0"\n}'),
    _neg("python_dict_literal", "In Python:\n{'city': 'Paris', 'days': 3}\nis a dict."),
    _neg("bullet_checkboxes", "Tasks:\n[ ] buy milk\n[x] call mum\n"),
    _neg("markdown_link_line", "See:\n[the docs](https://example.com/docs) for more."),
    _neg("citation_line", "Sources:\n[1] Smith, 2020.\n[2] Doe, 2021."),
    _neg("number_list", "Values:\n[1, 2, 3]\nsum to 6."),
    _neg("code_block_brace", "int main()\n{\n    return 0;\n}"),
    _neg("brace_prose", "Sets are written\n{a, b, c}\nin maths."),
]

CASES: list[Case] = [*_AFTER, *_BEFORE, *_TEXT]
