"""The CLI reference of the documentation, generated from the commands' own definitions (names, flags, help)."""

from __future__ import annotations

import typer


def markdown_reference() -> str:
    """Every command: its summary, usage and a table of its arguments and options, as ``--help`` shows them."""
    from .app import app

    group = typer.main.get_command(app)
    ctx = group.make_context("rocketstore", [], resilient_parsing=True)
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
        usage = " ".join(command.collect_usage_pieces(sub))
        out += [f"## `rocketstore {name}`", "", (command.help or "").strip(), "", "```text",
                f"rocketstore {name} {usage}", "```", "", "| argument or option | meaning |", "|---|---|"]
        for param in command.params:
            if param.param_type_name == "argument":
                names, help_text = f"{param.name.upper()}", param.help or ""
            else:
                names, help_text = param.get_help_record(sub) or ("", "")
            cell = help_text.replace("|", "\\|").replace("\n", " ")
            out.append(f"| `{names}` | {cell} |")
        out.append("")
    return "\n".join(out)
