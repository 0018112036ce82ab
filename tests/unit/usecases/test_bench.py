"""``usecases.bench``: the checks the bench subcommands make before anything is measured or written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumatch.errors import InputError
from gpumatch.usecases import bench


def test_serve_refuses_an_existing_out_before_sending(tmp_path: Path) -> None:
    """Port 9 of the loopback has no server: a run that started would fail on the connection, not on --out."""
    out = tmp_path / "run.json"
    out.write_text("keep")
    store = tmp_path / "results.sqlite"
    req = bench.ServeRequest("http://127.0.0.1:9", "m", concurrency=(1,), num_prompts=1, selftest=False,
                             store=store)
    with pytest.raises(InputError, match="exists"):
        bench.serve(req, out=out)
    assert out.read_text() == "keep" and not store.exists()


def test_import_refuses_another_tools_file(tmp_path: Path) -> None:
    """A vLLM ``bench serve --save-result`` file belongs to ``runs import``: refused, no store written."""
    src = tmp_path / "vllm.json"
    src.write_text(json.dumps({"backend": "vllm", "model_id": "m", "num_prompts": 1, "request_throughput": 1.0,
                               "mean_ttft_ms": 10.0, "max_concurrency": 1, "date": "20250101-000000"}))
    store = tmp_path / "results.sqlite"
    with pytest.raises(InputError, match="runs import"):
        bench.import_file(src, store)
    assert not store.exists()

