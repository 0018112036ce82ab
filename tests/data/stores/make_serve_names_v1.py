"""Make tests/data/stores/serve-names-v1.sqlite with the code at commit b402829 (before the unified names)."""
import sys
from pathlib import Path

from gpumatch.loadgen.bench import ServeRequest, run_serve_bench
from gpumatch.loadgen.loopback import Loopback, LoopbackConfig
from gpumatch.store.imports import import_file

out = Path(sys.argv[1])
data = Path("tests/data/imports")
with Loopback(LoopbackConfig(itl_s=0.002, ttft_s=0.01)) as url:

    base = dict(concurrency=(1, 4), num_prompts=12, prompt_tokens=16, output_tokens=8, selftest=False, store=str(out))
    run = run_serve_bench(ServeRequest(url, "test-model", **base))
    print("serve run", run.run_id)
for f in ("vllm-bench-serve.json", "guidellm-benchmarks.json", "aiperf-profile-export.json"):
    print(import_file(data / f, None, str(out)))
