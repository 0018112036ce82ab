"""The one mapping of a workload file and flags to a request (gpumatch.workload.request), followed end to end:
a serving concurrency and a training micro-batch, from a flag and from a file, down to the memory estimate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpumatch.cli.app import main
from gpumatch.errors import InputError
from gpumatch.estimate import Request, estimate
from gpumatch.models import get_model
from gpumatch.plan import from_workload
from gpumatch.plan.query import PlanQuery, plan_request
from gpumatch.workload import load_workload
from gpumatch.workload.request import RequestFlags, resolve_request

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
HF = ROOT / "tests" / "data" / "hf_configs"
GPU = "H100 SXM"


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["estimate", *args, "--format", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "w.toml"
    p.write_text(text)
    return p


SERVE = 'task = "serve"\nmodel = "llama-3.1-8b"\n[shape]\nprompt_tokens = 1024\noutput_tokens = 128\n'


@pytest.mark.parametrize(("shape", "in_flight"), [("concurrency = 24\n", 24), ("batch_size = 24\n", 24),
                                                  ("batch_size = 8\nconcurrency = 24\n", 24),
                                                  ("batch_size = 24\nconcurrency = 8\n", 24)])
def test_a_serving_file_gives_both_commands_the_same_sequences_in_flight(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: str, in_flight: int) -> None:
    path = _file(tmp_path, SERVE + shape)
    assert resolve_request(load_workload(path), RequestFlags()).concurrency == in_flight
    req = from_workload(load_workload(path))
    assert req.concurrency == in_flight and not req.training
    d = _json(capsys, "--workload", str(path), "--gpu", GPU)
    assert d["layout"]["seqs_per_replica"] == in_flight and d["layout"]["in_flight"] == in_flight


def test_an_infer_file_with_concurrency_is_estimated_at_its_concurrency(capsys: pytest.CaptureFixture[str]) -> None:
    # Before: 'estimate --workload' read batch_size (1) for task infer while 'plan' read concurrency (16).
    path = EXAMPLES / "inference-7b-budget.toml"
    d = _json(capsys, "--workload", str(path), "--gpu", GPU)
    assert d["layout"]["seqs_per_replica"] == from_workload(load_workload(path)).concurrency == 16


def test_concurrency_from_a_flag_or_a_file_reaches_the_kv_cache(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    lib = estimate("llama-3.1-8b", GPU, Request(task="serve", prompt=1024, gen=128, concurrency=24))
    flag = _json(capsys, "--model", "llama-3.1-8b", "--gpu", GPU, "--task", "serve", "--concurrency", "24",
                 "--prompt", "1024", "--gen", "128")
    file = _json(capsys, "--workload", str(_file(tmp_path, SERVE + "concurrency = 24\n")), "--gpu", GPU)
    old = _json(capsys, "--model", "llama-3.1-8b", "--gpu", GPU, "--task", "serve", "--batch", "24",
                "--prompt", "1024", "--gen", "128")
    kv = lib.memory.items["kv_cache_bytes"]
    assert flag["memory"]["kv_cache_bytes"] == file["memory"]["kv_cache_bytes"] == old["memory"]["kv_cache_bytes"] == kv


def test_concurrency_is_spread_over_the_replicas(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(capsys, "--model", "llama-3.1-8b", "--gpu", GPU, "--task", "serve", "--concurrency", "10", "--dp", "4")
    assert d["layout"]["seqs_per_replica"] == 3 and d["layout"]["in_flight"] == 10  # the planner's split: ceil(10 / 4)


def test_a_training_micro_batch_from_a_flag_or_a_file_reaches_the_activations(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lib = estimate("llama-3.2-1b", GPU, Request(task="lora", seq=2048, micro_batches=4, micro_batch=4))
    args = ("--model", "llama-3.2-1b", "--gpu", GPU, "--task", "lora", "--seq", "2048")
    flag = _json(capsys, *args, "--micro-batch", "4", "--global-batch", "16")
    path = _file(tmp_path, 'task = "lora"\nmodel = "llama-3.2-1b"\n[shape]\nbatch_size = 16\nmicro_batch_size = 4\n'
                           'sequence_length = 2048\n')
    file = _json(capsys, "--workload", str(path), "--gpu", GPU)
    for d in (flag, file):
        assert d["layout"]["seqs_per_replica"] == 4 and d["layout"]["micro_batches"] == 4
        assert d["memory"]["activations_bytes"] == lib.memory.items["activations_bytes"]
    req = from_workload(load_workload(path))
    assert (req.micro_batch, req.global_batch, req.training) == (4, 16, True)


def test_a_global_batch_is_spread_over_the_data_parallel_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--model", "llama-3.2-1b", "--gpu", GPU, "--task", "train", "--dp", "4")
    assert _json(capsys, *args, "--global-batch", "32")["layout"]["seqs_per_replica"] == 8
    d = _json(capsys, *args, "--global-batch", "32", "--micro-batch", "2")
    assert (d["layout"]["seqs_per_replica"], d["layout"]["micro_batches"]) == (2, 4)


def test_the_deprecated_batch_keeps_its_meaning_and_says_what_replaces_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--model", "llama-3.2-1b", "--gpu", GPU, "--task", "train", "--seq", "1024")
    new = _json(capsys, *args, "--micro-batch", "4")
    assert capsys.readouterr().err == ""
    assert main(["estimate", *args, "--batch", "4", "--format", "json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["memory"] == new["memory"]
    assert out.err == ("gpumatch: note: --batch is deprecated; for task 'train' use --micro-batch (sequences per DP "
                       "rank per step)\n")
    req, notes = plan_request(PlanQuery(request=RequestFlags(model="llama-3.1-8b", task="serve", batch=12)))
    assert req.concurrency == 12 and notes == (
        "--batch is deprecated; for task 'serve' use --concurrency (sequences in flight)",
    )
    req, _ = plan_request(PlanQuery(request=RequestFlags(model="llama-3.1-8b", task="lora", batch=12)))
    assert req.global_batch == 12 and req.training


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--task", "train", "--concurrency", "4"], "--concurrency is for inference only, but the task is 'train'"),
        (["--task", "serve", "--global-batch", "4"], "--global-batch is for training only, but the task is 'serve'"),
        (["--task", "infer", "--micro-batch", "4"], "--micro-batch is for training only"),
        (["--concurrency", "4", "--batch", "4"], "--batch and --concurrency both set concurrency"),
        (["--concurrency", "100000000"], "--concurrency 1e+08 is beyond any real workload"),
    ],
)
def test_batch_flags_that_do_not_apply_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    for command in (["estimate", "--gpu", GPU], ["plan"]):
        assert main([*command, "--model", "llama-3.1-8b", *args]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1


def test_estimate_takes_a_config_json_or_its_folder_as_plan_does(capsys: pytest.CaptureFixture[str]) -> None:
    preset = _json(capsys, "--model", "llama-3.2-1b", "--gpu", GPU)
    for spec in (HF / "llama-3.2-1b" / "config.json", HF / "llama-3.2-1b"):
        d = _json(capsys, "--model", str(spec), "--gpu", GPU)
        assert d["memory"]["weights_bytes"] == pytest.approx(preset["memory"]["weights_bytes"], rel=1e-6)
        req, _ = plan_request(PlanQuery(request=RequestFlags(model=str(spec))))
        assert req.model.params_total == get_model("llama-3.2-1b").params_total


def test_an_optimizer_the_estimator_does_not_model_is_refused_by_both(tmp_path: Path) -> None:
    path = _file(tmp_path, 'task = "train"\nmodel = "llama-3.2-1b"\n[training]\noptimizer = "adafactor"\n')
    with pytest.raises(InputError, match="adafactor"):
        from_workload(load_workload(path))
    with pytest.raises(InputError, match="adafactor"):
        resolve_request(load_workload(path), RequestFlags())


def test_a_task_flag_of_the_other_kind_drops_the_files_fields_of_its_kind(tmp_path: Path) -> None:
    wl = load_workload(_file(tmp_path, SERVE + "concurrency = 24\n"))
    work = resolve_request(wl, RequestFlags(task="lora", micro_batch=2))
    assert work.concurrency is None and work.prompt is None and work.micro_batch == 2
    assert work.from_flags == {"task", "micro_batch"} and work.flag("micro_batch") == "--micro-batch"
    assert resolve_request(wl, RequestFlags()).flag("concurrency") == "shape.concurrency"
