"""``gpumatch bench run|serve|scale|list|show|compare|export``: the fixed experiment package and its stored runs.

Each command parses, makes one library call (:mod:`gpumatch.usecases.bench`) and renders (:mod:`gpumatch.report`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from gpumatch.cli.common import RUN_ID_MAX, Format, FormatOption, emit, emit_object, emit_rows

app = typer.Typer(help="The fixed experiment package: run a suite on this machine's GPU, list, show, compare and "
                       "export the stored runs.", no_args_is_help=True)

StoreOption = typer.Option(
    None, "--store", help="Results store: a SQLite file or postgresql:// URL (default: $GPUMATCH_STORE or "
    "$GPUMATCH_HOME/results.sqlite).")

_HF = typer.Option(None, "--hf-config", help="A Hugging Face config.json instead.")
_PREC = typer.Option([], "--precision", help="GEMM precisions (repeat; default all five).")
_DB = typer.Option([], "--decode-batch", help="Also decode at this batch (repeat).")
_CASE = typer.Option([], "--case", help="Run only this case of the suite (repeat).")
_OUT = typer.Option(..., "--out", help="JSON file to write.")
_WEIGHTS = typer.Option(None, "--weights", help="Local Hugging Face folder (config.json, *.safetensors): decode "
                        "and prefill load its weights.")
_TEXT = typer.Option(None, "--text", help="UTF-8 text for the quality check of int8/fp8 weights against bf16 "
                     "(needs --weights and its tokenizer.json).")
_WORKLOAD = typer.Option(None, "--workload", help="Workload file: model, precision, batch and lengths from it "
                         "(flags win).")
_FILE = typer.Argument(..., help="A JSON file 'gpumatch bench export' wrote.")

_RUN_HELP = (
    "Run a suite (quick: at most 3 min on an H200; standard: 15 min; soak: --duration after thermal steady "
    "state), each case in a child process, and record it in the results store. Without CUDA (or with --tiny) "
    "a tiny model and small shapes run on the CPU in seconds.\n\n"
    "Example: gpumatch bench run --suite quick --store results.sqlite"
)


@app.command("run", help=_RUN_HELP)
def run_cmd(
    suite: str = typer.Option("quick", "--suite", help="quick, standard or soak."),
    model: str | None = typer.Option(None, "--model", help="Decode/prefill model preset (default llama-3.1-8b)."),
    hf_config: Path | None = _HF,
    precision: list[str] = _PREC,
    tiny: bool = typer.Option(False, "--tiny", help="Tiny model and shapes (CPU smoke test)."),
    duration: float = typer.Option(1800.0, "--duration", help="Soak: seconds after warm-up."),
    max_warmup: float = typer.Option(900.0, "--max-warmup", help="Soak: longest warm-up (s) before the "
                                     "steady-state rule is given up on (it then says so)."),
    decode_batch: list[int] = _DB,
    case: list[str] = _CASE,
    seed: int = typer.Option(0, "--seed", help="Data seed."),
    weights: Path | None = _WEIGHTS,
    text: Path | None = _TEXT,
    window: int | None = typer.Option(None, "--window", help="Quality: tokens per window (1024; tiny 32)."),
    stride: int | None = typer.Option(None, "--stride", help="Quality: tokens between windows (half the window)."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Quality: at most this many tokens (4096)."),
    workload: Path | None = _WORKLOAD,
    store: str | None = StoreOption,
) -> None:
    from gpumatch.report.bench import BenchProgress, run_summary
    from gpumatch.usecases import bench

    precisions = tuple(p.strip() for x in precision for p in x.split(",") if p.strip())
    req = bench.BenchRequest(suite=suite, model=model, hf_config=hf_config, precisions=precisions, tiny=tiny or None,
                       store=store, duration_s=duration, seed=seed, decode_batches=tuple(decode_batch),
                       only=tuple(case), weights=weights, text=text, window=window, stride=stride,
                       max_tokens=max_tokens, workload=workload, max_warmup_s=max_warmup)
    with BenchProgress() as progress:
        run = bench.run(req, progress)
    emit(run_summary(run))


@app.command("list", help="List the bench runs, newest first. Example: gpumatch bench list")
def list_cmd(limit: int = typer.Option(50, min=1, max=RUN_ID_MAX, help="At most this many runs."),
             store: str | None = StoreOption, fmt: Format = FormatOption) -> None:
    from gpumatch.report.bench import LIST_COLUMNS
    from gpumatch.usecases import bench

    emit_rows(bench.list_runs(store, limit), fmt, LIST_COLUMNS)


@app.command("show", help="One bench run: each case measured, predicted, ratio, n and percentiles; failures with "
             "their reason. A serve run: its load levels; a scale run: its ladder (n, tokens/s, per added GPU, "
             "efficiency, delivers k, exposed comm, predicted, ratio). Example: gpumatch bench show 3 --format json")
def show_cmd(run_id: int = typer.Argument(..., min=1, max=RUN_ID_MAX, help="Run id from 'gpumatch bench list'."),
             store: str | None = StoreOption, fmt: Format = FormatOption) -> None:
    from gpumatch.report.bench import show_csv, show_text
    from gpumatch.usecases import bench

    kind, data = bench.show(store, run_id, raw=fmt is Format.json)
    if kind == "serve":
        _show_serve(data, fmt)
        return
    if kind == "scale":
        _emit_scale(data, fmt)
        return
    if fmt is Format.json:
        emit_object(data, fmt)
    else:
        emit(show_csv(data) if fmt is Format.csv else show_text(data))


_RUN_A = typer.Argument(..., min=1, max=RUN_ID_MAX, help="Run A.")
_RUN_B = typer.Argument(..., min=1, max=RUN_ID_MAX, help="Run B.")


@app.command("compare", help="Two runs side by side with B/A: two bench runs per case, or two serving runs of any "
             "tool (bench serve, or vLLM, GuideLLM, AIPerf files from 'runs import') level by level, paired by load, "
             "with a 95% CI where both keep raw per-request samples. Refuses (exit 2) runs whose manifests differ "
             "in performance-relevant fields unless --force. Example: gpumatch bench compare 3 4")
def compare_cmd(run_a: int = _RUN_A, run_b: int = _RUN_B,
                force: bool = typer.Option(False, "--force", help="Compare even if the manifests differ (flagged)."),
                store: str | None = StoreOption, fmt: Format = FormatOption) -> None:
    from gpumatch.report.bench import compare_text
    from gpumatch.usecases import bench

    cmp = bench.compare(store, run_a, run_b, force)
    if cmp["differing_fields"]:
        sys.stderr.write(f"gpumatch: warning: manifests differ in {', '.join(cmp['differing_fields'])}\n")
    if fmt is Format.json:
        emit_object(cmp, fmt)
    elif cmp.get("kind") == "serve":
        _emit_serve_compare(cmp, fmt)
    elif fmt is Format.table:
        emit(compare_text(cmp))
    else:
        emit_rows(cmp["rows"], fmt, ["key", "unit", "a", "b", "b_over_a", "n_a", "n_b"])


def _emit_serve_compare(cmp: dict[str, Any], fmt: Format) -> None:
    from gpumatch.report.servecompare import CSV_COLUMNS, serve_compare_text

    if fmt is Format.table:
        emit(serve_compare_text(cmp))
    else:
        emit_rows(cmp["rows"], fmt, CSV_COLUMNS)


@app.command("export", help="Write a bench run (manifest, cases, results, failures) as JSON. "
             "Example: gpumatch bench export 3 --out h200-quick.json")
def export_cmd(run_id: int = typer.Argument(..., min=1, max=RUN_ID_MAX, help="Run id."),
               out: Path = _OUT,
               force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
               store: str | None = StoreOption) -> None:
    from gpumatch.usecases import bench

    path = bench.export(store, run_id, out, force)
    sys.stderr.write(f"gpumatch: run {run_id} written to {path}\n")


def _show_serve(data: dict[str, Any], fmt: Format) -> None:
    from gpumatch.report.serve import serve_csv, serve_text

    if fmt is Format.json:
        emit_object(data, fmt)
    else:
        emit(serve_csv(data) if fmt is Format.csv else serve_text(data))


_SERVE_HELP = (
    "Load-test any OpenAI-compatible streaming server (vLLM, SGLang, TGI, llama.cpp, gpumatch serve): a "
    "closed-loop concurrency ladder and/or open-loop rates, latency from the scheduled send time, TTFT/TPOT/ITL/E2E "
    "percentiles, throughput, goodput under an SLO, a search for the highest rate meeting it. A client self-test "
    "against a built-in loopback server runs first, so a client bottleneck is reported as such. Recorded in the "
    "results store (kind serve); --out writes JSON with vllm bench serve's field names. Exit 1 (one line) when "
    "the server goes away mid-run; what was measured is saved.\n\n"
    "Examples:\n\n"
    "gpumatch bench serve --endpoint http://localhost:8000 --model meta-llama/Llama-3.1-8B-Instruct "
    "--concurrency 1,8,32 --prompt-tokens 512 --output-tokens 128 --tokenizer ~/models/llama-3.1-8b --gpu h100-sxm"
    "\n\n"
    "gpumatch bench serve --endpoint http://localhost:8000 --model M --rate 4 --burstiness 0.5 --duration 120 "
    "--dataset sharegpt ShareGPT_V3_unfiltered_cleaned_split.json --header 'X-Tenant: a' "
    "--extra-body '{\"top_k\": 1}'"
)


def _floats(values: list[str], what: str) -> tuple[float, ...]:
    from gpumatch.errors import InputError

    try:
        return tuple(float(p) for v in values for p in v.split(",") if p.strip())
    except ValueError:
        raise InputError(f"{what} takes numbers (repeat or comma-separate), got {values}") from None


_CONC = typer.Option([], "--concurrency", "-c", help="Closed-loop clients (repeat or 1,8,32).")
_RATE = typer.Option([], "--rate", help="Open-loop requests/s (repeat or 2,4,8).")
_DATASET = typer.Option(None, "--dataset", help="FORMAT FILE: sharegpt (JSON list of conversations) or jsonl "
                        "({prompt, output_tokens} per line); sampled with --seed.")
_TOKENIZER = typer.Option(None, "--tokenizer", help="Local tokenizer.json (or a folder with one): prompts of "
                          "exact token counts, checked against the server's usage.")
_WARMUP = typer.Option("auto", "--warmup", help="Warm-up requests per level, not measured (auto: 1-2 per client, "
                       "about 2 s of arrivals; 0: none).")
_DURATION = typer.Option(None, "--duration", help="Seconds per level instead of --num-prompts; requests in flight "
                         "then finish (up to --grace s more, else incomplete).")
_HEADER = typer.Option([], "--header", help="HTTP header 'Name: value' on every request (repeat).")
_SERVE_OUT = typer.Option(None, "--out", help="Also write the run as JSON (vLLM field names) here.")


@app.command("serve", help=_SERVE_HELP)
def serve_cmd(
    endpoint: str = typer.Option(..., "--endpoint", help="Server root (http://host:8000), .../v1, or the full URL."),
    model: str = typer.Option(..., "--model", help="Model name the server serves (sent in each request)."),
    api: str = typer.Option("completions", "--api", help="completions or chat."),
    concurrency: list[str] = _CONC,
    rate: list[str] = _RATE,
    arrival: str = typer.Option("poisson", "--arrival", help="Open loop: poisson or constant."),
    num_prompts: int = typer.Option(200, "--num-prompts", "-n", help="Requests per level."),
    prompt_tokens: int = typer.Option(512, "--prompt-tokens", help="Prompt length (tokens; exact with --tokenizer)."),
    output_tokens: int = typer.Option(128, "--output-tokens", help="Output length (tokens, enforced)."),
    range_ratio: float = typer.Option(1.0, "--range-ratio", help="Lengths uniform in \\[r*L, L]; 1 = fixed."),
    dataset: tuple[str, Path] | None = _DATASET,
    tokenizer: Path | None = _TOKENIZER,
    warmup: str = _WARMUP,
    duration: float | None = _DURATION,
    grace: float = typer.Option(30.0, "--grace", help="--duration: seconds requests in flight may still take."),
    burstiness: float = typer.Option(1.0, "--burstiness", help="Open loop: gamma shape of the gaps (1: Poisson; "
                                     "<1 burstier, >1 more even)."),
    extra_body: str | None = typer.Option(None, "--extra-body", help="JSON object merged into every request body."),
    header: list[str] = _HEADER,
    prompt_tolerance: int | None = typer.Option(None, "--prompt-tolerance", help="Prompt tokens the server may "
                                                "add (default 2; chat 48) before usage counts as a mismatch."),
    no_enforce: bool = typer.Option(False, "--no-enforce-length", help="Do not send ignore_eos / min_tokens."),
    slo_ttft_ms: float | None = typer.Option(None, "--slo-ttft-ms", help="SLO: TTFT at most this (ms)."),
    slo_tpot_ms: float | None = typer.Option(None, "--slo-tpot-ms", help="SLO: TPOT at most this (ms)."),
    slo_e2el_ms: float | None = typer.Option(None, "--slo-e2el-ms", help="SLO: E2E latency at most this (ms)."),
    attainment: float = typer.Option(0.9, "--slo-attainment", help="Share of requests that must meet the SLO."),
    search: bool = typer.Option(False, "--search", help="Search the highest open-loop rate meeting the SLO."),
    search_steps: int = typer.Option(4, "--search-steps", help="Bisection steps of --search."),
    no_selftest: bool = typer.Option(False, "--no-selftest", help="Skip the client self-test (levels unchecked)."),
    selftest_itl_ms: float | None = typer.Option(None, "--selftest-itl-ms",
                                                 help="Loopback token interval (default: predicted TPOT, else 10)."),
    max_lag_ms: float = typer.Option(10.0, "--max-client-lag-ms", help="Client-bound above this send lag (p99)."),
    gpu: str | None = typer.Option(None, "--gpu", help="The server's card, for the prediction (local: detected)."),
    arch: str | None = typer.Option(None, "--arch", help="Architecture for the prediction (default: --model)."),
    engine: str = typer.Option("vllm", "--engine", help="Engine profile of the prediction (vllm, sglang, ...)."),
    seed: int = typer.Option(0, "--seed", help="Seed of lengths, prompts and arrivals."),
    timeout: float = typer.Option(600.0, "--timeout", help="Per-request timeout (s)."),
    max_in_flight: int = typer.Option(0, "--max-in-flight", help="Open loop: connection cap (0: none)."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Env variable holding an API key."),
    out: Path | None = _SERVE_OUT,
    no_store: bool = typer.Option(False, "--no-store", help="Record nothing in the results store."),
    store: str | None = StoreOption,
    fmt: Format = FormatOption,
) -> None:
    import os

    from gpumatch.report.serve import ServeProgress, serve_csv, serve_text
    from gpumatch.usecases import bench

    ms = [None if v is None else v / 1000.0 for v in (slo_ttft_ms, slo_tpot_ms, slo_e2el_ms)]
    data_format, data_file = dataset if dataset and dataset[0] is not None else (None, None)
    req = bench.ServeRequest(
        endpoint, model, api, tuple(int(c) for c in _floats(concurrency, "--concurrency")),
        _floats(rate, "--rate"), arrival, num_prompts, prompt_tokens, output_tokens, range_ratio, data_file,
        not no_enforce, seed, timeout, max_in_flight, bench.Slo(*ms), attainment, search, search_steps,
        not no_selftest,
        None if selftest_itl_ms is None else selftest_itl_ms / 1000.0, bench.Limits(max_lag_s=max_lag_ms / 1000.0),
        arch, gpu, engine, os.environ.get(api_key_env) or None, store, not no_store,
        dataset_format=data_format or "jsonl", tokenizer=tokenizer, warmup=_warmup(warmup), duration_s=duration,
        grace_s=grace, burstiness=burstiness, extra_body=bench.parse_extra_body(extra_body),
        headers=bench.parse_headers(header), prompt_tolerance=prompt_tolerance)
    with ServeProgress(bars=fmt is not Format.json) as progress:
        run = bench.serve(req, progress, out)
    doc = run.to_json(raw=fmt is Format.json)
    if fmt is Format.json:
        emit_object(doc, fmt)
    else:
        emit(serve_csv(doc) if fmt is Format.csv else serve_text(doc))
    for warning in run.warnings:
        sys.stderr.write(f"gpumatch: warning: {warning}\n")
    if run.store_error:
        sys.stderr.write(f"gpumatch: warning: results store not updated: {run.store_error}\n")
    if (gone := bench.gone_error(run)) is not None:
        raise gone


def _warmup(text: str) -> int | None:
    """``--warmup``: ``auto`` (None) or a count."""
    from gpumatch.errors import InputError

    if text.strip().lower() == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise InputError(f"--warmup takes a number of requests or auto, got {text!r}") from None


@app.command("import", help="Read a 'bench export' JSON file (or a 'bench serve --out' file) into the results "
             "store as a new bench (serve) run (so "
             "'bench show', 'bench compare' and 'gpumatch calibrate' see it). "
             "Example: gpumatch bench import h200-quick.json --store results.sqlite")
def import_cmd(file: Path = _FILE,
               store: str | None = StoreOption) -> None:
    from gpumatch.usecases import bench

    kind, run_id = bench.import_file(file, store)
    sys.stderr.write(f"gpumatch: {file} imported as {kind} run {run_id}\n")
    emit(str(run_id))


_SCALE_HELP = (
    "The same workload on 1 -> 2 -> 4 -> 8 GPUs through torchrun (NCCL; gloo on CPU processes with --cpu or "
    "without CUDA), only the counts this machine has. Reports throughput per added GPU, scaling efficiency "
    "X_n / (n X_1), 'n GPUs deliver the throughput of k' and the exposed communication per step; collectives "
    "give algbw and busbw as nccl-tests defines them. Beside each figure the estimator's prediction and "
    "measured / predicted. One run of kind scale in the results store (a record per rank, the GPU topology and "
    "launch environment in the manifest); a failing rung is recorded and the ladder goes on. Several nodes: run "
    "the same command on each with --nnodes and --rdzv-endpoint (docs/scale.md: Slurm, Kubernetes).\n\n"
    "Example: gpumatch bench scale --workload collectives --gpus 1,2,4,8 --sizes 1KiB..1GiB"
)


@app.command("scale", help=_SCALE_HELP)
def scale_cmd(
    workload: str = typer.Option("ddp", "--workload", help="collectives, ddp, fsdp or tp-decode."),
    gpus: str = typer.Option("", "--gpus", help="Rungs, e.g. 1,2,4,8 (default: those up to what is here)."),
    model: str | None = typer.Option(None, "--model", help="Model preset (default llama-3.2-1b; tiny on CPU)."),
    batch_per_gpu: int = typer.Option(1, "--batch-per-gpu", help="Sequences per GPU per step (TP: decode batch)."),
    seq: int = typer.Option(128, "--seq", help="Training sequence / decode context (tokens)."),
    steps: int = typer.Option(10, "--steps", help="Timed steps per rung (after --warmup)."),
    sizes: str = typer.Option("", "--sizes", help="Collectives: 1KiB..1GiB (x2), 4KiB..64MiB:4 or 1MiB,16MiB."),
    iters: int = typer.Option(20, "--iters", help="Collectives: timed iterations per size."),
    ops: str = typer.Option("", "--ops", help="Collectives: all_reduce,all_gather,reduce_scatter,all_to_all,sendrecv."),
    warmup: int = typer.Option(3, "--warmup", help="Untimed warm-up steps / iterations."),
    cpu: bool = typer.Option(False, "--cpu", help="CPU processes over gloo even where CUDA is (tests, smoke)."),
    nnodes: int = typer.Option(1, "--nnodes", help="Nodes (run the command on each)."),
    rdzv_endpoint: str | None = typer.Option(None, "--rdzv-endpoint", help="HOST:PORT of the c10d rendezvous."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds per rung before it is killed (a failure)."),
    seed: int = typer.Option(0, "--seed", help="Data seed."),
    no_store: bool = typer.Option(False, "--no-store", help="Record nothing in the results store."),
    store: str | None = StoreOption,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.report.scale import ScaleProgress
    from gpumatch.usecases import bench

    req = bench.ScaleRequest(workload=workload, gpus=bench.parse_counts(gpus), model=model,
                             batch_per_gpu=batch_per_gpu, seq=seq, steps=steps,
                             sizes_bytes=bench.parse_sizes(sizes) if sizes else (), iters=iters, cpu=cpu,
                             ops=tuple(o.strip() for o in ops.split(",") if o.strip()), warmup_steps=warmup,
                             nnodes=nnodes, rdzv_endpoint=rdzv_endpoint, store=store, use_store=not no_store,
                             timeout_s=timeout, seed=seed)
    with ScaleProgress() as progress:
        out = bench.scale(req, progress)
    _emit_scale(out.to_json(), fmt)


def _emit_scale(doc: dict[str, Any], fmt: Format) -> None:
    from gpumatch.report.scale import scale_csv, scale_text

    if fmt is Format.json:
        emit_object(doc, fmt)
    else:
        emit(scale_csv(doc) if fmt is Format.csv else scale_text(doc))

