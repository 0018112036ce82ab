"""An engine's logged passes held against the serving model's cost of the same passes, part by part.

``gpumatch serve`` logs every pass (``GET /gpumatch/iterations``, :class:`gpumatch.bench.server.engine.Iteration`):
its kind, decode rows and the keys they attend, its prompt chunks, the batch and context buckets the runner ran,
its seconds and start. :func:`compare` costs each pass with :func:`gpumatch.estimate.pass_costs` twice:

- ``modelled``: ``B`` decode rows at their mean context -- the engine model without padding (an engine with paged
  attention reads each row's own keys);
- ``as run``: the shape the runner ran -- the decode rows padded to the batch bucket (``span``), each reading the
  context bucket's keys (``context``): what the ``gpumatch`` profile's padded model (``padded_decode``) costs for
  this pass.

The ratio measured / predicted per class of pass (kind and batch bucket) says which term of the pass time is off;
the gap between one pass's end and the next one's start (scheduling, the engine loop, the HTTP thread's share of
the interpreter) is time between tokens too, which the model counts only as its per-pass host cost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpumatch.errors import InputError
from gpumatch.estimate import PassShape, Request, pass_costs


@dataclass(frozen=True)
class PassRow:
    """One logged pass: measured seconds, the gap after it, and the two predictions (module docstring)."""

    index: int
    kind: str
    decode_rows: int
    span: int
    context: int
    prefill_tokens: int
    measured_s: float
    schedule_s: float
    gap_s: float | None
    """From this pass's end to the next pass's start (None for the last pass logged)."""
    modelled_s: float
    modelled_decode_s: float
    modelled_prefill_s: float
    modelled_host_s: float
    as_run_s: float


def level_iterations(doc: dict[str, Any], warmup_s: float = 0.0) -> list[dict[str, Any]]:
    """The passes of a saved level (``benchmarks/gpu/serve_passes.sh``: ``{"iterations": [...]}``) after its
    warm-up: those starting ``warmup_s`` seconds or more after the first one logged (the warm-up requests run first,
    then the level's own)."""
    its = doc.get("iterations")
    if not isinstance(its, list) or not its:
        raise InputError("no passes in this file", "save GET /gpumatch/iterations of a level (serve_passes.sh)")
    start = float(its[0]["start_s"])
    return [i for i in its if float(i["start_s"]) >= start + warmup_s]


def _shape(it: dict[str, Any], padded: bool) -> PassShape:
    rows = int(it["decode_rows"])
    chunks = tuple((float(s), float(t)) for s, t in it.get("chunk_spans", ()))
    if padded and rows:
        return PassShape(int(it["span"]) or rows, float(it["context"]) or float(it["attended"]) / rows, chunks)
    return PassShape(rows, float(it["attended"]) / rows if rows else 0.0, chunks)


def compare(iterations: Sequence[dict[str, Any]], model: str, gpu: str, request: Request) -> list[PassRow]:
    """Each logged pass with its measured seconds and the model's cost of it as modelled and as run."""
    its = list(iterations)
    if not its:
        return []
    modelled = pass_costs(model, gpu, request, [_shape(i, padded=False) for i in its])
    as_run = pass_costs(model, gpu, request, [_shape(i, padded=True) for i in its])
    rows = []
    for n, (it, mod, run) in enumerate(zip(its, modelled, as_run, strict=True)):
        nxt = its[n + 1] if n + 1 < len(its) else None
        gap = None
        if nxt is not None and int(nxt["index"]) == int(it["index"]) + 1:
            gap = float(nxt["start_s"]) - float(it["start_s"]) - float(it["seconds"])
        rows.append(PassRow(
            index=int(it["index"]), kind=str(it["kind"]), decode_rows=int(it["decode_rows"]), span=int(it["span"]),
            context=int(it["context"]), prefill_tokens=int(it["prefill_tokens"]), measured_s=float(it["seconds"]),
            schedule_s=float(it.get("schedule_s", 0.0)), gap_s=gap, modelled_s=mod.total_s,
            modelled_decode_s=mod.decode_s, modelled_prefill_s=mod.linear_s + mod.attention_s,
            modelled_host_s=mod.host_s, as_run_s=run.total_s))  # fmt: skip
    return rows


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def summarize(rows: Sequence[PassRow]) -> list[dict[str, Any]]:
    """Per class of pass (kind, batch bucket): count, mean decode rows and prompt tokens, mean measured seconds,
    mean gap after the pass, the mean predictions and measured / predicted; and one ``all`` row over every pass
    (seconds summed: the level's engine time)."""
    groups: dict[tuple[str, int], list[PassRow]] = defaultdict(list)
    for r in rows:
        groups[(r.kind, r.span)].append(r)
    out = [_summary(kind, span, g) for (kind, span), g in sorted(groups.items())]
    if rows:
        out.append(_summary("all", 0, list(rows)))
    return out


def _summary(kind: str, span: int, g: list[PassRow]) -> dict[str, Any]:
    measured, modelled, as_run = (_mean([getattr(r, k) for r in g]) for k in ("measured_s", "modelled_s", "as_run_s"))
    return {
        "kind": kind, "span": span, "passes": len(g), "decode_rows": _mean([r.decode_rows for r in g]),
        "prefill_tokens": _mean([r.prefill_tokens for r in g]), "measured_s": measured,
        "schedule_s": _mean([r.schedule_s for r in g]), "gap_s": _mean([r.gap_s for r in g if r.gap_s is not None]),
        "modelled_s": modelled, "modelled_decode_s": _mean([r.modelled_decode_s for r in g]),
        "modelled_prefill_s": _mean([r.modelled_prefill_s for r in g]),
        "modelled_host_s": _mean([r.modelled_host_s for r in g]), "as_run_s": as_run,
        "measured_over_modelled": measured / modelled if modelled > 0 else float("nan"),
        "measured_over_as_run": measured / as_run if as_run > 0 else float("nan"),
    }  # fmt: skip
