"""Other tools' result files in and gpumatch runs out: the field's formats (docs/store.md, "Formats").

Import (``gpumatch runs import FILE [--from ...]``): a file from ``vllm bench serve --save-result``
(:mod:`.vllm`; with ``--append-result`` one object a line, read as one run with a level per line), nccl-tests
``-J`` (:mod:`.nccl_tests`), GuideLLM ``benchmarks.json`` (:mod:`.guidellm`) or AIPerf/GenAI-Perf
``profile_export_aiperf.json`` / ``profile_export_genai_perf.json`` (:mod:`.aiperf`) becomes one run in the store
(a serving file: kind ``serve``, the kind of ``gpumatch bench serve`` runs, :data:`gpumatch.metric_names.SERVE_KIND`;
nccl-tests: kind ``bench``), its values converted to gpumatch's canonical SI result names (each result's ``extra``
keeps the source key, value and unit), its source recorded in the manifest (``source.format``, ``source.tool``,
``source.file``, ``source.sha256``), and the per-request or per-size raw data kept as an event. The run's global
id is derived from the file's SHA-256, so importing a file twice (or into two stores that are merged later) gives
one run. Export: :mod:`.export`.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpumatch.errors import DataFileError, GpumatchError, InputError
from gpumatch.files import parse_json_object, read_bytes

FORMATS = ("vllm", "nccl-tests", "guidellm", "aiperf")
"""Formats ``gpumatch runs import`` reads (``--from``); detected from the content when not given."""

MAX_IMPORT_BYTES = 200_000_000
"""A result file larger than this is refused (a vLLM file with per-request arrays for 100k requests is ~30 MB)."""

_IMPORT_NAMESPACE = uuid.UUID("b8a7d0c2-3f0e-5b1c-8d4e-696d706f7274")


@dataclass(frozen=True)
class ImportedResult:
    """One value in SI units under gpumatch's name; ``extra`` keeps the source's key, value and unit."""

    metric: str
    value: float
    unit: str
    config: dict[str, Any]
    extra: dict[str, Any]


@dataclass(frozen=True)
class ImportedRun:
    """A run read from another tool's file, ready to store (:func:`gpumatch.store.imports.import_file`)."""

    name: str
    manifest: dict[str, Any]
    config: dict[str, Any]
    results: list[ImportedResult]
    started_at: datetime
    duration_s: float | None
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    kind: str = "bench"
    missing: list[str] = field(default_factory=list)
    """What the file does not say that a run should (the model, the load): stated in the import summary."""

    @property
    def ended_at(self) -> datetime:
        return self.started_at + timedelta(seconds=self.duration_s or 0.0)


def run_uuid_for(sha256: str) -> str:
    """The global id of the run imported from the file with this SHA-256 (UUIDv5, RFC 9562 section 5.5)."""
    return str(uuid.uuid5(_IMPORT_NAMESPACE, sha256))


def detect(data: dict[str, Any]) -> str | None:
    """The format of a parsed JSON object: ``vllm`` (``mean_ttft_ms``, ``*_tpot_ms`` or ``*_e2el_ms`` with
    ``request_throughput``, in 2024 files ``request_inthroughput``),
    ``nccl-tests`` (a ``results`` list of rows with ``size`` and ``out_of_place``/``in_place``), ``guidellm`` (a
    ``benchmarks`` list whose first entry has ``metrics``), ``aiperf`` (a ``time_to_first_token`` or
    ``request_latency`` record with a ``unit``), or None."""
    if ("request_throughput" in data or "request_inthroughput" in data) and any(
            k.endswith(("_ttft_ms", "_tpot_ms", "_e2el_ms")) for k in data):
        return "vllm"
    rows = data.get("results")
    if isinstance(rows, list) and rows and isinstance(rows[0], dict) and "size" in rows[0] and (
            "out_of_place" in rows[0] or "in_place" in rows[0]):
        return "nccl-tests"
    benches = data.get("benchmarks")
    if isinstance(benches, list) and benches and isinstance(benches[0], dict) and isinstance(
            benches[0].get("metrics"), dict):
        return "guidellm"
    if any(isinstance(data.get(k), dict) and "unit" in data[k] for k in ("time_to_first_token", "request_latency")):
        return "aiperf"
    return None


def read_source(path: Path, fmt: str | None) -> tuple[ImportedRun, str]:
    """Parse ``path`` (``fmt`` or detected) into an :class:`ImportedRun`; also returns the file's SHA-256."""
    raw = read_bytes(path, str(path), MAX_IMPORT_BYTES)
    text = raw.decode("utf-8", errors="replace")
    try:
        data = parse_json_object(text, str(path))
    except DataFileError:
        wrong_file(text, path)
        lines = appended_objects(text, str(path))
        if lines is None or fmt not in (None, "vllm"):
            raise
        from gpumatch.store.formats.vllm import parse_vllm_appended

        sha = hashlib.sha256(raw).hexdigest()
        source = {"format": "vllm", "file": path.name, "sha256": sha, "bytes": len(raw)}
        return parse_vllm_appended(lines, source), sha
    found = fmt or detect(data)
    if found is None:
        raise InputError(f"{path}: not a result file gpumatch can import (no vLLM, nccl-tests, GuideLLM or AIPerf "
                         "keys)",
                         f"give --from ({', '.join(FORMATS)}) if it is one of them")
    if found not in FORMATS:
        raise InputError(f"unknown import format {found!r}", f"use one of: {', '.join(FORMATS)}")
    sha = hashlib.sha256(raw).hexdigest()
    source = {"format": found, "file": path.name, "sha256": sha, "bytes": len(raw)}
    if found == "vllm":
        from gpumatch.store.formats.vllm import parse_vllm

        return parse_vllm(data, source), sha
    if found == "guidellm":
        from gpumatch.store.formats.guidellm import parse_guidellm

        return parse_guidellm(data, source), sha
    if found == "aiperf":
        from gpumatch.store.formats.aiperf import parse_aiperf

        return parse_aiperf(data, source), sha
    from gpumatch.store.formats.nccl_tests import parse_nccl_tests

    return parse_nccl_tests(data, source), sha


def sniff(path: Path) -> str | None:
    """The import format of the file at ``path`` (:data:`FORMATS`: a vLLM object or ``--append-result`` lines, a
    GuideLLM, AIPerf or nccl-tests file), or None for anything else (a gpumatch export, not JSON, unreadable: the
    caller's own reader says what is wrong)."""
    try:
        text = read_bytes(path, str(path), MAX_IMPORT_BYTES).decode("utf-8", errors="replace")
    except GpumatchError:
        return None
    try:
        return detect(parse_json_object(text, str(path)))
    except DataFileError:
        return "vllm" if appended_objects(text, str(path)) else None


def wrong_file(text: str, path: Path) -> None:
    """Raise a one-line InputError naming the right file when ``text`` is a known companion of a result file: the
    PyTorch-benchmark list vLLM writes beside it (``*.pytorch.json``: records with ``benchmark.name`` "vLLM
    benchmark", ``vllm/benchmarks/lib/utils.py``, written when ``SAVE_TO_PYTORCH_BENCHMARK_FORMAT`` is set) or AIPerf's
    per-request records (``profile_export.jsonl``: one ``{"metadata", "metrics"}`` object a line)."""
    head = text.lstrip()[:4096]
    if head.startswith("[") and '"vLLM benchmark"' in head:
        raise InputError(f"{path}: vLLM's PyTorch-benchmark-format companion file, not its result file",
                         f"give the file beside it without '.pytorch' ({path.name.replace('.pytorch', '')})")
    first = head.split("\n", 1)[0]
    if first.startswith("{") and '"metrics"' in first and '"metadata"' in first and '"request_start_ns"' in first:
        raise InputError(f"{path}: AIPerf per-request records (profile_export.jsonl), not the summary",
                         "give profile_export_aiperf.json from the same directory")


def appended_objects(text: str, label: str) -> list[dict[str, Any]] | None:
    """The objects of a file ``vllm bench serve --append-result`` grew (vLLM ``serve.py``: each run appends a newline
    and one ``json.dump`` object, so a sweep's file is JSON Lines), or None when it is not two or more vLLM result
    objects one per line."""
    rows = [line for line in text.splitlines() if line.strip()]
    if len(rows) < 2:
        return None
    try:
        objects = [parse_json_object(line, f"{label} line {i + 1}") for i, line in enumerate(rows)]
    except DataFileError:
        return None
    return objects if all(detect(o) == "vllm" for o in objects) else None


def utc(text: str | None, fmts: tuple[str, ...]) -> datetime | None:
    """A time string in one of ``fmts`` (no zone: taken as UTC, said so in the docs), or None."""
    for f in fmts:
        try:
            return datetime.strptime(str(text), f).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def number(value: Any) -> float | None:
    """A finite float from a JSON number (not a bool; nccl-tests writes NaN as the string ``"nan"``), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if v == v and v not in (float("inf"), float("-inf")) else None


def obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a missing or mistyped section reads as absent)."""
    return value if isinstance(value, dict) else {}
