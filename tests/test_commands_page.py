"""docs/commands.md has a section for every command of the CLI and a row for each of its options, and names no
option a command does not have: an option added without a row fails, as does a row for a removed one."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

from wirelessfl.cli import app

PAGE = Path(__file__).resolve().parents[1] / "docs" / "commands.md"
OPTION_ROW = re.compile(r"^\| `(--[a-z-]+)")


def _sections() -> dict[str, list[str]]:
    """Section title -> its lines; the lines before the first ``## `` are the global section ``""``."""
    sections: dict[str, list[str]] = {"": []}
    title = ""
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            sections[title] = []
        else:
            sections[title].append(line)
    return sections


def _rows(lines: list[str]) -> set[str]:
    return {m.group(1) for line in lines if (m := OPTION_ROW.match(line))}


def _options(command) -> set[str]:
    return {opt for param in command.params for opt in param.opts if opt.startswith("--")} | {"--help"}


def test_every_command_has_a_section_and_every_option_a_row():
    group = typer.main.get_command(app)
    sections = _sections()
    assert set(group.commands) <= set(sections), f"commands without a section: {sorted(set(group.commands) - set(sections))}"
    for name, command in group.commands.items():
        assert _rows(sections[name]) == _options(command) - {"--help"}, name
    assert _rows(sections[""]) == _options(group)


def test_a_command_without_options_says_so():
    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        if _options(command) == {"--help"}:
            assert "No options." in "\n".join(_sections()[name]), name
