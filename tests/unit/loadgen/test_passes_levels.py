"""The server's pass log kept with each load level (gpumatch.loadgen.passes): the passes numbered after the last one
before the level, whether the log still held them all, and nothing from a server that keeps no log. Against a real
``gpumatch serve`` (tiny model, CPU) and the loopback (a server without the endpoint), over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpumatch.loadgen.passes import last_index, level_doc


def _log(first: int, last: int) -> list[dict[str, object]]:
    return [{"index": i, "start_s": float(i), "seconds": 0.5} for i in range(first, last + 1)]


def test_the_passes_after_the_last_one_before_the_level() -> None:
    doc = level_doc(4, _log(2, 9), {"concurrency": 2})
    assert [i["index"] for i in doc["iterations"]] == [5, 6, 7, 8, 9]
    assert doc["first_index"] == 5 and doc["complete"] and doc["concurrency"] == 2
    assert doc["schema"] == "gpumatch.serve-passes/1"
    assert not level_doc(4, _log(7, 9), {})["complete"]  # the log dropped passes 5 and 6
    assert last_index([]) == -1 and last_index(_log(0, 3)) == 3
    assert level_doc(-1, _log(0, 1), {})["complete"]


pytest.importorskip("torch")
pytest.importorskip("aiohttp")

from gpumatch.calibrate.passes import level_iterations  # noqa: E402
from gpumatch.lab.serve import ServeOptions, ServerThread  # noqa: E402
from gpumatch.loadgen.bench import ServeRequest, run_serve_bench, write_json  # noqa: E402
from gpumatch.loadgen.loopback import Loopback, LoopbackConfig  # noqa: E402
from gpumatch.loadgen.server_info import probe  # noqa: E402


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(ServeOptions(tiny=True, port=0, max_num_seqs=4, max_model_len=256,
                                   max_num_batched_tokens=64)) as s:
        yield s


def test_a_gpumatch_server_level_keeps_its_passes(server: ServerThread, tmp_path: Path) -> None:
    model = probe(server.url)["models"][0]["id"]
    req = ServeRequest(server.url, model, num_prompts=6, prompt_tokens=8, output_tokens=4, concurrency=(2,),
                       store=tmp_path / "s.sqlite", selftest=False)
    run = run_serve_bench(req)
    assert run.status == "completed"
    lv = run.levels[0]
    its = lv.passes["iterations"]
    assert lv.passes["complete"] and lv.passes["concurrency"] == 2 and lv.passes["requests"] == 6
    assert [i["index"] for i in its] == list(range(lv.passes["first_index"], lv.passes["first_index"] + len(its)))
    # every prompt token of the level and its warm-up went through a logged pass, every output token but the
    # first (sampled at the end of the prefill) through a decode row
    sent = len(lv.records) + len(lv.warmup)
    assert sum(i["prefill_tokens"] for i in its) >= sent * 8
    assert sum(i["decode_rows"] for i in its) >= sent * 3
    out = write_json(run, tmp_path / "run.json")
    level = json.loads(out.read_text())["levels"][0]
    assert level["server_passes"]["iterations"] == its
    assert level_iterations(level["server_passes"], float(level["warmup_s"]))


def test_a_server_without_a_pass_log_gives_none(tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.001, ttft_s=0.002)) as url:
        run = run_serve_bench(ServeRequest(url, "test-model", num_prompts=4, prompt_tokens=8, output_tokens=4,
                                           concurrency=(2,), store=tmp_path / "s.sqlite", selftest=False))
    assert run.levels[0].passes == {}
    out = write_json(run, tmp_path / "run.json")
    assert "server_passes" not in json.loads(out.read_text())["levels"][0]
