"""Fails if the modules of the lockstream package import each other in a cycle.

Reads the source (src/lockstream/*.py) with `ast`, without importing it: every import counts,
at the top of a module, inside a function, or under `if TYPE_CHECKING:`, so a cycle cannot be
hidden behind a late import. Prints each cycle (one module after another, with the line of each
import) and exits 1; exits 0 when the import graph is a DAG. Standard library only.

    python3 clients/python/scripts/check_cycles.py [package directory]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "lockstream"
DEFAULT_ROOT = Path(__file__).resolve().parent.parent / "src" / PACKAGE


def module_names(root: Path) -> dict[str, Path]:
    """The package's modules by dotted name (the package itself for __init__.py)."""
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The package's modules that `name` imports, each with the line of its first import."""
    found: dict[str, int] = {}
    is_package = path.name == "__init__.py"

    def add(target: str, line: int) -> None:
        if target in modules and target != name:
            found.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                # Relative: from the module's package (__init__.py is its package's own module).
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            for alias in node.names:
                submodule = f"{base}.{alias.name}" if base else alias.name
                # `from lockstream import _checks` imports the module _checks; `from lockstream
                # import Client` imports the package's __init__.
                add(submodule if submodule in modules else base, node.lineno)
    return found


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Every elementary cycle of `graph`, each starting from its smallest module, in order."""
    order = sorted(graph)
    found: list[list[str]] = []
    for index, start in enumerate(order):
        allowed = set(order[index:])
        path = [start]

        def walk(node: str) -> None:
            for target in sorted(graph[node]):
                if target == start:
                    found.append([*path, start])
                elif target in allowed and target not in path:
                    path.append(target)
                    walk(target)
                    path.pop()

        walk(start)
    return found


def main() -> int:
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else DEFAULT_ROOT
    modules = module_names(root)
    if not modules:
        print(f"check_cycles: no Python modules under {root}", file=sys.stderr)
        return 2
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    found = cycles(graph)
    if not found:
        print(f"check_cycles: no import cycle among the {len(modules)} modules of {PACKAGE} ({root})")
        return 0
    print(f"check_cycles: {len(found)} import cycle(s) among the modules of {PACKAGE}:", file=sys.stderr)
    for cycle in found:
        steps = [f"{source} (line {graph[source][target]})" for source, target in zip(cycle, cycle[1:])]
        print("  " + " -> ".join([*steps, cycle[-1]]), file=sys.stderr)
    print("Move what two modules share into the lower one (or a small module of its own), pass a "
          "collaborator in, or give the lower module a Protocol of what it needs; an import inside "
          "a function or under TYPE_CHECKING still counts.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
