"""transformers' config of a satsweep model: the `arch` model config under `arch`, and the
transformers names (vocab_size, hidden_size, ...) that generate, lm-eval and the hub read.

Written into an export folder by the satsweep project's trainers.export."""

from transformers import PretrainedConfig


class SatsweepConfig(PretrainedConfig):
    model_type = "satsweep"

    def __init__(self, arch: dict | None = None, **kwargs):
        self.arch = dict(arch or {})
        heads = self.arch.get("n_heads", 4)
        # What transformers and its users read by these names; `arch` is what builds the model.
        self.vocab_size = self.arch.get("vocab_size", 256)
        self.hidden_size = self.arch.get("d_model", 128)
        self.num_hidden_layers = self.arch.get("n_layers", 4)
        self.num_attention_heads = heads
        self.num_key_value_heads = self.arch.get("n_kv_heads") or heads
        self.intermediate_size = self.arch.get("d_ff", 384)
        self.max_position_embeddings = self.arch.get("max_seq_len", 256)
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "num_key_value_heads", "intermediate_size", "max_position_embeddings"):  # fmt: skip
            kwargs.pop(name, None)  # derived from `arch` above, never set twice
        kwargs["tie_word_embeddings"] = self.arch.get("tie_embeddings", True)
        super().__init__(**kwargs)
