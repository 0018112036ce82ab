#!/usr/bin/env bash
# gpumatch serve --compile on one GPU (Llama-3.1-8B shape, random weights) under gpumatch bench serve, one closed-loop
# level per call. Each level's --out file holds the server's own record of every pass of the level (server_passes:
# kind, decode rows, prompt tokens, the batch and context buckets run, seconds, start; gpumatch.loadgen.passes), so
# each pass can be held against the estimator's cost of the same pass: python benchmarks/serve_passes.py LEVEL.json.
# Usage (device): OUT=dir PROMPT=768 OUTPUT=384 LEVELS="1:8 24:96 56:112" bash benchmarks/gpu/serve_passes.sh
# (LEVELS: concurrency:requests pairs; PYTHONPATH must reach gpumatch). TAG names the files (default DATE-CARD).
set -u
G="python3 -m gpumatch"
URL=http://127.0.0.1:8000
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h100|h200|b200|a100|l40s' \
  | head -1 | tr 'A-Z' 'a-z')
D=${TAG:-$(date +%F)-${CARD:-gpu}}-serve-passes-${PROMPT}-${OUTPUT}
$G serve --model llama-3.1-8b --compile --max-num-seqs ${SLOTS:-64} --max-model-len ${MAXLEN:-2048} \
  --max-num-batched-tokens 8192 --port 8000 > "$OUT/$D-server.log" 2>&1 &
SERVER=$!
for i in $(seq 1 400); do
  curl -sf $URL/health > /dev/null && break
  kill -0 $SERVER 2>/dev/null || { echo "server died"; tail -30 "$OUT/$D-server.log"; exit 1; }
  sleep 1
done
echo "server up after ${i} s"; head -8 "$OUT/$D-server.log"
M=$(curl -s $URL/v1/models | python3 -c "import json,sys; print(json.load(sys.stdin)['data'][0]['id'])")
C="--endpoint $URL --model $M --arch llama-3.1-8b --engine gpumatch --prompt-tokens $PROMPT --output-tokens $OUTPUT"
for lv in $LEVELS; do
  c=${lv%%:*}; n=${lv##*:}
  timeout 200 $G bench serve $C -c $c -n $n --store "$OUT/$D.sqlite" --out "$OUT/$D-c$c.json" | tail -12
done
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > "$OUT/$D-smi.txt"
kill -INT $SERVER; wait $SERVER; echo "server rc=$?"
tail -3 "$OUT/$D-server.log"
