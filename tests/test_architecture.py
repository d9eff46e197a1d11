"""The architecture rules that can be checked mechanically: import direction inside the format layer, the
Spark layer going through the store facade, and module size."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rocketstore_spark"
STORE = PACKAGE / "store"
SPARK = PACKAGE / "spark"

# The format layer's named levels (the brief's "layout → codec → file queue → commitlog / consume queue /
# index / checkpoint → recovery / appender → store facade"): imports between them only go to a lower level.
LEVELS = {
    "layout": 0, "codec": 1, "mapped_file_queue": 2,
    "commitlog": 3, "consume_queue": 3, "index_file": 3, "checkpoint": 3,
    "recovery": 4, "appender": 4, "store": 5,
}
MAX_MODULE_LINES = 400
MAX_LINE_CHARS = 120


def sibling_imports(path: Path) -> set:
    """The store modules ``path`` imports relatively, at any depth (imports inside functions count too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out |= {alias.name for alias in node.names}
    return out


def store_graph() -> dict:
    return {p.stem: sibling_imports(p) & {q.stem for q in STORE.glob("*.py")}
            for p in STORE.glob("*.py") if p.stem != "__init__"}


def test_store_imports_have_no_cycle():
    graph = store_graph()
    assert len(graph) > 20
    done, active = set(), []

    def visit(module):
        assert module not in active, f"import cycle: {' → '.join(active[active.index(module):] + [module])}"
        if module in done:
            return
        active.append(module)
        for dep in sorted(graph[module]):
            visit(dep)
        active.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


def test_only_the_package_init_imports_the_facade():
    graph = store_graph()
    assert [m for m, deps in graph.items() if "store" in deps] == []
    assert sibling_imports(STORE / "__init__.py") == {"store"}


def test_named_levels_import_only_downwards():
    graph = store_graph()
    upward = [(m, d) for m, deps in graph.items() if m in LEVELS for d in deps
              if d in LEVELS and LEVELS[d] >= LEVELS[m]]
    assert upward == []
    assert graph["layout"] == set()


def test_the_spark_layer_reaches_the_store_through_its_facade():
    """``from ..store import X`` (the facade's exports) and the constants of ``layout`` only."""
    offenders = []
    for path in sorted(SPARK.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 2 and (node.module or "").startswith("store."):
                if node.module != "store.layout":
                    offenders.append(f"{path.name}: from ..{node.module} import ...")
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module == "store":
                names = {alias.name for alias in node.names}
                import rocketstore_spark.store as facade

                missing = names - set(facade.__all__) - {"layout"}
                if missing:
                    offenders.append(f"{path.name}: {sorted(missing)} are not facade exports")
    assert offenders == []


def test_modules_stay_small_and_lines_short():
    too_long, wide = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(PACKAGE)}: {len(lines)} lines")
        wide += [f"{path.relative_to(PACKAGE)}:{i}" for i, line in enumerate(lines, 1) if len(line) > MAX_LINE_CHARS]
    assert too_long == [] and wide == []
