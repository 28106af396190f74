"""The layers hold: no import cycle among genzoo's modules and the built-in plugins, the core imports no plugin,
no built-in plugin imports another, and the shared building blocks (``genzoo.blocks``) stand on the foundations only.

The scan reads every import statement, those inside functions included (a lazy import is still a
dependency), and counts the package ``__init__`` an import runs: importing ``genzoo.datasets.files``
from outside ``genzoo.datasets`` runs ``genzoo/datasets/__init__.py`` first. The package root
``genzoo`` sits outside the layers (it re-exports the public names), so it is not a node.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = "genzoo"


def module_files(folder: Path, packages: list[str] | None = None) -> dict[str, Path]:
    """Dotted module name -> file, for ``packages`` (default: every package) directly under ``folder``."""
    if packages is None:
        packages = [path.parent.name for path in folder.glob("*/__init__.py")]
    modules = {}
    for package in packages:
        for path in sorted((folder / package).rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name an import statement of ``module`` reaches (``from X import y``: X and X.y)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(modules: dict[str, Path], roots: set[str]) -> dict[str, set[str]]:
    """module -> the modules importing it runs: each target and the packages above it that the importer is not in."""
    graph: dict[str, set[str]] = {m: set() for m in modules if m not in roots}
    for module in graph:
        for name in imported_names(module, modules[module]):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            while name:
                if name not in roots and name != module and not module.startswith(name + "."):
                    graph[module].add(name)
                name = name.rpartition(".")[0]
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a list of modules, the first repeated at the end) per group of modules that import each other."""
    found, done = [], set()
    for start in sorted(graph):
        if start in done:
            continue
        group = reachable(graph, start) & {m for m in graph if start in reachable(graph, m)}
        done |= group | {start}
        if len(group) > 1:
            found.append(path_back(graph, start, group))
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def path_back(graph: dict[str, set[str]], start: str, group: set[str]) -> list[str]:
    """The shortest import path from ``start`` back to itself inside ``group``."""
    paths = {start: [start]}
    todo = [start]
    while todo:
        here = todo.pop(0)
        for nxt in sorted(graph[here] & group):
            if nxt == start:
                return paths[here] + [start]
            if nxt not in paths:
                paths[nxt] = paths[here] + [nxt]
                todo.append(nxt)
    raise AssertionError(f"{start} is in a cycle but no path leads back to it")


def plugin_packages() -> set[str]:
    return {path.parent.name for path in (ROOT / "plugins").glob("*/__init__.py")}


def test_genzoo_and_the_built_in_plugins_have_no_import_cycle():
    modules = {**module_files(ROOT, [CORE]), **module_files(ROOT / "plugins")}
    assert "genzoo.datasets.specs" in modules and "genzoo_ign.model" in modules
    found = cycles(import_graph(modules, roots={CORE}))
    assert not found, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in found)


def test_the_core_imports_no_plugin():
    plugins = plugin_packages()
    assert {"genzoo_ign", "genzoo_edm"} <= plugins
    offending = {module: sorted(name for name in imported_names(module, path) if name.partition(".")[0] in plugins)
                 for module, path in module_files(ROOT, [CORE]).items()}
    assert not {m: names for m, names in offending.items() if names}


def test_no_built_in_plugin_imports_another():
    plugins = plugin_packages()
    offending = {module: sorted(name for name in imported_names(module, path)
                                if name.partition(".")[0] in plugins - {module.partition(".")[0]})
                 for module, path in module_files(ROOT / "plugins").items()}
    assert not {m: names for m, names in offending.items() if names}, "share code through genzoo.blocks instead"


# What the shared building blocks may import from genzoo: each other and these foundations (never the training
# loop, the plugin host or anything built on them), so an outside plugin can use them at no cost.
BLOCKS_MAY_IMPORT = {"genzoo.configs", "genzoo.errors", "genzoo.seeding"}


def test_the_shared_blocks_import_only_each_other_and_the_foundations():
    modules = module_files(ROOT, [CORE])
    graph = import_graph(modules, roots={CORE})
    blocks = {m for m in graph if m == "genzoo.blocks" or m.startswith("genzoo.blocks.")}
    assert {"genzoo.blocks.unet", "genzoo.blocks.batchnorm"} <= blocks
    reached = set().union(*(graph[m] for m in blocks)) - blocks
    assert reached <= BLOCKS_MAY_IMPORT, f"genzoo.blocks imports {sorted(reached - BLOCKS_MAY_IMPORT)}"


def test_the_plugin_host_holds_every_table_without_importing_the_datasets_or_metrics_packages():
    """The rows (genzoo.entries, genzoo.registry) and their registrars sit below the host; the packages that
    read data and score images sit above it and look names up in it."""
    graph = import_graph(module_files(ROOT, [CORE]), roots={CORE})
    below = reachable(graph, "genzoo.plugins")
    assert {"genzoo.entries", "genzoo.registrars", "genzoo.registry", "genzoo.table"} <= below
    upward = sorted(m for m in below if m.startswith(("genzoo.datasets", "genzoo.metrics", "genzoo.cli")))
    assert not upward, f"the plugin host imports {upward}"


def test_the_scan_sees_lazy_imports_and_the_package_init_an_import_runs(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "host.py").write_text("from .sub.rows import Row\n")
    (package / "sub" / "__init__.py").write_text("from .specs import load\n")
    (package / "sub" / "rows.py").write_text("Row = object\n")
    (package / "sub" / "specs.py").write_text("def load():\n    from .. import host\n    return host\n")
    (package / "leaf.py").write_text("def f():\n    import pkg.twig\n")
    (package / "twig.py").write_text("from . import leaf\n")
    modules = module_files(tmp_path)
    graph = import_graph(modules, roots={"pkg"})
    assert graph["pkg.sub.specs"] == {"pkg.host"} and graph["pkg.host"] == {"pkg.sub", "pkg.sub.rows"}
    found = sorted(" -> ".join(cycle) for cycle in cycles(graph))
    assert found == ["pkg.host -> pkg.sub -> pkg.sub.specs -> pkg.host", "pkg.leaf -> pkg.twig -> pkg.leaf"]
