"""latchgate: an OpenAI-compatible reverse proxy that adds the agent layer between clients and
model servers."""

__version__ = "0.1.0"
