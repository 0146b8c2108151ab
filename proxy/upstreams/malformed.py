"""The one error the request path's HTTP client (`upstreams.transport`) adds to aiohttp's own.

It lives apart from the client because it derives from an aiohttp class: the client is compiled
with mypyc (proxy/compiled.py), which builds without aiohttp and must not compile a class whose
base it cannot see. Raised from compiled code and caught as any aiohttp connection error, it
works the same from here.
"""

from __future__ import annotations

import aiohttp


class MalformedResponse(aiohttp.ClientConnectionError):
    """What the server sent is not an HTTP/1.1 answer: the connection is of no further use."""
