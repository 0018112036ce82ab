"""Every ``gpumatch`` command shown in README.md runs as shown (issue 10, item 18), and every GPU name the README
uses resolves in the catalog.

The commands are the lines of the README's code blocks that start with ``gpumatch`` or ``./scripts/gpumatch``,
less the synopsis lines (placeholders such as ``NAME``, ``ID``, ``FILE``, ``CMD``, alternatives ``a|b``,
optional ``[...]`` parts, ``…``); a ``#`` comment or a gap of three spaces ends the command. They run in-process
(``gpumatch.cli.app.main``) with a scratch ``$GPUMATCH_HOME`` and must exit 0: the README documents no other
exit code for them.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SYNOPSIS = re.compile(r"\||…|\[|\]|\b(NAME|ID|FILE|CMD|PATH|M|G|WORKLOAD\.toml)\b")


def _code_lines(text: str) -> list[str]:
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside:
            lines.append(line)
    return lines


def readme_commands(text: str) -> list[str]:
    """The runnable ``gpumatch`` command lines of ``text``'s code blocks (module docstring)."""
    out = []
    for line in _code_lines(text):
        cmd = re.split(r"\s#|\s{3,}", line.strip(), maxsplit=1)[0].strip()
        if not re.match(r"(\./scripts/)?gpumatch\b", cmd) or SYNOPSIS.search(cmd):
            continue
        out.append(cmd)
    return out


def test_the_extraction_keeps_examples_and_leaves_synopses() -> None:
    text = "```\ngpumatch gpus list|show NAME   the catalog\ngpumatch monitor --replay t.csv   the same\n```\n" \
           "```bash\n./scripts/gpumatch plan x.toml   # the main job\ngpumatch --version\n```\ngpumatch plan y\n"
    assert readme_commands(text) == ["gpumatch monitor --replay t.csv", "./scripts/gpumatch plan x.toml",
                                     "gpumatch --version"]


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))


def test_the_readme_shows_commands() -> None:
    assert len(COMMANDS) >= 10 and any(c.startswith("gpumatch plan") for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs_as_shown(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from gpumatch.cli.app import main

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("GPUMATCH_HOME", str(tmp_path))
    monkeypatch.delenv("GPUMATCH_STORE", raising=False)
    argv = shlex.split(command)[1:]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 0, f"{command!r} exited {code}: {err.strip()}"


def _readme_gpu_names(text: str) -> set[str]:
    """GPU names the README uses: --gpu "X", the workload example's allow/deny/price keys, and the cards of the
    top-pick table ("B200 ×4")."""
    names = set(re.findall(r'--gpu "([^"]+)"', text))
    for line in text.splitlines():
        m = re.match(r'\s*(allow|deny)\s*=\s*\[(.*)\]', line)
        if m:
            names |= set(re.findall(r'"([^"]+)"', m.group(2)))
        names |= set(re.findall(r'usd_per_gpu_hour = \{ "([^"]+)"', line))
        if line.startswith("| ") and "×" in line:
            cells = line.split("|")[2:]
            for cell in cells:
                names |= {n.strip() for n in re.findall(r"(?:^|[:;,(]\s*)([A-Z][\w .-]*?) ×\d", cell)}
    return names


def test_every_gpu_name_in_the_readme_resolves() -> None:
    from gpumatch.catalog import load_catalog

    names = _readme_gpu_names(README.read_text(encoding="utf-8"))
    assert {"H100 SXM", "RTX 4090"} <= names and len(names) >= 6
    catalog = load_catalog()
    unresolved = []
    for name in sorted(names):
        try:
            catalog.get(name)
        except Exception as e:  # the catalog's own error: unknown or ambiguous
            unresolved.append(f"{name}: {e}")
    assert not unresolved, unresolved
