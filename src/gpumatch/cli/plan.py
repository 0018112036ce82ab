"""``gpumatch plan``: the shortlist by role, with the rejected configurations and their reasons.

Parse the flags into a :class:`~gpumatch.plan.query.PlanQuery`, call :func:`~gpumatch.plan.query.run_plan`,
render with :func:`gpumatch.report.plan.plan_output`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from gpumatch.cli import flags as fl
from gpumatch.cli.common import Format, FormatOption, emit
from gpumatch.cli.flags import Flag

if TYPE_CHECKING:
    from gpumatch.plan.query import PlanQuery

HELP = """Plan: which GPU, how many, in what layout, at what cost, and why the others lost.

\b
Examples:
  gpumatch plan examples/chat-70b-serving.toml
  gpumatch plan examples/chat-70b-serving.toml --verbose
  gpumatch plan examples/finetune-70b-cluster.toml --role cluster-training --top 5
  gpumatch plan --model llama-3.1-70b --task serve --concurrency 32 --prompt 2048 --gen 256 --max-gpus 8
  gpumatch plan --model llama-3.1-8b --task lora --global-batch 16 --seq 2048 --max-gpus 2 --gpus-per-node 2 -f json
  gpumatch plan examples/lowpower-small-inference.toml --format csv

Flags override the workload file's fields. A serving file's sequences in flight are max(shape.batch_size,
shape.concurrency), as for 'gpumatch estimate --workload'. --batch is deprecated: it was the global batch
(training) or the sequences in flight (inference); use --global-batch or --concurrency.
"""

_OPT = typer.Option
FLAGS: dict[str, Flag] = {
    "workload": Flag(str, typer.Argument(None, help="Workload file (TOML/YAML); flags below override its fields.")),
    "model": Flag(str, _OPT(None, "--model", "-m", help="Model preset or alias (gpumatch models list), or a path to "
                            "a config.json or a folder holding one.")),
    "task": Flag(str, _OPT(None, "--task", help=fl.TASK_HELP)),
    "concurrency": Flag(int, _OPT(None, "--concurrency", help=fl.CONCURRENCY_HELP)),
    "global_batch": Flag(int, _OPT(None, "--global-batch", help=fl.GLOBAL_BATCH_HELP)),
    "micro_batch": Flag(int, _OPT(None, "--micro-batch", help="Fix the per-GPU micro-batch (training; default: the "
                                  "planner tries 1, 2, 4, 8).")),
    "batch": Flag(int, _OPT(None, "--batch", "-b", help="Deprecated: --global-batch (training) or --concurrency "
                            "(inference).")),
    "seq": Flag(int, _OPT(None, "--seq", help="Training sequence length.")),
    "prompt": Flag(int, _OPT(None, "--prompt", help="Prompt tokens per request (inference).")),
    "gen": Flag(int, _OPT(None, "--gen", help="Generated tokens per request (inference).")),
    "precision": Flag(str, _OPT(None, "--precision", help=fl.PRECISION_HELP)),
    "kv_precision": Flag(str, _OPT(None, "--kv-precision", help=fl.KV_PRECISION_HELP)),
    "tp": Flag(int, _OPT(None, "--tp", help="Pin the tensor-parallel degree.")),
    "pp": Flag(int, _OPT(None, "--pp", help="Pin the pipeline-parallel degree.")),
    "max_gpus": Flag(int, _OPT(None, "--max-gpus", help="Most GPUs to consider (default 64).")),
    "gpus_per_node": Flag(int, _OPT(None, "--gpus-per-node", help="GPUs per node (default 8).")),
    "budget_usd": Flag(str, _OPT(None, "--budget-usd", help="Purchase budget in US dollars ('20000', '$20k'; checked "
                                 "against purchase prices whatever --price-basis says).")),
    "price_basis": Flag(str, _OPT(None, "--price-basis", help="Price every card by on-demand (default) | reserved | "
                                  "spot | purchase quotes: the median of providers.")),
    "w_per_node": Flag(str, _OPT(None, "--power-w-per-node", help="Power available per node ('10200', '10.2kW').")),
    "psu_w": Flag(str, _OPT(None, "--psu-w", help="PSU rating ('1600', '1.6kW'; the 1.5x headroom rule applies).")),
    "ttft_p50_s": Flag(str, _OPT(None, "--ttft-s", help="Target p50 time to first token ('0.5' seconds, '500ms').")),
    "tpot_p50_s": Flag(str, _OPT(None, "--tpot-s", help="Target p50 time per output token ('0.05' seconds, "
                                 "'50ms').")),
    "tokens_per_s": Flag(str, _OPT(None, "--tokens-per-s", help="Target aggregate tokens per second ('2000', "
                                   "'2k').")),
    "gpus_allow": Flag(list[str], _OPT(None, "--gpu", "-g", help="Consider only this GPU (repeatable).")),
    "gpus_deny": Flag(list[str], _OPT(None, "--exclude", help="Leave this GPU out (repeatable).")),
    "top": Flag(int, _OPT(3, "--top", "-n", help="Entries per role.")),
    "roles": Flag(list[str], _OPT(None, "--role", help="Show only this role (repeatable).")),
    "verbose": Flag(bool, _OPT(False, "--verbose", "-v", "--explain", help="Table: after the summary, per pick the "
                               "full why, cost, flip and verify plan, and each failed reason's examples (JSON/CSV "
                               "always carry everything).")),
    "no_calibration": Flag(bool, _OPT(False, "--no-calibration", help="Shipped defaults even when the plan is "
                                      "limited to one card with a stored calibration.")),
    "store": Flag(str, _OPT(None, "--store", help="Results store to look for calibrations in (default: "
                            "$GPUMATCH_STORE or $GPUMATCH_HOME/results.sqlite; none there: the defaults).")),
    "fmt": Flag(Format, FormatOption),
}
_SHARED = ("model", "task", "concurrency", "global_batch", "micro_batch", "batch", "seq", "prompt", "gen",
           "precision", "kv_precision", "price_basis", "gpus_per_node")


def plan_query(given: dict[str, Any]) -> PlanQuery:
    """The typed request of the flags (:class:`gpumatch.plan.query.PlanQuery`)."""
    from gpumatch.plan.query import PlanQuery
    from gpumatch.workload.request import RequestFlags

    request = RequestFlags(batch_means="per-step", **{k: given[k] for k in _SHARED})
    lists: dict[str, Any] = {k: tuple(given[k] or ()) for k in ("gpus_allow", "gpus_deny", "roles")}
    own = {k: v for k, v in given.items() if k not in (*_SHARED, *lists, "verbose", "fmt", "no_calibration", "store")}
    return PlanQuery(request=request, **lists, **own)


@fl.takes(FLAGS)
def plan_cmd(**given: Any) -> None:
    from pathlib import Path

    from gpumatch.report.plan import plan_output
    from gpumatch.report.progress import StatusLine
    from gpumatch.usecases.plan import plan_calibrated

    query = plan_query(given)
    store = Path(given["store"]) if given["store"] else None
    with StatusLine("planning") as status:
        run = plan_calibrated(query, status, store, use_store=not given["no_calibration"])
    fl.say(run.notes)
    emit(plan_output(run.plan.to_dict(), given["fmt"], given["verbose"]))
