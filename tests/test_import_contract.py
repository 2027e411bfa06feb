"""The layers' contract, read from the source with ``ast`` (every import statement of every file of
``explorer/``, at module level or inside a function: both run, sooner or later):

- only the page (``explorer/ui``) imports Gradio;
- nothing below the page imports it: what the explorer presents without Gradio is
  ``explorer/present``, which the lessons, saved sessions and the notebook use; only the commands
  that start the page (``cli.py``, ``__main__.py``) import ``explorer.ui``;
- ``explorer/viz`` draws from arrays and plain records: it imports no layer above it;
- no module imports itself back through others (an import circle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import explorer

ROOT = Path(explorer.__file__).parent
PAGE = "explorer.ui"
# The commands that start the page: above it, so they may import it.
STARTS_THE_PAGE = {"explorer.cli", "explorer.__main__"}
ABOVE_VIZ = ("explorer.ui", "explorer.present", "explorer.workshop", "explorer.session", "explorer.lessons")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def imports(name: str) -> list[tuple[str, int]]:
    """(the module or package imported, line) for every import statement of module ``name``;
    ``from package import submodule`` names the submodule."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y
                above = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*above, base] if base else above)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.append((submodule if submodule in MODULES else base, node.lineno))
    return found


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def explorer_module(imported: str) -> str | None:
    """The module of ``explorer/`` an import runs (the longest known prefix), or None."""
    while imported and imported not in MODULES:
        imported = imported.rpartition(".")[0]
    return imported or None


def graph() -> dict[str, dict[str, int]]:
    """module -> {module of explorer/ it imports: the first line that does}."""
    edges = {}
    for name in MODULES:
        edges[name] = {}
        for imported, line in imports(name):
            target = explorer_module(imported)
            if target and target != name:
                edges[name].setdefault(target, line)
    return edges


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                groups.append(sorted(group))

    for node in edges:
        if node not in index:
            visit(node)
    return groups


def where(name: str, line: int) -> str:
    return f"{MODULES[name].relative_to(ROOT.parent)}:{line}"


def test_the_contract_reads_every_module_and_its_imports():
    """A check of the reader itself, so the tests below cannot pass by reading nothing."""
    assert {"explorer.ui.app", "explorer.present.views", "explorer.viz.workshop"} <= set(MODULES)
    assert "gradio" in [name for name, _ in imports("explorer.ui.tabs.parts")]
    assert "explorer.present.views" in graph()["explorer.present.insights"]
    looped = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert circles(looped) == [["a", "b", "c"]]


def test_only_the_page_imports_gradio():
    outside = sorted(
        {
            f"{where(name, line)} imports {imported}"
            for name in MODULES
            if not within(name, PAGE)
            for imported, line in imports(name)
            if within(imported, "gradio")
        }
    )
    assert not outside, "Gradio is the page's (explorer/ui) alone:\n" + "\n".join(outside)


def test_nothing_below_the_page_imports_it():
    upward = sorted(
        {
            f"{where(name, line)} imports {imported}"
            for name in MODULES
            if not within(name, PAGE) and name not in STARTS_THE_PAGE
            for imported, line in imports(name)
            if within(imported, PAGE)
        }
    )
    assert not upward, "what the page and the rest share belongs in explorer/present:\n" + "\n".join(upward)


def test_the_figures_import_no_layer_above_them():
    upward = sorted(
        {
            f"{where(name, line)} imports {imported}"
            for name in MODULES
            if within(name, "explorer.viz")
            for imported, line in imports(name)
            if any(within(imported, layer) for layer in ABOVE_VIZ)
        }
    )
    assert not upward, "explorer/viz draws from arrays and plain records:\n" + "\n".join(upward)


def test_no_import_circle():
    edges = graph()
    found = [
        " <-> ".join(f"{name} ({where(name, line)} imports {target})"
                     for name in group for target, line in edges[name].items() if target in group)
        for group in circles(edges)
    ]  # fmt: skip
    assert not found, "import circles:\n" + "\n".join(found)


def test_every_package_of_explorer_is_installed():
    """pyproject.toml lists the packages by hand: a new layer left out of it is missing from the wheel."""
    import tomllib

    listed = set(tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {module_name(path) for path in ROOT.rglob("__init__.py")}
    assert packages <= listed, f"not in pyproject.toml's packages: {sorted(packages - listed)}"
