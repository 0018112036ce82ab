"""``gpumatch plan``: the shortlist by role, with the rejected configurations and their reasons."""

from __future__ import annotations

from typing import Any

import typer

from gpumatch.cli.common import Format, FormatOption, emit

HELP = """Plan: which GPU, how many, in what layout, at what cost, and why the others lost.

\b
Examples:
  gpumatch plan examples/chat-70b-serving.toml
  gpumatch plan examples/chat-70b-serving.toml --verbose
  gpumatch plan examples/finetune-70b-cluster.toml --role cluster-training --top 5
  gpumatch plan --model llama-3.1-70b --task serve --batch 32 --prompt 2048 --gen 256 --max-gpus 8
  gpumatch plan --model llama-3.1-8b --task lora --batch 16 --seq 2048 --max-gpus 2 --gpus-per-node 2 --format json
  gpumatch plan examples/lowpower-small-inference.toml --format csv
"""

GpuOption = typer.Option(None, "--gpu", "-g", help="Consider only this GPU (repeatable).")
ExcludeOption = typer.Option(None, "--exclude", help="Leave this GPU out (repeatable).")
RoleOption = typer.Option(None, "--role", help="Show only this role (repeatable).")
VerboseOption = typer.Option(False, "--verbose", "-v", "--explain", help="Table: after the summary, per pick the "
                             "full why, cost, flip and verify plan, and each failed reason's examples (JSON/CSV "
                             "always carry everything).")


def plan_cmd(
    workload: str = typer.Argument(None, help="Workload file (TOML/YAML); flags below override its fields."),
    model: str = typer.Option(None, "--model", "-m", help="Model preset (gpumatch models list) or config.json."),
    task: str = typer.Option(None, "--task", help="infer | serve | dev | train | finetune | lora | qlora."),
    batch: int = typer.Option(None, "--batch", "-b", help="Global batch in sequences (training) or sequences in "
                              "flight (inference)."),
    micro_batch: int = typer.Option(None, "--micro-batch", help="Fix the per-GPU micro-batch (training)."),
    seq: int = typer.Option(None, "--seq", help="Training sequence length."),
    prompt: int = typer.Option(None, "--prompt", help="Prompt tokens per request (inference)."),
    gen: int = typer.Option(None, "--gen", help="Generated tokens per request (inference)."),
    precision: str = typer.Option(None, "--precision", help="Weights as written: bf16 | fp16 | fp8 | int8 | int4."),
    kv_precision: str = typer.Option(None, "--kv-precision", help="KV cache precision as written."),
    tp: int = typer.Option(None, "--tp", help="Pin the tensor-parallel degree."),
    pp: int = typer.Option(None, "--pp", help="Pin the pipeline-parallel degree."),
    max_gpus: int = typer.Option(None, "--max-gpus", help="Most GPUs to consider (default 64)."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node", help="GPUs per node (default 8)."),
    budget_usd: str = typer.Option(None, "--budget-usd", help="Purchase budget in US dollars ('20000', '$20k'; "
                                   "checked against purchase prices whatever --price-basis says)."),
    price_basis: str = typer.Option(None, "--price-basis", help="Price every card by on-demand (default) | "
                                    "reserved | spot | purchase quotes: the median of providers."),
    power_w_per_node: str = typer.Option(None, "--power-w-per-node", help="Power available per node ('10200', "
                                         "'10.2kW')."),
    psu_w: str = typer.Option(None, "--psu-w", help="PSU rating ('1600', '1.6kW'; the 1.5x headroom rule applies)."),
    ttft_s: str = typer.Option(None, "--ttft-s", help="Target p50 time to first token ('0.5' seconds, '500ms')."),
    tpot_s: str = typer.Option(None, "--tpot-s", help="Target p50 time per output token ('0.05' seconds, '50ms')."),
    tokens_per_s: str = typer.Option(None, "--tokens-per-s", help="Target aggregate tokens per second ('2000', "
                                     "'2k')."),
    gpu: list[str] = GpuOption,
    exclude: list[str] = ExcludeOption,
    top: int = typer.Option(3, "--top", "-n", help="Entries per role."),
    role: list[str] = RoleOption,
    verbose: bool = VerboseOption,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.plan import plan
    from gpumatch.plan.view import plan_request

    req = plan_request(workload, model, task=task, batch=batch, micro_batch=micro_batch, seq=seq, prompt=prompt,
                       gen=gen, precision=precision, kv_precision=kv_precision, tp=tp, pp=pp, max_gpus=max_gpus,
                       gpus_per_node=gpus_per_node, budget_usd=budget_usd, w_per_node=power_w_per_node, psu_w=psu_w,
                       ttft_p50_s=ttft_s, tpot_p50_s=tpot_s, tokens_per_s=tokens_per_s, gpus_allow=gpu,
                       gpus_deny=exclude, price_basis=price_basis)
    if top < 1:
        from gpumatch.errors import InputError

        raise InputError(f"--top must be at least 1, got {top}")
    from gpumatch.report.progress import StatusLine

    with StatusLine("planning") as status:
        result = plan(req, top=top, roles=role or None, progress=status)
    _emit(result.to_dict(), fmt, verbose)


def _emit(d: dict[str, Any], fmt: Format, verbose: bool) -> None:
    from gpumatch.report.plan import csv_rows, plan_text
    from gpumatch.report.render import to_csv, to_json

    if fmt is Format.json:
        emit(to_json(d))
    elif fmt is Format.csv:
        emit(to_csv(csv_rows(d)))
    else:
        emit(plan_text(d, verbose=verbose))
