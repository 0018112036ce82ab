"""Errors, hints and help that name a ``gpumatch`` command name one that exists (issue 10, item 18: hints named
``gpumatch bench run``, which does not exist yet).

Every ``gpumatch VERB [SUB]`` in the package's source that stands as a command (after a quote or backtick, or
after "Example:", "run", "use", "try" or "with") must be a registered command, and for a group one of its
sub-commands.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

from gpumatch.cli.app import app

SRC = Path(__file__).resolve().parents[3] / "src" / "gpumatch"
PROSE = {"exits", "store"}
"""Words after "gpumatch" in prose, not commands ("gpumatch exits 130", "gpumatch store is append-only")."""
MENTION = re.compile(r"(?:[`'\"]|Examples?:\s*|\b(?:run|use|try|with)\s+)gpumatch ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")


def _commands() -> dict[str, set[str] | None]:
    root = typer.main.get_command(app)
    out: dict[str, set[str] | None] = {}
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", None)
        out[name] = set(subs) if subs is not None else None
    return out


def mentions(text: str) -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in MENTION.finditer(text)]


def test_the_scanner_finds_quoted_and_example_mentions() -> None:
    text = "hint=\"run 'gpumatch bench run' to create one\"; Example: gpumatch runs list; gpumatch results store"
    assert mentions(text) == [("bench", "run"), ("runs", "list")]


def test_every_command_named_in_the_source_exists() -> None:
    commands = _commands()
    assert {"plan", "estimate", "runs", "monitor"} <= set(commands)
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        for verb, sub in mentions(path.read_text(encoding="utf-8")):
            if verb in PROSE:
                continue
            subs = commands.get(verb, set())
            if verb not in commands or (subs is not None and sub is not None and sub not in subs):
                wrong.append(f"{path.relative_to(SRC)}: gpumatch {verb} {sub or ''}".rstrip())
    assert not wrong, wrong
