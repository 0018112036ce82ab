#!/usr/bin/env bash
# gpumatch serve on one GPU (Llama-3.1-8B shape, random weights) under gpumatch bench serve: a closed-loop
# concurrency ladder 1..256 and an open-loop Poisson rate sweep, recorded in one store, as JSON with vLLM's
# field names, with gpumatch's prediction (engine profile 'gpumatch') beside each level.
# Each level's energy (gross and idle-subtracted, from the server's NVML telemetry) is stored beside it.
# Usage (device): OUT=dir bash benchmarks/gpu/serve_h200.sh   (expects gpumatch importable: PYTHONPATH=src)
# GPU: the catalog card the predictions are for (default: detected by bench serve from nvidia-smi). TAG (default
# DATE-CARD-serve, the card from nvidia-smi) names the files; SERVE_ARGS is added to `gpumatch serve` (e.g.
# --compile for the compiled layers). RATES= (empty) skips the rate sweep.
set -u
G="python3 -m gpumatch"
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h100|h200|b200|a100|l40s' \
  | head -1 | tr 'A-Z' 'a-z')
D=${TAG:-$(date +%F)-${CARD:-gpu}-serve}
S=$OUT/$D.sqlite
$G serve --model llama-3.1-8b --max-num-seqs 256 --max-model-len 2048 --max-num-batched-tokens 8192 \
  --port 8000 ${SERVE_ARGS:-} > "$OUT/$D-server.log" 2>&1 &
SERVER=$!
for i in $(seq 1 400); do
  curl -sf http://127.0.0.1:8000/health > /dev/null && break
  kill -0 $SERVER 2>/dev/null || { echo "server died"; tail -30 "$OUT/$D-server.log"; exit 1; }
  sleep 1
done
echo "server up after ${i} s"; head -8 "$OUT/$D-server.log"
M=$(curl -s http://127.0.0.1:8000/v1/models | python3 -c "import json,sys; print(json.load(sys.stdin)['data'][0]['id'])")
C="--endpoint http://127.0.0.1:8000 --model $M --arch llama-3.1-8b ${GPU:+--gpu $GPU} --engine gpumatch"
C="$C --prompt-tokens 512 --output-tokens 128 --store $S"
timeout 200 $G bench serve $C -c 1,4 -n 32 --out "$OUT/$D-c1-4.json" | tail -25
timeout 150 $G bench serve $C -c 16,64 -n 256 --out "$OUT/$D-c16-64.json" | tail -25
timeout 150 $G bench serve $C -c 256 -n 768 --out "$OUT/$D-c256.json" | tail -25
[ -n "${RATES-4,16,32}" ] && timeout 200 $G bench serve $C --rate ${RATES-4,16,32} -n 96 --out "$OUT/$D-rates.json" | tail -25
curl -s http://127.0.0.1:8000/metrics | grep -v "^#" | head -30
kill -INT $SERVER; wait $SERVER; echo "server rc=$?"
tail -5 "$OUT/$D-server.log"
