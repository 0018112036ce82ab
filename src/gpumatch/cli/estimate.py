"""``gpumatch estimate``: memory fit, time, power and cost of one configuration."""

from __future__ import annotations

from typing import Any

import typer

from gpumatch.cli.common import Format, FormatOption, emit_object, emit_rows

HELP = """Estimate one configuration: does it fit, how fast, at what power and cost.

\b
Examples:
  gpumatch estimate --model llama-3.1-8b --gpu "H100 SXM" --task infer --batch 8 --prompt 1024 --gen 256
  gpumatch estimate --model llama-3.1-70b --gpu "H100 SXM" --count 4 --tp 4 --task serve --batch 64
  gpumatch estimate --model llama-3.2-1b --gpu "H200 SXM" --task train --batch 8 --seq 2048 --recompute full --curve
  gpumatch estimate --model llama-3.1-8b --gpu "RTX 4090" --task qlora --batch 4 --seq 2048 --format json
  gpumatch estimate --workload examples/chat-70b-serving.toml --gpu "H100 SXM" --count 4 --tp 4

With --workload, flags given explicitly (--model, --task, --batch, ...) override the file's values.
Flags that do not apply to the task are errors: --seq, --optimizer, --master-weights, --recompute,
--micro-batches, --zero and --offload-optimizer are for training; --prompt, --gen and --kv-precision for
inference. Bounds, far above any real job: --batch <= 1e7, --count/--tp/--pp/--dp <= 1e6, tokens per
sequence <= 1e8, --run-tokens <= 1e18.
"""


def _one_model(models: list[str] | None) -> str:
    """The one --model (or "" for none): repeating it is an error, not "the last one wins"."""
    from gpumatch.errors import InputError

    models = models or []
    if len(models) > 1:
        raise InputError(f"--model given {len(models)} times ({', '.join(models)}): estimate takes one model",
                         "run one estimate per model; repeat --gpu to compare GPUs")
    return models[0] if models else ""


def _distinct_gpus(names: list[str]) -> list[str]:
    """The GPUs as canonical names, in order; the same card named twice is an error."""
    from gpumatch.catalog import load_catalog
    from gpumatch.errors import InputError

    catalog = load_catalog()
    out: list[str] = []
    for n in names:
        name = catalog.get(n).name
        if name in out:
            raise InputError(f"--gpu {n!r} names {name} a second time", "give each GPU once")
        out.append(name)
    return out


def _compare(model: Any, gpus: list[str], count: int | None, options: dict[str, Any], fmt: Format) -> None:
    """The same configuration on each GPU: JSON a list of estimates, table/CSV one row per GPU."""
    from gpumatch.cli.common import emit
    from gpumatch.estimate import estimate
    from gpumatch.report.estimate_compare import comparison_csv_rows, comparison_text
    from gpumatch.report.render import to_csv, to_json

    results = [estimate(model, g, count=count, **options).to_dict() for g in gpus]
    if fmt is Format.json:
        emit(to_json(results))
    elif fmt is Format.csv:
        emit(to_csv(comparison_csv_rows(results)))
    else:
        emit(comparison_text(results))


def _workload_options(path: str) -> tuple[Any, dict[str, Any]]:
    """(model, request options) from a workload file (gpumatch.workload)."""
    from gpumatch.estimate.workload_bridge import options_from_workload
    from gpumatch.workload import load_workload

    wl = load_workload(path)
    return wl.model, options_from_workload(wl)


def _override(file_options: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The workload file's options under explicit flags. A --task of the other kind (training vs inference)
    also drops the file's options of its own kind (its prompt/gen, or its optimizer), which no longer apply;
    --seq replaces the file's prompt, --prompt its sequence length."""
    from gpumatch.workload.rules import misplaced_options

    out = dict(file_options)
    if "task" in given:
        for name, _ in misplaced_options(given["task"], list(out)):
            out.pop(name)
    if "seq" in given:
        out.pop("prompt", None)
    if "prompt" in given:
        out.pop("seq", None)
    return out


ModelOption = typer.Option(None, "--model", "-m", help="Model preset (gpumatch models list) or ModelArch name (once).")
GpuOption = typer.Option(..., "--gpu", "-g", help="GPU name or alias (gpumatch gpus list); repeat it to compare GPUs "
                         "side by side.")


def estimate_cmd(
    model: list[str] = ModelOption,
    gpu: list[str] = GpuOption,
    count: int = typer.Option(None, "--count", "-n", help="GPUs in total (= tp × pp × dp)."),
    task: str = typer.Option(None, "--task", help="infer | serve | train | finetune | lora | qlora."),
    batch: int = typer.Option(None, "--batch", "-b", help="Micro-batch per DP rank, or concurrent sequences."),
    seq: int = typer.Option(None, "--seq", help="Training sequence length (inference: prompt length)."),
    prompt: int = typer.Option(None, "--prompt", help="Prompt tokens per sequence (inference)."),
    gen: int = typer.Option(None, "--gen", help="Generated tokens per sequence (inference)."),
    precision: str = typer.Option(None, "--precision", help="Weights: bf16 | fp16 | fp8 | int8 | int4 | fp32 | tf32."),
    kv_precision: str = typer.Option(None, "--kv-precision", help="KV cache: bf16 | fp16 | fp8 | int8 | int4."),
    optimizer: str = typer.Option(None, "--optimizer", help="adamw | adamw-8bit | sgd."),
    master_weights: str = typer.Option(None, "--master-weights", help="fp32 | none (all in training precision)."),
    recompute: str = typer.Option(None, "--recompute", help="none | selective | full."),
    tp: int = typer.Option(None, "--tp", help="Tensor-parallel degree."),
    pp: int = typer.Option(None, "--pp", help="Pipeline-parallel degree."),
    dp: int = typer.Option(None, "--dp", help="Data-parallel degree."),
    zero: int = typer.Option(None, "--zero", help="ZeRO stage 0-3 (3 = FSDP full shard)."),
    micro_batches: int = typer.Option(None, "--micro-batches", help="Micro-batches per step (grad accumulation)."),
    offload_optimizer: bool = typer.Option(False, "--offload-optimizer",
                                           help="Keep and update the optimizer state on the host (ZeRO-Offload)."),
    workload: str = typer.Option(None, "--workload", "-w", help="A workload file; flags given explicitly override "
                                 "its values."),
    run_tokens: str = typer.Option(None, "--run-tokens", help="Tokens of a whole run ('100M', '2e9'): adds hours, "
                                   "kWh and $ per run."),
    price_basis: str = typer.Option(None, "--price-basis", help="Price the GPU by on-demand (default) | reserved | "
                                    "spot | purchase quotes: the median of providers, as the plan does."),
    curve: bool = typer.Option(False, "--curve", help="Add the memory growth curve over batch × sequence length."),
    calibration: str = typer.Option(None, "--calibration", help="A Calibration JSON file (fields of "
                                    "gpumatch.estimate.Calibration) instead of the defaults."),
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.errors import InputError
    from gpumatch.estimate import estimate, memory_curve

    model_name = _one_model(model)
    model_arg: Any = model_name
    gpus = _distinct_gpus(gpu)
    if len(gpus) > 1 and curve:
        raise InputError("--curve draws one GPU's memory curve, but --gpu was given "
                         f"{len(gpus)} times", "drop --curve to compare, or give one --gpu")
    options: dict[str, Any] = {}
    flags = {"task": task, "batch": batch, "seq": seq, "prompt": prompt, "gen": gen, "precision": precision,
             "kv_precision": kv_precision, "optimizer": optimizer, "master_weights": master_weights,
             "recompute": recompute, "tp": tp, "pp": pp, "dp": dp, "zero": zero, "micro_batches": micro_batches,
             "offload_optimizer": offload_optimizer or None, "price_basis": price_basis}
    given = {k: v for k, v in flags.items() if v is not None}
    if workload:
        model_arg, options = _workload_options(workload)
        options = _override(options, given)
        if model_name:
            model_arg = model_name
    elif not model_name:
        raise InputError("--model is required (or --workload FILE)", "see 'gpumatch estimate --help'")
    options.update(given)
    if run_tokens is not None:
        from gpumatch.workload.quantities import token_count

        try:
            options["run_tokens"] = token_count(run_tokens)
        except ValueError as e:
            raise InputError(f"--run-tokens: {e}") from None
    if count is None and "count" in options:
        count = options.pop("count")
    options.pop("count", None)
    if calibration:
        from gpumatch.estimate.calibration import load_calibration_file

        options["calibration"] = load_calibration_file(calibration)
    if len(gpus) > 1:
        _compare(model_arg, gpus, count, options, fmt)
        return
    gpu_name = gpus[0]
    result = estimate(model_arg, gpu_name, count=count, **options)
    d = result.to_dict()
    options.pop("run_tokens", None)
    options.pop("calibration", None)
    rows = memory_curve(model_arg, gpu_name, count=count, **options) if curve else []
    if curve:
        d["memory_curve"] = rows
    from gpumatch.report.estimate import CURVE_TITLE, curve_rows, field_values

    human = fmt is Format.table  # CSV keeps its figures as they were; JSON is the whole result
    emit_object(d, fmt, field_values(d, human))
    if curve and fmt is not Format.json:
        emit_rows(curve_rows(rows, human), fmt, title=CURVE_TITLE)
