"""Keepalives while a stream waits for its first token, for fronts whose clients expect them.

A local server can take minutes to read a long prompt before its first token. The chat route
says nothing meanwhile (its clients wait), but Anthropic's API sends `ping` events and Codex
resets its idle timer on any event, so a front can ask for keepalives (`Front.keepalive`,
seconds apart). When that long passes with no answer begun, the stream relay opens the client's
stream (its 200 committed: a later failure is an error event in the stream, which those SDKs
raise) and writes a keepalive comment; the front's stream turns it into its own event
(`proxy.fronts.chatstream`). A failure within the first interval stays an HTTP error.
"""

from __future__ import annotations

from aiohttp import web

from proxy.path import client as out
from proxy.path.job import Job

KEEPALIVE = b": keepalive\n\n"  # an SSE comment: every SSE client skips it


async def send(request: web.Request, job: Job) -> None:
    """One keepalive to the client, opening its stream if need be."""
    client = job.response or await out.open_stream(request, job)
    await out.write(client, KEEPALIVE)
