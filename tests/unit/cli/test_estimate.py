"""``gpumatch estimate``: the JSON contract and one-line errors."""

from __future__ import annotations

import json

import pytest

from gpumatch.cli.app import main

CONTRACT_MEMORY = {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "kv_cache_bytes",
                   "overhead_bytes", "total_bytes", "capacity_bytes"}


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:  # type: ignore[type-arg]
    assert main(["estimate", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_infer_contract(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(capsys, "--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--task", "infer", "--batch", "4",
              "--prompt", "1024", "--gen", "128")
    assert set(d["memory"]) >= CONTRACT_MEMORY
    for k in ("fits", "basis", "prefill_s", "tpot_s", "decode_tokens_per_s", "bound", "power_w",
              "energy_j_per_token", "usd_per_million_tokens"):
        assert k in d
    assert d["fits"] is True and d["basis"] == "assumed"
    assert d["decode_tokens_per_s"] == pytest.approx(4 / d["tpot_s"])
    lo, hi = d["uncertainty"]["ranges"]["tpot_s"]
    assert lo < d["tpot_s"] < hi


def test_train_contract_and_master_weights(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--model", "llama-3.2-1b", "--gpu", "H100 SXM", "--task", "train", "--batch", "4", "--seq", "2048")
    d = _json(capsys, *args)
    for k in ("step_s", "tokens_per_s", "mfu", "bound"):
        assert k in d
    none = _json(capsys, *args, "--master-weights", "none")
    from gpumatch.models import get_model

    p = get_model("llama-3.2-1b").params_total

    def states(e: dict) -> float:  # type: ignore[type-arg]
        """Weights + gradients + optimizer, less the tied embedding's transient second gradient (llama-3.2-1b
        ties its embedding; the gradients item includes it)."""
        m = e["memory"]
        return float(m["weights_bytes"] + m["gradients_bytes"] + m["optimizer_bytes"]
                     - m["detail"]["tied_embedding_grad_bytes"])

    # --master-weights none: params, grads and AdamW moments all bf16 = 2 + 2 + 4 bytes per parameter
    assert states(none) == pytest.approx(8 * p)
    assert states(d) == pytest.approx(18 * p)  # bf16 weights + fp32 grads + fp32 master and moments
    amp = _json(capsys, *args, "--master-weights", "amp")
    assert states(amp) == pytest.approx(16 * p)  # PyTorch AMP: fp32 params (the master) + grads + moments
    assert amp["memory"]["detail"]["autocast_copies_bytes"] > 0 and amp["precision"]["master_weights"] == "amp"
    assert amp["memory"]["total_bytes"] != d["memory"]["total_bytes"]


@pytest.mark.parametrize(
    ("args", "needle", "hint"),
    [
        (["--master-weights", "bf16"], "unknown master weights 'bf16'", "use one of fp32, amp, none"),
        (["--master-weights", "amp", "--task", "lora"], "apply to full training", "--task train"),
        (["--master-weights", "amp", "--precision", "fp32"], "autocast to bf16 or fp16", "--precision bf16"),
    ],
)
def test_bad_master_weights_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], needle: str,
                                            hint: str) -> None:
    base = ["estimate", "--model", "llama-3.2-1b", "--gpu", "H100 SXM", "--task", "train"]
    assert main([*base, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and hint in err and "\n" not in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--tp", "3", "--count", "3"], "does not divide"),
        (["--tp", "2", "--count", "3"], "not a multiple"),
        (["--tp", "2", "--dp", "2", "--count", "8"], "count 8"),
        (["--precision", "fp9"], "unknown precision"),
        (["--task", "fly"], "unknown task"),
        (["--gpu", "A100 SXM4 80GB", "--precision", "fp8"], "FP8"),
    ],
)
def test_bad_combinations_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    base = ["estimate", "--model", "llama-3.1-8b"]
    if "--gpu" not in args:
        base += ["--gpu", "H100 SXM"]
    assert main([*base, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_table_and_csv(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--model", "llama-3.1-70b", "--gpu", "H100 SXM", "--precision", "fp16"]) == 0
    out = capsys.readouterr().out
    assert "does not fit" in out
    assert main(["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("field,value")


def test_run_tokens_and_power_levels(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(capsys, "--model", "llama-3.2-1b", "--gpu", "H100 SXM", "--task", "train", "--batch", "4",
              "--run-tokens", "1B")
    assert d["run_hours"] == pytest.approx(1e9 / d["tokens_per_s"] / 3600)
    assert d["usd_per_run"] == pytest.approx(d["usd_per_hour"] * d["run_hours"])
    assert d["energy_kwh_per_run"] > d["power_w"] * d["run_hours"] / 1000  # host share and PUE on top
    assert d["power_idle_w"] < d["power_w"] <= d["power_peak_w"]
    assert main(["estimate", "--model", "llama-3.2-1b", "--gpu", "H100 SXM", "--run-tokens", "lots"]) == 2


def test_calibration_file(capsys: pytest.CaptureFixture[str], tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    good = Path(str(tmp_path)) / "cal.json"
    good.write_text('{"calibration": {"gemm_efficiency_max": 0.3, "basis": "calibrated", "provenance": "runs 1-2"}}')
    args = ("--model", "llama-3.2-1b", "--gpu", "H100 SXM", "--task", "train")
    slow = _json(capsys, *args, "--calibration", str(good))
    fast = _json(capsys, *args)
    assert slow["basis"] == f"calibrated from file {good}" and fast["basis"] == "assumed"
    assert slow["provenance"] == f"runs 1-2 ({good} sets gemm_efficiency_max; other fields default)"
    assert slow["step_s"] > fast["step_s"]
    bad = Path(str(tmp_path)) / "bad.json"
    bad.write_text("[1, 2]")
    assert main(["estimate", *args, "--calibration", str(bad)]) == 2
    assert "not an object" in capsys.readouterr().err


def test_offload_optimizer_moves_state_to_host(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--model", "llama-3.2-3b", "--gpu", "H100 SXM", "--task", "train", "--batch", "1", "--recompute", "full")
    on_gpu = _json(capsys, *args)
    assert on_gpu["fits"]  # both fit, so both have a step time
    off = _json(capsys, *args, "--offload-optimizer")
    assert off["memory"]["optimizer_bytes"] == 0
    assert off["memory"]["detail"]["offloaded_bytes"] == pytest.approx(on_gpu["memory"]["optimizer_bytes"])
    assert off["memory"]["total_bytes"] < on_gpu["memory"]["total_bytes"]
    assert off["step_s"] > on_gpu["step_s"]  # the CPU update and the PCIe round trip cost time
    assert main(["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--offload-optimizer"]) == 2
