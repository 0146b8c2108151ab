"""The modules compiled with mypyc (proxy.compiled.MODULES) do not recurse, and derive no class
from a dependency's.

Compiled code does not count Python's recursion limit: a recursion the input drives deep enough
ends the process with a crash where the sources raise RecursionError (which latchgate answers
with an error). So no function of these modules may reach itself again through calls made
within them: `f()` and `self.f()` to a function or method of a compiled module, read from the
source with `ast`. Calls through other objects (`self.inner.feed()`) are not followed; they leave
the compiled modules or go to a processor, none of which calls back into them.

`BOUNDED` lists the cycles that exist and cannot run deep, each with the reason.

The build runs without the dependencies (aiohttp, prometheus_client), so a class derived from
one of theirs is derived from a type mypyc cannot see; two builds of such a module made
different code, and one broke at its first attribute lookup. A compiled class derives from
`object`, a class of the same module or a built-in exception, or is a `Protocol`.
"""

from __future__ import annotations

import ast
from pathlib import Path

from proxy import compiled

ROOT = Path(__file__).resolve().parents[2]

# A cycle (its functions, sorted) -> why it stops after a step or two.
BOUNDED: dict[tuple[str, ...], str] = {
    (
        "proxy.toolcalls.stream:StreamToolProcessor._pass_opening",
        "proxy.toolcalls.stream:StreamToolProcessor.pass_texts",
    ): "_pass_opening runs only while the processor has no choice, and makes one before it "
    "calls pass_texts, which then does not call it again: one level",
}


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(module: str, source: str | None = None) -> dict[str, Function]:
    """A module's functions and methods, `module:name` and `module:Class.name`, and the
    functions nested in them, `module:name.<locals>.inner` (from `source` when given)."""
    tree = ast.parse(source or compiled.source_of(module, ROOT).read_text())
    found: dict[str, Function] = {}
    for node in tree.body:
        if isinstance(node, Function):
            found[f"{module}:{node.name}"] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, Function):
                    found[f"{module}:{node.name}.{item.name}"] = item
    for key, node in list(found.items()):
        for inner in ast.walk(node):
            if inner is not node and isinstance(inner, Function):
                found[f"{key}.<locals>.{inner.name}"] = inner  # as Python's __qualname__
    return found


def _imported(module: str) -> dict[str, str]:
    """Names a module imports from other compiled modules -> `module:name`."""
    tree = ast.parse(compiled.source_of(module, ROOT).read_text())
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in compiled.MODULES:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    return names


def _calls(key: str, node: ast.AST, imported: dict[str, str], known: set[str]) -> set[str]:
    """The compiled functions `key`'s body calls by name or through `self`."""
    module, _, qualname = key.partition(":")
    owner = qualname.rpartition(".")[0]
    out = set()
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        target = sub.func
        nested = _nested(module, qualname, target, known)
        if nested is not None:  # a function nested in an enclosing one (`branch` in `branch`)
            callee = nested
        elif isinstance(target, ast.Name):
            callee = imported.get(target.id, f"{module}:{target.id}")
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id in ("self", "cls")
            and owner
        ):
            callee = f"{module}:{owner}.{target.attr}"
        else:
            continue
        if callee in known:
            out.add(callee)
    return out


def _nested(module: str, qualname: str, target: ast.expr, known: set[str]) -> str | None:
    """The nested function a call by name reaches, looked for from the innermost scope out."""
    if not isinstance(target, ast.Name):
        return None
    parts = qualname.split(".")
    for depth in range(len(parts), 0, -1):
        key = f"{module}:{'.'.join(parts[:depth])}.<locals>.{target.id}"
        if key in known:
            return key
    return None


def _graph() -> dict[str, set[str]]:
    functions = {}
    imported = {}
    for module in compiled.MODULES:
        for key, node in _functions(module).items():
            functions[key] = node
            imported[key] = _imported(module)
    known = set(functions)
    return {key: _calls(key, node, imported[key], known) for key, node in functions.items()}


def _cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The functions of each cycle (each set sorted), found from every function."""
    found = set()
    for start in graph:
        stack = [(start, (start,))]
        seen = set()
        while stack:
            node, path = stack.pop()
            for callee in graph[node]:
                if callee == start:
                    found.add(tuple(sorted(path)))
                elif callee not in seen:
                    seen.add(callee)
                    stack.append((callee, (*path, callee)))
    return found


def test_the_walk_sees_calls_by_name_and_through_self() -> None:
    graph = _graph()
    relay = "proxy.path.stream_relay:StreamRelay"
    assert f"{relay}._pass_texts" in graph[f"{relay}._events"]
    assert "proxy.path.sse:next_block" in graph[f"{relay}._events"]  # imported from sse


def test_the_walk_sees_a_nested_function_call_itself() -> None:
    source = (
        "def outer(t):\n"
        "    def branch(n):\n"
        "        return [branch(c) for c in n]\n"
        "    return branch(t)\n"
    )
    functions = _functions("m", source)
    graph = {key: _calls(key, node, {}, set(functions)) for key, node in functions.items()}
    assert graph["m:outer"] == {"m:outer.<locals>.branch"}
    assert ("m:outer.<locals>.branch",) in _cycles(graph)


def test_no_compiled_function_reaches_itself() -> None:
    cycles = _cycles(_graph())
    unexplained = sorted(cycles - set(BOUNDED))
    assert not unexplained, f"recursion in compiled modules (see the docstring): {unexplained}"
    assert not set(BOUNDED) - cycles, "a cycle in BOUNDED is gone: remove it"


ALLOWED_BASES = {"Protocol", "Exception", "ValueError", "RuntimeError", "NamedTuple"}


def test_no_compiled_class_derives_from_a_dependencys() -> None:
    foreign = []
    for module in compiled.MODULES:
        tree = ast.parse(compiled.source_of(module, ROOT).read_text())
        own = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        for node in tree.body:
            bases = [ast.unparse(base) for base in getattr(node, "bases", ())]
            if isinstance(node, ast.ClassDef) and "Protocol" not in bases:  # an interface alone
                foreign += [f"{module}:{node.name}({b})" for b in bases
                            if b not in own and b not in ALLOWED_BASES]  # fmt: skip
    assert not foreign, f"compiled classes with a base mypyc cannot see: {foreign}"
