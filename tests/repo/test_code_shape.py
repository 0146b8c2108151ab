"""The package's shape: layers import downwards only, no import circles, no function too long.

These are issue 14's "done when" kept as tests, read from the source (`ast` for imports and
lengths, radon for cyclomatic complexity), so nothing is imported or run.

**Layers.** A module imports only modules of the layers below its own, in this order (top first):

    __main__ > cli > http > fronts > path > agent, toolcalls > upstreams, state, observe > bottom

where "bottom" is the package's top-level modules (`proxy/__init__.py`, `settings.py`,
`errors.py`, `headers.py`, `jsontext.py`, `timespec.py`) and every other layer is the folder of
that name under `proxy/`. Modules of one folder may import each other. Folders on one floor are
peers (`agent` and `toolcalls`; `upstreams`, `state` and `observe`): a peer may import another
peer, in one direction only; an import both ways between two peers (or around a ring of them)
fails, as it would mean the two are one layer that was cut in the wrong place. Every import
counts: at module level, inside a function, and under `if TYPE_CHECKING:` (a type-only import is
still a dependency, and the usual way a circle is hidden rather than cut).

**Circles.** The module import graph has no cycle, within a folder or across folders.

**Size.** No function or method (closures included) is longer than `MAX_LINES` lines from its
`def` to its last line, or has a radon cyclomatic complexity above `MAX_COMPLEXITY` (radon counts
a closure apart from the function that holds it). Exceptions are listed in `OVERSIZED` with their
measured numbers: data tables, which read best as one long list, and the functions not yet split
(issue 14). A listed function may shrink but not grow, and an entry that is no longer needed
fails the test until it is removed, so the list only gets shorter.

`UNCUT_IMPORTS` lists, the same way, the imports that still break the layer or circle rules
because the layout moved the files first and the cuts come after (issue 14).
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "proxy"

# Higher floors may import lower ones. Folders on one floor are peers.
FLOORS: dict[str, int] = {
    "__main__": 9,
    "cli": 8,
    "http": 7,
    "fronts": 6,
    "path": 5,
    "agent": 4,
    "toolcalls": 4,
    "upstreams": 3,
    "state": 3,
    "observe": 3,
    "managed": 2,  # the llama-servers latchgate runs: below the upstreams that front them
    "bottom": 1,
}
BOTTOM = frozenset(
    {"proxy", "proxy.settings", "proxy.errors", "proxy.headers", "proxy.jsontext", "proxy.timespec",
     "proxy.lifetime", "proxy.knowntools", "proxy.compiled", "proxy._built"}
)

MAX_LINES = 80
MAX_COMPLEXITY = 20

# (importer, imported) -> why it is still there. Each breaks a rule above; each goes with its cut.
UNCUT_IMPORTS: dict[tuple[str, str], str] = {}  # none left: keep it so

# "module:qualname" -> (lines, complexity) as measured when listed. Data tables are kept on
# purpose; a function issue 14 has yet to split would be listed below them, with its numbers,
# until it is split.
OVERSIZED: dict[str, tuple[int, int]] = {
    # data tables: one call per flag / per metric, read top to bottom
    "proxy.observe.metrics:Metrics._define": (112, 2),
}


# -- reading the package ------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    how: str  # "at module level", "in a function", "under TYPE_CHECKING"

    def __str__(self) -> str:
        path = _modules()[self.importer].relative_to(ROOT)
        return f"{self.importer} -> {self.imported}  ({path}:{self.line}, {self.how})"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its `__init__.py`)."""
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _owning_module(name: str) -> str | None:
    """The package module `name` is, or lives in (`proxy.a.b.thing` -> `proxy.a.b`)."""
    modules = _modules()
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, how: str) -> Iterator[tuple[ast.AST, str]]:
    """Every node under `node`, with where it sits (the innermost of function / TYPE_CHECKING)."""
    for child in ast.iter_child_nodes(node):
        here = how
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            here = "in a function"
        yield child, here
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for part in child.body:
                yield part, "under TYPE_CHECKING"
                yield from _walk(part, "under TYPE_CHECKING")
            for part in child.orelse:
                yield part, here
                yield from _walk(part, here)
        else:
            yield from _walk(child, here)


def _imports_of(module: str) -> list[Import]:
    path = _modules()[module]
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: list[Import] = []
    for node, how in _walk(ast.parse(path.read_text(encoding="utf-8")), "at module level"):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            # `from proxy.observe import logs` imports the module proxy.observe.logs;
            # `from proxy.errors import ProxyError` imports proxy.errors.
            targets = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in _modules() else source
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            if target.split(".")[0] != "proxy":
                continue
            owner = _owning_module(target)
            if owner is not None and owner != module:
                found.append(Import(module, owner, node.lineno, how))
    return found


def _all_imports() -> list[Import]:
    # one entry per (importer, imported, line): `from x import a, b` is one import
    return sorted(
        {(i.importer, i.imported, i.line): i for m in _modules() for i in _imports_of(m)}.values(),
        key=lambda i: (i.importer, i.line, i.imported),
    )


def _floor_of(module: str) -> str | None:
    if module in BOTTOM:
        return "bottom"
    parts = module.split(".")
    if module == "proxy.__main__":
        return "__main__"
    if len(parts) >= 2 and (PACKAGE / parts[1]).is_dir():
        return parts[1] if parts[1] in FLOORS else None
    return None


def _cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _layer_problem(imp: Import) -> str | None:
    """Why an import breaks the layer order (peers are judged together, in `_peer_rings`)."""
    low, high = _floor_of(imp.imported), _floor_of(imp.importer)
    if low is None or high is None or low == high:
        return None
    if FLOORS[high] < FLOORS[low]:
        return f"{high} is below {low}"
    return None


def _peer_rings(imports: list[Import]) -> list[list[str]]:
    """Rings of peer folders importing each other (each folder a node)."""
    edges = set()
    for imp in imports:
        a, b = _floor_of(imp.importer), _floor_of(imp.imported)
        if a and b and a != b and FLOORS[a] == FLOORS[b]:
            edges.add((a, b))
    return _cycles(edges)


def _fail_with(*sections: tuple[str, list[str]]) -> None:
    """Fail with every non-empty section: a title, then one offending item a line."""
    text = "\n".join(title + "\n  " + "\n  ".join(items) for title, items in sections if items)
    if text:
        pytest.fail(text, pytrace=False)


# -- imports ------------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    lost = [m for m in _modules() if _floor_of(m) is None]
    _fail_with(
        (
            "Modules outside the layer contract (add the folder to FLOORS, or the module to "
            "BOTTOM, in tests/unit/test_code_shape.py):",
            lost,
        )
    )


def test_layers_import_only_downwards() -> None:
    imports = [i for i in _all_imports() if (i.importer, i.imported) not in UNCUT_IMPORTS]
    upward = [f"{i}: {why}" for i in imports if (why := _layer_problem(i))]
    rings = _peer_rings(imports)
    crossing = [
        str(i)
        for ring in rings
        for i in imports
        if _floor_of(i.importer) in ring
        and _floor_of(i.imported) in ring
        and _floor_of(i.importer) != _floor_of(i.imported)
    ]
    _fail_with(
        ("Imports against the layer order (a layer imports only the layers below it):", upward),
        (f"Peer folders import each other ({'; '.join(map(' <-> '.join, rings))}):", crossing),
    )


def _shortest_cycle(members: list[str], edges: set[tuple[str, str]]) -> list[str]:
    """One shortest cycle through the first of `members` (a strongly connected component)."""
    inside = set(members)
    start = members[0]
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for a, b in sorted(edges):
                if a != node or b not in inside:
                    continue
                if b == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came[path[-1]])
                    return [*reversed(path), start]
                if b not in came:
                    came[b] = node
                    following.append(b)
        frontier = following
    return members  # not reached: a component holds a cycle through each member


def test_no_import_cycles() -> None:
    imports = [i for i in _all_imports() if (i.importer, i.imported) not in UNCUT_IMPORTS]
    edges = {(i.importer, i.imported) for i in imports}
    lines = []
    for knot in _cycles(edges):
        cycle = _shortest_cycle(knot, edges)
        lines.append(" -> ".join(cycle) + f"   ({len(knot)} modules in this knot)")
        for step in itertools.pairwise(cycle):
            lines += [f"  {i}" for i in imports if (i.importer, i.imported) == step]
    _fail_with(("Import cycles between modules:", lines))


def test_uncut_imports_are_still_there() -> None:
    """An UNCUT_IMPORTS entry whose import is gone, or breaks no rule any more, must go."""
    imports = _all_imports()
    edges = {(i.importer, i.imported) for i in imports}
    cyclic = {frozenset(c) for c in _cycles(edges)}
    stale = []
    for edge in UNCUT_IMPORTS:
        on_cycle = any(edge[0] in c and edge[1] in c for c in cyclic)
        upward = any(_layer_problem(i) for i in imports if (i.importer, i.imported) == edge)
        if edge not in edges or not (on_cycle or upward):
            stale.append(f"{edge[0]} -> {edge[1]}")
    _fail_with(("UNCUT_IMPORTS entries that break nothing now (remove them):", stale))


# -- function size ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    name: str  # "module:Class.method" or "module:function.closure"
    lines: int
    complexity: int


def _functions() -> list[Measured]:
    try:
        from radon.visitors import ComplexityVisitor
    except ImportError:  # pragma: no cover - a dev install has it
        pytest.fail("radon is not installed: pip install -e '.[dev]'")
    measured: list[Measured] = []
    seen: dict[str, int] = {}

    def visit(node: ast.AST, module: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, module, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{module}:{prefix}{child.name}"
                seen[name] = seen.get(name, 0) + 1
                if seen[name] > 1:  # the same name twice in one scope (a property's setter)
                    name = f"{name}#{seen[name]}"
                assert child.end_lineno is not None
                lines = child.end_lineno - child.lineno + 1
                blocks = ComplexityVisitor.from_ast(child).functions
                measured.append(Measured(name, lines, blocks[0].complexity))
                visit(child, module, f"{prefix}{child.name}.")
            else:
                visit(child, module, prefix)

    for module, path in _modules().items():
        visit(ast.parse(path.read_text(encoding="utf-8")), module, "")
    return measured


def test_functions_are_short_and_simple() -> None:
    too_big, grown = [], []
    for f in _functions():
        over = f.lines > MAX_LINES or f.complexity > MAX_COMPLEXITY
        now = f"{f.lines} lines, complexity {f.complexity}"
        if f.name not in OVERSIZED:
            if over:
                too_big.append(f"{f.name}: {now}")
            continue
        lines, complexity = OVERSIZED[f.name]
        if f.lines > lines or f.complexity > complexity:
            grown.append(f"{f.name}: {now}, listed at {lines} lines, complexity {complexity}")
    _fail_with(
        (f"Functions over {MAX_LINES} lines or complexity {MAX_COMPLEXITY} (split them):", too_big),
        ("Functions in OVERSIZED that grew past their listed numbers (split them):", grown),
    )


def test_oversized_list_is_current() -> None:
    """An OVERSIZED entry for a function that is gone, or within the limits now, must go."""
    measured = {f.name: f for f in _functions()}
    stale = []
    for name in OVERSIZED:
        f = measured.get(name)
        if f is None:
            stale.append(f"{name}: no such function any more")
        elif f.lines <= MAX_LINES and f.complexity <= MAX_COMPLEXITY:
            stale.append(f"{name}: {f.lines} lines, complexity {f.complexity}, within the limits")
    _fail_with(("OVERSIZED entries to remove:", stale))
