"""Real upstream refusal bodies, as data, with what latchgate must make of each.

The wordings are quoted in docs/research/refusal-wordings.md (its section numbers begin the
names); those found later (issue 13, item 23) carry their source in a comment above them, tagged
as that file tags them: [SRC] a server's own source, [ISSUE] a pasted response in an issue
thread, [3P] third-party code or tests quoting the server. Each case carries the body the
upstream answered with, its HTTP status, the request body that was sent (holding the field that
triggered the refusal), and the expected classification: a capability (with its fields / effort
details) or None for "return it to the client, never latch". Reusable by HTTP-level tests: serve
`status` + `body` from a fake upstream, send `sent`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

MESSAGES = [{"role": "user", "content": "hi"}]
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    }
]
SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "answer", "schema": {"type": "object", "properties": {}}},
}


def req(**fields: Any) -> dict[str, Any]:
    """A request body as sent upstream: model and messages plus the triggering fields."""
    return {"model": "m", "messages": MESSAGES, **fields}


def openai(message: str, **extra: Any) -> bytes:
    """An OpenAI-shaped error body."""
    return orjson.dumps({"error": {"message": message, **extra}})


@dataclass(frozen=True)
class Case:
    name: str
    status: int
    body: bytes
    sent: dict[str, Any]
    capability: str | None  # None: must never latch
    fields: tuple[str, ...] = ()
    refused_effort: str | None = None
    next_effort: str | None = None
    supported: tuple[str, ...] | None = None
    effort_with_tools: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


CASES: list[Case] = [
    # --- 1. max_tokens ------------------------------------------------------------------------
    Case(
        "1-openai-max-tokens-unsupported", 400,
        openai("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
               "'max_completion_tokens' instead.", type="invalid_request_error",
               param="max_tokens", code="unsupported_parameter"),
        req(max_tokens=100), "legacy_token_limit",
    ),
    Case(
        "1-copilot-max-tokens-invalid-request-body", 400,
        openai("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
               "'max_completion_tokens' instead.", code="invalid_request_body"),
        req(max_tokens=100), "legacy_token_limit",
    ),
    Case(
        "1-openrouter-wrapped-max-tokens", 400,
        orjson.dumps({"error": {"message": "Provider returned error", "code": 400, "metadata": {
            "raw": openai("Unsupported parameter: 'max_tokens' is not supported with this "
                          "model. Use 'max_completion_tokens' instead.").decode(),
            "provider_name": "Azure"}}}),
        req(max_tokens=100), "legacy_token_limit",
    ),
    Case(
        "1-max-tokens-too-large", 400,
        openai("max_tokens is too large: 8192. This model supports at most 4096 completion "
               "tokens, whereas you provided 8192.", type="invalid_request_error",
               param="max_tokens", code=None),
        req(max_tokens=8192), None,
    ),
    Case(
        "1-anthropic-both-at-once", 400,
        orjson.dumps({"type": "error", "error": {"type": "invalid_request_error", "message":
            "Setting 'max_tokens' and 'max_completion_tokens' at the same time is not "
            "supported."}}),
        req(max_tokens=10, max_completion_tokens=10), None,
    ),
    Case(
        "1-vllm-old-max-completion-tokens-extra-forbidden", 400,
        b'{"object":"error","message":"[{\'type\': \'extra_forbidden\', \'loc\': (\'body\', '
        b"'max_completion_tokens'), 'msg': 'Extra inputs are not permitted', 'input': 64}]\","
        b'"type":"BadRequestError","param":null,"code":400}',
        req(max_completion_tokens=64), None,
    ),
    Case(
        "1-groq-max-completion-tokens-cap", 400,
        openai("max_completion_tokens must be less than or equal to 40960, the maximum value "
               "for max_completion_tokens is less than the context_window for this model",
               type="invalid_request_error", param="max_completion_tokens"),
        req(max_tokens=50000), None,
    ),
    Case(
        "1-volcengine-max-completion-tokens-cap", 400,
        orjson.dumps({"error": {"code": "InvalidParameter", "message": "The parameter "
            "`max_completion_tokens` specified in the request are not valid: integer above "
            "maximum value, expected a value <= 12288, but got 32000 instead. Request id: x",
            "param": "max_completion_tokens", "type": "BadRequest"}}),
        req(max_tokens=32000), None,
    ),
    Case(
        "1-deepseek-max-tokens-range", 400,
        openai("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
               type="invalid_request_error", param=None, code="invalid_request_error"),
        req(max_tokens=9000), None,
    ),
    # --- 2. sampling ----------------------------------------------------------------------------
    # Lightning AI names both ceilings in CamelCase (quoted in a code comment of a Go gateway that
    # matches "every variant seen mentions both field names") [3P].
    Case(
        "1-lightning-camelcase-max-completion-tokens", 400,
        openai("this model is not supported MaxTokens, please use MaxCompletionTokens"),
        req(max_tokens=100), "legacy_token_limit",
    ),
    Case(
        "2-openai-temperature-only-default", 400,
        openai("Unsupported value: 'temperature' does not support 0.2 with this model. Only "
               "the default (1) value is supported.", type="invalid_request_error",
               param="temperature", code="unsupported_value"),
        req(temperature=0.2), "chosen_temperature",
    ),
    Case(
        "2-o3-mini-temperature-unsupported-parameter", 400,
        openai("Unsupported parameter: 'temperature' is not supported with this model.",
               type="invalid_request_error", param="temperature", code="unsupported_parameter"),
        req(temperature=0.2), "chosen_temperature",
    ),
    Case(
        "2-temperature-range-error", 400,
        openai("Unsupported value: 'temperature' does not support 5. Supported values are "
               "between 0 and 2.", param="temperature", code="unsupported_value"),
        req(temperature=5), None,
    ),
    Case(
        "2-anthropic-temperature-deprecated", 400,
        orjson.dumps({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "`temperature` is deprecated for this model."}}),
        req(temperature=0.5), "chosen_temperature",
    ),
    Case(
        "2-bedrock-only-temperature-1", 400,
        orjson.dumps({"message": "Only temperature=1 is supported"}),
        req(temperature=0), "chosen_temperature",
    ),
    Case(
        "2-litellm-o-series-temperature", 400,
        openai("litellm.UnsupportedParamsError: O-series models don't support "
               "temperature=0.2. Only temperature=1 is supported. To drop unsupported openai "
               "params from the call, set `litellm.drop_params = True`",
               type="invalid_request_error", param=None, code="400"),
        req(temperature=0.2), "chosen_temperature",
    ),
    Case(
        "11-litellm-gpt5-temperature", 400,
        openai("litellm.UnsupportedParamsError: gpt-5 models (including gpt-5-codex) don't "
               "support temperature=0.2. Only temperature=1 is supported. For gpt-5.1, "
               "temperature is supported when reasoning_effort='none' (or not specified, as it "
               "defaults to 'none'). To drop unsupported params set `litellm.drop_params = True`"),
        req(temperature=0.2, reasoning_effort="low"), "chosen_temperature",
    ),
    Case(
        "11-litellm-gpt5-nano-temperature-while-reasoning", 400,
        openai("litellm.UnsupportedParamsError: gpt-5-nano doesn't support temperature=0.1 "
               "while reasoning is active. Only temperature=1 is supported unless "
               "reasoning_effort resolves to 'none', either set explicitly on the request or "
               "declared as the model's default_reasoning_effort. To drop unsupported params "
               "set `litellm.drop_params = True`.", code="400"),
        req(temperature=0.1), "chosen_temperature",
    ),
    # Moonshot / Kimi: the one value allowed stated as a number [ISSUE]
    # https://github.com/countbot-ai/CountBot/issues/61,
    # https://github.com/tinyhumansai/openhuman/pull/2082 (146 Sentry events a day).
    Case(
        "2-moonshot-only-1-is-allowed", 400,
        openai("invalid temperature: only 1 is allowed for this model",
               type="invalid_request_error"),
        req(temperature=0.2), "chosen_temperature",
    ),
    # The same refusal with the non-thinking value [ISSUE]
    # https://github.com/arcsin1/oh-my-ppt/issues/45 (Kimi's official API).
    Case(
        "2-moonshot-only-0.6-is-allowed", 400,
        openai("invalid temperature: only 0.6 is allowed for this model"),
        req(temperature=0.2), "chosen_temperature",
    ),
    # Through OpenRouter's Moonshot provider [ISSUE] https://github.com/HenriGrimm/Minnow/issues/291
    Case(
        "2-openrouter-moonshot-only-1", 400,
        openai("Error from provider (Moonshot AI): invalid temperature: only 1 is allowed for "
               "this model", type="invalid_request_error"),
        req(temperature=0.7), "chosen_temperature",
    ),
    # Anthropic with extended thinking (quoted with its docs link in several clients' code) [3P]
    Case(
        "2-anthropic-temperature-only-1-with-thinking", 400,
        orjson.dumps({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "`temperature` may only be set to 1 when thinking is enabled. Please "
                       "consult our documentation at https://docs.anthropic.com/en/docs/"
                       "build-with-claude/extended-thinking#important-considerations-when-"
                       "using-extended-thinking"}}),
        req(temperature=0.2), "chosen_temperature",
    ),
    # The newer wording with adaptive thinking (an agent-native changeset quoting the 400) [3P]
    Case(
        "2-anthropic-temperature-only-1-adaptive", 400,
        orjson.dumps({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "temperature may only be set to 1 when thinking is enabled or in "
                       "adaptive mode"}}),
        req(temperature=0), "chosen_temperature",
    ),
    # Default-only wordings from a client's refusal fixtures ("reads default-only and
    # non-default wording as a value rejection") [3P].
    Case(
        "2-temperature-non-default-values", 400,
        openai("temperature: non-default values are not supported"),
        req(temperature=0), "chosen_temperature",
    ),
    Case(
        "2-only-the-default-value-of-temperature", 400,
        openai("Only the default value of temperature is supported"),
        req(temperature=0), "chosen_temperature",
    ),
    # A model-name-agnostic Anthropic provider test's refusal [3P]
    Case(
        "2-temperature-this-parameter-not-supported", 400,
        openai("temperature: this parameter is not supported for this model"),
        req(temperature=0.3), "chosen_temperature",
    ),
    # Range errors, which must never latch: vLLM's SamplingParams validation [SRC]
    # (vllm/sampling_params.py, VLLMValidationError appends the parameter and value).
    Case(
        "2-vllm-temperature-in-range", 400,
        openai("temperature must be in [0, 2], got 3.0. (parameter=temperature, value=3.0)",
               type="BadRequestError", param="temperature", code=400),
        req(temperature=3.0), None,
    ),
    Case(
        "2-vllm-temperature-non-negative", 400,
        openai("temperature must be non-negative, got -0.5. (parameter=temperature, "
               "value=-0.5)", type="BadRequestError", param="temperature", code=400),
        req(temperature=-0.5), None,
    ),
    # Groq, Cerebras, Together, captured live in a provider-settings recogniser table [3P]
    Case(
        "2-groq-temperature-at-most", 400,
        openai("'temperature' : number must be at most 2", type="invalid_request_error"),
        req(temperature=3), None,
    ),
    Case(
        "2-cerebras-temperature-less-or-equal", 400,
        openai("temperature: Input should be less than or equal to 2",
               type="invalid_request_error"),
        req(temperature=3), None,
    ),
    Case(
        "2-together-temperature-within", 400,
        openai("temperature must be within [0, 1], got 2"),
        req(temperature=2), None,
    ),
    # Anthropic refuses the pair, not temperature: dropping it would be a guess [3P] (several
    # clients' fixtures and a LiteLLM AnthropicException paste).
    Case(
        "2-anthropic-temperature-and-top-p", 400,
        orjson.dumps({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "`temperature` and `top_p` cannot both be specified for this model. "
                       "Please use only one."}}),
        req(temperature=0.2, top_p=0.9), None,
    ),
    Case(
        "2-top-p-unsupported-not-droppable", 400,
        openai("Unsupported parameter: 'top_p' is not supported with this model.",
               type="invalid_request_error", param="top_p", code="unsupported_parameter"),
        req(top_p=0.9), None,
    ),
    Case(
        "2-presence-penalty-unsupported", 400,
        openai("Unsupported parameter: 'presence_penalty' is not supported with this model."),
        req(presence_penalty=0.5), "refused_field", ("presence_penalty",),
    ),
    Case(
        "2-stop-unsupported-never-droppable", 400,
        openai("Unsupported parameter: 'stop' is not supported with this model."),
        req(stop=["\n"]), None,
    ),
    Case(
        "2-logprobs-unsupported", 400,
        openai("Unsupported parameter: 'logprobs' is not supported with this model.",
               code="unsupported_parameter"),
        req(logprobs=True), "refused_field", ("logprobs",),
    ),
    Case(
        "2-search-preview-incompatible-argument", 400,
        openai("Model incompatible request argument supplied: presence_penalty"),
        req(presence_penalty=0.1), "refused_field", ("presence_penalty",),
    ),
    Case(
        "2-gemini-unknown-name-frequency-penalty-partial", 400,
        '400 INVALID_ARGUMENT … Unknown name "frequency_penalty"'.encode(),
        req(frequency_penalty=0.3), "refused_field", ("frequency_penalty",),
    ),
    # --- 3. reasoning_effort --------------------------------------------------------------------
    # xAI names fields in camelCase, as a plain-string error (recorded in a client's failure
    # classifier tests) [3P].
    Case(
        "2-xai-argument-not-supported-camelcase", 400,
        orjson.dumps({"code": "invalid-argument",
                      "error": "Argument not supported on this model: presencePenalty"}),
        req(presence_penalty=0.5), "refused_field", ("presence_penalty",),
    ),
    # ...and in snake_case (an API stub replaying it) [3P]
    Case(
        "2-xai-argument-not-supported-snake-case", 400,
        openai("Argument not supported on this model: frequency_penalty."),
        req(frequency_penalty=0.5), "refused_field", ("frequency_penalty",),
    ),
    # xAI reasoning models refusing `stop`, which is never dropped (recogniser table) [3P]
    Case(
        "2-xai-does-not-support-parameter-stop", 400,
        openai("Model grok-4.20-0309-reasoning does not support parameter stop."),
        req(stop=["\n"]), None,
    ),
    Case(
        "3-gpt4o-mini-unrecognized-reasoning-effort", 400,
        openai("Unrecognized request argument supplied: reasoning_effort",
               type="invalid_request_error", param=None, code=None),
        req(reasoning_effort="low"), "reasoning_effort",
    ),
    Case(
        "3-unsupported-parameter-reasoning-effort", 400,
        openai("Unsupported parameter: 'reasoning_effort' is not supported with this model.",
               type="invalid_request_error", param="reasoning_effort",
               code="unsupported_parameter"),
        req(reasoning_effort="high"), "reasoning_effort",
    ),
    Case(
        "3-unknown-parameter-reasoning-object", 400,
        openai("Unknown parameter: 'reasoning'.", type="invalid_request_error",
               param="reasoning", code="unknown_parameter"),
        req(reasoning={"effort": "low"}), None,
    ),
    Case(
        "3-gpt52-minimal-refused-with-list", 400,
        openai("Unsupported value: 'reasoning_effort' does not support 'minimal' with this "
               "model. Supported values are: 'none', 'low', 'medium', 'high', and 'xhigh'.",
               code="unsupported_value"),
        req(reasoning_effort="minimal"), "effort_value",
        refused_effort="minimal", next_effort="low",
        supported=("none", "low", "medium", "high"),
    ),
    Case(
        "3-kimi-none-refused-with-list", 400,
        openai("Unsupported value: 'reasoning_effort' does not support 'none' with this model. "
               "Supported values are: 'minimal', 'low', 'medium', and 'high'.",
               type="invalid_request_error"),
        req(reasoning_effort="none"), "effort_value",
        refused_effort="none", next_effort="minimal",
        supported=("minimal", "low", "medium", "high"),
    ),
    Case(
        "3-gpt54-function-tools-with-effort-no-effort-sent", 400,
        openai("Function tools with reasoning_effort are not supported for gpt-5.4 in "
               "/v1/chat/completions. Please use /v1/responses instead.",
               type="invalid_request_error", param="reasoning_effort", code=None),
        req(tools=TOOLS), "effort_value", effort_with_tools="none",
    ),
    Case(
        "3-gpt56-function-tools-set-effort-none", 400,
        openai("Function tools with reasoning_effort are not supported for gpt-5.6-terra in "
               "/v1/chat/completions. To use function tools, use /v1/responses or set "
               "reasoning_effort to 'none'.", type="invalid_request_error",
               param="reasoning_effort", code=None),
        req(tools=TOOLS, reasoning_effort="medium"), "effort_value", effort_with_tools="none",
    ),
    Case(
        "3-gpt54-already-sent-none", 400,
        openai("Function tools with reasoning_effort are not supported for gpt-5.4 in "
               "/v1/chat/completions. Please use /v1/responses instead."),
        req(tools=TOOLS, reasoning_effort="none"), None,
    ),
    Case(
        "3-groq-message-reasoning", 400,
        openai("`messages[3].reasoning`: reasoning is not supported with this model",
               type="invalid_request_error"),
        req(reasoning_effort="low"), None,
    ),
    Case(
        "3-gemini-unknown-name-reasoning-effort", 400,
        orjson.dumps([{"error": {"code": 400, "message": 'Invalid JSON payload received. '
                                 'Unknown name "reasoning_effort": Cannot find field.',
                                 "status": "INVALID_ARGUMENT"}}]),
        req(reasoning_effort="low"), "reasoning_effort",
    ),
    Case(
        "3-ollama-invalid-reasoning-value-off-ladder", 400,
        openai('invalid reasoning value: "turbo" (must be "minimal", "low", "medium", "high", '
               '"xhigh", "ultra", "max", or "none")', type="invalid_request_error"),
        req(reasoning_effort="turbo"), None,
    ),
    Case(
        "3-ollama-model-does-not-support-thinking-effort", 400,
        openai('"qwen2.5:7b" does not support thinking', type="invalid_request_error"),
        req(reasoning_effort="high"), "reasoning_effort",
    ),
    Case(
        "3-ollama-native-does-not-support-thinking-think", 400,
        orjson.dumps({"error": '"qwen2.5:7b" does not support thinking'}),
        req(think=True), "refused_field", ("think",),
    ),
    Case(
        "3-litellm-together-reasoning-effort", 400,
        openai("litellm.UnsupportedParamsError: together_ai does not support parameters: "
               "['reasoning_effort'], for model=Qwen/Qwen3.5-9B. To drop these, set "
               "`litellm.drop_params=True` or for proxy:\n\n`litellm_settings:\n drop_params: "
               "true`\n. \n If you want to use these params dynamically send "
               "allowed_openai_params=['reasoning_effort'] in your request.",
               type="invalid_request_error", param=None, code="400"),
        req(reasoning_effort="low"), "reasoning_effort",
    ),
    # xAI grok-4.5 and later refuse `none` (several clients' model notes, live-verified) [3P]
    Case(
        "3-xai-reasoning-effort-value-none", 400,
        orjson.dumps({"code": "invalid-argument", "error":
                      "This model does not support `reasoning_effort` value `none`."}),
        req(reasoning_effort="none"), "effort_value",
        refused_effort="none", next_effort="minimal",
    ),
    # Gemini's OpenAI-compatible endpoint lists bare values [ISSUE]
    # https://github.com/ctrl-space-labs/gendox-core/issues/480
    Case(
        "3-gemini-invalid-reasoning-effort-valid-values", 400,
        openai("Invalid reasoning_effort: minimal.\nValid values are: high, low, medium, none"),
        req(reasoning_effort="minimal"), "effort_value",
        refused_effort="minimal", next_effort="low", supported=("high", "low", "medium", "none"),
    ),
    # Groq qwen3 takes only "none" or "default": nothing above "low" to step to [ISSUE]
    # https://github.com/earendil-works/pi/issues/1745
    Case(
        "3-groq-effort-must-be-none-or-default", 400,
        openai("reasoning_effort must be one of none or default", type="invalid_request_error"),
        req(reasoning_effort="low"), None,
    ),
    # xAI grok-4 refusing the field, snake_case and camelCase (a client's tests of "both observed
    # provider spellings") [3P]
    Case(
        "3-xai-argument-not-supported-reasoning-effort", 400,
        orjson.dumps({"error": "Argument not supported on this model: reasoning_effort"}),
        req(reasoning_effort="low"), "reasoning_effort",
    ),
    Case(
        "3-xai-does-not-support-parameter-reasoning-effort-camelcase", 400,
        orjson.dumps({"error": "Model grok-4-1-fast does not support parameter reasoningEffort."}),
        req(reasoning_effort="low"), "reasoning_effort",
    ),
    # Gemini 2.5 Flash without thinking levels (native API paste) [ISSUE]
    # https://github.com/RooCodeInc/Roo-Code/issues/10700
    Case(
        "3-gemini-thinking-level-not-supported", 400,
        orjson.dumps({"error": {"code": 400, "message": "Thinking level is not supported for "
                                "this model.", "status": "INVALID_ARGUMENT"}}),
        req(reasoning_effort="low"), "reasoning_effort",
    ),
    # Gemini 3 refusing one level (recogniser table) [3P]
    Case(
        "3-gemini-thinking-level-minimal-not-supported", 400,
        orjson.dumps({"error": {"code": 400, "message": "Thinking level MINIMAL is not supported "
                                "for this model. Please retry with other thinking level.",
                                "status": "INVALID_ARGUMENT"}}),
        req(reasoning_effort="minimal"), "effort_value",
        refused_effort="minimal", next_effort="low",
    ),
    # OpenRouter, a model that always reasons asked not to (a curation record; seen for
    # `reasoning: {enabled: false}`, the same request as effort `none`) [3P]
    Case(
        "3-openrouter-reasoning-mandatory", 400,
        openai("Reasoning is mandatory for this endpoint and cannot be disabled.", code=400),
        req(reasoning_effort="none"), "effort_value",
        refused_effort="none", next_effort="minimal",
    ),
    # SGLang's pydantic literal error: `xhigh` is off the ladder, so returned [ISSUE]
    # https://github.com/router-for-me/CLIProxyAPI/issues/1572
    Case(
        "3-sglang-literal-error-xhigh", 400,
        orjson.dumps({"object": "error", "message": "1 validation error:\n  {'type': "
                      "'literal_error', 'loc': ('body', 'reasoning_effort'), 'msg': \"Input "
                      "should be 'low', 'medium' or 'high'\", 'input': 'xhigh', 'ctx': "
                      "{'expected': \"'low', 'medium' or 'high'\"}}", "type": "Bad Request",
                      "param": None, "code": 400}),
        req(reasoning_effort="xhigh"), None,
    ),
    Case(
        "11-litellm-xhigh-only-for-some-models", 400,
        openai("reasoning_effort='xhigh' is only supported for gpt-5.1-codex-max, gpt-5.2, and "
               "gpt-5.4+ models."),
        req(reasoning_effort="xhigh"), None,
    ),
    Case(
        "11-litellm-logprobs-only-with-effort-none", 400,
        openai("gpt-5.1/5.2/5.4 only support logprobs, top_p, top_logprobs when "
               "reasoning_effort='none'. Current reasoning_effort='low'. To drop unsupported "
               "params set `litellm.drop_params = True`"),
        req(reasoning_effort="low", logprobs=True), None,
    ),
    # --- 4. stream_options, parallel_tool_calls -------------------------------------------------
    Case(
        "4-openai-stream-options-non-streaming", 400,
        openai("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
               type="invalid_request_error", param="stream_options", code=None),
        req(stream_options={"include_usage": True}), "usage_in_stream",
    ),
    Case(
        "4-vllm-stream-options-validator", 400,
        openai("Stream options can only be defined when `stream=True`.",
               type="BadRequestError", param=None, code=400),
        req(stream=True, stream_options={"include_usage": True}), "usage_in_stream",
    ),
    Case(
        "4-fireworks-extra-inputs-stream-options", 400,
        b"Error: 400 Extra inputs are not permitted, field: 'stream_options'",
        req(stream=True, stream_options={"include_usage": True}), "usage_in_stream",
    ),
    Case(
        "4-azure-unrecognized-stream-options", 400,
        openai("Unrecognized request argument supplied: stream_options"),
        req(stream=True, stream_options={"include_usage": True}), "usage_in_stream",
    ),
    Case(
        "4-o-series-parallel-tool-calls", 400,
        openai("Unsupported parameter: 'parallel_tool_calls' is not supported with this model.",
               type="invalid_request_error", param="parallel_tool_calls",
               code="unsupported_parameter"),
        req(tools=TOOLS, parallel_tool_calls=True), "refused_field", ("parallel_tool_calls",),
    ),
    Case(
        "4-parallel-tool-calls-without-tools", 400,
        openai("Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed "
               "when 'tools' are specified.", param="parallel_tool_calls", code=None),
        req(parallel_tool_calls=True), None,
    ),
    Case(
        "4-azure-old-unrecognized-parallel-tool-calls", 400,
        openai("Unrecognized request argument supplied: parallel_tool_calls",
               type="invalid_request_error"),
        req(tools=TOOLS, parallel_tool_calls=False), "refused_field", ("parallel_tool_calls",),
    ),
    Case(
        "4-gemini-array-parallel-tool-calls", 400,
        orjson.dumps([{"error": {"code": 400, "message": 'Invalid JSON payload received. Unknown '
                                 'name "parallel_tool_calls": Cannot find field.',
                                 "status": "INVALID_ARGUMENT", "details": [{
                                     "@type": "type.googleapis.com/google.rpc.BadRequest",
                                     "fieldViolations": [{"description": "Invalid JSON payload "
                                         'received. Unknown name "parallel_tool_calls": Cannot '
                                         "find field."}]}]}}]),
        req(tools=TOOLS, parallel_tool_calls=True), "refused_field", ("parallel_tool_calls",),
    ),
    # --- 5. unknown fields ----------------------------------------------------------------------
    Case(
        "5-openai-unrecognized-top-k", 400,
        openai("Unrecognized request argument supplied: top_k", type="invalid_request_error",
               param=None, code=None),
        req(top_k=40), "refused_field", ("top_k",),
    ),
    Case(
        "5-litellm-system-prompt-not-droppable", 400,
        b"litellm.BadRequestError: OpenAIException - Unrecognized request argument supplied: "
        b"system_prompt",
        req(system_prompt="x"), None,
    ),
    Case(
        "5-openai-unrecognized-thinking-not-droppable", 400,
        openai("Unrecognized request argument supplied: thinking", type="invalid_request_error"),
        req(thinking={"type": "enabled"}), None,
    ),
    Case(
        "5-responses-response-format-moved", 400,
        openai("Unsupported parameter: 'response_format'. In the Responses API, this parameter "
               "has moved to 'text.format'. Try again with the new parameter. See the API "
               "documentation for more information: "
               "https://platform.openai.com/docs/api-reference/responses/create."),
        req(response_format=SCHEMA_FORMAT), "structured_output",
    ),
    Case(
        "5-vllm-tools-extra-forbidden", 400,
        b'{"object":"error","message":"[{\'type\': \'extra_forbidden\', \'loc\': (\'body\', '
        b"'tool_choice'), 'msg': 'Extra inputs are not permitted', 'input': 'auto'}, {'type': "
        b"'extra_forbidden', 'loc': ('body', 'tools'), 'msg': 'Extra inputs are not permitted'}]"
        b'","type":"BadRequestError","param":null,"code":400}',
        req(tools=TOOLS, tool_choice="auto"), "native_tools",
    ),
    Case(
        "5-vllm-mistral-tokenizer-message-name", 400,
        openai("1 validation error for ChatCompletionRequest\nmessages.0.user.name\n  Extra "
               "inputs are not permitted [type=extra_forbidden, input_value='bob', "
               "input_type=str]"),
        req(), None,
    ),
    Case(
        "5-mistral-422-message-extras", 422,
        orjson.dumps({"object": "error", "message": {"detail": [
            {"type": "extra_forbidden", "loc": ["body", "messages", 0, "user", "name"],
             "msg": "Extra inputs are not permitted", "input": None}]},
            "type": "invalid_request_error", "param": None, "code": None}),
        req(), None,
    ),
    Case(
        "5-mistral-safe-prompt-not-droppable", 422,
        orjson.dumps({"object": "error", "message": {"detail": [
            {"type": "extra_forbidden", "loc": ["body", "safe_prompt"],
             "msg": "Extra inputs are not permitted"}]}, "type": "invalid_request_error"}),
        req(safe_prompt=True), None,
    ),
    Case(
        "5-mistral-422-seed-extra-forbidden", 422,
        orjson.dumps({"object": "error", "message": {"detail": [
            {"type": "extra_forbidden", "loc": ["body", "seed"],
             "msg": "Extra inputs are not permitted", "input": 7}]},
            "type": "invalid_request_error", "param": None, "code": None}),
        req(seed=7), "refused_field", ("seed",),
    ),
    Case(
        "5-mistral-newer-envelope-tools", 422,
        orjson.dumps({"object": "Error", "detail": [{"type": "extra_forbidden",
                                                     "loc": ["body", "tools"],
                                                     "msg": "Extra inputs are not permitted",
                                                     "input": []}],
                      "message": [], "type": "invalid_request_error", "code": 3001}),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "5-llamacpp-completions-best-of", 500,
        orjson.dumps({"error": {"code": 500, "message": "Unsupported param: best_of",
                                "type": "server_error"}}),
        req(best_of=2), None,
    ),
    # OpenAI's realtime models name the kind of thing between name and verb (a client's tests of
    # "the refusal seen in production") [3P]; `languages` is not droppable...
    Case(
        "5-openai-realtime-parameter-not-supported", 400,
        openai("The 'languages' parameter is not supported for this model."),
        req(languages=["en"]), None,
    ),
    Case(
        "5-gemini-unknown-name-top-k", 400,
        orjson.dumps([{"error": {"code": 400, "message": 'Invalid JSON payload received. Unknown '
                                 'name "top_k": Cannot find field.',
                                 "status": "INVALID_ARGUMENT"}}]),
        req(top_k=20), "refused_field", ("top_k",),
    ),
    # --- 6. response_format ---------------------------------------------------------------------
    Case(
        "6-openai-json-schema-not-supported", 400,
        openai("Invalid parameter: 'response_format' of type 'json_schema' is not supported "
               "with this model. Learn more about supported models at the Structured Outputs "
               "guide: https://platform.openai.com/docs/guides/structured-outputs",
               type="invalid_request_error", param=None, code=None),
        req(response_format=SCHEMA_FORMAT), "structured_output",
    ),
    Case(
        "6-openai-json-object-not-supported", 400,
        openai("Invalid parameter: 'response_format' of type 'json_object' is not supported "
               "with this model.", param="response_format", code=None),
        req(response_format={"type": "json_object"}), "structured_output",
    ),
    Case(
        "6-deepseek-response-format-unavailable", 400,
        openai("This response_format type is unavailable now", type="invalid_request_error",
               param=None, code="invalid_request_error"),
        req(response_format=SCHEMA_FORMAT), "structured_output",
    ),
    Case(
        "6-deepseek-422-json-schema-unavailable", 422,
        b"Failed to deserialize the JSON body into the target type: response_format: "
        b"response_format.type `json_schema` is unavailable now at line 1 column 12440",
        req(response_format=SCHEMA_FORMAT), "structured_output",
    ),
    Case(
        "6-deepseek-json-word-missing", 400,
        openai("Prompt must contain the word 'json' in some form to use 'response_format' of "
               "type 'json_object'"),
        req(response_format={"type": "json_object"}), None,
    ),
    Case(
        "6-volcengine-json-schema-invalid-value", 400,
        orjson.dumps({"error": {"code": "InvalidParameter", "message": "The parameter "
            "`response_format.type` specified in the request are not valid: invalid value: "
            "`json_schema`, supported values are: `json_object` and `text`. Request id: x",
            "param": "response_format.type", "type": "BadRequest"}}),
        req(response_format=SCHEMA_FORMAT), "structured_output",
    ),
    # Groq writes the field in words (several clients quote it, one with the models it hit:
    # llama-3.3-70b-versatile, qwen3-32b, llama-3.1-8b-instant) [3P]
    Case(
        "6-groq-does-not-support-response-format-json-schema", 400,
        openai("This model does not support response format `json_schema`. See supported "
               "models at https://console.groq.com/docs/structured-outputs#supported-models",
               type="invalid_request_error"),
        req(response_format=SCHEMA_FORMAT), "structured_output",
    ),
    Case(
        "6-llamacpp-response-format-must-be-one-of", 400,
        orjson.dumps({"error": {"code": 400, "message": 'response_format type must be one of '
                                '"text" or "json_object", but got: json_schema',
                                "type": "invalid_request_error"}}),
        req(response_format=SCHEMA_FORMAT), "structured_output",
    ),
    Case(
        "6-llamacpp-derived-illegal-param", 500,
        orjson.dumps({"error": {"code": 500, "message": 'Illegal param: "response_format" must '
                                'be one of "text" or "json_object", but got: json_schema',
                                "type": "server_error"}}),
        req(response_format=SCHEMA_FORMAT), "structured_output",
    ),
    Case(
        "6-llamacpp-json-schema-and-grammar", 500,
        orjson.dumps({"error": {"code": 500, "message": "Cannot use both json_schema and grammar",
                                "type": "server_error"}}),
        req(response_format=SCHEMA_FORMAT, grammar="root ::= x"), None,
    ),
    Case(
        "6-llamacpp-grammar-with-tools", 400,
        orjson.dumps({"error": {"code": 400, "message": "Cannot use custom grammar constraints "
                                "with tools.", "type": "invalid_request_error"}}),
        req(tools=TOOLS, grammar="root ::= x"), None,
    ),
    Case(
        "6-llamacpp-old-500-unrecognized-schema", 500,
        b'{"error": {"code": 500, "message": "JSON schema conversion failed:\\nUnrecognized '
        b'schema: {\\"required\\":[\\"instructions\\"]}\\n", "type": "server_error"}}',
        req(tools=TOOLS), "strict_schemas",
    ),
    Case(
        "6-llamacpp-new-400-unrecognized-schema", 400,
        b'{"error":{"code":400,"message":"JSON schema conversion failed:\\nUnrecognized schema: '
        b'{\\"description\\":\\"Arguments for the tool (JSON object)\\"}","type":'
        b'"invalid_request_error"}}',
        req(tools=TOOLS), "strict_schemas",
    ),
    Case(
        "6-llamacpp-parser-generation-schema-failure", 400,
        openai("Unable to generate parser for this template. Automatic parser generation "
               "failed: JSON schema conversion failed:\nPattern must start with '^' and end "
               "with '$'", type="invalid_request_error"),
        req(tools=TOOLS), "strict_schemas",
    ),
    Case(
        "6-llamacpp-sampling-json-schema-prefix", 500,
        openai('"json_schema": JSON schema conversion failed:\nUnsupported ref: '
               "https://example.com/x.json", type="server_error"),
        req(response_format=SCHEMA_FORMAT), "strict_schemas",
    ),
    Case(
        "6-llamacpp-failed-to-parse-grammar", 500,
        openai("failed to parse grammar", type="server_error"),
        req(response_format=SCHEMA_FORMAT), "strict_schemas",
    ),
    Case(
        "6-llamacpp-error-parsing-grammar", 500,
        openai("error parsing grammar: expecting name at ]", type="server_error"),
        req(tools=TOOLS), "strict_schemas",
    ),
    Case(
        "6-openai-invalid-schema-response-format", 400,
        openai("Invalid schema for response_format 'default': In context=(), "
               "'additionalProperties' is required to be supplied and to be false.",
               type="invalid_request_error", param="response_format", code=None),
        req(response_format=SCHEMA_FORMAT), None,
    ),
    Case(
        "6-openrouter-azure-invalid-schema-nested", 400,
        orjson.dumps({"error": {"message": "Provider returned error", "code": 400, "metadata": {
            "raw": openai("Invalid schema for response_format 'json_schema': In context=("
                          "'properties', 'etymology'), 'additionalProperties' is required to "
                          "be supplied and to be false.").decode(),
            "provider_name": "Azure"}}}),
        req(response_format=SCHEMA_FORMAT), None,
    ),
    Case(
        "6-codex-invalid-json-schema", 400,
        openai("Invalid schema for response_format 'codex_output_schema': In context=(), "
               "'additionalProperties' is required to be supplied and to be false.",
               code="invalid_json_schema", param="text.format.schema"),
        req(response_format=SCHEMA_FORMAT), None,
    ),
    # --- 7. tools ------------------------------------------------------------------------------
    Case(
        "7-ollama-native-does-not-support-tools", 400,
        orjson.dumps({"error": "registry.ollama.ai/library/Qwen3.5:0.8b does not support tools"}),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-ollama-v1-api-error-does-not-support-tools", 400,
        openai("registry.ollama.ai/library/gemma3:4b does not support tools", type="api_error",
               param=None, code=None),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-ollama-027-short-name", 400,
        openai("llama3 does not support tools", type="api_error", param=None, code=None),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-llamacpp-b4369-unsupported-param-tools", 500,
        orjson.dumps({"code": 500, "message": "Unsupported param: tools", "type": "server_error"}),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-llamacpp-derived-jinja-mode-required", 500,
        openai("Unsupported param (--jinja mode required for tool call): tools"),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-llamacpp-tools-requires-jinja", 500,
        orjson.dumps({"error": {"code": 500, "message": "tools param requires --jinja flag",
                                "type": "server_error"}}),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-llamacpp-tool-choice-requires-jinja", 500,
        orjson.dumps({"error": {"code": 500, "message": "tool_choice param requires --jinja flag",
                                "type": "server_error"}}),
        req(tools=TOOLS, tool_choice="auto"), "native_tools",
    ),
    Case(
        "7-vllm-auto-tool-choice-flags", 400,
        openai('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
               "to be set", type="BadRequestError", param=None, code=400),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-vllm-tool-choice-without-tools", 400,
        openai("When using `tool_choice`, `tools` must be set.", type="BadRequestError"),
        req(tool_choice="auto"), None,
    ),
    Case(
        "7-vllm-invalid-tool-choice-value", 400,
        openai('Invalid value for `tool_choice`: any! Only named tools, "none", "auto" or '
               '"required" are supported.', type="BadRequestError"),
        req(tools=TOOLS, tool_choice="any"), None,
    ),
    Case(
        "7-vllm-tool-choice-no-match", 400,
        openai("The tool specified in `tool_choice` does not match any of the specified `tools`",
               type="BadRequestError"),
        req(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "x"}}), None,
    ),
    Case(
        "7-vllm-05-only-named-tools", 400,
        b'{"object":"error","message":"[{\'type\': \'value_error\', \'loc\': (\'body\',), '
        b"'msg': 'Value error, Currently only named tools are supported.'}]\","
        b'"type":"BadRequestError","param":null,"code":400}',
        req(tools=TOOLS, tool_choice="auto"), "native_tools",
    ),
    Case(
        "7-openrouter-no-endpoints-tool-use-old-url", 404,
        openai("No endpoints found that support tool use. To learn more about provider "
               "routing, visit: https://openrouter.ai/docs/provider-routing", code=404),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-openrouter-no-endpoints-tool-use-new-url", 404,
        openai('No endpoints found that support tool use. To learn more about provider routing, '
               "visit: https://openrouter.ai/docs/guides/routing/provider-selection Try "
               'disabling "question".', code=404),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-openrouter-no-endpoints-tool-choice", 404,
        openai("No endpoints found that support the provided 'tool_choice' value. To learn more "
               "about provider routing, visit: https://openrouter.ai/docs/provider-routing",
               code=404),
        req(tools=TOOLS, tool_choice="required"), "native_tools",
    ),
    Case(
        "7-deepseek-reasoner-function-calling", 400,
        openai("deepseek-reasoner does not support Function Calling",
               type="invalid_request_error", param=None, code="invalid_request_error"),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-deepseek-reasoning-content-passed-back", 400,
        openai("The reasoning_content in the thinking mode must be passed back to the API."),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-deepseek-missing-reasoning-content", 400,
        openai("Missing `reasoning_content` field in the assistant message at message index 2. "
               "For more information, please refer to "
               "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-deepinfra-405-tool-calling", 405,
        orjson.dumps({"status": "failure", "message": "deepinfra error: Tool calling is not "
                      "supported for model: mistralai/Mistral-Small-24B-Instruct-2501",
                      "error": {"message": "…", "type": "APIError", "code": "405"}}),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-groq-tools-not-supported", 400,
        openai("`tools` is not supported with this model.", type="invalid_request_error"),
        req(tools=TOOLS), "native_tools",
    ),
    Case(
        "7-groq-tools-item-limit", 400,
        openai("'tools' : maximum number of items is 128", type="invalid_request_error"),
        req(tools=TOOLS * 129), None,
    ),
    Case(
        "7-openai-invalid-schema-required-missing", 400,
        openai("Invalid schema for function 'mysql_execute': In context=(), 'required' is "
               "required to be supplied and to be an array including every key in properties. "
               "Missing 'params'.", param="tools[1].parameters",
               code="invalid_function_parameters"),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-openai-invalid-schema-missing-properties", 400,
        openai("Invalid schema for function 'mongodb-list-databases': In context=(), object "
               "schema missing properties.", param="tools[1].function.parameters",
               code="invalid_function_parameters"),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-openai-invalid-schema-type-key", 400,
        openai("Invalid schema for function 'odoo_model_inspector': In context=('properties', "
               "'method_name_filter'), schema must have a 'type' key.", param=None, code=None),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-openai-invalid-schema-not-object", 400,
        openai("Invalid schema for function 'knowledge_books': [] is not of type 'object'."),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-deepseek-invalid-schema-type-null", 400,
        openai("Invalid schema for function 'codex_app__automation_update': schema must be a "
               "JSON Schema of 'type: \"object\"', got 'type: null'."),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-moonshot-flavored-schema", 400,
        openai("Invalid request: tools.function.parameters is not a valid moonshot flavored "
               "json schema, details: <At path 'properties.source': type is not defined>",
               type="invalid_request_error"),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-gemini-unknown-name-additional-properties", 400,
        orjson.dumps([{"error": {"code": 400, "message": 'Invalid JSON payload received. Unknown '
                                 "name \"additionalProperties\" at 'tools[0].function_declarations"
                                 "[0].parameters': Cannot find field.",
                                 "status": "INVALID_ARGUMENT"}}]),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-gemini-function-name-invalid", 400,
        openai("* tools[0].function_declarations[53].name: [FIELD_INVALID] Invalid function "
               "name. Must start with a letter or an underscore. Must be a-z, A-Z, 0-9, or "
               "contain underscores (_), dots (.), colons (:), or dashes (-), with a maximum "
               "length of 64."),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-llamacpp-template-failure-with-tools", 400,
        openai("Unable to generate parser for this template. Automatic parser generation "
               "failed: \n------------\nWhile executing CallExpression at line 110\nError: "
               "Jinja Exception: System message must be at the beginning.",
               type="invalid_request_error"),
        req(tools=TOOLS), None,
    ),
    Case(
        "7-qwen-template-no-user-query", 400,
        openai("Unable to generate parser for this template. Automatic parser generation "
               "failed: Jinja Exception: No user query found in messages.",
               type="invalid_request_error"),
        req(tools=TOOLS), None,
    ),
    # --- 8. context overflow and rate-limit look-alikes ----------------------------------------
    Case(
        "8-openai-context-length-exceeded", 400,
        openai("This model's maximum context length is 8192 tokens. However, you requested "
               "8256 tokens (64 in the messages, 8192 in the completion). Please reduce the "
               "length of the messages or completion.", type="invalid_request_error",
               param="messages", code="context_length_exceeded"),
        req(max_tokens=8192), None,
    ),
    Case(
        "8-gpt5-input-tokens-exceed", 400,
        openai("Input tokens exceed the configured limit of 272000 tokens. Your messages "
               "resulted in 289650 tokens. Please reduce the length of the messages."),
        req(max_tokens=1000), None,
    ),
    Case(
        "8-openai-string-too-long", 400,
        openai("Invalid 'messages[17].content': string too long. Expected a string with "
               "maximum length 1048576, but got a string with length 1744259 instead.",
               code="string_above_max_length"),
        req(), None,
    ),
    Case(
        "8-openai-user-too-long", 400,
        openai("Invalid 'user': string too long. Expected a string with maximum length 64, "
               "but got a string with length 80 instead.", param="user",
               code="string_above_max_length"),
        req(user="u" * 80), None,
    ),
    Case(
        "8-llamacpp-exceed-context-size", 400,
        orjson.dumps({"error": {"code": 400, "message": "the request exceeds the available "
                                "context size. try increasing the context size or enable "
                                "context shift", "type": "exceed_context_size_error",
                                "n_prompt_tokens": 14429, "n_ctx": 8192}}),
        req(max_tokens=100), None,
    ),
    Case(
        "8-llamacpp-current-request-exceeds", 400,
        orjson.dumps({"error": {"code": 400, "message": "request (4476 tokens) exceeds the "
                                "available context size (4096 tokens), try increasing it",
                                "type": "exceed_context_size_error", "n_prompt_tokens": 4476,
                                "n_ctx": 4096}}),
        req(max_tokens=100), None,
    ),
    Case(
        "8-vllm-max-tokens-too-large-both-names", 400,
        openai("'max_tokens' or 'max_completion_tokens' is too large: 16384. This model's "
               "maximum context length is 65536 tokens and your request has 52189 input tokens "
               "(16384 > 65536 - 52189). (parameter=max_tokens, value=16384)",
               type="BadRequestError", param="max_tokens", code=400),
        req(max_tokens=16384), None,
    ),
    Case(
        "8-vllm-input-tokens", 400,
        openai("This model's maximum context length is 32768 tokens. However, your request has "
               "33413 input tokens. Please reduce the length of the input messages. "
               "(parameter=input_tokens, value=33413)", type="BadRequestError"),
        req(), None,
    ),
    Case(
        "8-ollama-prompt-longer-than-context", 400,
        orjson.dumps({"error": "the prompt is longer than the context length currently "
                      "available to the model; shorten the prompt, adjust the context length "
                      "in settings, or use a model with a longer context length"}),
        req(), None,
    ),
    Case(
        "8-lmstudio-n-keep", 400,
        orjson.dumps({"error": "The number of tokens to keep from the initial prompt is greater "
                      "than the context length (n_keep: 13055>= n_ctx: 4096). Try to load the "
                      "model with a larger context length, or provide a shorter input."}),
        req(), None,
    ),
    Case(
        "8-lmstudio-cannot-truncate", 400,
        orjson.dumps({"error": "Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"}),
        req(), None,
    ),
    Case(
        "8-anthropic-prompt-too-long", 400,
        orjson.dumps({"type": "error", "error": {"type": "invalid_request_error", "message":
                      "prompt is too long: 208310 tokens > 200000 maximum"},
                      "request_id": "req_1"}),
        req(), None,
    ),
    Case(
        "8-anthropic-output-cap", 400,
        orjson.dumps({"type": "error", "error": {"type": "invalid_request_error", "message":
                      "max_tokens: 21333 > 4096, which is the maximum allowed number of output "
                      "tokens for claude-3-opus-20240229"}}),
        req(max_tokens=21333), None,
    ),
    Case(
        "8-gemini-input-token-count", 400,
        orjson.dumps({"error": {"code": 400, "message": "The input token count (1200293) exceeds "
                                "the maximum number of tokens allowed (1048576).",
                                "status": "INVALID_ARGUMENT"}}),
        req(), None,
    ),
    Case(
        "8-openai-tpm-request-too-large", 429,
        openai("Request too large for gpt-4o in organization org-x on tokens per min (TPM): "
               "Limit 30000, Requested 36278. The input or output tokens must be reduced in "
               "order to run successfully.", type="tokens", param=None,
               code="rate_limit_exceeded"),
        req(), None,
    ),
    Case(
        "8-groq-413-request-too-large", 413,
        openai("Request too large for model : Limit 6000, Requested 7591"),
        req(), None,
    ),
    # --- 9. transient and auth --------------------------------------------------------------------
    Case(
        "9-openai-rate-limit", 429,
        openai("Rate limit reached for gpt-4o in organization x on tokens per min (TPM): Limit "
               "30000, Used 14567, Requested 24754. Please try again in 18.642s.",
               type="tokens", code="rate_limit_exceeded"),
        req(), None,
    ),
    Case(
        "9-openai-insufficient-quota", 429,
        openai("You exceeded your current quota, please check your plan and billing details.",
               type="insufficient_quota", param=None, code="insufficient_quota"),
        req(), None,
    ),
    Case(
        "9-anthropic-overloaded", 529,
        orjson.dumps({"type": "error", "error": {"type": "overloaded_error",
                                                 "message": "Overloaded"}}),
        req(), None,
    ),
    Case(
        "9-llamacpp-loading-model", 503,
        orjson.dumps({"error": {"code": 503, "message": "Loading model",
                                "type": "unavailable_error"}}),
        req(), None,
    ),
    Case(
        "9-ollama-server-busy", 503,
        openai("server busy, please try again.  maximum pending requests exceeded",
               type="api_error"),
        req(), None,
    ),
    Case(
        "9-vllm-internal-error", 500,
        openai("Internal server error", type="InternalServerError", code=500),
        req(), None,
    ),
    Case(
        "9-auth-401-naming-a-field", 401,
        openai("Unrecognized request argument supplied: top_k (invalid api key)"),
        req(top_k=5), None,
    ),
    Case(
        "9-openai-model-not-found-404", 404,
        openai("The model `gpt-9` does not exist or you do not have access to it.",
               code="model_not_found"),
        req(top_k=5), None,
    ),
    # --- 10. roles, n, logprobs -----------------------------------------------------------------
    Case(
        "10-deepseek-developer-role", 400,
        b"Failed to deserialize the JSON body into the target type: messages[0].role: unknown "
        b"variant `developer`, expected one of `system`, `user`, `assistant`, `tool`, "
        b"`latest_reminder` at line 1 column 60",
        req(), None,
    ),
    Case(
        "10-o1-system-role", 400,
        openai("Unsupported value: 'messages[0].role' does not support 'system' with this "
               "model.", param="messages[0].role", code="unsupported_value"),
        req(), None,
    ),
    Case(
        "10-openai-max-tokens-zero", 400,
        openai("0 is less than the minimum of 1 - 'max_tokens'"),
        req(max_tokens=0), None,
    ),
    Case(
        "10-vllm-max-tokens-at-least-1", 400,
        b"{'object': 'error', 'message': 'max_tokens must be at least 1, got -3197.', 'type': "
        b"'BadRequestError', 'param': None, 'code': 400}",
        req(max_tokens=-3197), None,
    ),
    Case(
        "10-llamacpp-old-one-choice", 500,
        orjson.dumps({"error": {"code": 500, "message": "Only one completion choice is allowed",
                                "type": "server_error"}}),
        req(n=2), None,
    ),
    Case(
        "10-groq-n-at-most-1", 400,
        openai("n must be at most 1", type="invalid_request_error"),
        req(n=3), None,
    ),
    Case(
        "10-llamacpp-logprobs-tools-stream", 400,
        openai("logprobs is not supported with tools + stream", type="invalid_request_error"),
        req(logprobs=True, tools=TOOLS, stream=True), None,
    ),
    Case(
        "10-llamacpp-top-logprobs-requires-logprobs", 400,
        openai("top_logprobs requires logprobs to be set to true"),
        req(top_logprobs=3), None,
    ),
    Case(
        "10-vllm-top-logprobs-requires-logprobs", 400,
        openai("when using `top_logprobs`, `logprobs` must be set to true."),
        req(top_logprobs=3), None,
    ),
    # --- 11. LiteLLM ---------------------------------------------------------------------------
    Case(
        "11-litellm-unsupported-params-several", 400,
        openai("litellm.UnsupportedParamsError: openai does not support parameters: "
               "['presence_penalty', 'frequency_penalty'], for model=o3. To drop these, set "
               "`litellm.drop_params=True` or for proxy:\n\n`litellm_settings:\n drop_params: "
               "true`\n.", type="invalid_request_error", param=None, code="400"),
        req(presence_penalty=0.1, frequency_penalty=0.2), "refused_field",
        ("presence_penalty", "frequency_penalty"),
    ),
]
