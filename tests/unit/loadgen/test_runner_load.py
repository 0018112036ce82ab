"""``gpumatch bench serve`` load options over real loopback HTTP (the loopback server in its own process; what it
received read back from its ``/loopback/seen`` route): the tokenizer and the server's usage, warm-up, time-limited
levels and their grace period, --extra-body and --header, requests in flight, progress bars and lines, and the new
fields in the stored run and the JSON. No test asserts a speed: times are checked against the loopback's own
schedule or the run's own records."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("tokenizers")

from gpumatch.loadgen.bench import ServeRequest, run_serve_bench
from gpumatch.loadgen.client import Target, target_url
from gpumatch.loadgen.loopback import Loopback, LoopbackConfig
from gpumatch.loadgen.runner import Level, run_level
from gpumatch.loadgen.workload import arrivals, synthetic
from gpumatch.report.serve import ServeProgress
from gpumatch.usecases.stored_serving import load_serve_run

sys.path.insert(0, str(Path(__file__).parent))
from test_inputs import train_bpe

SRC = str(Path(__file__).resolve().parents[3] / "src")


def _req(url: str, store: Path, **kw: Any) -> ServeRequest:
    base = {"num_prompts": 12, "prompt_tokens": 16, "output_tokens": 4, "store": store, "selftest": False}
    return ServeRequest(url, "test-model", **{**base, **kw})


def _seen(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/loopback/seen", timeout=10) as resp:
        return list(json.loads(resp.read()))


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer.json whose small vocabulary splits most words into several tokens."""
    return train_bpe(tmp_path_factory.mktemp("tok") / "tokenizer.json", 300)


def test_tokenizer_prompts_match_a_server_counting_with_it(bpe: Path, tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.001, tokenizer=str(bpe))) as url:
        run = run_serve_bench(_req(url, tmp_path / "s.sqlite", concurrency=(2,), tokenizer=bpe, warmup=0))
    s = run.levels[0].summary
    assert s["prompt_len_mismatches"] == 0 and run.warnings == []
    assert s["mean_prompt_tokens_requested"] == s["mean_prompt_tokens_server"] == 16.0
    assert all(r.prompt_tokens == r.prompt_tokens_requested == 16 for r in run.levels[0].records)


def test_word_prompts_against_another_tokenizer_warn_once_with_numbers(bpe: Path, tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.001, tokenizer=str(bpe))) as url:
        run = run_serve_bench(_req(url, tmp_path / "s.sqlite", concurrency=(1, 2), warmup=0))
    assert [lv.summary["prompt_len_mismatches"] for lv in run.levels] == [12, 12]
    served = run.levels[0].summary["mean_prompt_tokens_server"]
    assert served > 24  # 16 words, each several tokens of this vocabulary
    assert len(run.warnings) == 1 and run.warnings[0].startswith(f"16-token prompts arrived as {served:.0f} tokens")
    assert "12 of 12 requests at c=1" in run.warnings[0] and run.warnings[0].endswith("pass --tokenizer")
    assert load_serve_run(tmp_path / "s.sqlite", run.run_id or 0)["warnings"] == run.warnings
    assert run.to_json()["warnings"] == run.warnings


def test_tokenizer_against_a_word_counting_server_names_the_tokenizer(bpe: Path, tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.001)) as url:  # counts words
        got = _cli(["bench", "serve", "--endpoint", url, "--model", "m", "-c", "1,2", "-n", "6",
                    "--prompt-tokens", "40", "--output-tokens", "3", "--tokenizer", str(bpe), "--no-selftest",
                    "--warmup", "0", "--no-store"])
    assert got.returncode == 0, got.stderr
    warnings = [ln for ln in got.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1 and "40-token prompts arrived as" in warnings[0]
    assert f"differs from {bpe}" in warnings[0]
    assert "c=1: 6 prompts arrived with another length" in got.stdout.replace("\n", " ")


def test_warmup_runs_first_is_kept_apart_and_stored(tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.001)) as url:
        run = run_serve_bench(_req(url, tmp_path / "s.sqlite", concurrency=(3,), warmup=5))
        seen = _seen(url)
    lv = run.levels[0]
    assert len(lv.warmup) == 5 and len(lv.records) == 12 and lv.summary["completed"] == 12
    assert lv.summary["warmup_requests"] == 5 and lv.summary["warmup_failed"] == 0 and lv.summary["warmup_s"] > 0
    prompts = [e["body"]["prompt"] for e in seen]
    assert len(prompts) == 17 and all(p.startswith("W0-") for p in prompts[:5])
    assert all(p.startswith("L0-") for p in prompts[5:])  # every warm-up request was sent before any measured one
    from gpumatch.store import open_existing_store

    with open_existing_store(tmp_path / "s.sqlite") as st:
        kinds = [e["kind"] for e in st.export_run(run.run_id or 0)["events"]]
    assert kinds.count("warmup_request") == 5 and kinds.count("request") == 12
    stored = load_serve_run(tmp_path / "s.sqlite", run.run_id or 0, raw=True)
    assert len(stored["levels"][0]["requests"]) == 12 and stored["levels"][0]["warmup_requests"] == 5
    assert stored["config"]["warmup"] == 5


def test_duration_closed_loop_stops_sending_and_drains(tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.005)) as url:
        run = run_serve_bench(_req(url, tmp_path / "s.sqlite", concurrency=(2,), duration_s=1.0, warmup=0))
    lv = run.levels[0]
    recs = lv.records
    assert len(recs) > 12 and lv.summary["completed"] == len(recs) and lv.summary["incomplete"] == 0
    assert all(r.scheduled_s < 1.0 for r in recs) and max(r.end_s for r in recs) > 1.0  # in flight at 1 s: finished
    assert len({r.index for r in recs}) == len(recs)  # an endless supply: every request a new one
    assert lv.to_dict()["duration_limit_s"] == 1.0 and run.config["duration_s"] == 1.0


def test_duration_open_loop_sends_exactly_the_arrivals_before_the_deadline() -> None:
    with Loopback(LoopbackConfig(itl_s=0.001)) as url:
        t = Target(target_url(url, "completions"), "m")
        specs = iter(synthetic(10_000, 8, 2, 1.0, 0))
        run = run_level(t, Level(0, "rate", 60.0, burstiness=0.5, duration_s=0.6), specs, 9, 0)
    want = [a for a in arrivals(200, 60.0, "poisson", 9, 0.5) if a < 0.6]
    assert sorted(r.scheduled_s for r in run.records) == pytest.approx(want)
    assert all(r.ok for r in run.records)


def test_requests_running_past_the_grace_period_are_incomplete(tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.05)) as url:  # 40 tokens: 2 s a request
        run = run_serve_bench(_req(url, tmp_path / "s.sqlite", concurrency=(3,), duration_s=0.2, grace_s=0.3,
                                   output_tokens=40, warmup=0))
    s = run.levels[0].summary
    assert (s["completed"], s["failed"], s["incomplete"], s["error_rate"]) == (0, 0, 3, 0.0)
    assert all(r.status == "incomplete" and 0.45 < r.end_s < 1.5 for r in run.levels[0].records)
    assert run.status == "completed" and not run.levels[0].aborted


def test_extra_body_and_headers_reach_the_server(tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.001)) as url:
        run_serve_bench(_req(url, tmp_path / "s.sqlite", concurrency=(2,), num_prompts=3, warmup=1,
                             extra_body={"top_k": 1, "ignore_eos": False}, headers={"X-Tenant": "team a"},
                             api="chat"))
        seen = _seen(url)
    assert len(seen) == 4
    for e in seen:
        assert e["body"]["top_k"] == 1 and e["body"]["ignore_eos"] is False  # --extra-body wins, as in vLLM
        assert e["body"]["messages"][0]["role"] == "user" and e["headers"]["X-Tenant"] == "team a"


def test_in_flight_per_level_from_the_records(tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.002, ttft_s=0.005)) as url:
        run = run_serve_bench(_req(url, tmp_path / "s.sqlite", concurrency=(1, 4), num_prompts=24, warmup=0))
    one, four = (lv.summary for lv in run.levels)
    assert one["max_in_flight_requests"] == 1 and 0.5 < one["mean_in_flight_requests"] <= 1.0
    assert four["max_in_flight_requests"] == 4 and 1.0 < four["mean_in_flight_requests"] <= 4.0
    recs = run.levels[1].records
    busy = sum(r.end_s - r.sent_s for r in recs)
    assert four["mean_in_flight_requests"] == pytest.approx(busy / max(r.end_s for r in recs))
    doc = run.to_json()
    assert doc["levels"][1]["mean_in_flight_requests"] == four["mean_in_flight_requests"]


def _cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "gpumatch", *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def test_cli_json_output_is_pure_and_progress_goes_to_stderr_lines(tmp_path: Path) -> None:
    sg = tmp_path / "sg.json"
    sg.write_text(json.dumps([{"conversations": [{"from": "human", "value": f"question {i} about the water"},
                                                  {"from": "gpt", "value": "an answer of six words"}]}
                              for i in range(5)]))
    with Loopback(LoopbackConfig(itl_s=0.001)) as url:
        got = _cli(["bench", "serve", "--endpoint", url, "--model", "m", "--rate", "40", "--burstiness", "2",
                    "-n", "8", "--dataset", "sharegpt", str(sg), "--no-selftest", "--no-store", "--format", "json",
                    "--header", "X-A: b", "--extra-body", '{"top_p": 0.5}'])
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    lv = doc["levels"][0]
    assert lv["label"] == "40/s gamma B=2" and lv["burstiness"] == 2.0 and lv["completed"] == 8
    assert lv["total_output_tokens"] == 8 * 5 and lv["warmup_requests"] == 2
    assert doc["config"]["dataset_rows"] == {"format": "sharegpt", "path": str(sg), "rows": 5, "skipped": 0}
    assert doc["config"]["header_names"] == ["X-A"] and doc["config"]["extra_body"] == {"top_p": 0.5}
    assert "gpumatch: measuring 40/s gamma B=2" in got.stderr and "\x1b" not in got.stderr
    assert "warming up 40/s gamma B=2: 2 requests" in got.stderr


def test_cli_bad_load_options_exit_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    cases = [
        (["--dataset", "sharegpt", str(bad)], "not a JSON list of conversations"),
        (["--dataset", "parquet", str(bad)], "unknown dataset format"),
        (["--tokenizer", str(tmp_path)], "no tokenizer.json at"),
        (["--extra-body", "{"], "--extra-body is not JSON"),
        (["--header", "nothing"], "is not NAME:VALUE"),
        (["--warmup", "some"], "--warmup takes a number"),
        (["--duration", "-1"], "--duration must be a positive number"),
        (["--rate", "2", "--arrival", "constant", "--burstiness", "0.5"], "--burstiness shapes random arrivals"),
    ]
    for extra, message in cases:
        got = _cli(["bench", "serve", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--no-store", *extra])
        lines = got.stderr.strip().splitlines()
        assert got.returncode == 2 and len(lines) == 1 and message in lines[0], (extra, got.stderr)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_terminal_and_lines_otherwise() -> None:
    def drive(p: ServeProgress) -> None:
        with p:
            p("probe", "http://127.0.0.1:1")
            p("level", "c=4")
            p("warmup", "c=4", 0, 8)
            for k in range(1, 9):
                p("warmup", "c=4", k, 8)
            for k in range(1, 41):
                p("requests", "c=4", k, 40)
            p("seconds", "2/s poisson", 3, 10, 7)
            p("done", "")

    tty = _Tty()
    drive(ServeProgress(tty, interval_s=0.0))
    out = tty.getvalue()
    assert "40/40" in out and "requests" in out and "3/10" in out and "7 requests" in out
    plain = io.StringIO()
    drive(ServeProgress(plain))
    assert plain.getvalue().splitlines() == ["gpumatch: asking the server at http://127.0.0.1:1",
                                             "gpumatch: measuring c=4",
                                             "gpumatch: warming up c=4: 8 requests (not measured)"]
    json_mode = _Tty()
    drive(ServeProgress(json_mode, bars=False))  # --format json: lines even on a terminal
    assert json_mode.getvalue() == plain.getvalue()
