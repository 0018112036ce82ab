"""Issue 25 (Reliability), "output misreads": wording a user read as something else.

- ``estimate --gpu A --gpu B`` was titled "on 2 GPUs" (it compares two alternatives, one GPU each);
- its footnote said "TTFT: one prompt alone" for ``--task serve``, whose TTFT is the engine's steady-state mean
  (the pass in flight and queueing included);
- ``--task serve`` printed a "prefill time included" throughput above the "decode steps alone" one: both are
  per second of serving there, the decode one without each request's first token;
- ``plan`` said "see Failed" where no Failed section was printed;
- the README gave two exit codes for ``doctor``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.report.plan import none_feasible, plan_text

ROOT = Path(__file__).resolve().parents[2]
EST = ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM"]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _run(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    assert main(args) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("task", ["infer", "serve"])
def test_two_gpus_are_titled_as_alternatives(capsys: pytest.CaptureFixture[str], task: str) -> None:
    out = _run(capsys, [*EST, "--gpu", "A100 SXM4 80GB", "--task", task])
    title = out.splitlines()[0]
    assert "2 alternatives, one configuration per row" in title and "on 2 GPUs" not in title
    assert "H100 SXM5 80GB ×1" in out and "A100 SXM4 80GB ×1" in out  # each row says its own count


def test_serve_ttft_footnote_says_it_includes_queueing(capsys: pytest.CaptureFixture[str]) -> None:
    flat = _flat(_run(capsys, [*EST, "--gpu", "A100 SXM4 80GB", "--task", "serve"]))
    assert "one prompt alone" not in flat
    assert "TTFT: mean per request over the replayed benchmark (first burst included), including the pass in " \
           "flight and queueing" in flat  # closed loop: the benchmark of --num-prompts requests, replayed
    steady = _flat(_run(capsys, [*EST, "--gpu", "A100 SXM4 80GB", "--task", "serve", "--request-rate", "1"]))
    assert "TTFT: mean per request at the engine's steady state, including the pass in flight and queueing" in steady
    static = _flat(_run(capsys, [*EST, "--gpu", "A100 SXM4 80GB", "--task", "infer"]))
    assert "TTFT: one prompt alone, no queueing" in static


def test_serve_throughput_labels_match_their_order(capsys: pytest.CaptureFixture[str]) -> None:
    """Static: with prefill time < decode steps alone. Serve: all generated >= those from decode passes, and
    the labels say so (the first token of each request comes from its prefill)."""
    for task, extra in (("infer", []), ("serve", ["--request-rate", "1"]), ("serve", [])):
        d = json.loads(_run(capsys, [*EST, "--task", task, *extra, "--format", "json"]))
        table = _flat(_run(capsys, [*EST, "--task", task, *extra]))
        if task == "infer":
            assert d["tokens_per_s"] < d["decode_tokens_per_s"]
            assert "prefill time included" in table and "in decode steps alone" in table
            continue
        assert "prefill time included" not in table and "decode steps alone" not in table
        if extra:  # open loop, steady state: the difference is each request's first token
            assert d["tokens_per_s"] - d["decode_tokens_per_s"] == pytest.approx(d["requests_per_s"], rel=0.01)
            assert "requests/s × output tokens" in table and "from decode passes (one replica" in table
            assert "first tokens, from each request's prefill" in table
        else:  # closed loop: the replayed benchmark's throughput beside the steady state's decode rate
            assert "mean over the replayed benchmark" in table
            assert "from decode passes at the steady state" in table and "not the benchmark's figure" in table


def test_an_empty_role_points_at_the_failed_section_it_prints(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys, ["plan", "examples/chat-70b-serving.toml"])
    flat = _flat(out)
    assert "see Failed" not in flat.replace("see Failed below", "")
    assert "low-power inference card (low-power-inference): none feasible: no candidate on cards of at most " \
           "165 W board power passed every check (see Failed below)" in flat
    assert re.search(r"^Failed: ", out, re.M)


def test_an_empty_role_without_failures_points_at_not_considered() -> None:
    excluded = [{"gpu": "L4", "count": 0, "rule": "excluded", "reason": "not selected (--gpu H100 SXM)"}]
    failed = [{"gpu": "L4", "count": 1, "rule": "memory", "reason": "short"}]
    assert none_feasible({"rejected": excluded}, "low-power-inference") == \
        "none feasible among the GPUs considered (see Not considered below)"
    assert none_feasible({"rejected": []}, "latency-serving") == "none feasible within the role's limits"
    assert none_feasible({"rejected": [*excluded, *failed]}, "latency-serving") == \
        "none feasible: no candidate passed every check (see Failed below)"


def test_plan_with_only_excluded_cards_prints_not_considered(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "llama-3.1-8b", "--task", "serve", "--gpu", "H100 SXM", "--max-gpus", "1",
            "--format", "json"]
    d = json.loads(_run(capsys, args))
    text = _flat(plan_text(d, width=80))
    assert "none feasible among the GPUs considered (see Not considered below)" in text
    assert "Not considered:" in text and "Failed" not in text


def test_readme_gives_doctor_one_exit_code() -> None:
    readme = _flat((ROOT / "README.md").read_text(encoding="utf-8"))
    assert "exit 1 if a check" not in readme and "exit 3 if a check fails" in readme
    from gpumatch.cli.doctor import HELP, PreflightFailed

    assert PreflightFailed.exit_code == 3 and "3 when a check fails" in HELP


def test_readme_says_what_a_pipeline_returns() -> None:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert "head -1`); nothing more" not in section  # the old claim that `| head -1` exits 141
    assert "PIPESTATUS" in section and "| 74 |" in section
