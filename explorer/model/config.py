"""The knobs that tell GPT-2, Llama and Marian apart.

One transformer implementation serves every family; a ``ModelConfig`` says which
variant of each building block to use. Nothing here knows where weights come from.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal

Norm = Literal["layer", "rms"]
Positions = Literal["learned", "sinusoidal", "rope", "relative"]
Activation = Literal["gelu", "gelu_tanh", "relu", "silu"]
LayerType = Literal["full", "sliding"]


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
    relative_buckets: int = 32  # T5's relative positions: distances binned (exact when small, log-spaced up to
    relative_max_distance: int = 128  # relative_max_distance), one learned number per bucket and head
    rotary_dim: int | None = None  # rotary on the first rotary_dim numbers of each head (Pythia: a quarter)
    parallel_residual: bool = False  # x + attn(norm1(x)) + ffn(norm2(x)) (GPT-NeoX/Pythia)
    activation: Activation = "gelu"
    gated_ffn: bool = False  # SwiGLU: down(act(gate(x)) * up(x))
    qkv_bias: bool = True
    qk_norm: bool = False  # RMSNorm on each head's query and key before rotary (Qwen3)
    attn_scale: float | None = None  # scores are q·k times this; None: 1/sqrt(head_dim) (Gemma 3 sets its own)
    # Sliding-window attention: a "sliding" layer's query reads only the last sliding_window
    # positions, itself included (Mistral: every layer; Gemma 3: five local layers per global one).
    sliding_window: int | None = None
    layer_types: list[LayerType] | None = None  # per decoder layer; None: all "sliding" if there is a window
    rope_local_theta: float | None = None  # the rotary base of the sliding layers, if not rope_theta (Gemma 3)
    sandwich_norm: bool = False  # a norm after each sublayer too: x + norm2(sublayer(norm1(x))) (Gemma 3)
    out_bias: bool = True
    ffn_bias: bool = True
    tie_embeddings: bool = True
    scale_embeddings: bool = False  # multiply token embeddings by sqrt(d_model)
    embedding_norm: bool = False  # a norm on the embeddings (plus positions) of each stack (BART, mBART)
    final_logits_bias: bool = False  # Marian adds a learned bias to the logits
    output_scale: float = 1.0  # the last residual is multiplied by this before the output head (T5: d_model^-0.5)
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
        if self.layer_types is not None:
            if len(self.layer_types) != self.n_layers or not set(self.layer_types) <= {"full", "sliding"}:
                raise ValueError(f"layer_types must give 'full' or 'sliding' for each of {self.n_layers} layers")
            if "sliding" in self.layer_types and not self.sliding_window:
                raise ValueError("sliding layers need a sliding_window")

    def layer_type(self, layer: int) -> LayerType:
        """Whether decoder layer ``layer`` reads every earlier position or a window of them."""
        if self.layer_types is not None:
            return self.layer_types[layer]
        return "sliding" if self.sliding_window else "full"

    def windows(self) -> list[int | None]:
        """Each decoder layer's sliding window (None: a global layer)."""
        return [self.window_of(i) for i in range(self.n_layers)]

    def window_of(self, layer: int) -> int | None:
        """How many positions (itself included) a query of decoder layer ``layer`` may read; None: all."""
        return self.sliding_window if self.layer_type(layer) == "sliding" else None

    @property
    def score_scale(self) -> float:
        """What q·k is multiplied by before softmax: 1/sqrt(head_dim) unless the family says otherwise."""
        return self.attn_scale if self.attn_scale is not None else self.head_dim**-0.5

    @property
    def queries_per_kv_head(self) -> int:
        """How many query heads share one key/value head (1 without grouped-query attention)."""
        return self.n_heads // self.n_kv_heads

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        return cls(**json.loads(text))
