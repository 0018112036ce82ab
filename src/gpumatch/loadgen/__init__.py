"""``gpumatch bench serve``: a load generator for any OpenAI-compatible streaming endpoint.

- :mod:`.metrics` — the per-request record and every summary figure, with its formula (pure, no HTTP);
- :mod:`.workload` — prompts, output lengths and arrival times (seeded; gamma gaps with a burstiness);
- :mod:`.tokens` — a local tokenizer.json: prompts cut to an exact token count;
- :mod:`.datasets` — ShareGPT and JSONL datasets, read with bounds and sampled with a seed;
- :mod:`.inputs` — each level's requests and its warm-up's (count- or time-limited);
- :mod:`.usage` — the server's token counts checked against the requests, and the warnings;
- :mod:`.client` — one streamed request over aiohttp, timed from its scheduled send time;
- :mod:`.runner` — a load level: closed loop (fixed concurrency) or open loop (Poisson or constant rate);
- :mod:`.loopback` — the built-in OpenAI-compatible fake server the client self-test runs against;
- :mod:`.selftest` — the client self-test (is the client the bottleneck at this load?);
- :mod:`.predict` — the estimator's serving prediction for each level;
- :mod:`.bench` — :func:`run_serve_bench`, the one library call behind the command; records the run.

aiohttp and tokenizers (the ``serve`` extra) are imported inside functions only: ``import gpumatch`` never needs them.
"""
