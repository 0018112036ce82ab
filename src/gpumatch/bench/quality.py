"""The quality check of weight-only quantized variants against the bf16 reference, on the user's own text.

Calibrate and check a quantization on representative samples, not on random tokens: the text is the user's
(``--text``), tokenized with the model's own tokenizer (:mod:`gpumatch.bench.textdata`), and scored in fixed
windows (:func:`gpumatch.bench.textdata.windows`). For each variant (:data:`gpumatch.bench.weights.QUANT_VARIANTS`,
loaded through :class:`gpumatch.bench.weights.Quantizer`; bf16 first) over the N scored targets t_j:

- perplexity PPL = exp((1/N) Σ_j -log p(t_j | the window's tokens before j)), natural log (Jelinek et al.
  1977; Hugging Face's "Perplexity of fixed-length models");
- top-1 agreement = (1/N) Σ_j [argmax_v p_variant(v | ...) = argmax_v p_bf16(v | ...)] (1.0 for bf16 itself);
- KL(bf16 || variant) = (1/N) Σ_j Σ_v p_bf16(v) (log p_bf16(v) - log p_variant(v)) in nats, when the reference's
  log-probabilities (N × vocab float32, kept in host memory) fit :data:`KL_MAX_BYTES`; else left out, with the
  reason.

Bounded work: one window's logits at a time on the device, at most ``max_tokens`` tokens; the model is loaded
once per variant. Logits and log-probabilities are float32.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from gpumatch.bench.llama import Llama, build_model, rope_tables
from gpumatch.bench.textdata import windows
from gpumatch.bench.weights import Quantizer, load_weights

KL_MAX_BYTES = 4 * 2**30
PPL_FORMULA = "exp(mean over scored targets of -ln p(target | window tokens before it))"
AGREE_FORMULA = "fraction of scored targets where argmax p_variant = argmax p_bf16"
KL_FORMULA = "mean over scored targets of sum_v p_bf16(v) * (ln p_bf16(v) - ln p_variant(v))"


def _window_logprobs(model: Llama, ids: torch.Tensor, span: tuple[int, int, int],
                     rope: torch.Tensor) -> torch.Tensor:
    """float32 log-probabilities (targets, vocab) predicting tokens span[2]..span[1]-1 of ``ids``."""
    begin, end, first = span
    with torch.inference_mode():
        logits = model(ids[begin:end].unsqueeze(0), rope[:, :end - begin])[0]
        return F.log_softmax(logits[first - 1 - begin:end - 1 - begin].float(), dim=-1)


def _score(model: Llama, ids: torch.Tensor, spans: list[tuple[int, int, int]], rope: torch.Tensor,
           ref: dict[str, Any] | None, keep: bool) -> dict[str, Any]:
    """Sum of NLL, argmaxes, agreement and KL against ``ref`` over the windows; ``keep`` the log-probs (CPU)."""
    nll, agree, kl, tops, kept = 0.0, 0, 0.0, [], []
    for i, span in enumerate(spans):
        lp = _window_logprobs(model, ids, span, rope)
        targets = ids[span[2]:span[1]]
        nll -= float(lp.gather(1, targets.unsqueeze(1)).sum())
        top = lp.argmax(dim=-1).cpu()
        tops.append(top)
        if ref is not None:
            agree += int((top == ref["tops"][i]).sum())
            if ref["logprobs"]:
                ref_lp = ref["logprobs"][i].to(lp.device)
                kl += float(F.kl_div(lp, ref_lp, reduction="sum", log_target=True))
        if keep:
            kept.append(lp.cpu())
    return {"nll": nll, "agree": agree, "kl": kl, "tops": tops, "logprobs": kept}


def quality_case(p: dict[str, Any], dev: torch.device) -> dict[str, Any]:
    """Score ``p["tokens"]`` (token ids) in windows of ``p["window"]`` every ``p["stride"]``: a reference pass
    with the stored (bf16) weights, then each of ``p["variants"]`` against it, bf16 included (its agreement
    1.0 and KL 0 check that the pass is deterministic). One row per variant (module docstring)."""
    ids = torch.tensor(p["tokens"], dtype=torch.long, device=dev)
    spans = windows(len(p["tokens"]), int(p["window"]), int(p["stride"]))
    n = sum(e - f for _, e, f in spans)
    model = build_model(p["model"], dev, torch.bfloat16, init=False)
    model.eval()
    rope = rope_tables(model.s, int(p["window"]), dev, torch.bfloat16)
    kl_bytes = 4 * n * model.s.vocab
    keep_kl = kl_bytes <= KL_MAX_BYTES
    load_weights(model, p["weights"], p["files"])
    ref = _score(model, ids, spans, rope, None, keep=keep_kl)
    rows, held = [], "bf16"
    for variant in p["variants"]:
        quant = Quantizer(variant)
        if variant != held:
            load_weights(model, p["weights"], p["files"], quant)
            held = variant
        got = _score(model, ids, spans, rope, ref, keep=False)
        nll = got["nll"] / n
        rows.append({"variant": variant, "tokens": n, "windows": len(spans), "nll_mean_nat": nll,
                     "perplexity": math.exp(nll) if nll < 700 else math.inf, "top1_agreement": got["agree"] / n,
                     "kl_nat": got["kl"] / n if keep_kl else None, "quantized_tensors": quant.quantized,
                     "weight_rel_error": quant.rel_error})
    skipped = None if keep_kl else (f"the reference's log-probabilities would take {kl_bytes} B (> {KL_MAX_BYTES} "
                                    "B of host memory); lower --max-tokens")
    return {"rows": rows, "kl_skipped": skipped}
