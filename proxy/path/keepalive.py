"""Keepalives while a stream waits for its first token, for fronts whose clients expect them.

A local server can take minutes to read a long prompt before its first token. The chat route
says nothing meanwhile (its clients wait), but Anthropic's API sends `ping` events and Codex
resets its idle timer on any event, so a front can ask for keepalives (`Front.keepalive`,
seconds apart). Once the upstream has accepted the request, the client's stream is opened (its
200 committed: a later failure is an error event in the stream, which those SDKs raise) and a
keepalive comment is written every so often until content starts; the front's stream turns
each into its own event (`proxy.fronts.chatstream`).
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from proxy.path import client as out
from proxy.path.job import Job

KEEPALIVE = b": keepalive\n\n"  # an SSE comment: every SSE client skips it


def start(request: web.Request, job: Job) -> asyncio.Task[None] | None:
    """Keepalives for this attempt's wait, when the job's front wants them."""
    front = job.front
    if front is None or front.keepalive <= 0 or job.content_started:
        return None
    return asyncio.ensure_future(_beat(request, job, front.keepalive))


async def _beat(request: web.Request, job: Job, every: float) -> None:
    with contextlib.suppress(out.ClientGone, ConnectionError):
        client = job.response or await out.open_stream(request, job)
        while not job.content_started:
            await out.write(client, KEEPALIVE)
            await asyncio.sleep(every)


def stop(task: asyncio.Task[None] | None) -> None:
    if task is not None and not task.done():
        task.cancel()
