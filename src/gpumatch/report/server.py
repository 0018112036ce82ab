"""The startup lines of ``gpumatch serve`` (each fits 80 columns)."""

from __future__ import annotations

from gpumatch.lab.serve import Listening
from gpumatch.units import GIB


def listening_text(lst: Listening) -> str:
    """Where the server listens, what it serves, its KV slots, graphs and telemetry."""
    i = lst.info
    n = i["params"]
    size = f"{n / 1e9:.3g} B" if n >= 1e9 else f"{n / 1e6:.3g} M"
    idle = f", idle {lst.idle_power_w:.0f} W" if lst.idle_power_w is not None else ""
    tele = "NVML" + idle if lst.telemetry == "nvml" else f"none ({lst.telemetry})"
    lines = [
        f"gpumatch serve: listening on {lst.url}",
        f"  model    {i['model']} ({size} parameters, {_weights(i)}), {i['dtype']} "
        f"on {i['device']}",
        f"  KV cache {i['slots']} slots x {i['max_model_len']} tokens ({i['kv_cache_bytes'] / GIB:.2f} GiB), "
        f"budget {i['max_num_batched_tokens']} tokens/pass",
        f"  graphs   {i['cuda_graphs']} decode CUDA graphs, "
        f"{'compiled' if i.get('compiled') else 'uncompiled'} layers; telemetry {tele}",
        f"  try      curl {lst.url}/v1/models   (Ctrl-C stops)",
    ]
    return "\n".join(line if len(line) <= 80 else line[:79] + "…" for line in lines)


def _weights(info: dict[str, object]) -> str:
    """"random weights", or the folder's name and how text becomes tokens."""
    folder = info.get("weights")
    if not folder:
        return "random weights"
    name = str(folder).rstrip("/").rsplit("/", 1)[-1]
    return f"weights {name}, {info.get('tokens', 'words')}"
