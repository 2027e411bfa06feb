"""The knobs that tell GPT-2, Llama and Marian apart.

One transformer implementation serves every family; a ``ModelConfig`` says which
variant of each building block to use. Nothing here knows where weights come from.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal

Norm = Literal["layer", "rms"]
Positions = Literal["learned", "sinusoidal", "rope"]
Activation = Literal["gelu", "gelu_tanh", "relu", "silu"]


@dataclass
class ModelConfig:
    """Architecture of one checkpoint.

    Widths: ``d_model`` is the residual stream, ``d_ff`` the feed-forward hidden layer,
    ``head_dim`` the size of one attention head (``d_model // n_heads`` unless given).
    """

    family: str  # the checkpoint's model_type ("gpt2", "llama", "gpt_neox", "marian", ...), for display
    vocab_size: int
    d_model: int
    n_layers: int  # decoder layers
    n_heads: int
    d_ff: int
    max_positions: int  # the context window
    n_kv_heads: int | None = None  # grouped-query attention; None means n_heads
    head_dim: int | None = None
    norm: Norm = "layer"
    norm_eps: float = 1e-5
    norm_first: bool = True  # pre-norm (GPT-2, Llama) or post-norm (2017 paper, Marian)
    final_norm: bool = True  # a norm after the last layer (pre-norm models need one)
    positions: Positions = "learned"
    rope_theta: float = 10000.0
    rotary_dim: int | None = None  # rotary on the first rotary_dim numbers of each head (Pythia: a quarter)
    parallel_residual: bool = False  # x + attn(norm1(x)) + ffn(norm2(x)) (GPT-NeoX/Pythia)
    activation: Activation = "gelu"
    gated_ffn: bool = False  # SwiGLU: down(act(gate(x)) * up(x))
    qkv_bias: bool = True
    qk_norm: bool = False  # RMSNorm on each head's query and key before rotary (Qwen3)
    out_bias: bool = True
    ffn_bias: bool = True
    tie_embeddings: bool = True
    scale_embeddings: bool = False  # multiply token embeddings by sqrt(d_model)
    final_logits_bias: bool = False  # Marian adds a learned bias to the logits
    is_encoder_decoder: bool = False
    n_encoder_layers: int = 0
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    pad_token_id: int | None = None
    decoder_start_token_id: int | None = None  # Marian starts decoding from the pad token
    extra: dict = field(default_factory=dict)  # free-form provenance, never read by the model

    def __post_init__(self) -> None:
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
            self.head_dim = self.d_model // self.n_heads
        if self.rotary_dim is None:
            self.rotary_dim = self.head_dim
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}")
        if self.is_encoder_decoder and self.n_encoder_layers < 1:
            raise ValueError("an encoder-decoder model needs n_encoder_layers >= 1")

    @property
    def queries_per_kv_head(self) -> int:
        """How many query heads share one key/value head (1 without grouped-query attention)."""
        return self.n_heads // self.n_kv_heads

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        return cls(**json.loads(text))
