"""The package's shape, checked from its source: no import cycles, modules of at most 400 lines, renderings
that compute nothing.

Every ``import`` and ``from ... import`` of every module under ``pytest_mcpeval/`` counts, those inside
functions too (a lazy import is still a dependency: it only moves the moment the cycle bites), and those
under ``if TYPE_CHECKING:`` (they never run, but a layer that needs a type from above is still coupled to
it: the type belongs lower down, or the lower layer takes a narrower one).  A name imported from a
package is the package's submodule when one of that name exists (``from pytest_mcpeval.run import flow`` is
an import of ``pytest_mcpeval.run.flow``), else the package itself, as import-linter (grimp) reads them.
Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``; those implicit edges are left out,
as grimp leaves them out: a package's ``__init__`` that re-exports its submodules would otherwise be in a
"cycle" with each of them that Python resolves by design.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_mcpeval"
MAX_LINES = 400
RENDERERS = ("report/terminal.py", "report/markdown.py", "report/html*.py")
RENDERERS_MAY_NOT_IMPORT = ("pytest_mcpeval.scoring", "pytest_mcpeval.gate")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of the package that ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a name that is not a module: its package
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One cycle through the component's first module, as a path of imports (for the failure message)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [start]
                    while node != start:
                        path.append(node)
                        node = previous[node]
                    return [start, *reversed(path[1:]), start]
                if child not in previous:
                    previous[child] = node
                    nxt.append(child)
        frontier = nxt
    return component


def test_the_graph_reads_imports_as_python_does() -> None:
    graph = import_graph()
    assert "pytest_mcpeval.run.flow" in graph["pytest_mcpeval.run.runtime"]  # from pytest_mcpeval.run import flow
    assert "pytest_mcpeval.plugin" in graph  # every module is a node
    sample = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(sample) == [["a", "b", "c"]]
    assert cycle_path(sample, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_cycles() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles (each a strongly connected component; one cycle of it shown):\n" + "\n".join(
        f"  {len(component)} modules: {' -> '.join(cycle_path(graph, component))}\n    all: {', '.join(component)}"
        for component in found)


def test_nothing_imports_the_plugin() -> None:
    """pytest loads plugin.py; it wires hooks to the modules below it, and none of them reaches back up."""
    graph = import_graph()
    users = sorted(name for name, targets in graph.items() if "pytest_mcpeval.plugin" in targets)
    assert not users, f"modules importing pytest_mcpeval.plugin: {', '.join(users)}"


def test_modules_are_at_most_400_lines() -> None:
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: " + ", ".join(
        f"{name} ({n})" for name, n in sorted(long.items()))


def test_renderings_import_neither_scoring_nor_gate() -> None:
    """Rendering is the last step and computes nothing: terminal, Markdown and HTML take the finished report."""
    graph = import_graph()
    renderers = sorted({module_name(path) for pattern in RENDERERS for path in PACKAGE.glob(pattern)})
    assert "pytest_mcpeval.report.terminal" in renderers
    bad = {name: sorted(t for t in graph[name] if t.startswith(RENDERERS_MAY_NOT_IMPORT)) for name in renderers}
    bad = {name: targets for name, targets in bad.items() if targets}
    assert not bad, "renderings importing scoring or gate: " + "; ".join(
        f"{name} -> {', '.join(targets)}" for name, targets in sorted(bad.items()))


# docs/architecture.md's layers, lowest first: a module imports only from its own layer and the ones before it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "results", "text", "numbers", "bounds", "defaults", "redact", "json_file", "storage", "hookspecs",
     "interrupts", "tool_result", "server_log", "core"),
    ("benchmark", "catalog", "catalog_files", "transports", "server_secrets", "servers", "overlay", "tool_search"),
    ("models", "catalog_report"),
    ("scoring",),
    ("gate",),
    ("report",),
    ("outputs", "settings", "keys"),
    ("run", "checks"),
    ("options", "collect", "session", "summary", "plugin", "__main__", "importers", "tune", "draft", "cli", "testing",
     "shard", "merge"),
)
# type-only, under TYPE_CHECKING: the stash key's type; importing run.case when pytest starts would load pydantic
LAYER_EXCEPTIONS = {("pytest_mcpeval.keys", "pytest_mcpeval.run.case")}


def layer_of(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    for number, members in enumerate(LAYERS):
        if top in members:
            return number
    raise AssertionError(f"{module} is in no layer of docs/architecture.md (add it to LAYERS and to the page)")


def test_layers_import_only_downwards() -> None:
    graph = import_graph()
    upward = sorted(f"{source} ({layer_of(source) + 1}) -> {target} ({layer_of(target) + 1})"
                    for source, targets in graph.items() for target in targets
                    if layer_of(target) > layer_of(source) and (source, target) not in LAYER_EXCEPTIONS)
    assert not upward, "imports from a higher layer:\n  " + "\n  ".join(upward)
