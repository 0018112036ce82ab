"""``gpumatch serve``: build the engine, start GPU telemetry, serve the OpenAI-compatible API until stopped.

:func:`serve` is the library call the CLI makes; :class:`ServerThread` runs the same in a thread (tests, and a
client that wants a local server). The engine, scheduler and HTTP API are in :mod:`gpumatch.bench.server`
(docs/serve.md). Order of startup: check the options, open the GPU telemetry and measure the idle power (before
the model: a CUDA context would hold the clocks up, and the idle power is the settled one,
:func:`gpumatch.telemetry.window.settled_idle_power`), build the engine (model, KV slots, CUDA graphs), start the
engine thread, bind, report ``Listening``.
Shutdown (Ctrl-C, SIGTERM, or the stop event): stop accepting, cancel the requests in flight, stop the engine and
the telemetry; the exception (KeyboardInterrupt) goes on to the caller.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumatch.bench.dtypes import STORAGE_PRECISIONS
from gpumatch.errors import InputError, MissingDependencyError

LOOPBACK_NAMES = ("localhost",)
DEFAULT_PORT = 8000
DEFAULT_IDLE_S = 3.0


@dataclass(frozen=True)
class ServeOptions:
    """What ``gpumatch serve`` is asked for (counts; ``idle_s`` seconds of idle-power measurement on a GPU)."""

    model: str | None = None
    hf_config: Path | None = None
    weights: Path | None = None
    """A local Hugging Face folder (config.json, safetensors, tokenizer.json): its architecture, its weights and,
    when present, its tokenizer and end-of-sequence id."""
    tiny: bool = False
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    max_num_seqs: int = 256
    max_model_len: int = 2048
    max_num_batched_tokens: int = 8192
    dtype: str = "auto"
    device: str = "auto"
    cuda_graphs: bool = True
    compile: bool = False
    """torch.compile the layers (opt-in; :class:`gpumatch.bench.server.engine.EngineConfig`)."""
    idle_s: float = DEFAULT_IDLE_S
    seed: int = 0


@dataclass(frozen=True)
class Listening:
    """The server is up: where, what it serves (:class:`gpumatch.bench.server.engine.EngineInfo` as a dict)."""

    url: str
    host: str
    port: int
    info: dict[str, Any]
    telemetry: str
    """``"nvml"``, or why there is none."""
    idle_power_w: float | None
    warnings: list[str] = field(default_factory=list)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_options(o: ServeOptions) -> list[str]:
    """InputError for a bad option; the warnings for risky ones (a non-loopback bind)."""
    if sum(x is not None for x in (o.model, o.hf_config, o.weights)) > 1:
        raise InputError("give one of --model, --hf-config and --weights", "--weights takes the architecture from "
                         "the folder's config.json")
    if o.tiny and (o.model or o.hf_config or o.weights):
        raise InputError("--tiny serves a 2-layer stand-in; leave out --model/--hf-config/--weights with it")
    for name, v in (("--max-num-seqs", o.max_num_seqs), ("--max-model-len", o.max_model_len),
                    ("--max-num-batched-tokens", o.max_num_batched_tokens)):
        if v < 1:
            raise InputError(f"{name} must be at least 1, not {v}")
    if not 0 <= o.port <= 65535:
        raise InputError(f"--port must be 0-65535, not {o.port}", "0 picks a free port")
    if o.dtype not in ("auto", *STORAGE_PRECISIONS):
        raise InputError(f"unknown --dtype {o.dtype!r}", f"one of auto, {', '.join(STORAGE_PRECISIONS)}")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", o.device):
        raise InputError(f"unknown --device {o.device!r}", "one of auto, cpu, cuda, cuda:N")
    if o.idle_s < 0 or o.idle_s > 60:
        raise InputError(f"--idle-seconds must be 0-60, not {o.idle_s}")
    check_weights(o)  # headers only: a bad folder is refused before anything is built
    if is_loopback(o.host):
        return []
    return [f"listening on {o.host}, not loopback: anyone who reaches this machine can use the server "
            "(it has no authentication)"]


@dataclass(frozen=True)
class WeightsSource:
    """A checked ``--weights`` folder (:func:`gpumatch.lab.inputs.load_weights_folder`) and its config's
    end-of-sequence id (the first, when the config lists several)."""

    weights: Any
    eos_token_id: int | None


def check_weights(o: ServeOptions) -> WeightsSource | None:
    """Check the ``--weights`` folder before anything is built (no weight is read); None without one."""
    if o.weights is None:
        return None
    from gpumatch.bench.hfweights import read_config
    from gpumatch.lab.inputs import load_weights_folder

    w = load_weights_folder(o.weights)
    eos = read_config(o.weights.expanduser()).get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) and eos else eos
    return WeightsSource(w, eos if isinstance(eos, int) and not isinstance(eos, bool) else None)


def _codec(src: WeightsSource | None, vocab: int) -> Any:
    """The folder's tokenizer when it has one, else words as tokens."""
    if src is None or src.weights.tokenizer is None:
        return None
    from gpumatch.bench.server.tokens import TokenizerCodec

    try:
        return TokenizerCodec(src.weights.tokenizer, vocab)
    except ValueError as e:
        raise InputError(str(e), "give a folder whose tokenizer.json matches its config.json") from e


def model_shape(o: ServeOptions, src: WeightsSource | None = None) -> dict[str, Any]:
    """The served decoder's shape: ``--tiny`` (2 layers), ``--weights`` (its config, RoPE and norm included),
    ``--model``/``--hf-config``, else Llama-3.1-8B's."""
    from gpumatch.bench import shapes

    if src is not None:
        return dict(src.weights.shape)
    if o.tiny:
        return shapes.tiny_shape()
    source = o.model or (str(o.hf_config) if o.hf_config else None)
    if source is None:
        return shapes.from_preset("llama-3.1-8b")
    from gpumatch.models import resolve_model

    arch = resolve_model(source)
    if arch.experts or arch.q_lora_rank or arch.kv_lora_rank or not arch.gated_mlp:
        raise InputError(f"model {arch.name} is not a dense Llama-style decoder (MoE, MLA or ungated MLP)",
                         "gpumatch serve runs dense gated-MLP models; give one with --model or --hf-config")
    return {"name": arch.name, "layers": arch.layers, "hidden": arch.hidden_size, "heads": arch.heads,
            "kv_heads": arch.kv_heads, "head_dim": arch.head_dim, "ffn": arch.ffn_size, "vocab": arch.vocab_size,
            "tied": arch.tied_embeddings}


def build(o: ServeOptions, load_weights: Callable[[Any], None] | None = None,
          src: WeightsSource | None = None) -> Any:
    """The engine (not started). ``load_weights`` fills the model's parameters (the hook for real weights);
    ``src`` (a checked ``--weights`` folder) loads its safetensors the same way."""
    try:
        from gpumatch.bench.server.build import build_engine
        from gpumatch.bench.server.engine import EngineConfig
    except ImportError as e:
        raise MissingDependencyError(f"gpumatch serve needs torch, aiohttp and prometheus-client ({e})",
                                     "pip install 'gpumatch[bench,serve]'") from e
    if src is not None and load_weights is None:
        from gpumatch.bench.weights import load_weights as load_folder

        params = src.weights.params

        def load_weights(model: Any) -> None:
            load_folder(model, params["weights"], params["files"])

    cfg = EngineConfig(shape=model_shape(o, src), max_num_seqs=o.max_num_seqs, max_model_len=o.max_model_len,
                       max_num_batched_tokens=o.max_num_batched_tokens, dtype=o.dtype, device=o.device,
                       cuda_graphs=o.cuda_graphs, compile=o.compile, seed=o.seed,
                       eos_token_id=src.eos_token_id if src is not None else None)
    try:
        return build_engine(cfg, load_weights)
    except ValueError as e:
        raise InputError(str(e), "lower --max-num-seqs or --max-model-len (on a CPU: --tiny)") from e


def serve(o: ServeOptions, on_ready: Callable[[Listening], None] | None = None,
          stop: threading.Event | None = None, load_weights: Callable[[Any], None] | None = None) -> None:
    """Serve until ``stop`` is set (or forever: Ctrl-C / SIGTERM end it, their exception passes through)."""
    warnings = check_options(o)
    src = check_weights(o)
    from gpumatch.lab.serve_telemetry import open_server_telemetry

    # before the model: no CUDA context holds the clocks up yet, so they settle (the one idle-power rule)
    tele, why = open_server_telemetry("cuda" if o.device == "auto" else o.device)
    engine: Any = None
    try:
        idle = tele.measure_idle(o.idle_s) if tele is not None else None
        engine = build(o, load_weights, src)
        if not str(engine.runner.dev).startswith("cuda"):  # "auto" without a usable CUDA GPU
            if tele is not None:
                tele.stop()
            tele, why, idle = None, "the server runs on a CPU", None
        codec = _codec(src, int(engine.runner.model.s.vocab))
        engine.start()
        asyncio.run(_run(o, engine, tele, why, idle, warnings + engine.info.warnings, on_ready, stop, codec))
    finally:
        if engine is not None:
            engine.stop()
        if tele is not None:
            tele.stop()


async def _run(o: ServeOptions, engine: Any, tele: Any, why: str, idle: float | None, warnings: list[str],
               on_ready: Callable[[Listening], None] | None, stop: threading.Event | None, codec: Any = None) -> None:
    from aiohttp import web

    from gpumatch.bench.server.http import make_app

    app = make_app(engine, tele.query if tele is not None else None, codec)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=2.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, o.host, o.port)
        try:
            await site.start()
        except OSError as e:
            raise InputError(f"cannot listen on {o.host}:{o.port} ({e.strerror or e})",
                             "pick another --port (0: any free one)") from e
        port = _bound_port(runner, o.port)
        host = f"[{o.host}]" if ":" in o.host else o.host
        if on_ready is not None:
            info = {**engine.info.to_dict(), "weights": str(o.weights) if o.weights else None,
                    "tokens": codec.name if codec is not None else "words"}
            on_ready(Listening(f"http://{host}:{port}", o.host, port, info,
                               "nvml" if tele is not None else why, idle, warnings))
        while stop is None or not stop.is_set():
            await asyncio.sleep(0.1)
    finally:
        await runner.cleanup()


def _bound_port(runner: Any, asked: int) -> int:
    for addr in runner.addresses:
        if isinstance(addr, tuple) and len(addr) >= 2:
            return int(addr[1])
    return asked


class ServerThread:
    """``serve`` in a daemon thread: ``with ServerThread(opts) as s: ... s.url ...`` (tests, local clients)."""

    def __init__(self, o: ServeOptions, timeout_s: float = 120.0) -> None:
        self.options, self.timeout_s = o, timeout_s
        self.listening: Listening | None = None
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="gpumatch-serve", daemon=True)

    def _main(self) -> None:
        try:
            serve(self.options, self._up, self._stop)
        except BaseException as e:  # handed to the starting thread
            self.error = e
        finally:
            self._ready.set()

    def _up(self, listening: Listening) -> None:
        self.listening = listening
        self._ready.set()

    @property
    def url(self) -> str:
        assert self.listening is not None
        return self.listening.url

    def __enter__(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(self.timeout_s):
            raise TimeoutError(f"gpumatch serve did not start in {self.timeout_s} s")
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30.0)
