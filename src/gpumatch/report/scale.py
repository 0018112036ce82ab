"""Views of ``gpumatch bench scale``: the ladder table within 80 columns, the collectives table, failures,
formulas; CSV of the same rows; a progress line. Computes nothing new: the numbers come from
:mod:`gpumatch.lab.scale` (a run just measured, :meth:`ScaleOutcome.to_json`) or
:func:`gpumatch.usecases.stored_scale.load_scale_run` (a stored one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpumatch.report.human import bytes_per_s, seconds
from gpumatch.report.progress import BarOrLines
from gpumatch.report.render import Column, to_csv, to_table, wrap_block

LADDER_CSV = ("n_gpus", "tokens_per_s", "step_s", "per_added_gpu_tokens_per_s", "scaling_efficiency",
              "delivers_gpus", "exposed_comm_s", "predicted_step_s", "step_ratio", "predicted_tokens_per_s", "ratio")
COLLECTIVE_CSV = ("n_gpus", "op", "size_bytes", "dtype", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s",
                  "busbw_factor", "predicted", "ratio")


def _num(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    return f"{v:.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"


def _size(n: Any) -> str:
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            return f"{n / f:g} {unit}"
    return f"{n} B"


def ladder_rows(ladder: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per rung: the seed's figures, the prediction and measured / predicted (tokens/s)."""
    return [{"n": r["n_gpus"], "tok/s": _num(r.get("tokens_per_s")),
             "per added GPU": _num(r.get("per_added_gpu_tokens_per_s")),
             "eff.": "-" if r.get("scaling_efficiency") is None else f"{r['scaling_efficiency'] * 100:.0f}%",
             "delivers k": "-" if r.get("delivers_gpus") is None else f"{r['delivers_gpus']:.2f}",
             "exposed comm": seconds(r.get("exposed_comm_s")) if r.get("exposed_comm_s") is not None else "-",
             "pred tok/s": _num(r.get("predicted_tokens_per_s")), "ratio": _num(r.get("ratio"), 2)}
            for r in ladder]


LADDER_COLUMNS = [Column("n", align="right"), Column("tok/s", align="right"), Column("per added GPU", align="right"),
                  Column("eff.", align="right"), Column("delivers k", align="right"),
                  Column("exposed comm", align="right", wrap=False), Column("pred tok/s", align="right", drop=1),
                  Column("ratio", "meas/pred", align="right", drop=2)]


def collective_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"n": r["n_gpus"], "op": r["op"], "size": _size(r["size_bytes"]), "time": seconds(r.get("time_s")),
             "algbw": bytes_per_s(r.get("algbw_bytes_per_s")), "busbw": bytes_per_s(r.get("busbw_bytes_per_s")),
             "pred time": seconds(r["predicted"]) if r.get("predicted") else "-", "ratio": _num(r.get("ratio"), 2)}
            for r in rows]


COLLECTIVE_COLUMNS = [Column("n", align="right"), Column("op", wrap=False), Column("size", align="right"),
                      Column("time", align="right"), Column("algbw", align="right"), Column("busbw", align="right"),
                      Column("pred time", align="right", drop=1), Column("ratio", "meas/pred", align="right", drop=2)]

FORMULA_LINES = (
    "X_n = job tokens per step / slowest rank's median step",
    "per added GPU = (X_n - X_m) / (n - m); efficiency = X_n / (n X_1)",
    "n GPUs deliver the throughput of k = X_n / X_1 GPUs",
    "exposed comm = max(0, median(step) - median(compute-only step)), worst rank",
    "busbw = algbw x factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter,",
    "  all_to_all (n-1)/n; sendrecv 1 (nccl-tests doc/PERFORMANCE.md)",
)


def scale_text(doc: dict[str, Any]) -> str:
    """The run as text: heading, ladder (or collectives) table, failures, notes, formulas."""
    head = (f"bench scale run {doc.get('run_id') if doc.get('run_id') is not None else '(not stored)'}: "
            f"{doc.get('workload')} on {doc.get('card') or doc.get('device')} ({doc.get('status')})")
    parts = [wrap_block(head).rstrip()]
    if doc.get("ladder"):
        parts.append(to_table(ladder_rows(doc["ladder"]), LADDER_COLUMNS, "scaling ladder").rstrip())
    if doc.get("collectives"):
        parts.append(to_table(collective_rows(doc["collectives"]), COLLECTIVE_COLUMNS,
                              "collectives (job time = slowest rank's median)").rstrip())
    for f in doc.get("failures") or []:
        what = f" {f['op']} {_size(f['size_bytes'])}" if f.get("op") else ""
        parts.append(wrap_block(f"failed: {f.get('n_gpus')} GPU(s){what}: {f['error_class']}: "
                                f"{f['message']}").rstrip())
    for n in doc.get("notes") or []:
        parts.append(wrap_block(f"note: {n}").rstrip())
    parts.append("\n".join(FORMULA_LINES))
    return "\n".join(parts) + "\n"


def scale_csv(doc: dict[str, Any]) -> str:
    """The ladder rows (or, for collectives, the collective rows) with every SI field."""
    if doc.get("collectives"):
        return to_csv(doc["collectives"], list(COLLECTIVE_CSV))
    return to_csv(doc.get("ladder") or [], list(LADDER_CSV))


class ScaleProgress(BarOrLines):
    """``progress(phase, done, total, label)`` of :func:`gpumatch.lab.scale.run_scale`: a rich bar on a terminal
    (stderr), one plain line per rung otherwise."""

    def __call__(self, phase: str, done: int, total: int, label: str) -> None:
        if self.tty:
            from rich.progress import TimeElapsedColumn

            self.bar(f"{phase} {label}", done, total, TimeElapsedColumn())
        elif phase == "rung":
            self.line(f"[{done + 1}/{total}] {label}")
        elif phase == "probe":
            self.line("describing this machine (environment manifest)")
