"""The package's floors and the worker's layers: every import points down, and no modules import each other in a circle.

The floors, the layers and what each holds: docs/architecture.md.
"""

from __future__ import annotations

import ast
import functools
import sys

from tests.conftest import ROOT

PACKAGE = ROOT / "memory_anchor"
WORKER = PACKAGE / "worker"

# The package's floors, bottom to top. A module may import its own floor and any floor below.
FLOORS = ["core", "hookkit", "schemas", "client", "mcp", "worker", "cli", "bench"]
# The hooks run these under `python -S`: no site-packages, so nothing but the standard library.
STDLIB_ONLY = {"core", "hookkit"}

# Bottom to top. A module may import its own package and any layer below its own.
LAYERS = [
    {"store"},
    {"capture", "index", "llm", "codebase"},
    {"memory"},
    {"branching"},
    {"context", "pipeline"},
    {"api"},
    {"app", "services", "logs", "__main__"},
]
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}
ENTRY = LAYERS[-1]


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path, package, modules):
    """Every module name an import in `path` names (relative ones resolved), at the top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


@functools.cache
def package_imports():
    """{module: {the package's modules it imports}} and {module: {the outside top-level packages it imports}}."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    inside, outside = {}, {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        names = imported_names(path, package, modules)
        inside[name] = {n for n in names if n in modules and n != name}
        outside[name] = {n.split(".")[0] for n in names if n.split(".")[0] != "memory_anchor"}
    return inside, outside


def floor(module):
    parts = module.split(".")  # memory_anchor.<floor>...
    # The package's own face hands out the SDK (memory_anchor.Memory): it stands with the client.
    return parts[1] if len(parts) > 1 else "client"


def test_every_part_of_the_package_has_a_floor():
    parts = {floor(m) for m in package_imports()[0]}
    assert parts <= set(FLOORS), f"put these on a floor (here and in docs/architecture.md): {sorted(parts - set(FLOORS))}"


def test_floors_import_only_floors_below():
    upward = [
        f"{source} -> {target}"
        for source, targets in package_imports()[0].items()
        for target in targets
        if FLOORS.index(floor(target)) > FLOORS.index(floor(source))
    ]
    assert not upward, "imports that point to a higher floor:\n" + "\n".join(sorted(upward))


def test_the_floors_the_hooks_run_import_only_the_standard_library():
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    foreign = [
        f"{module} imports {', '.join(sorted(names - allowed))}"
        for module, names in package_imports()[1].items()
        if floor(module) in STDLIB_ONLY and names - allowed
    ]
    assert not foreign, "modules the hooks may load that need more than the standard library:\n" + "\n".join(sorted(foreign))


def test_no_import_circles_in_the_package():
    circles = find_circles(package_imports()[0])
    assert not circles, "modules that import each other in a circle:\n" + "\n".join(circles)


@functools.cache
def worker_imports():
    """{module: {the worker modules it imports, at the top or inside a function}}."""
    modules = {module_name(p): p for p in WORKER.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found.update(t for t in targets if t in modules and t != name and t != "memory_anchor.worker")
        graph[name] = found
    return graph


def layer(module):
    parts = module.split(".")  # memory_anchor.worker.<layer>...
    return parts[2] if len(parts) > 2 else None


def test_every_worker_part_has_a_layer():
    parts = {layer(m) for m in worker_imports()} - {None}
    assert parts <= set(RANK), f"put these in a layer (here and in docs/architecture.md): {sorted(parts - set(RANK))}"


def test_imports_point_down():
    upward = [
        f"{source} -> {target}"
        for source, targets in worker_imports().items()
        for target in targets
        if layer(source) and layer(target) and layer(source) != layer(target)
        and not (layer(source) in ENTRY and layer(target) in ENTRY)
        and RANK.get(layer(target), 99) >= RANK.get(layer(source), -1)
    ]
    assert not upward, "imports that do not point to a lower layer:\n" + "\n".join(sorted(upward))


def test_no_import_circles():
    circles = find_circles(worker_imports())
    assert not circles, "modules that import each other in a circle:\n" + "\n".join(circles)


def find_circles(graph):
    done, on_path, circles = set(), [], []

    def visit(module):
        if module in on_path:
            circles.append(" -> ".join(on_path[on_path.index(module):] + [module]))
            return
        if module in done:
            return
        on_path.append(module)
        for target in sorted(graph[module]):
            visit(target)
        on_path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)
    return circles


def test_sql_runs_only_in_the_store():
    """Storage has one door: a statement is run only in memory_anchor/worker/store/; other layers
    call its named operations, and the dialect differences stay there too."""
    store = WORKER / "store"
    outside = [
        f"{path.relative_to(ROOT)}:{node.lineno} .{node.func.attr}("
        for path in sorted(PACKAGE.rglob("*.py"))
        if store not in path.parents
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("execute", "executemany", "executescript")
    ]
    assert not outside, "statements run outside the store:\n" + "\n".join(outside)
