"""The lm-evaluation-harness model `satsweep`: a trained trial behind lm-eval's LM API.

`SatsweepLM` is a `lm_eval.api.model.TemplateLM` (an `LM` that splits context and continuation
tokens the harness's way) registered as `satsweep`, so `simple_evaluate(model="satsweep",
model_args={"pretrained": CHECKPOINT_OR_RUN_ID})` and `lm_eval --model satsweep` (after
`import evals.adapter`) load a trial. Requests:

- loglikelihood: log p(continuation | context) summed over the continuation's tokens, and whether
  greedy decoding would give every one of them. Context and continuation are cut on the left to
  the model's window (the last max_seq_len + 1 tokens, the continuation whole); batches of
  similar length, right-padded (a causal model's real positions never see the padding).
- loglikelihood_rolling: a document in windows of max_seq_len, each token predicted once
  (lm-eval's rolling windows), the first from the prefix token.
- generate_until: batched generation with the key/value cache, left-padded, until one of the
  request's stop strings, `max_gen_toks` or the end of the window; the context keeps its last
  max(max_seq_len - max_gen_toks, max_seq_len // 2) tokens.

Every context starts with the token that preceded every document in training (the tokenizer's
`start`, trainers.data.tokenizer.ContextStart: the shards' separator, BOS or EOS, for `prepare hf`
shards; a line break for text corpora), as lm-eval's Hugging Face model starts each with BOS: it
is lm-eval's prefix token too (before a document or an empty context). The text itself is
encoded by the project's one rule (no special tokens); `prefix` names another one-token string.
`context_start` says which token it is and why (the evals write it into their results JSON).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict

import torch
import torch.nn.functional as F
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from arch.generate import generate
from trainers.data.tokenizer import ContextStart
from trainers.mlflow_names import DEFAULT_TRACKING_URI
from trainers.trained import load_trial, trial_tokenizer

log = logging.getLogger(__name__)

MODEL_NAME = "satsweep"
GEN_KWARGS = ("until", "max_gen_toks", "do_sample", "temperature", "top_k", "top_p")
DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's default for generate_until tasks that set none


def _batches(order: list[int], size: int):
    for start in range(0, len(order), size):
        yield order[start : start + size]


@register_model(MODEL_NAME)
class SatsweepLM(TemplateLM):
    """A trial's model and tokenizer under lm-eval. `pretrained`: a checkpoint file or an MLflow
    run id (`tracking_uri`); or build one around a loaded model with `from_model`."""

    def __init__(
        self,
        pretrained: str | None = None,
        tracking_uri: str | None = None,
        batch_size: int | str = 8,
        device: str | None = None,
        data_root: str | None = None,
        prefix: str | None = None,
        seed: int = 1234,
        model=None,
        tokenizer=None,
        run_id: str | None = None,
    ):
        super().__init__()
        if model is None:
            if pretrained is None:
                raise ValueError("satsweep needs pretrained=<checkpoint file or MLflow run id>")
            cfg, model, run_id = load_trial(pretrained, tracking_uri or DEFAULT_TRACKING_URI)
            tokenizer = tokenizer or trial_tokenizer(cfg, data_root)
        if tokenizer is None:
            raise ValueError("satsweep needs the model's tokenizer")
        if str(batch_size).startswith("auto"):
            raise ValueError("satsweep: batch_size 'auto' is not supported; give a number")
        self.batch_size = int(batch_size)
        self._device = torch.device(device or "cpu")
        self.model = model.to(self._device).eval()
        self.tokenizer_ = tokenizer
        self.run_id = run_id
        self.max_length = model.cfg.max_seq_len
        self._start = self._context_start(prefix)
        self._prefix_id = self._start.id
        self.generator = torch.Generator(device=self._device).manual_seed(seed)

    def _context_start(self, prefix: str | None) -> ContextStart:
        if prefix is None:
            if getattr(self.tokenizer_, "start", None) is None:
                raise ValueError("satsweep: the tokenizer has no context start (the token before every "
                                 "document in training); pass prefix=<a one-token string>")  # fmt: skip
            return self.tokenizer_.start
        ids = self.tok_encode(prefix, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(f"satsweep: prefix {prefix!r} is {len(ids)} tokens; it must be one")
        return ContextStart(ids[0], prefix, "the prefix argument")

    @property
    def context_start(self) -> dict:
        """The token every context starts with, and why (for the results JSON)."""
        return self._start.as_dict()

    @classmethod
    def from_model(cls, model, tokenizer, **kwargs) -> SatsweepLM:
        return cls(model=model, tokenizer=tokenizer, **kwargs)

    # --- tokens
    @property
    def eot_token_id(self) -> int:
        return self._prefix_id

    @property
    def tokenizer_name(self) -> str:
        return type(self.tokenizer_).__name__

    def tok_encode(self, string: str, add_special_tokens=None, **kwargs) -> list[int]:
        """The context start, then the text's ids (lm-eval's convention for a model whose
        tokenizer adds BOS: `add_special_tokens=False` gives the text's ids alone)."""
        ids = [int(i) for i in self.tokenizer_.encode(string)]
        return ids if add_special_tokens is False else [self._prefix_id, *ids]

    def tok_decode(self, ids) -> str:
        return self.tokenizer_.decode(ids)

    # --- scoring
    @torch.inference_mode()
    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs):
        """requests: ((context, continuation) or None, context ids, continuation ids) ->
        [(sum of log p over the continuation, greedy)] in the same order."""
        rows = []
        for _, context, continuation in requests:
            if not continuation:
                raise ValueError("satsweep: an empty continuation has no likelihood")
            if len(continuation) > self.max_length:
                raise ValueError(
                    f"satsweep: a continuation of {len(continuation)} tokens exceeds the window "
                    f"max_seq_len {self.max_length}"
                )
            whole = (context + continuation)[-(self.max_length + 1) :]
            rows.append((whole[:-1], continuation))
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i][0]))
        results: list[tuple[float, bool] | None] = [None] * len(rows)
        for batch in _batches(order, self.batch_size):
            width = len(rows[batch[0]][0])
            x = torch.zeros(len(batch), width, dtype=torch.long)
            for j, i in enumerate(batch):
                x[j, : len(rows[i][0])] = torch.tensor(rows[i][0])
            logits = self.model(x.to(self._device))  # [B, T, V]
            for j, i in enumerate(batch):
                inputs, continuation = rows[i]
                n = len(continuation)
                # [n, V]: the positions predicting the continuation (log-softmax of those alone: a
                # [B, T, V] float copy is gigabytes at a 32k vocabulary and 4k positions)
                scores = F.log_softmax(logits[j, len(inputs) - n : len(inputs)].float(), dim=-1)
                target = torch.tensor(continuation, device=scores.device)
                logp = scores.gather(-1, target[:, None]).sum().item()
                greedy = bool((scores.argmax(-1) == target).all())
                results[i] = (logp, greedy)
                if requests[i][0] is not None:
                    self.cache_hook.add_partial("loglikelihood", requests[i][0], results[i])
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        windows, owner = [], []
        for k, request in enumerate(requests):
            (text,) = request.args
            for window in get_rolling_token_windows(
                token_list=self.tok_encode(text, add_special_tokens=False),
                prefix_token=self.prefix_token_id,
                max_seq_len=self.max_length,
                context_len=1,
            ):
                context, continuation = make_disjoint_window(window)
                windows.append((None, context, continuation))
                owner.append(k)
        totals = [0.0] * len(requests)
        for k, (logp, _) in zip(owner, self._loglikelihood_tokens(windows), strict=True):
            totals[k] += logp
        for request, total in zip(requests, totals, strict=True):
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, total)
        return totals

    # --- generation
    def _sampling(self, kwargs: dict) -> dict:
        unknown = sorted(set(kwargs) - set(GEN_KWARGS))
        if unknown:
            raise ValueError(
                f"satsweep: generation arguments {unknown} are not supported; allowed: {GEN_KWARGS}"
            )
        temperature = float(kwargs.get("temperature", 0.0)) if kwargs.get("do_sample", False) else 0.0
        return {"temperature": temperature, "top_k": kwargs.get("top_k"), "top_p": kwargs.get("top_p")}

    def _stop_on(self, until: list[str]):
        """Stop a row once its decoded new text holds one of the stop strings."""
        return lambda ids: any(s in self.tok_decode(ids) for s in until)

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        groups: dict[str, list[int]] = defaultdict(list)  # requests with the same arguments
        for k, request in enumerate(requests):
            groups[json.dumps(request.args[1], sort_keys=True, default=str)].append(k)
        out: list[str | None] = [None] * len(requests)
        for members in groups.values():
            kwargs = dict(requests[members[0]].args[1])
            until = kwargs.pop("until", None) or []
            until = [until] if isinstance(until, str) else list(until)
            max_gen = int(kwargs.pop("max_gen_toks", DEFAULT_MAX_GEN_TOKS))
            sampling = self._sampling(kwargs)
            keep = max(self.max_length - max_gen, self.max_length // 2)
            contexts = {k: self.tok_encode(requests[k].args[0])[-keep:] for k in members}
            order = sorted(members, key=lambda k: -len(contexts[k]))
            for batch in _batches(order, self.batch_size):
                prompts = [contexts[k] for k in batch]
                new_tokens = min(max_gen, self.max_length - max(len(p) for p in prompts))
                if new_tokens < max_gen:
                    log.info("satsweep: %d of max_gen_toks %d fit the window", new_tokens, max_gen)
                stop = self._stop_on(until) if until else None
                continuations = generate(
                    self.model, prompts, new_tokens, generator=self.generator, should_stop=stop, **sampling
                )
                for k, ids in zip(batch, continuations, strict=True):
                    text = self.tok_decode(ids)
                    for s in until:
                        text = text.split(s, 1)[0]
                    out[k] = text
                    self.cache_hook.add_partial("generate_until", requests[k].args, text)
        return out
