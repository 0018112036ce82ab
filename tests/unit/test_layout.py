"""Tests mirror modules (issue 26, item 6): the test of ``src/gpumatch/x/y.py`` is ``tests/unit/x/test_y.py``.

The rule, checked over the tree here so that the next misplaced test fails:

- a test file under ``tests/unit/<pkg>/`` is ``test_<mod>.py`` or ``test_<mod>_<aspect>.py`` for a module
  ``<mod>.py`` (or a subpackage ``<mod>/``) of ``src/gpumatch/<pkg>/``; top-level modules (``units``, ``stats``,
  ...) have theirs directly in ``tests/unit/``;
- ``tests/unit/cli/`` mirrors ``src/gpumatch/cli/``, whose modules are the commands, so a test that drives the
  command line is ``tests/unit/cli/test_<command>[_<aspect>].py``; flows over several commands live in
  ``tests/e2e/`` (any name);
- every folder under ``tests/unit/`` mirrors a package of ``src/gpumatch/``;
- no two test files outside packages share a name (pytest's default import mode imports each by its bare name).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
UNIT = TESTS / "unit"
PACKAGE = TESTS.parent / "src" / "gpumatch"
OWN = {"test_layout.py"}  # this file checks the tree; it tests no module


def module_names(package: Path) -> set[str]:
    """The names a test file may start with in the mirror of ``package``: its modules and its subpackages."""
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    return modules | {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}


def named_for_a_module(file_name: str, modules: set[str]) -> bool:
    """``test_<mod>.py`` or ``test_<mod>_<aspect>.py`` for one of ``modules``."""
    stem = file_name.removeprefix("test_").removesuffix(".py")
    return any(stem == m or stem.startswith(m + "_") for m in modules)


def misplaced(unit: Path, package: Path) -> list[str]:
    """Test files and folders under ``unit`` that mirror no module of ``package``, each with the reason."""
    problems = []
    for folder in sorted(p for p in [unit, *unit.rglob("*")] if p.is_dir() and p.name != "__pycache__"):
        mirror = package / folder.relative_to(unit)
        tests = sorted(p.name for p in folder.glob("test_*.py") if folder != unit or p.name not in OWN)
        if not (mirror / "__init__.py").is_file():
            if tests:
                problems.append(f"{folder.relative_to(unit)}/: no package src/gpumatch/{mirror.relative_to(package)}")
            continue
        modules = module_names(mirror)
        problems += [f"{(folder / t).relative_to(unit)}: no module {t.removeprefix('test_').removesuffix('.py')!r}"
                     f" (nor a prefix of it) in {mirror.relative_to(package.parent)}"
                     for t in tests if not named_for_a_module(t, modules)]
    return problems


def shared_names(tests: Path) -> list[str]:
    """Test file names used twice among folders that are not packages (pytest would import one for the other)."""
    files = [p for p in tests.rglob("test_*.py") if not (p.parent / "__init__.py").is_file()]
    counts = Counter(p.name for p in files)
    return sorted(str(p.relative_to(tests)) for p in files if counts[p.name] > 1)


def test_every_unit_test_is_named_for_the_module_it_tests() -> None:
    assert misplaced(UNIT, PACKAGE) == []


def test_no_two_test_files_share_a_name() -> None:
    assert shared_names(TESTS) == []


def _tree(root: Path, files: list[str]) -> Path:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    return root


def test_the_rule_catches_a_misplaced_test(tmp_path: Path) -> None:
    package = _tree(tmp_path / "gpumatch", ["__init__.py", "units.py", "store/__init__.py", "store/db.py",
                                            "store/formats/__init__.py", "store/formats/vllm.py",
                                            "cli/__init__.py", "cli/runs.py"])
    unit = _tree(tmp_path / "unit", ["test_units.py", "store/test_db.py", "store/test_db_locks.py",
                                     "store/test_formats_detect.py", "store/formats/test_vllm.py",
                                     "cli/test_runs_import.py", "store/conftest.py", "store/workers.py",
                                     "test_layout.py"])
    assert misplaced(unit, package) == []
    _tree(unit, ["store/test_dbx.py", "cli/test_store_cli.py", "test_db.py", "nothing/test_units.py"])
    assert misplaced(unit, package) == [
        "test_db.py: no module 'db' (nor a prefix of it) in gpumatch",
        "cli/test_store_cli.py: no module 'store_cli' (nor a prefix of it) in gpumatch/cli",
        "nothing/: no package src/gpumatch/nothing",
        "store/test_dbx.py: no module 'dbx' (nor a prefix of it) in gpumatch/store",
    ]


def test_the_rule_catches_a_shared_name(tmp_path: Path) -> None:
    tests = _tree(tmp_path, ["unit/store/test_db.py", "e2e/test_db_flow.py", "unit/plan/__init__.py",
                             "unit/plan/test_db.py"])
    assert shared_names(tests) == []
    _tree(tests, ["e2e/test_db.py"])
    assert shared_names(tests) == ["e2e/test_db.py", "unit/store/test_db.py"]
