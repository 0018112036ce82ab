"""The annotated workload file in README.md ("Workload files") is itself a valid workload."""

from __future__ import annotations

from pathlib import Path

from gpumatch.workload import load_workload

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_workload_example_loads(tmp_path: Path) -> None:
    text = README.read_text()
    start = text.index("```toml", text.index("## Workload files")) + len("```toml")
    example = tmp_path / "example.toml"
    example.write_text(text[start : text.index("```", start)])
    w = load_workload(example)
    assert (w.task, w.model.name, w.targets.deadline_s) == ("serve", "llama-3.1-70b", 7 * 86400)
