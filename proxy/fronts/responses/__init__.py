"""The Responses API front (`POST /v1/responses`): Codex CLI, the Agents SDK and other clients.

| module | what it does |
| --- | --- |
| `tools` | Responses tools and `tool_choice` as chat tools, and the way back to each tool |
| `items` | input items (messages, calls, outputs, reasoning) as chat messages |
| `request` | a Responses body as a chat body, with the settings the answer echoes |
| `output` | a chat completion as a Response object; usage and status |
| `events` | a chat stream as Responses events, item by item |
| `front` | the front as the chat path sees it (whole answers, streams, errors) |
"""
