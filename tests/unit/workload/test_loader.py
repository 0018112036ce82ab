"""load_workload: the examples load, units convert, defaults follow the task, bad files fail on one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpumatch.errors import DataFileError, MissingDependencyError
from gpumatch.workload import load_workload

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))
HF = ROOT / "tests" / "data" / "hf_configs"
SEED_SCENARIOS = {
    "chat-70b-serving", "inference-7b-budget", "finetune-70b-cluster", "lora-8b-workstation",
    "lowpower-small-inference", "dev-box",
}  # fmt: skip


def test_every_seed_scenario_has_an_example() -> None:
    assert {p.stem for p in EXAMPLES} >= SEED_SCENARIOS


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_load(path: Path) -> None:
    w = load_workload(path)
    assert w.name == path.stem
    assert w.model.params_total > 1e9
    assert w.to_dict()["model"]["name"] == w.model.name


def test_example_values_are_si() -> None:
    chat = load_workload(ROOT / "examples" / "chat-70b-serving.toml")
    assert (chat.targets.ttft_p50_s, chat.targets.tpot_p99_s) == (0.5, 0.08)
    assert chat.power.w_per_node == 10_200
    assert chat.money.electricity_usd_per_kwh == 0.12
    ft = load_workload(ROOT / "examples" / "finetune-70b-cluster.toml")
    assert ft.targets.train_tokens == 2e9 and ft.targets.deadline_s == 7 * 86400
    assert ft.targets.required_train_tokens_per_s == pytest.approx(2e9 / (7 * 86400))
    assert ft.gpus_deny == ("GeForce RTX 4090", "GeForce RTX 3090", "GeForce RTX 5090")
    assert load_workload(ROOT / "examples" / "inference-7b-budget.toml").money.purchase_budget_usd == 15_000


def _write(tmp_path: Path, text: str, name: str = "w.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_defaults_follow_the_task(tmp_path: Path) -> None:
    q = load_workload(_write(tmp_path, 'task = "qlora"\nmodel = "llama-3.1-8b"\n'))
    assert (q.precision.weights, q.precision.compute, q.precision.master_weights) == ("nf4", "bf16", "none")
    assert q.shape.lora_rank == 16 and q.shape.sequence_length == 4096 and q.is_training
    s = load_workload(_write(tmp_path, 'task = "serve"\nmodel = "llama-3.1-8b"\n[precision]\nweights = "int4"\n'))
    assert (s.precision.compute, s.precision.kv_cache, s.precision.optimizer) == ("bf16", "bf16", None)
    assert s.context_tokens == 1024 + 256
    t = load_workload(_write(tmp_path, 'task = "train"\nmodel = "llama-3.2-1b"\n[precision]\nweights = "fp32"\n'))
    assert (t.precision.master_weights, t.precision.optimizer, t.optimizer) == ("none", "fp32", "adamw")


def test_model_path_relative_to_the_workload_file(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text((HF / "qwen2.5-7b" / "config.json").read_text())
    w = load_workload(_write(tmp_path, 'task = "infer"\nmodel = "cfg/config.json"\n'))
    assert w.model.params_total == 7_615_616_512


def test_yaml_workload(tmp_path: Path) -> None:
    p = _write(tmp_path, "task: serve\nmodel: mixtral-8x7b\ntargets:\n  tpot_p50_s: 50ms\n", "w.yaml")
    w = load_workload(p)
    assert w.model.experts == 8 and w.targets.tpot_p50_s == 0.05


def test_yaml_without_pyyaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(MissingDependencyError, match="PyYAML") as info:
        load_workload(_write(tmp_path, "task: serve\n", "w.yml"))
    assert "gpumatch[yaml]" in info.value.hint


def test_yaml_aliases_refused(tmp_path: Path) -> None:
    text = "a: &x [1, 2]\nb: [*x, *x]\ntask: serve\nmodel: llama-3.1-8b\n"
    with pytest.raises(DataFileError, match="aliases"):
        load_workload(_write(tmp_path, text, "w.yaml"))


@pytest.mark.parametrize(
    ("text", "field", "fix"),
    [
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[targets]\ntpot_p50 = 0.05\n', "targets.tpot_p50", "tpot_p50_s"),
        (
            'task = "serve"\nmodel = "llama-3.1-8b"\nconcurrency = 4\n',
            "concurrency",
            "did you mean 'shape.concurrency'",
        ),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[shapes]\nconcurrency = 4\n', "shapes", "shape"),
        ('task = "serving"\nmodel = "llama-3.1-8b"\n', "task", "fix that field"),
        ('model = "llama-3.1-8b"\n', "task", "add 'task'"),
        ('task = "serve"\nmodel = "llama-3.1-9b"\n', "model", "did you mean"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[power]\nw_per_node = "ten kW"\n', "power.w_per_node", "700W"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[power]\nw_per_node = -5\n', "power.w_per_node", "fix"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[power]\ncooling = "water"\n', "power.cooling", "fix"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[shape]\nconcurrency = "many"\n', "shape.concurrency", "fix"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[shape]\nconcurrency = true\n', "shape.concurrency", "fix"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[targets]\ndeadline = "3 fortnights"\n', "targets.deadline", "72h"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[targets]\nttft_p50_s = 2\nttft_p99_s = 1\n', "targets", "p99"),
        ('task = "lora"\nmodel = "llama-3.1-8b"\n[targets]\nttft_p50_s = 1\n', "targets.ttft_p50_s", "remove"),
        ('task = "qlora"\nmodel = "llama-3.1-8b"\n[precision]\nweights = "bf16"\n', "precision.weights", "nf4"),
        ('task = "lora"\nmodel = "llama-3.1-8b"\n[precision]\nweights = "nf4"\n', "task", "qlora"),
        ('task = "train"\nmodel = "llama-3.1-8b"\n[precision]\nweights = "int4"\n', "precision.weights", "bf16"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[precision]\noptimizer = "fp32"\n', "precision.optimizer", "remove"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[shape]\nprompt_tokens = 200000\n', "shape.prompt_tokens", "131072"),
        (
            'task = "serve"\nmodel = "llama-3.1-8b"\n[limits]\nmax_gpus = 16\nmax_nodes = 1\n',
            "limits.max_gpus",
            "max_nodes",
        ),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[gpus]\nallow = ["H100 SXX"]\n', "gpus.allow", "H100"),
        (
            'task = "serve"\nmodel = "llama-3.1-8b"\n[gpus]\nallow = ["L4"]\ndeny = ["nvidia-l4"]\n',
            "gpus.deny",
            "one list",
        ),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[money.usd_per_gpu_hour]\n"H100 SXM" = "cheap"\n', "money", "$2.5/h"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[role_weights.latency-serving]\nlatncy = 2\n', "latncy", "latency"),
        (
            'task = "serve"\nmodel = "llama-3.1-8b"\n[role_weights.serving]\nlatency = 2\n',
            "role_weights.serving",
            "serving",
        ),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[role_weights.dev]\ncost = -1\n', "role_weights.dev.cost", ">= 0"),
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[money]\npue = 0.5\n', "money.pue", "fix"),
        ("task = serve\n", "", "TOML"),
    ],
)
def test_errors_name_file_field_and_fix(tmp_path: Path, text: str, field: str, fix: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(DataFileError) as info:
        load_workload(p)
    msg = str(info.value)
    assert msg.startswith(str(p)) and "\n" not in msg
    assert field in msg and fix in msg


def test_unreadable_and_hostile_files(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="cannot read"):
        load_workload(tmp_path / "missing.toml")
    big = _write(tmp_path, "# " + "x" * 1_100_000 + "\n")
    with pytest.raises(DataFileError, match="MB limit"):
        load_workload(big)
    binary = tmp_path / "b.toml"
    binary.write_bytes(b"\xff\xfe\x00\x00garbage")
    with pytest.raises(DataFileError, match="UTF-8"):
        load_workload(binary)
    with pytest.raises(DataFileError, match="top level"):
        load_workload(_write(tmp_path, "- a\n- b\n", "list.yaml"))


def test_price_overrides_resolve_to_catalog_names(tmp_path: Path) -> None:
    text = 'task = "serve"\nmodel = "llama-3.1-8b"\n[money.usd_per_gpu_hour]\n"h100-sxm5-80gb" = "$2.5/h"\nL4 = 0.8\n'
    w = load_workload(_write(tmp_path, text))
    assert w.money.usd_per_gpu_hour == {"H100 SXM5 80GB": 2.5, "L4": 0.8}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('task = "train"\nmodel = "llama-3.2-1b"\n[shape]\nprompt_tokens = 512\n', "shape.prompt_tokens"),
        ('task = "lora"\nmodel = "llama-3.2-1b"\n[shape]\noutput_tokens = 64\n', "shape.output_tokens"),
        ('task = "train"\nmodel = "llama-3.2-1b"\n[precision]\nkv_cache = "fp8"\n', "precision.kv_cache"),
        ('task = "serve"\nmodel = "llama-3.2-1b"\n[precision]\nmaster_weights = "fp32"\n', "precision.master_weights"),
    ],
)
def test_fields_of_the_other_task_are_errors(tmp_path: Path, text: str, field: str) -> None:
    """The same rules as the estimate flags (gpumatch.workload.rules.misplaced_options)."""
    p = tmp_path / "w.toml"
    p.write_text(text)
    with pytest.raises(DataFileError, match=f"{field}.*applies to"):
        load_workload(p)
