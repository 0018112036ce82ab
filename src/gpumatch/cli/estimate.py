"""``gpumatch estimate``: memory fit, time, power and cost of one configuration.

Parse the flags into an :class:`~gpumatch.estimate.query.EstimateQuery`, call
:func:`~gpumatch.estimate.query.run_estimate`, render with :func:`gpumatch.report.estimate.estimate_output`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from gpumatch.cli import flags as fl
from gpumatch.cli.common import Format, FormatOption, emit
from gpumatch.cli.flags import Flag
from gpumatch.vocab import OPTIMIZERS, RECOMPUTE_MODES

if TYPE_CHECKING:
    from gpumatch.estimate.query import EstimateQuery

HELP = """Estimate one configuration: does it fit, how fast, at what power and cost.

\b
Examples:
  gpumatch estimate --model llama-3.1-8b --gpu "H100 SXM" --task infer --concurrency 8 --prompt 1024 --gen 256
  gpumatch estimate --model llama-3.1-70b --gpu "H100 SXM" --count 4 --tp 4 --task serve --concurrency 64
  gpumatch estimate --model llama-3.1-8b --gpu "H200 SXM" --task serve --engine sglang --concurrency 32
  gpumatch estimate --model llama-3.2-1b --gpu "H200 SXM" --task train --micro-batch 8 --seq 2048 --curve
  gpumatch estimate --model llama-3.1-8b --gpu "RTX 4090" --task qlora --micro-batch 4 --seq 2048 --format json
  gpumatch estimate --model ./my-model/config.json --gpu "H100 SXM" --concurrency 16
  gpumatch estimate --workload examples/chat-70b-serving.toml --gpu "H100 SXM" --count 4 --tp 4

--model takes a preset or alias (gpumatch models list), or a path to a Hugging Face config.json or to a folder
holding one. With --workload, flags given explicitly (--model, --task, --concurrency, ...) override the file's
values; a serving file's sequences in flight are max(shape.batch_size, shape.concurrency), as for 'gpumatch plan'.
--concurrency is spread over the replicas (--dp); --global-batch over the data-parallel ranks, with
--micro-batch setting the gradient accumulation. --batch is deprecated: it was the micro-batch per DP rank
(training) or the sequences per replica (inference). Flags that do not apply to the task are errors: --seq,
--optimizer, --master-weights, --recompute, --micro-batches, --zero, --offload-optimizer, --micro-batch and
--global-batch are for training; --prompt, --gen, --kv-precision and --concurrency for inference; --engine,
--request-rate and --prefix-hit-ratio for --task serve (engine vllm by default; static = the static-batch model).
Bounds, far above any real job: batches <= 1e7, --count/--tp/--pp/--dp <= 1e6, tokens per sequence <= 1e8,
--run-tokens <= 1e18.
"""

_OPT = typer.Option
FLAGS: dict[str, Flag] = {
    "model": Flag(list[str], _OPT(None, "--model", "-m", help="Model preset or alias (gpumatch models list), or a "
                                  "path to a config.json or a folder holding one (once).")),
    "gpu": Flag(list[str], _OPT(..., "--gpu", "-g", help="GPU name or alias (gpumatch gpus list); repeat it to "
                                "compare GPUs side by side.")),
    "count": Flag(int, _OPT(None, "--count", "-n", help="GPUs in total (= tp × pp × dp).")),
    "task": Flag(str, _OPT(None, "--task", help=fl.TASK_HELP)),
    "concurrency": Flag(int, _OPT(None, "--concurrency", help=fl.CONCURRENCY_HELP)),
    "micro_batch": Flag(int, _OPT(None, "--micro-batch", help=fl.MICRO_BATCH_HELP)),
    "global_batch": Flag(int, _OPT(None, "--global-batch", help=fl.GLOBAL_BATCH_HELP)),
    "batch": Flag(int, _OPT(None, "--batch", "-b", help="Deprecated: --micro-batch (training) or --concurrency "
                            "(inference: --batch was per replica).")),
    "seq": Flag(int, _OPT(None, "--seq", help="Training sequence length (inference: prompt length).")),
    "prompt": Flag(int, _OPT(None, "--prompt", help="Prompt tokens per sequence (inference).")),
    "gen": Flag(int, _OPT(None, "--gen", help="Generated tokens per sequence (inference).")),
    "engine": Flag(str, _OPT(None, "--engine", help=fl.ENGINE_HELP)),
    "request_rate": Flag(float, _OPT(None, "--request-rate", help="Task serve: open-loop Poisson arrivals, "
                                     "requests/s over all replicas (default: closed loop at --concurrency).")),
    "prefix_hit_ratio": Flag(float, _OPT(None, "--prefix-hit-ratio", help="Task serve: share of each prompt "
                                         "already in the engine's prefix cache, 0 <= r < 1 (default 0).")),
    "num_prompts": Flag(int, _OPT(None, "--num-prompts", help="Task serve: requests of the benchmark replayed "
                                  "pass by pass; closed loop: first burst included (default 10 × --concurrency, "
                                  "as published sweeps); with --request-rate: a finite run of that many arrivals "
                                  "(default: the steady state); 0 = the long-run steady state the planner "
                                  "ranks.")),
    "length_low": Flag(float, _OPT(None, "--length-low", help="Task serve, replay: draw prompt and output lengths "
                                   "in [F × L, L] (default 1 = fixed; InferenceX's --random-range-ratio 0.8).")),
    "memory_fraction": Flag(float, _OPT(None, "--memory-fraction", help="Task serve: share of GPU memory the "
                                        "engine takes (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static; "
                                        "default: the engine profile's, e.g. 0.9).")),
    "precision": Flag(str, _OPT(None, "--precision", help=fl.PRECISION_HELP)),
    "kv_precision": Flag(str, _OPT(None, "--kv-precision", help=fl.KV_PRECISION_HELP)),
    "optimizer": Flag(str, _OPT(None, "--optimizer", help=fl.choices(OPTIMIZERS) + ".")),
    "master_weights": Flag(str, _OPT(None, "--master-weights", help=fl.MASTER_WEIGHTS_HELP)),
    "recompute": Flag(str, _OPT(None, "--recompute", help=fl.choices(RECOMPUTE_MODES) + ".")),
    "tp": Flag(int, _OPT(None, "--tp", help="Tensor-parallel degree.")),
    "pp": Flag(int, _OPT(None, "--pp", help="Pipeline-parallel degree.")),
    "dp": Flag(int, _OPT(None, "--dp", help="Data-parallel degree (inference: replicas).")),
    "zero": Flag(int, _OPT(None, "--zero", help="ZeRO stage 0-3 (3 = FSDP full shard).")),
    "micro_batches": Flag(int, _OPT(None, "--micro-batches", help="Micro-batches per step (grad accumulation).")),
    "offload_optimizer": Flag(bool, _OPT(False, "--offload-optimizer", help="Keep and update the optimizer state "
                                         "on the host (ZeRO-Offload).")),
    "workload": Flag(str, _OPT(None, "--workload", "-w", help="A workload file; flags given explicitly override its "
                               "values.")),
    "run_tokens": Flag(str, _OPT(None, "--run-tokens", help="Tokens of a whole run ('100M', '2e9'): adds hours, kWh "
                                 "and $ per run.")),
    "price_basis": Flag(str, _OPT(None, "--price-basis", help="Price the GPU by on-demand (default) | reserved | "
                                  "spot | purchase quotes: the median of providers, as the plan does.")),
    "curve": Flag(bool, _OPT(False, "--curve", help="Add the memory growth curve over batch × sequence length.")),
    "calibration": Flag(str, _OPT(None, "--calibration", help="A Calibration JSON file (fields of "
                                  "gpumatch.estimate.Calibration) instead of the card's newest stored one.")),
    "no_calibration": Flag(bool, _OPT(False, "--no-calibration", help="Use the shipped defaults, not the card's "
                                      "newest calibration in the results store ('gpumatch calibrate').")),
    "store": Flag(str, _OPT(None, "--store", help="Results store to look for calibrations in (default: "
                            "$GPUMATCH_STORE or $GPUMATCH_HOME/results.sqlite; none there: the defaults).")),
    "fmt": Flag(Format, FormatOption),
}
_SHARED = ("task", "concurrency", "micro_batch", "global_batch", "batch", "seq", "prompt", "gen", "precision",
           "kv_precision", "optimizer", "master_weights", "price_basis", "engine", "request_rate", "prefix_hit_ratio")


def estimate_query(given: dict[str, Any]) -> EstimateQuery:
    """The typed request of the flags (:class:`gpumatch.estimate.query.EstimateQuery`)."""
    from gpumatch.estimate.query import EstimateQuery
    from gpumatch.workload.request import RequestFlags

    request = RequestFlags(batch_means="per-rank", **{k: given[k] for k in _SHARED})
    own = {k: v for k, v in given.items() if k not in (*_SHARED, "model", "gpu", "fmt", "no_calibration", "store")}
    return EstimateQuery(request=request, models=tuple(given["model"] or ()), gpus=tuple(given["gpu"]), **own)


@fl.takes(FLAGS)
def estimate_cmd(**given: Any) -> None:
    from pathlib import Path

    from gpumatch.report.estimate import estimate_output
    from gpumatch.usecases.estimate import estimate_calibrated

    store = Path(given["store"]) if given["store"] else None
    run = estimate_calibrated(estimate_query(given), store, use_store=not given["no_calibration"])
    fl.say(run.notes)
    for block in estimate_output(run, given["fmt"]):
        emit(block)
