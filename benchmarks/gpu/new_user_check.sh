#!/usr/bin/env bash
# Try `gpumatch doctor`, `gpumatch monitor` and the store as a new user would, on a GPU machine, and run the
# test suite there (the `gpu`-marked NVML tests run only where a GPU is).
#
# Usage (device machine, repo root; wheels for pydantic/typer/rich in .carry/ when the machine lacks them):
#     OUT=/some/dir bash benchmarks/gpu/new_user_check.sh
# Writes $OUT/log.txt (everything printed), doctor.json, monitor-gemm.csv/.json, export-*.csv/.json,
# results.sqlite, pytest.txt. PYTEST_PATHS (default: the GPU, telemetry and store tests) and PYTEST_TIMEOUT_S
# (default 240) bound the test step: the whole suite outlasted a 10-minute device call on 2026-12-03.
set -u
OUT=${OUT:?set OUT to a folder}
if ls .carry/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .carry/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export GPUMATCH_HOME=/tmp/gpumatch-home
mkdir -p /tmp/bin && cat >/tmp/bin/gpumatch <<'EOF'
#!/usr/bin/env bash
exec python3 -c 'import sys; sys.argv[0] = "gpumatch"; from gpumatch.cli.app import main; sys.exit(main())' "$@"
EOF
chmod +x /tmp/bin/gpumatch && export PATH=/tmp/bin:$PATH

step() { echo; echo "=== $*"; }
{
  step "machine"; nvidia-smi --query-gpu=name,driver_version,power.limit,pcie.link.gen.max,pcie.link.width.max \
    --format=csv; python3 -c 'import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
  step "gpumatch --version"; gpumatch --version; echo "rc=$?"
  step "gpumatch doctor"; gpumatch doctor; echo "rc=$?"
  step "gpumatch doctor --format json"; gpumatch doctor --format json >"$OUT/doctor.json"; echo "rc=$?"
  step "gpumatch doctor --psu-w 1000 (H200 700 W x 1.5 > 1000 W: should fail the PSU rule)"
  gpumatch doctor --psu-w 1000; echo "rc=$?"
  step "gpumatch doctor --psu-w banana (bad input)"; gpumatch doctor --psu-w banana; echo "rc=$?"
  step "monitor a 30-s bf16 GEMM loop"
  gpumatch monitor --interval 0.05 --output "$OUT/monitor-gemm.csv" -- python3 -c '
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
t0 = time.time(); n = 0
while time.time() - t0 < 30:
    for _ in range(20): a @ b
    torch.cuda.synchronize(); n += 20
print(f"{2 * 8192**3 * n / (time.time() - t0) / 1e12:.0f} TFLOP/s")'
  echo "rc=$?"
  step "monitor a host-bound loop of tiny kernels (10 s), json"
  gpumatch monitor --interval 0.1 --format json -- python3 -c '
import time, torch
x = torch.zeros(1, device="cuda"); t0 = time.time()
while time.time() - t0 < 10: x += 1
torch.cuda.synchronize()' | tail -c 3000
  echo "rc=$?"
  step "monitor a failing command (exit 3)"; gpumatch monitor -- python3 -c 'import sys; sys.exit(3)'; echo "rc=$?"
  step "monitor until Ctrl-C (SIGINT after 6 s)"; timeout -s INT 6 gpumatch monitor --interval 0.1; echo "rc=$?"
  step "monitor killed with SIGKILL mid-run (store must stay readable)"
  gpumatch monitor --interval 0.05 -- sleep 30 & pid=$!; sleep 8; pkill -9 -f 'gpumatch.cli.app' ; wait $pid
  echo "rc=$?"
  step "gpumatch runs list"; gpumatch runs list; echo "rc=$?"
  step "gpumatch runs show (newest)"
  id=$(gpumatch runs list --format json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(max(x["run_id"] for x in r) if r else "")')
  gpumatch runs show "$id" | head -60; echo "rc=$?"
  step "gpumatch runs export (the GEMM and tiny-kernel runs back to trace files, then replayed)"
  gpumatch runs export 1 --output "$OUT/export-gemm.csv"; echo "rc=$?"
  gpumatch runs export 2 --output "$OUT/export-tiny.csv"; echo "rc=$?"
  gpumatch monitor --replay "$OUT/export-tiny.csv" | head -12; echo "rc=$?"
  gpumatch runs export 99 --output "$OUT/nope.csv"; echo "rc=$? (unknown run: expect 2)"
  step "sqlite integrity"; python3 -c '
import sqlite3; c = sqlite3.connect("/tmp/gpumatch-home/results.sqlite")
print(c.execute("pragma integrity_check").fetchone(), c.execute("select count(*) from runs").fetchone())'
} 2>&1 | tee "$OUT/log.txt"
cp /tmp/gpumatch-home/results.sqlite "$OUT/results.sqlite" 2>/dev/null
step "pytest (all tests, GPU present)" | tee -a "$OUT/log.txt"
timeout "${PYTEST_TIMEOUT_S:-240}" python3 -m pytest -q -p no:cacheprovider -rs ${PYTEST_PATHS:-tests/gpu tests/unit/telemetry tests/unit/store} 2>&1 | tail -40 | tee "$OUT/pytest.txt" | tee -a "$OUT/log.txt"
