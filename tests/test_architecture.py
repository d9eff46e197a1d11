"""The architecture rules that can be checked mechanically: the format layer's folders are its layers and
imports point down them, the layers above (Spark, the CLI, the sample generators) go through the store facade,
and no module touches another module's private (``_``-prefixed) names. A module is one concept, whatever its
length."""

import ast
import subprocess
import sys
from pathlib import Path

import rocketstore_spark.store as facade

PACKAGE = Path(__file__).resolve().parents[1] / "rocketstore_spark"
STORE = PACKAGE / "store"
ABOVE_THE_FACADE = (PACKAGE / "spark", PACKAGE / "cli", PACKAGE / "samples")

# The format layer's folders, lowest first; a module imports only from its own folder and the folders before
# it. The facade (store/store.py, level 4) sits on top and only the package's __init__ imports it.
FOLDER_LEVELS = {"format": 0, "files": 1, "read": 2, "write": 3, "": 4}
# The module at the bottom of everything: the byte layouts import nothing of the store.
BOTTOM = "format.layout"
MAX_LINE_CHARS = 120


def module_name(path: Path) -> str:
    """``read.recovery`` for store/read/recovery.py, ``store`` for the facade, ``format`` for a folder's init."""
    rel = path.relative_to(STORE).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def store_modules() -> dict:
    return {module_name(p): p for p in STORE.rglob("*.py")}


def imports_of(path: Path) -> set:
    """The store modules ``path`` imports relatively (imports inside functions count too), as dotted names."""
    package = list(path.relative_to(STORE).parent.parts)  # the package the module is in, relative to store/
    known = store_modules()
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            continue
        base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
        if node.level - 1 > len(package):
            continue  # above the store package (..errors from a folder)
        target = base + (node.module.split(".") if node.module else [])
        for alias in node.names:
            name = ".".join(target + [alias.name])
            dotted = ".".join(target)
            if name in known:
                out.add(name)
            elif dotted in known or dotted == "":
                out.add(dotted)
    out.discard("")
    return out


def folder_of(module: str) -> str:
    return module.split(".")[0] if "." in module else ("" if module == "store" else module)


def store_graph() -> dict:
    return {m: imports_of(p) - {m} for m, p in store_modules().items() if p.name != "__init__.py"}


def test_the_format_layer_has_its_folders():
    folders = {p.name for p in STORE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(FOLDER_LEVELS) - {""}
    assert not [p.name for p in STORE.glob("*.py") if p.name not in ("__init__.py", "store.py")]
    for folder in folders:
        assert len(list((STORE / folder).glob("*.py"))) >= 4, folder


def test_store_imports_have_no_cycle():
    graph = store_graph()
    assert len(graph) > 20
    done, active = set(), []

    def visit(module):
        assert module not in active, f"import cycle: {' → '.join(active[active.index(module):] + [module])}"
        if module in done:
            return
        active.append(module)
        for dep in sorted(graph.get(module, ())):
            visit(dep)
        active.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


def test_folders_import_only_their_own_folder_and_those_below():
    upward = [(m, d) for m, deps in store_graph().items() for d in deps
              if FOLDER_LEVELS[folder_of(d)] > FOLDER_LEVELS[folder_of(m)]]
    assert upward == []
    assert store_graph()[BOTTOM] == set()


def test_the_graph_sees_imports_across_folders():
    """Guard against a vacuous pass: relative imports across folders are resolved into the graph."""
    graph = store_graph()
    assert "files.mapped_file_queue" in graph["files.commitlog"]
    assert "format.layout" in graph["read.recovery"] and "read.store_reader" in graph["write.appender"]


def test_only_the_package_init_imports_the_facade():
    assert [m for m, deps in store_graph().items() if "store" in deps] == []
    assert imports_of(STORE / "__init__.py") == {"store"}


def test_the_layers_above_reach_the_store_through_its_facade():
    """``from ..store import X`` (the facade's exports) and the constants of ``format.layout`` only."""
    offenders = []
    for path in sorted(p for folder in ABOVE_THE_FACADE for p in folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level != 2:
                continue
            if (node.module or "").startswith("store.") and node.module != "store.format":
                offenders.append(f"{path.name}: from ..{node.module} import ...")
            names = {alias.name for alias in node.names}
            if node.module == "store.format" and names != {"layout"}:
                offenders.append(f"{path.name}: from ..store.format import {sorted(names)}")
            if node.module == "store":
                missing = names - set(facade.__all__)
                if missing:
                    offenders.append(f"{path.name}: {sorted(missing)} are not facade exports")
    assert offenders == []


def test_lines_stay_short():
    wide = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        wide += [f"{path.relative_to(PACKAGE)}:{i}" for i, line in enumerate(lines, 1) if len(line) > MAX_LINE_CHARS]
    assert wide == []


def private_names_defined(tree: ast.AST) -> set:
    """The ``_`` names a module defines: its functions, classes and module-level names, the methods and class
    attributes of its classes, and the attributes its code assigns (``self._x = ...``, ``obj._x = ...``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname:
            out.add(node.asname)
    return {name for name in out if is_private(name)}


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def foreign_private_uses(path: Path) -> list:
    """Where ``path`` imports another module's ``_`` name, or reads a ``_`` attribute its own code does not define
    (on anything but ``self`` / ``cls``: those are its own classes' names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    own = private_names_defined(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out += [f"{path.name}:{node.lineno}: imports {a.name}" for a in node.names if is_private(a.name)
                    and not (a.name == NATIVE and node.module in (None, "rocketstore_spark"))]
        elif isinstance(node, ast.Attribute) and is_private(node.attr) and node.attr not in own:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                out.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return out


# The compiled kernels (the Rust crate's module, ``rocketstore_spark._native``): private to the package, imported only
# by the store's kernel wrappers in its two lowest layers, which give the rest of the package Python functions.
NATIVE = "_native"


def test_only_the_lowest_store_layers_call_the_native_kernels():
    users = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                   if any(isinstance(n, ast.ImportFrom) and any(a.name == NATIVE for a in n.names)
                          for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))))
    assert users and all(u.startswith(("store/format/", "store/files/")) for u in users), users


def test_no_module_touches_another_modules_private_names():
    """The store layer, and the layers above it too."""
    offenders = [use for path in sorted(PACKAGE.rglob("*.py")) for use in foreign_private_uses(path)]
    assert offenders == []


def test_the_private_name_rule_sees_a_foreign_use(tmp_path):
    """Guard against a vacuous pass: a private name imported or read from elsewhere is found, an own one is not."""
    probe = tmp_path / "probe.py"
    probe.write_text("from .other import _hidden\n\nclass A:\n    def __init__(self, b):\n"
                     "        self._mine = b._theirs\n        self._mine2 = self._mine\n", encoding="utf-8")
    assert foreign_private_uses(probe) == ["probe.py:1: imports _hidden", "probe.py:5: b._theirs"]


def test_spark_lookup_imports_no_store():
    """Spark imports ``pyspark_rocketstore`` in each Python worker of a query's planning, most of which only ask
    for the format's name or pickle the source: that import must not pull in the store, numpy or pyarrow."""
    probe = ("import sys, pyspark_rocketstore; print(pyspark_rocketstore.DefaultSource.name()); "
             "print(sorted(m for m in ('numpy', 'pyarrow', 'rocketstore_spark.store') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["rocketstore", "[]"]


# Where a store's variant behaviour is chosen from its features: once, when the store opens.
VARIANT_CHOICE = STORE / "read" / "variants" / "behaviour.py"


def test_the_read_engine_asks_the_variant_its_features_only_where_it_chooses_its_behaviour():
    """Variant features are looked at (``variant.has(...)``) in one place of the read engine, which composes the
    variants' parts; the rest of it asks the composed behaviour, and never probes an object with hasattr."""
    looked = sorted(str(p.relative_to(STORE)) for p in (STORE / "read").rglob("*.py")
                    if ".has(" in p.read_text(encoding="utf-8"))
    assert looked == [str(VARIANT_CHOICE.relative_to(STORE))]
    probing = sorted(str(p.relative_to(STORE)) for p in (STORE / "read").rglob("*.py")
                     if "hasattr(" in p.read_text(encoding="utf-8"))
    assert probing == []


def test_each_storage_variant_reads_in_its_own_module():
    from rocketstore_spark.store.files.variant import FEATURES

    modules = {p.stem for p in (STORE / "read" / "variants").glob("*.py")}
    assert {f.replace("-", "_") for f in FEATURES} | {"plain", "part", "behaviour"} <= modules
