"""The HTML report opened in a real browser (headless chromium), offline, as a new user would.

Fails on any console error or uncaught exception, on any request that is not the file itself, and on a plot that
rendered nothing; keeps full-page screenshots under ``$GPUMATCH_SCREENSHOTS`` (default: the test's temp folder)
and checks they are not blank. Without chromium the test is skipped, except where ``GPUMATCH_REQUIRE_BROWSER=1``
(CI, set by ``.ci/run``), where a missing browser is a failure.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from tests.browser.chromium import find_browser, load_page

from gpumatch.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> str:
    found = find_browser()
    if found is None:
        if os.environ.get("GPUMATCH_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium not found (GPUMATCH_REQUIRE_BROWSER=1): install Debian's chromium package")
        pytest.skip("no chromium on PATH (set GPUMATCH_CHROMIUM or install chromium)")
    return found


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("GPUMATCH_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _not_blank(png: bytes) -> tuple[int, int]:
    from PIL import Image

    im = Image.open(io.BytesIO(png)).convert("L")
    lo, hi = im.getextrema()
    assert hi - lo > 100, "screenshot is blank"
    return im.size


@pytest.mark.parametrize(("name", "args", "plots"), [
    ("plan", [str(ROOT / "examples" / "chat-70b-serving.toml")], 2),
    ("runs", ["--run", "1", "--run", "2"], 3),
])
def test_report_renders_in_chromium_offline(browser: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            name: str, args: list[str], plots: int) -> None:
    monkeypatch.setenv("GPUMATCH_STORE", str(tmp_path / "s.sqlite"))
    if name == "runs":
        assert main(["monitor", "--replay", str(ROOT / "tests/data/traces/h200-2026-12-03-monitor-gemm.csv")]) == 0
        assert main(["bench", "import", str(ROOT / "tests/data/measurements/bench/2026-12-04-h200-standard.json")]) == 0
    page = tmp_path / f"{name}.html"
    assert main(["report", *args, "--html", str(page)]) == 0
    got = load_page(browser, page)
    assert got.title.startswith("gpumatch report")
    errors = [c for c in got.console if c["type"] in ("error", "assert", "warning")]
    assert not errors and not got.exceptions, (errors, got.exceptions)
    assert got.requests == [page.resolve().as_uri()]  # offline: nothing but the file itself
    assert len(got.plots) == plots
    for p in got.plots:
        assert p["svg"] and p["width"] > 300 and p["height"] > 150 and p["marks"] > 20 and p["text"] > 5, p
    shot = _shots(tmp_path) / f"report-{name}.png"
    shot.write_bytes(got.screenshot)
    width, height = _not_blank(got.screenshot)
    assert width == 1200 and height > 1500


SERVE_PLOTS = ["serve-load-concurrency", "serve-energy-concurrency", "serve-load-rate", "serve-energy-rate",
               "serve-slo"]


def test_serving_page_renders_in_chromium(browser: str, tmp_path: Path) -> None:
    """The serving page of a gpumatch ``bench serve`` run (with energy and predictions) overlaid with an imported
    vLLM and GuideLLM run: no console error, every serving plot drawn, no 'None' in a heading, a screenshot."""
    from tests.browser.serve_runs import build_serve_store

    store = tmp_path / "s.sqlite"
    build_serve_store(store)
    page = tmp_path / "serve.html"
    assert main(["report", "--run", "1", "--run", "2", "--run", "3", "--store", str(store), "--html",
                 str(page)]) == 0
    got = load_page(browser, page)
    errors = [c for c in got.console if c["type"] in ("error", "assert", "warning")]
    assert not errors and not got.exceptions, (errors, got.exceptions)
    assert got.requests == [page.resolve().as_uri()]
    assert [p["id"] for p in got.plots] == SERVE_PLOTS
    for p in got.plots:
        assert p["svg"] and p["paths"] > 10 and p["width"] > 300 and p["height"] > 250 and p["text"] > 5, p
    assert got.headings and not [h for h in got.headings if "None" in h]
    assert any(h.startswith("Run 2: unknown card, meta-llama/Llama-3.1-8B-Instruct, vllm bench serve")
               for h in got.headings)
    shot = _shots(tmp_path) / "report-serve.png"
    shot.write_bytes(got.screenshot)
    width, height = _not_blank(got.screenshot)
    assert width == 1200 and height > 4000
