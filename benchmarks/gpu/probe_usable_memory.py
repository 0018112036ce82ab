"""Probe: how much of a GPU's memory one process can really allocate (issue 10, card memory).

Records, for each visible CUDA device: nvidia-smi's memory.total / reserved / used / free and ECC mode,
torch's ``cuda.mem_get_info`` before and after the CUDA context exists, and the bytes one process can
allocate with plain ``torch.empty`` (1 GiB chunks until out of memory, then 16 MiB chunks), so the catalog's
usable-memory rule (driver total) can be compared with what a framework gets after its own context.

Run on a GPU machine: ``python3 benchmarks/gpu/probe_usable_memory.py OUT.json``. Needs torch; no gpumatch.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

MIB = 2**20
GIB = 2**30


def smi() -> list[dict[str, str]]:
    fields = ("name,uuid,driver_version,memory.total,memory.reserved,memory.used,memory.free,"
              "ecc.mode.current,vbios_version")
    out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    keys = fields.split(",")
    return [dict(zip(keys, (v.strip() for v in line.split(",")), strict=True)) for line in out.strip().splitlines()]


def fill(torch: object, device: int) -> dict[str, int]:
    import torch as t

    blocks = []
    for chunk in (GIB, 16 * MIB):
        while True:
            try:
                blocks.append(t.empty(chunk, dtype=t.uint8, device=f"cuda:{device}"))
            except t.OutOfMemoryError:
                break
    got = sum(b.numel() for b in blocks)
    free_after, total = t.cuda.mem_get_info(device)
    del blocks
    t.cuda.empty_cache()
    return {"allocated_bytes": got, "free_after_fill_bytes": free_after, "total_bytes": total}


def main() -> None:
    import torch

    before = smi()
    rows = []
    for i in range(torch.cuda.device_count()):
        free0, total0 = torch.cuda.mem_get_info(i)  # creates the context on device i
        after = smi()[i]
        rows.append({"device": i, "torch_name": torch.cuda.get_device_name(i),
                     "mem_get_info_free_bytes": free0, "mem_get_info_total_bytes": total0,
                     "smi_before_context": before[i], "smi_with_context": after,
                     "fill": fill(torch, i)})
    res = {"probe": "usable-memory", "date": dt.date.today().isoformat(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "devices": rows}
    text = json.dumps(res, indent=2)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
