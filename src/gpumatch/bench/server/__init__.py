"""gpumatch's own continuous-batching server engine (``gpumatch serve``; docs/serve.md).

- :mod:`.tokens`: prompt text <-> token ids without a tokenizer (torch-free);
- :mod:`.scheduler`: the iteration-level scheduler: slots, admission, chunked prefill under a token budget
  (torch-free, unit-tested on its own);
- :mod:`.runner`: the model side: the slot KV cache, one flat forward per iteration that mixes decode rows and
  prefill chunks, CUDA graphs for decode-only iterations (imports torch);
- :mod:`.engine`: the engine thread that runs scheduler + runner and hands tokens to the event loop;
- :mod:`.logprobs`: log-probs and top-k out of a pass (imports torch);
- :mod:`.metrics`: the Prometheus metrics (prometheus-client), ``gpumatch_*`` and vLLM's ``vllm:*``;
- :mod:`.protocol`, :mod:`.stops`, :mod:`.responses`: request fields and checks, stop strings, response bodies
  (vLLM's OpenAI server's shapes; torch-free);
- :mod:`.http`: the OpenAI-compatible HTTP API (aiohttp).

Only :mod:`.runner`, :mod:`.logprobs` and :mod:`.build` import torch.
"""
