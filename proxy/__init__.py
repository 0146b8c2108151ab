"""latchgate: an OpenAI-compatible reverse proxy that adds the agent layer between clients and
model servers."""

from proxy import compiled

__version__ = "0.1.0"

# Before any module of the request path is imported: which build of its hot modules runs.
compiled.select()
