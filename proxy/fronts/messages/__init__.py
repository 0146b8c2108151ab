"""The Anthropic Messages front (`POST /v1/messages`): Claude Code and Anthropic-SDK agents.

| module | what it does |
| --- | --- |
| `request` | a Messages body as a chat body |
| `output` | a chat completion as a Message; stop reasons, usage, tool ids |
| `events` | a chat stream as Messages events, block by block |
| `errors` | every error in Anthropic's shape |
| `front` | the front as the chat path sees it (whole answers, streams) |
"""
