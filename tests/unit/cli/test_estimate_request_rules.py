"""Input rules of ``gpumatch estimate`` (QA pass): zero and absurd sizes, flags that do not apply to the task,
QLoRA precision, context length, workload overrides, and ``--debug`` anywhere. Every bad input is one line on
stderr and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.errors import InputError
from gpumatch.estimate import Request, estimate
from gpumatch.models import get_model
from gpumatch.workload import check_context, misplaced_options

BASE = ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100-SXM"]
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main([*BASE, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "internal error" not in err
    return err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--tp", "0"], "--tp must be at least 1"),
        (["--pp", "0"], "--pp must be at least 1"),
        (["--dp", "0"], "--dp must be at least 1"),
        (["--count", "0"], "--count must be at least 1"),
        (["--batch", "0"], "--batch must be at least 1"),
        (["--task", "train", "--micro-batches", "0"], "--micro-batches must be at least 1"),
    ],
)
def test_zero_sizes(capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    assert needle in _error(capsys, *args)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--seq", "1024", "--prompt", "512"], "give --seq (training) or --prompt/--gen (inference), not both"),
        (["--task", "train", "--kv-precision", "fp8"], "--kv-precision applies to inference only"),
        (["--task", "train", "--gen", "64"], "--gen applies to inference only"),
        (["--task", "lora", "--prompt", "64"], "--prompt applies to inference only"),
        (["--task", "serve", "--optimizer", "sgd"], "--optimizer applies to training only"),
        (["--task", "infer", "--micro-batches", "2"], "--micro-batches applies to training only"),
        (["--master-weights", "none"], "--master-weights applies to training only"),
        (["--task", "serve", "--recompute", "full"], "--recompute applies to training only"),
    ],
)
def test_flags_of_the_other_task_are_errors(capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    assert needle in _error(capsys, *args)


def test_defaults_never_trigger_the_task_rules(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["--task", "train", "--seq", "1024"], ["--task", "serve", "--prompt", "512", "--gen", "64"],
                 ["--task", "infer", "--seq", "1024"]):
        assert main([*BASE, *args, "--format", "json"]) == 0, args
        capsys.readouterr()


def test_qlora_needs_a_4_bit_base(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, "--task", "qlora", "--precision", "bf16")
    assert "4 bits" in err and "nf4" in err
    for args in (["--task", "qlora"], ["--task", "qlora", "--precision", "nf4"]):
        assert main([*BASE, *args, "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["precision"]["weights"] == "nf4"


def test_context_beyond_the_models_positions(capsys: pytest.CaptureFixture[str]) -> None:
    assert "131072 positions" in _error(capsys, "--prompt", "200000")
    assert "131072 positions" in _error(capsys, "--task", "train", "--seq", "10000000")
    assert main([*BASE, "--prompt", "100000", "--format", "json"]) == 0
    capsys.readouterr()


def test_context_check_is_shared() -> None:
    arch = get_model("llama-3.1-8b")
    check_context(arch, 131072)
    with pytest.raises(InputError, match=r"exceeds llama-3\.1-8b.s 131072 positions"):
        check_context(arch, 131073, "--seq")
    assert misplaced_options("train", ["prompt", "batch"]) == [("prompt", "inference")]
    assert misplaced_options("serve", ["optimizer", "prompt"]) == [("optimizer", "training")]
    with pytest.raises(InputError, match="positions"):
        estimate(arch, "H100-SXM", Request(task="train", seq=200_000))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--batch", "99999999999999999999999"], "--batch"),
        (["--count", "2000000"], "--count"),
        (["--tp", "2000000"], "--tp"),
        (["--run-tokens", "1e40"], "--run-tokens"),
        (["--prompt", "1000000000"], "--prompt"),
    ],
)
def test_absurd_magnitudes(capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    err = _error(capsys, *args)
    assert needle in err and "beyond any real workload" in err


def test_explicit_flags_override_the_workload_file(capsys: pytest.CaptureFixture[str]) -> None:
    wl = str(EXAMPLES / "chat-70b-serving.toml")
    args = ["estimate", "--workload", wl, "--gpu", "H100-SXM", "--format", "json"]
    assert main([*args, "--count", "4", "--tp", "4"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert from_file["model"] == "llama-3.1-70b" and from_file["layout"]["seqs_per_replica"] == 32
    assert main([*args, "--model", "llama-3.1-8b", "--batch", "2", "--prompt", "128"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"] == "llama-3.1-8b" and d["layout"]["seqs_per_replica"] == 2 and d["layout"]["prompt"] == 128
    assert d["layout"]["gen"] == from_file["layout"]["gen"]  # what no flag overrides comes from the file
    # a training --task replaces the file's inference shape instead of clashing with it
    assert main([*args, "--model", "llama-3.2-1b", "--task", "train", "--seq", "1024"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"]["seq"] == 1024


def test_help_says_flags_override_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--help"]) == 0
    assert "override" in capsys.readouterr().out


def test_debug_is_accepted_after_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--format", "json", "--debug"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "llama-3.1-8b"
    with pytest.raises(InputError):
        main([*BASE, "--tp", "0", "--debug"])
    with pytest.raises(InputError):
        main(["--debug", *BASE, "--tp", "0"])
    assert main([*BASE, "--tp", "0"]) == 2  # without it: one line again
    assert "Traceback" not in capsys.readouterr().err
