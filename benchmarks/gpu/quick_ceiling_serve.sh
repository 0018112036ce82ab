#!/usr/bin/env bash
# One device call for issue 27 on whatever card comes (H200 asked for; an H100 may come instead).
# H200: the quick suite with the fused decoder (export + log), the plain-PyTorch decode ceiling probe in the same call
# (benchmarks/gpu/probe_decode_mbu.py), then gpumatch serve --compile at 1536/256, c = 2/16/40, against the predictions
# committed in tests/data/measurements/serve/2026-12-07-serve-passes-1536-256-blind-predictions.json.
# Other cards: the Triton fused-MoE probe (benchmarks/gpu/probe_moe_triton.py; its quick suite is committed already).
# At most 8 files come back from $OUT: the suite's export and log (nvidia-smi -q and the serve card line appended),
# the probe's JSON, the three serve levels and the server log.
# Usage (device, repo root, carry .carry): bash benchmarks/gpu/quick_ceiling_serve.sh
set -u -o pipefail
C=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -oiE 'h100|h200' | head -1 | tr 'A-Z' 'a-z')
echo "card=${C:-other}"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/whl/*.whl \
  2>/dev/null
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
D=$(date +%F)-${C:-gpu}
if [ "${C:-}" = h200 ]; then
  L=$OUT/$D-quick-fused-log.txt
  timeout 280 python3 benchmarks/gpu/lab_run.py --suite quick --store "/tmp/$D-quick.sqlite" \
    --export "$OUT/$D-quick-fused.json" 2>&1 | tee "$L"
  nvidia-smi -q -d PERFORMANCE,POWER,CLOCK >> "$L"
  echo "== ceiling probe" >> "$L"
  timeout 170 python3 benchmarks/gpu/probe_decode_mbu.py --budget-s 120 \
    --out "$OUT/$D-quick-fused-ceiling-probe.json" 2>&1 | tee -a "$L"
  mkdir -p /tmp/s
  OUT=/tmp/s PROMPT=1536 OUTPUT=256 LEVELS="2:12 16:64 40:80" timeout 130 bash benchmarks/gpu/serve_passes.sh
  cp /tmp/s/*-c*.json /tmp/s/*server.log "$OUT/"
  cat /tmp/s/*smi.txt >> "$L"
else
  timeout 400 python3 benchmarks/gpu/probe_moe_triton.py --out "$OUT/$D-moe-triton-probe.json" 2>&1 \
    | tee "$OUT/$D-moe-triton-probe-log.txt"
fi
ls -la "$OUT"
