"""``gpumatch report``: a plan and/or stored bench runs as one offline HTML page with plots, or as text.

Parse the plan flags (as ``gpumatch plan``) and the runs, call :func:`gpumatch.usecases.report.build_report`, render
with :mod:`gpumatch.report.html` (``--html FILE``) or the 80-column text views."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from gpumatch.cli import flags as fl
from gpumatch.cli import plan as plan_cli
from gpumatch.cli.common import RUN_ID_MAX, Format, emit
from gpumatch.cli.flags import Flag

HELP = """Report a plan and/or stored bench runs: one self-contained HTML page with plots (--html), or text.

\b
Examples:
  gpumatch report examples/chat-70b-serving.toml --html chat.html
  gpumatch report --model llama-3.1-8b --task serve --concurrency 16 --max-gpus 2 --html plan.html
  gpumatch report --run 1 --run 2 --store results.sqlite --html runs.html
  gpumatch report --run 1 --run 2 --store results.sqlite --format csv
  gpumatch report --run 4 --run 5 --slo-ttft-ms 500 --slo-tpot-ms 50 --html serve.html
  gpumatch report examples/lora-8b-workstation.toml

The page works offline (no script, no network; plots are inline SVG) and stays under 5 MB: per shortlisted card
the roofline with the workload's operators, memory growth with the card's capacity, the experiment plan and the
procurement re-check list; per run predicted vs measured, power/clock/temperature with throttling shaded, and the
decode load curve. Serve runs (bench serve, imported vLLM/GuideLLM/AIPerf files) overlay one line per run: TTFT
and TPOT (p50, p99), tokens/s and J/token over concurrency or request rate beside gpumatch's prediction, and the
SLO frontier with the levels that meet the SLO. With two bench runs or more (say on two cards), they also come
side by side against the first: tokens/s, TPOT, TTFT, peak memory, mean power, J/token gross and net, $/M tokens
at the card's on-demand price, the verdicts, predicted/measured, with 95% bootstrap intervals where raw timings
are stored and * where a run differs significantly from the first. --format json gives all the data, csv the
side-by-side rows (serve runs: one row per level).
Planning needs no GPU and no store.
"""

_OPT = typer.Option
FLAGS: dict[str, Flag] = {
    **{k: v for k, v in plan_cli.FLAGS.items() if k != "verbose"},
    "run": Flag(list[int], _OPT(None, "--run", min=1, max=RUN_ID_MAX, help="A stored bench run to include (repeat).")),
    "html": Flag(str, _OPT(None, "--html", help="Write the HTML page to this file.")),
    "force": Flag(bool, _OPT(False, "--force", help="Overwrite the --html file if it exists.")),
    "slo_ttft_ms": Flag(float, _OPT(None, "--slo-ttft-ms", help="Serve runs: the p99 TTFT a level must meet (ms); "
                                    "default: the runs' settings, else 450.")),
    "slo_tpot_ms": Flag(float, _OPT(None, "--slo-tpot-ms", help="Serve runs: the p99 TPOT a level must meet (ms); "
                                    "default: the runs' settings, else 40.")),
}
_PLAN_KEYS = ("workload", "model", "task", "concurrency", "global_batch", "micro_batch", "batch", "seq", "prompt",
              "gen", "precision", "kv_precision", "tp", "pp", "max_gpus", "gpus_per_node", "budget_usd", "price_basis",
              "w_per_node", "psu_w", "ttft_p50_s", "tpot_p50_s", "tokens_per_s", "gpus_allow", "gpus_deny", "top",
              "roles")


def _has_plan(given: dict[str, Any]) -> bool:
    return any(given[k] for k in ("workload", "model"))


@fl.takes(FLAGS)
def report_cmd(**given: Any) -> None:
    from gpumatch.report.html import write_report
    from gpumatch.report.plan import plan_output
    from gpumatch.usecases.report import ReportQuery, build_report

    store = Path(given["store"]) if given["store"] else None
    query = plan_cli.plan_query({**{k: given[k] for k in _PLAN_KEYS}, "verbose": False, "fmt": Format.table,
                                 "no_calibration": False, "store": None}) if _has_plan(given) else None
    for flag in ("slo_ttft_ms", "slo_tpot_ms"):
        if given[flag] is not None and not given[flag] > 0:
            from gpumatch.errors import InputError

            raise InputError(f"--{flag.replace('_', '-')} must be a positive number of milliseconds, not "
                             f"{given[flag]:g}", "for example --slo-ttft-ms 500")
    data = build_report(ReportQuery(plan=query, run_ids=tuple(given["run"] or ()), store=store,
                                    use_store=not given["no_calibration"], slo_ttft_ms=given["slo_ttft_ms"],
                                    slo_tpot_ms=given["slo_tpot_ms"]))
    plain = plan_output(data["plan"], "table", True) if data["plan"] else ""
    if given["html"]:
        path = write_report(data, Path(given["html"]), plain, force=given["force"])
        sys.stderr.write(f"gpumatch: report written to {path} ({path.stat().st_size / 1e6:.2f} MB)\n")
        return
    from gpumatch.report.html import report_text

    if given["fmt"] is Format.json:
        from gpumatch.report.render import to_json

        emit(to_json(data))
    elif given["fmt"] is Format.csv:
        emit(_csv(data))
    else:
        emit(report_text(data, plain))


def _csv(data: dict[str, Any]) -> str:
    from gpumatch.errors import InputError
    from gpumatch.report.sidebyside import side_by_side_csv

    if data.get("serving") and not data.get("side_by_side"):
        from gpumatch.report.serve_page import serving_csv

        return serving_csv(data["serving"])
    if not data.get("side_by_side"):
        raise InputError("--format csv gives the runs side by side, or the levels of serve runs",
                         "give two bench runs or more (--run A --run B), or serve runs")
    return side_by_side_csv(data["side_by_side"])
