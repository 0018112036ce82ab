"""``gpumatch serve``: gpumatch's own small OpenAI-compatible continuous-batching server (docs/serve.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gpumatch.cli.common import emit

HELP = (
    "Serve a Llama-shaped model (random weights) behind an OpenAI-compatible API with continuous batching: "
    "running decodes and chunked prefills share each pass under a token budget, a slot KV cache admits "
    "requests by capacity, CUDA graphs run decode-only passes on a GPU. /metrics is Prometheus text; "
    "/gpumatch/telemetry gives GPU power and clocks for energy per load level. Routes, request fields "
    "(stop, logprobs, echo, ...), errors and vllm:* metrics as vLLM's OpenAI server; sampling is greedy. "
    "Binds 127.0.0.1 unless --host says otherwise. Prompts are counted in words (docs/serve.md).\n\n"
    "Examples:\n"
    "  gpumatch serve --tiny --port 8000\n"
    "  gpumatch serve --model llama-3.1-8b --max-num-seqs 256 --max-model-len 2048\n"
    "  gpumatch bench serve --endpoint http://127.0.0.1:8000"
)


_HF = typer.Option(None, "--hf-config", help="A local Hugging Face config.json to serve.")
_WEIGHTS = typer.Option(None, "--weights", help="A local Hugging Face folder (config.json, *.safetensors, "
                        "tokenizer.json): serve its weights, tokenizer and EOS id. Nothing is downloaded.")


def serve_cmd(
    model: str = typer.Option(None, "--model", help="A built-in dense model (default llama-3.1-8b's shape)."),
    hf_config: Path | None = _HF,
    weights: Path | None = _WEIGHTS,
    tiny: bool = typer.Option(False, "--tiny", help="A 2-layer stand-in (CPU tests and smoke runs)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8000, "--port", help="Port (0: any free one)."),
    max_num_seqs: int = typer.Option(256, "--max-num-seqs", help="KV slots: requests running at once."),
    max_model_len: int = typer.Option(2048, "--max-model-len", help="Tokens per slot (prompt + output)."),
    max_num_batched_tokens: int = typer.Option(8192, "--max-num-batched-tokens",
                                               help="Token budget of one pass (decode rows + prompt chunks)."),
    dtype: str = typer.Option("auto", "--dtype", help="auto (bf16 on a GPU, fp32 on a CPU), bf16, fp16, fp32."),
    device: str = typer.Option("auto", "--device", help="auto, cuda, cuda:N or cpu."),
    cuda_graphs: bool = typer.Option(True, "--cuda-graphs/--enforce-eager",
                                     help="Capture decode CUDA graphs (GPU) or run every pass eagerly."),
    compile_: bool = typer.Option(False, "--compile/--no-compile",
                                  help="torch.compile the layers (opt-in; one H100 run: docs/serve.md)."),
    idle_s: float = typer.Option(3.0, "--idle-seconds", help="Idle power measured before serving (GPU; 0: skip)."),
) -> None:
    from gpumatch.report.server import listening_text
    from gpumatch.usecases.serve import Listening, ServeOptions, serve

    opts = ServeOptions(model=model, hf_config=hf_config, weights=weights, tiny=tiny, host=host, port=port,
                        max_num_seqs=max_num_seqs, max_model_len=max_model_len,
                        max_num_batched_tokens=max_num_batched_tokens, dtype=dtype, device=device,
                        cuda_graphs=cuda_graphs, compile=compile_, idle_s=idle_s)

    def building() -> None:
        sys.stderr.write("gpumatch: building the model and its KV cache...\n")

    def ready(lst: Listening) -> None:
        for w in lst.warnings:
            sys.stderr.write(f"gpumatch: warning: {w}\n")
        emit(listening_text(lst))
        sys.stdout.flush()

    serve(opts, on_ready=ready, on_building=building)
