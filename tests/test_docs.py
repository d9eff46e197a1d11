"""The documentation agrees with the code: option tables and CLI flags come from the options' one definition,
every option a page names exists, and the README's and guides' command-line and library examples run."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rocketstore_spark.spark.option_spec import markdown_table
from rocketstore_spark.spark.options import READ_SPEC
from rocketstore_spark.spark.write_options import WRITE_SPEC

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import generated  # noqa: E402 - the MkDocs hook, importable from its folder

KNOWN = {s.name for s in READ_SPEC} | {s.name for s in WRITE_SPEC} | {"checkpointLocation"}


def blocks(page: Path, language: str, after: str = "") -> list[str]:
    text = page.read_text(encoding="utf-8")
    if after:
        text = text[text.index(after):]
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_every_option_a_page_names_exists():
    unknown = []
    for page in PAGES:
        for name in re.findall(r"""\.option\(\s*["']([A-Za-z.]+)["']""", page.read_text(encoding="utf-8")):
            if name not in KNOWN and not name.startswith("fs."):
                unknown.append(f"{page.name}: {name}")
    assert unknown == []


def test_the_option_tables_are_generated_from_the_definitions():
    page = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    for marker in ("read-options", "stream-options", "write-options"):
        assert f"<!-- generated: {marker} -->" in page
    rendered = generated.on_page_markdown(page)
    assert "<!-- generated" not in rendered
    for spec in (*READ_SPEC, *WRITE_SPEC):
        assert spec.doc and f"| `{spec.name}` |" in rendered, spec.name
    assert markdown_table(WRITE_SPEC, "write") in rendered


def test_cli_flags_that_mirror_options_take_their_definition():
    import typer

    from rocketstore_spark.cli.app import app

    group = typer.main.get_command(app)
    # generate writes a store and mirrors no read option (its --topics is a number of topics to make)
    params = [p for name, c in group.commands.items() if name != "generate" for p in c.params]
    for spec in READ_SPEC:
        if not spec.cli:
            continue
        mirrors = [p for p in params if tuple(p.opts) == spec.cli]
        assert mirrors, f"no command has {spec.cli} for option {spec.name}"
        assert all(p.help == spec.doc.replace("`", "") for p in mirrors), spec.name


def test_the_cli_reference_lists_every_command():
    import typer

    from rocketstore_spark.cli.app import app

    rendered = generated.render("cli")
    for name in typer.main.get_command(app).commands:
        assert f"## `rocketstore {name}`" in rendered


def test_commands_the_pages_name_exist():
    import typer

    from rocketstore_spark.cli.app import app

    commands = set(typer.main.get_command(app).commands)
    named = {m for page in PAGES for m in re.findall(r"`rocketstore ([a-z]+)[ `]", page.read_text(encoding="utf-8"))}
    assert named and named <= commands, named - commands


def test_the_readme_command_line_quick_start_runs(tmp_path):
    (block,) = blocks(ROOT / "README.md", "bash", "## Quick start: command line")
    for line in block.strip().splitlines():
        command = shlex.split(line.split("#")[0])
        assert command[0] == "rocketstore"
        done = subprocess.run([sys.executable, "-m", "rocketstore_spark.cli", *command[1:]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        # query --key order-42 finds nothing in a sample store: exit 1 with a message, not an error
        assert done.returncode in ((0, 1) if "query" in command else (0,)), (line, done.stderr)


def test_the_library_quick_starts_run(tmp_path, sample_store):
    store = tmp_path / "demo-store"
    store.symlink_to(sample_store)
    sources = blocks(ROOT / "README.md", "python", "## Quick start: Python")[:1] + \
        [b for b in blocks(ROOT / "docs" / "getting-started.md", "python") if "RocketStore" in b] + \
        blocks(ROOT / "docs" / "api.md", "python")
    assert len(sources) >= 3
    for source in sources:
        code = source.replace("/data/broker-a/store", str(store)).replace('"demo-store"', f'"{store}"')
        exec(compile(code, "quick start", "exec"), {})


@pytest.mark.parametrize("page", ["writing.md"])
def test_the_library_write_example_runs(tmp_path, page):
    (source,) = [b for b in blocks(ROOT / "docs" / page, "python") if "open_writer(" in b]
    exec(compile(source.replace("/data/new-store", str(tmp_path / "new")), page, "exec"), {})
    from rocketstore_spark.store import RocketStore

    with RocketStore.open(tmp_path / "new") as s:
        assert s.max_offset("orders", s.queue_ids("orders")[0]) >= 1


def test_every_write_example_gives_a_save_mode_python_sources_support():
    """Spark's default save mode fails for Python data sources (UNSUPPORTED_DATA_SOURCE_SAVE_MODE): each example
    says append or overwrite, and the troubleshooting page explains the error."""
    for page in PAGES:
        text = "\n".join(blocks(page, "python"))
        for chain in re.findall(r"\.write\.format\(\"rocketstore\"\)[^\n]*(?:\n\s+\.[^\n]*)*", text):
            assert re.search(r"\.mode\(\"(append|overwrite)\"\)", chain), f"{page.name}: {chain}"
    trouble = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    assert "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" in trouble and "PYSPARK_PYTHON" in trouble


def test_no_page_speaks_of_how_the_project_was_made():
    pattern = re.compile(r"\b(session \d+|issue #?\d+|work period|reverted)\b", re.I)
    found = [f"{p.name}: {m.group(0)}" for p in [*PAGES, ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md"]
             for m in pattern.finditer(p.read_text(encoding="utf-8"))]
    assert found == []
