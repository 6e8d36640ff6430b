"""Batched generation with the key/value cache: greedy or sampled, until a stop sequence.

Prompts of different lengths are left-padded into one batch (`attention_mask` 0 on the padding),
prefilled in one forward, then extended one token per forward. Sampling draws from
softmax(logits / temperature) restricted to the `top_k` most likely tokens and to the smallest
set whose probability reaches `top_p`; temperature 0 is greedy (argmax).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def _pick(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None, generator):
    """logits [B, V] -> next token ids [B]."""
    if temperature == 0:
        return logits.argmax(-1)
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        drop = probs.cumsum(-1) - probs >= top_p  # tokens after the set has reached top_p
        logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(
    model,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    stop_sequences: Sequence[Sequence[int]] = (),
    should_stop: Callable[[list[int]], bool] | None = None,
) -> list[list[int]]:
    """The new tokens of each prompt (a list of token ids, at least one each).

    A row stops after `max_new_tokens`, when its new tokens end with one of `stop_sequences`
    (token ids; removed from what is returned), or when `should_stop(new tokens)` is true (e.g. a
    text-level stop string: kept; the caller cuts the text). Raises ValueError when a prompt is
    empty or a prompt plus `max_new_tokens` exceeds the model's max_seq_len (truncate first)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0: greedy); given {temperature}")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    limit = model.cfg.max_seq_len
    longest = max(len(p) for p in prompts)
    if longest + max_new_tokens > limit:
        raise ValueError(
            f"a prompt of {longest} tokens plus {max_new_tokens} new ones exceeds max_seq_len {limit}"
        )
    if max_new_tokens <= 0:
        return [[] for _ in prompts]
    device = next(model.parameters()).device
    width = longest
    x = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for b, p in enumerate(prompts):
        x[b, width - len(p) :] = torch.as_tensor(list(p))
        mask[b, width - len(p) :] = 1
    cache = model.new_cache(len(prompts), width + max_new_tokens - 1)
    logits = model(x.to(device), cache=cache, attention_mask=mask)[:, -1]
    new: list[list[int]] = [[] for _ in prompts]
    done = [False] * len(prompts)
    stops = [list(s) for s in stop_sequences if len(s)]
    for i in range(max_new_tokens):
        nxt = _pick(logits, temperature, top_k, top_p, generator)
        for b, tok in enumerate(nxt.tolist()):
            if done[b]:
                continue
            new[b].append(tok)
            for s in stops:
                if new[b][-len(s) :] == s:
                    del new[b][-len(s) :]
                    done[b] = True
                    break
            if not done[b] and should_stop is not None and should_stop(new[b]):
                done[b] = True
        if all(done) or i == max_new_tokens - 1:
            break
        logits = model(nxt[:, None].to(device), cache=cache)[:, -1]
    return new
