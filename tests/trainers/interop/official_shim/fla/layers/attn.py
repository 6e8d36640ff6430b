"""fla.layers.attn.Attention in plain torch: separate q/k/v/o projections, qk norms (fla RMSNorm,
eps 1e-5, fp32 weights), rotate-half rotary, causal GQA attention."""

import torch
from flash_attn import flash_attn_func
from torch import nn

from fla.modules import RMSNorm, RotaryEmbedding


class Attention(nn.Module):
    def __init__(
        self,
        hidden_size=2048,
        num_heads=32,
        num_kv_heads=None,
        qkv_bias=False,
        qk_norm=False,
        window_size=None,
        rope_theta=10000.0,
        max_position_embeddings=None,
        layer_idx=None,
    ):
        super().__init__()
        assert window_size is None
        self.num_heads = num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.head_dim = hidden_size // num_heads
        kv_dim = self.num_kv_heads * self.head_dim
        self.qk_norm, self.layer_idx = qk_norm, layer_idx
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=qkv_bias)
        self.k_proj = nn.Linear(hidden_size, kv_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden_size, kv_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        if qk_norm:
            self.q_norm = RMSNorm(self.head_dim, dtype=torch.float32)
            self.k_norm = RMSNorm(self.head_dim, dtype=torch.float32)
        self.rotary = RotaryEmbedding(dim=self.head_dim, base=rope_theta)

    def forward(
        self,
        hidden_states,
        attention_mask=None,
        past_key_values=None,
        output_attentions=False,
        use_cache=False,
        **kwargs,
    ):
        assert attention_mask is None and past_key_values is None
        b, t, _ = hidden_states.shape
        q = self.q_proj(hidden_states).unflatten(-1, (-1, self.head_dim))
        k = self.k_proj(hidden_states).unflatten(-1, (-1, self.head_dim))
        v = self.v_proj(hidden_states).unflatten(-1, (-1, self.head_dim))
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = self.rotary(q, k)
        o = flash_attn_func(q, k, v, causal=True)
        return self.o_proj(o.reshape(b, t, -1)), None, past_key_values
