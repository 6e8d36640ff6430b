"""transformers' causal LM around a satsweep `arch` model (vendored beside this file).

The weights are arch's own, under `model.` (`model.blocks.0.attn.qkv_proj.weight`, ...); the
forward is arch's, so the logits are arch's. Generation uses arch's key/value cache
(`arch_decoding.KVCache`: K and the design-mixed V' of every layer, a row's rotary positions
counted from its first real token, so left padding is exact) passed through `cache`: the model
makes it on the first forward of `generate` and hands it back in its output.

Written into an export folder by the satsweep project's trainers.export."""

import torch
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .arch_config import ModelConfig
from .arch_decoding import KVCache
from .arch_designs import __name__ as _designs  # noqa: F401  (imported: registers every design)
from .arch_layers import Rotary
from .arch_model import Transformer
from .configuration_satsweep import SatsweepConfig


class SatsweepCache(KVCache):
    """arch's cache with what transformers' generate asks of a cache: its length, and a
    reordering of its rows for beam search."""

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Beam search: row b continues from row beam_idx[b] (its K, V' and which slots are real)."""
        for store in (self.keys, self.values):
            for layer, kv in enumerate(store):
                if kv is not None:
                    store[layer] = kv.index_select(0, beam_idx.to(kv.device))
        rows = beam_idx.cpu()
        self.valid, self.seen = self.valid[rows], self.seen[rows]


class SatsweepForCausalLM(PreTrainedModel, GenerationMixin):
    config_class = SatsweepConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules = ["Block"]
    _supports_sdpa = True

    def __init__(self, config: SatsweepConfig):
        super().__init__(config)
        self.model = Transformer(ModelConfig.from_dict(config.arch))
        tied = {"model.head.weight": "model.embed.weight"}  # arch ties them itself; transformers asks
        self._tied_weights_keys = tied if config.tie_word_embeddings else {}
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module):
        """Only the rotary tables: arch initialises its own weights when it builds them and
        from_pretrained overwrites every one, but it builds the model on the meta device, so the
        tables (buffers computed at construction, not saved) are computed again here."""
        if isinstance(module, Rotary):
            arch = self.model.cfg
            with torch.device("cpu"):
                fresh = Rotary(arch.head_dim, arch.max_seq_len, arch.rope_base)
            for name, table in fresh.named_buffers():
                getattr(module, name).copy_(table)

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # the model makes arch's own cache (SatsweepCache) on the first forward

    def get_input_embeddings(self):
        return self.model.embed

    def get_output_embeddings(self):
        return self.model.head

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        cache: SatsweepCache | None = None,
        use_cache: bool | None = None,
        labels: torch.LongTensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ):
        """input_ids [B, T] -> logits [B, T, vocab]. With a cache (or use_cache): input_ids follow
        the cached tokens, and `attention_mask` covers cached and new tokens (transformers' form;
        arch's cache takes the new tokens' columns)."""
        if cache is None and use_cache:
            cache = SatsweepCache(
                self.config.num_hidden_layers, input_ids.shape[0], self.config.max_position_embeddings,
                self.config.max_position_embeddings,
            )  # fmt: skip
        mask = None
        if attention_mask is not None:
            mask = attention_mask[:, -input_ids.shape[1] :]
            if cache is None and bool(mask.all()):
                mask = None  # no padding: the plain forward
        logits = self.model(input_ids, cache=cache, attention_mask=mask)
        loss = None
        if labels is not None:
            loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100
            )
        return CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache if use_cache else None)
