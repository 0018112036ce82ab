"""Views of ``gpumatch bench serve``: one row per load level within 80 columns, the client self-test's verdicts,
the SLO search's answer and the formulas. Computes nothing new: the numbers come from
:mod:`gpumatch.loadgen` (a run just measured, as :meth:`ServeRun.to_json`, or a stored one)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar

from gpumatch.report.progress import BarOrLines
from gpumatch.report.render import Column, to_csv, to_table, wrap_block

FORMULA_LINES = (
    "TTFT = first chunk - scheduled send; E2E = end - scheduled send (no coordinated omission)",
    "TPOT = (E2E - TTFT) / (output tokens - 1), tokens from the server's usage; ITL = gaps between chunks",
    "p50/p90/p99 only from 2/10/100 samples or more ('-' below); req/s = completed / duration",
    "in flight = mean (time-weighted: sum(end - sent) / duration) / max requests between send and end",
)
CSV_KEYS = ("level", "label", "phase", "completed", "failed", "request_throughput", "output_throughput",
            "request_goodput", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
            "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms", "p99_client_lag_ms", "output_len_mismatches",
            "client_bound", "client_checked", "incomplete", "mean_in_flight_requests", "max_in_flight_requests",
            "warmup_requests", "prompt_len_mismatches", "mean_prompt_tokens_requested", "mean_prompt_tokens_server",
            "duration_limit_s", "burstiness")


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _num(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _client(lv: dict[str, Any]) -> str:
    if lv.get("client_bound"):
        return "BOUND"
    return "ok" if lv.get("client_checked") else "unchecked"


def _ratio(lv: dict[str, Any]) -> str:
    r = (lv.get("ratio") or {}).get("output_throughput")
    return "-" if r is None else f"{r:.2f}"


def _in_flight(lv: dict[str, Any]) -> str:
    mean, peak = lv.get("mean_in_flight_requests"), lv.get("max_in_flight_requests")
    return "-" if mean is None else f"{mean:.3g}/{peak}"


def level_rows(levels: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"level": lv["label"], "ok/fail": f"{lv['completed']}/{lv['failed']}",
             "req/s": _num(lv.get("request_throughput")), "tok/s": _num(lv.get("output_throughput")),
             "ttft p50/p99 ms": f"{_ms(lv.get('median_ttft_ms'))}/{_ms(lv.get('p99_ttft_ms'))}",
             "tpot ms": _ms(lv.get("mean_tpot_ms")), "itl p99": _ms(lv.get("p99_itl_ms")),
             "e2e p99": _ms(lv.get("p99_e2el_ms")), "in flight": _in_flight(lv), "meas/pred": _ratio(lv),
             "client": _client(lv)}
            for lv in levels]


COLUMNS = [Column("level", wrap=False), Column("ok/fail", wrap=False), Column("req/s", align="right"),
           Column("tok/s", align="right"), Column("ttft p50/p99 ms", wrap=False), Column("tpot ms", align="right"),
           Column("itl p99", align="right", drop=2), Column("e2e p99", align="right", drop=3),
           Column("in flight", align="right", wrap=False, drop=4),
           Column("meas/pred", "tok/s meas/pred", align="right", drop=1), Column("client", wrap=False)]


def notes(doc: dict[str, Any]) -> list[str]:
    """What a reader must know beside the table: client-bound levels, length mismatches, errors, the search."""
    out = []
    for lv in doc["levels"]:
        st = lv.get("client_self_test") or {}
        why = [f"self-test {r}" for r in st.get("reasons", [])]
        why += [f"measurement {lv['client_lag_in_run']}"] if lv.get("client_lag_in_run") else []
        if why:
            out.append(f"{lv['label']}: client-bound, not the server's figure ({'; '.join(why)})")
        if lv.get("output_len_mismatches"):
            out.append(f"{lv['label']}: {lv['output_len_mismatches']} requests got another output length than "
                       "asked (server usage); the server may ignore ignore_eos/min_tokens")
        if lv.get("prompt_len_mismatches"):
            out.append(f"{lv['label']}: {lv['prompt_len_mismatches']} prompts arrived with another length than "
                       f"built (server usage, mean {lv.get('mean_prompt_tokens_server') or 0:.0f} for "
                       f"{lv.get('mean_prompt_tokens_requested') or 0:.0f} tokens): another tokenizer")
        if lv.get("incomplete"):
            out.append(f"{lv['label']}: {lv['incomplete']} requests still running at the end of --duration + "
                       "--grace were cut off (incomplete: not in the figures)")
        if lv.get("errors"):
            out.append(f"{lv['label']}: errors " + ", ".join(f"{k} {v}" for k, v in lv["errors"].items()))
        if lv.get("prediction_note") and lv is doc["levels"][0]:
            out.append(lv["prediction_note"])
    if doc.get("max_rate_meeting_slo") is not None or doc.get("config", {}).get("search"):
        best = doc.get("max_rate_meeting_slo")
        out.append(f"highest rate meeting the SLO: {'none' if best is None else f'{best:g} requests/s'}")
    if doc.get("search_note"):
        out.append(f"search: {doc['search_note']}")
    return out


def serve_text(doc: dict[str, Any]) -> str:
    """The run as text: the level table, notes, formulas and where it was stored."""
    parts = [to_table(level_rows(doc["levels"]), COLUMNS)]
    parts += [wrap_block(n) for n in notes(doc)]
    source = doc.get("source")
    if source and source != "gpumatch bench serve":  # an imported run: its tool's definitions, no client check
        parts.append(wrap_block(f"measured by {source} (imported with 'gpumatch runs import'); the figures are "
                                "that tool's, the client column does not apply"))
    else:
        parts += [wrap_block(f) for f in FORMULA_LINES]
    run_id = doc.get("run_id", (doc.get("run") or {}).get("run_id"))
    if run_id is not None:
        parts.append(f"stored as run {run_id} (gpumatch bench show {run_id}; --format json for every figure)")
    return "\n".join(parts)


def serve_csv(doc: dict[str, Any]) -> str:
    return to_csv([{k: lv.get(k) for k in CSV_KEYS} for lv in doc["levels"]], list(CSV_KEYS))


class ServeProgress(BarOrLines):
    """``progress(phase, text, done, total, requests)`` of :func:`gpumatch.loadgen.bench.run_serve_bench`: on
    a terminal (stderr) a transient rich bar per level and phase (label, requests or seconds done of total, elapsed
    seconds), redrawn at most every ``interval_s`` so the terminal costs the load generator's event loop little;
    otherwise (a pipe, a file, or ``bars=False`` as ``--format json`` asks) one plain ``gpumatch: ...`` line per
    phase, never one per request."""

    WORDS: ClassVar[dict[str, str]] = {"probe": "asking the server at", "selftest": "client self-test:",
                                       "level": "measuring"}

    def __init__(self, stream: Any = None, bars: bool = True, interval_s: float = 0.1) -> None:
        super().__init__(stream)
        self.bars = bars and self.tty
        self.interval_s = interval_s
        self._last = 0.0
        self._key: tuple[str, str] = ("", "")

    def __call__(self, phase: str, text: str, done: int = 0, total: int = 0, requests: int = 0) -> None:
        if phase == "done":
            self.close()
        elif phase in ("warmup", "requests", "seconds"):
            self._count(phase, text, done, total, requests)
        else:
            self.close()
            self.line(f"{self.WORDS.get(phase, phase)} {text}")

    def _count(self, phase: str, label: str, done: int, total: int, requests: int) -> None:
        if not self.bars:
            if phase == "warmup" and done == 0:
                self.line(f"warming up {label}: {total} requests (not measured)")
            return
        now = time.monotonic()
        if (phase, label) != self._key:
            self.close()  # a new bar per level and phase
            self._key = (phase, label)
        elif done not in (0, total) and now - self._last < self.interval_s:
            return
        self._last = now
        unit = {"seconds": f"s, {requests} requests", "warmup": "warm-up"}.get(phase, "requests")
        self.bar(label, done, total, _unit_elapsed(), unit=unit)


def _unit_elapsed() -> Any:
    """A rich column: the unit of done/total, then the bar's elapsed seconds."""
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class UnitElapsed(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text(f"{task.fields.get('unit', '')} {int(task.elapsed or 0)} s")

    return UnitElapsed()


def progress(phase: str, text: str, done: int = 0, total: int = 0, requests: int = 0) -> None:
    """Plain progress lines on stderr (for callers without a context; :class:`ServeProgress` is the command's)."""
    ServeProgress(bars=False)(phase, text, done, total, requests)
