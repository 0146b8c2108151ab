"""Which build of the request path's hot modules runs: compiled with mypyc, or their sources.

A tools stream's cost over a relay is Python's own: some 200 calls a stream, spread over a dozen
steps, none worth more than a few µs (bench/RESULTS.md, issue 17). mypyc compiles a module from
its type hints to a C extension that runs the same code with native calls and attributes: with
the modules named here compiled, a native call's stream takes 0.58 of its time in a loop
(`bench/bench_stream_events.py`). So the build (setup.py) compiles them when it can, and the
sources stay the truth: the same files, read by people, by mypy and, when asked, by Python.

The build writes `proxy/_built.py`: the sha-256 of each source it compiled. At the package's
import (`proxy/__init__`), `select` loads every one of them from its source instead when
LATCHGATE_PURE=1 is set, or when a source no longer is what was compiled (edited after an
editable install). All or none: compiled modules call each other directly, and a mix would hold
two copies of a class. Pure functions, and `select` the one place that installs the finder.

Only modules that do not recurse are named here: compiled code does not count Python's recursion
limit, and a recursion driven by the input would end in a crash, not a RecursionError
(tests/repo checks it).

A dataclass made on every request writes its own `__init__` (`init=False`). mypyc compiles the
methods a class's source holds, but the ones `@dataclass` generates run interpreted: making a
three-field event took 175 ns that way, 340 frozen, and 23 compiled. Frozen ones set their fields
with `object.__setattr__`, as the generated one does (mypyc compiles that call to a store).
tests/http/test_native_constructors.py sends each kind of request and fails if a generated
`__init__` of these modules ran.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

# The modules compiled, as dotted names. Hot modules left out: those that recurse (agent.schemas,
# observe.logs, toolcalls.values); upstreams.client, whose classes the unit tests stand in
# for; agent.negotiate, whose `Notice` derives from `str`
# (mypyc compiles no such class); and those with a class derived from a dependency's
# (fronts.chatstream and the fronts' events, path.client: aiohttp's StreamResponse;
# observe.metrics: prometheus_client's Collector). The build does not have the dependencies, and
# two builds of observe.metrics made different code, one of which broke on its first attribute
# lookup (tests/repo checks that no compiled class has such a base). The tool-call formats'
# module-level values are annotated: without the dependencies, mypy could not infer them
# through the import cycle of toolcalls.formats, and the build failed.
MODULES = (
    "proxy.agent.healing",
    "proxy.agent.retry",
    "proxy.agent.sizing",
    "proxy.http.app",
    "proxy.http.auth",
    "proxy.http.bodies",
    "proxy.http.jobs",
    "proxy.http.request_ids",
    "proxy.http.routing",
    "proxy.http.validate",
    "proxy.knowntools",
    "proxy.observe.counting",
    "proxy.observe.events",
    "proxy.observe.masking",
    "proxy.path.answers",
    "proxy.path.attempts",
    "proxy.path.chunks",
    "proxy.path.deadlines",
    "proxy.path.holding",
    "proxy.path.job",
    "proxy.path.keepalive",
    "proxy.path.layer",
    "proxy.path.reask",
    "proxy.path.sending",
    "proxy.path.sse",
    "proxy.path.stream_relay",
    "proxy.path.text_events",
    "proxy.path.usage",
    "proxy.path.whole",
    "proxy.toolcalls.arguments",
    "proxy.toolcalls.formats.tagged",
    "proxy.toolcalls.leading",
    "proxy.toolcalls.recovery",
    "proxy.toolcalls.scan",
    "proxy.toolcalls.spans",
    "proxy.toolcalls.stream",
    "proxy.toolcalls.validation",
    "proxy.toolcalls.values",
    "proxy.upstreams.pool",
    "proxy.upstreams.transport",
)

PURE_ENV = "LATCHGATE_PURE"  # set to 1: run the sources, compiled or not
_ROOT = Path(__file__).resolve().parent.parent  # the folder that holds the `proxy` package


def source_of(module: str, root: Path = _ROOT) -> Path:
    """The source file of the dotted `module` under `root`."""
    return root.joinpath(*module.split(".")).with_suffix(".py")


def digest(path: Path) -> str:
    """The sha-256 of a file's bytes, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def built_text(root: Path = _ROOT) -> str:
    """The text of `proxy/_built.py`, which the build writes beside what it compiled: each of
    MODULES with its source's digest (read back by `select` as `SOURCES`)."""
    lines = ['"""Written by setup.py: the sha-256 of each source compiled with mypyc."""', ""]
    lines.append("SOURCES = {")
    lines += [f'    "{m}": "{digest(source_of(m, root))}",' for m in MODULES]
    return "\n".join([*lines, "}", ""])


def stale(built: Mapping[str, str], root: Path = _ROOT) -> list[str]:
    """The compiled modules whose source differs from the one compiled (`built`: module ->
    digest, as the build recorded them), that the build did not record, or whose extension is
    not beside the source (a tree whose build was installed elsewhere)."""
    out = []
    for module in MODULES:
        path = source_of(module, root)
        if (
            module not in built
            or not path.is_file()
            or not _extension_beside(path)
            or digest(path) != built[module]
        ):
            out.append(module)
    return out


def _extension_beside(source: Path) -> bool:
    return any(
        source.with_suffix(suffix).is_file() for suffix in importlib.machinery.EXTENSION_SUFFIXES
    )


def is_compiled(module: ModuleType) -> bool:
    """Whether `module` was loaded from a compiled extension."""
    return isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader)


class _Sources(importlib.abc.MetaPathFinder):
    """Finds the compiled modules' sources, ahead of the extensions beside them."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        name = fullname.rpartition(".")[2] + ".py"
        for folder in path or ():
            candidate = Path(folder, name)
            if candidate.is_file():
                return importlib.util.spec_from_file_location(fullname, candidate)
        return None


def reason_for_sources(
    built: Mapping[str, str] | None, environ: Mapping[str, str], root: Path = _ROOT
) -> str | None:
    """Why the sources of MODULES run rather than their compiled build (`built`: what the build
    recorded, None when it compiled nothing); None when the compiled build runs."""
    if built is None:
        return "nothing compiled"
    if environ.get(PURE_ENV) == "1":
        return f"{PURE_ENV}=1"
    if changed := stale(built, root):
        return f"{len(changed)} changed since compiled, e.g. {changed[0]}"
    return None


# What `select` decided, for the startup log: "compiled", or "sources (why)".
build = "sources (not selected yet)"


def select() -> str:
    """Decide, once per process and before any of them is imported, which build of MODULES
    runs; the decision, for the startup log."""
    global build
    if any(isinstance(finder, _Sources) for finder in sys.meta_path):
        return build
    try:
        built = importlib.import_module("proxy._built").SOURCES  # written by a build that compiled
    except ImportError:
        built = None
    why = reason_for_sources(built, os.environ)
    if why is None:
        build = "compiled"
        return build
    build = f"sources ({why})"
    if built is not None:
        sys.meta_path.insert(0, _Sources())
    return build
