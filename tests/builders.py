"""Tiny random checkpoints, built offline with transformers, saved as Hugging Face folders.

They exercise the same loaders as real checkpoints: GPT-2 (Conv1D, fused QKV, learned
positions), Llama (RMSNorm, RoPE, SwiGLU, grouped-query attention) and Marian (post-norm,
sinusoidal positions, cross-attention, final logits bias).
"""

from __future__ import annotations

from pathlib import Path

import torch

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Transformers generate text one token at a time.",
    "def add(a, b):\n    return a + b\n",
    "Attention is all you need, said the paper in 2017.",
    "twenty-one einundzwanzig three hundred and forty-two dreihundertzweiundvierzig",
    "Wednesday, March 3, 2021 Mittwoch, 3. März 2021 at 7:30 PM um 19:30",
] * 4


def byte_bpe_tokenizer(folder: Path, vocab_size: int = 320):
    """A GPT-2 style byte-level BPE tokenizer trained on a few sentences."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS, vocab_size=vocab_size, min_frequency=1, special_tokens=["<|endoftext|>"])
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>", bos_token="<|endoftext|>"
    )
    return tokenizer


def tiny_gpt2(folder: Path, seed: int = 0) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = byte_bpe_tokenizer(folder)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=128, n_embd=64, n_layer=3, n_head=4,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    return _save(GPT2LMHeadModel(config), tokenizer, folder, seed)


def tiny_llama(folder: Path, seed: int = 0) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = byte_bpe_tokenizer(folder)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=96, intermediate_size=160, num_hidden_layers=3,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=256, rope_theta=10000.0,
        tie_word_embeddings=True, bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    return _save(LlamaForCausalLM(config), tokenizer, folder, seed)


# The newer families' tiny checkpoints: the same small shape, each with what makes its family.
SMALL = {"hidden_size": 96, "num_hidden_layers": 3, "num_attention_heads": 6, "max_position_embeddings": 256}


def _tiny_decoder(folder: Path, seed: int, family: str, random_biases: bool = False, **settings) -> Path:
    """A tiny random ``family`` checkpoint (transformers' own classes) with our byte-level
    tokenizer. ``random_biases``: freshly built biases are zeros, which would hide a missing or
    misplaced one (a row of a fused matrix)."""
    import transformers

    config_class, model_class = (getattr(transformers, f"{family}{kind}") for kind in ("Config", "ForCausalLM"))
    tokenizer = byte_bpe_tokenizer(folder)
    torch.manual_seed(seed)
    ends = {"bos_token_id": tokenizer.eos_token_id, "eos_token_id": tokenizer.eos_token_id}
    model = model_class(config_class(vocab_size=len(tokenizer), **SMALL, **ends, **settings))
    if random_biases:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("bias") and "norm" not in name:
                    p.normal_(0, 0.3)
    return _save(model, tokenizer, folder, seed)


def tiny_qwen2(folder: Path, seed: int = 0) -> Path:
    """Llama's design with biases on q, k and v."""
    return _tiny_decoder(folder, seed, "Qwen2", random_biases=True, intermediate_size=160, num_key_value_heads=2)


def tiny_qwen3(folder: Path, seed: int = 0) -> Path:
    """Qwen3: q/k norms (randomised with the other norms) and a head size not d_model / heads."""
    return _tiny_decoder(
        folder, seed, "Qwen3", intermediate_size=160, num_key_value_heads=2, head_dim=24, tie_word_embeddings=True
    )


def tiny_opt(folder: Path, seed: int = 0) -> Path:
    """OPT: ReLU, biases everywhere, a position table offset by two rows."""
    return _tiny_decoder(folder, seed, "OPT", random_biases=True, ffn_dim=160, word_embed_proj_dim=96)


def tiny_gpt_neox(folder: Path, seed: int = 0) -> Path:
    """Pythia's design: parallel residual, rotary on a quarter of each head, fused per-head qkv."""
    return _tiny_decoder(
        folder, seed, "GPTNeoX", random_biases=True, intermediate_size=160, rotary_pct=0.25,
        use_parallel_residual=True,
    )  # fmt: skip


def tiny_mistral(folder: Path, seed: int = 0, window: int = 4096) -> Path:
    """Mistral; by default its sliding window is longer than the context, and never applies."""
    return _tiny_decoder(
        folder, seed, "Mistral", intermediate_size=160, num_key_value_heads=2, head_dim=16, sliding_window=window
    )


def tiny_phi3(folder: Path, seed: int = 0, partial_rotary: float = 1.0) -> Path:
    """Phi-3: fused qkv_proj and gate_up_proj, split on loading."""
    return _tiny_decoder(
        folder, seed, "Phi3", intermediate_size=160, num_key_value_heads=2, sliding_window=None,
        partial_rotary_factor=partial_rotary, pad_token_id=0,
    )  # fmt: skip


def tiny_gemma3(folder: Path, seed: int = 0, window: int = 6, vocab_size: int = 320) -> Path:
    """Gemma 3: sliding layers (a window of 6) between global ones, each kind with its own rotary
    base; norms around each sublayer (stored as weight - 1), q/k norms, GeGLU, scores
    scaled by 1/sqrt(query_pre_attn_scalar) with that scalar not the head size. ``vocab_size``: another
    one than the other tiny families' cuts the same text into other tokens."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    tokenizer = byte_bpe_tokenizer(folder, vocab_size)
    torch.manual_seed(seed)
    config = Gemma3TextConfig(
        vocab_size=len(tokenizer), hidden_size=96, intermediate_size=160, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, query_pre_attn_scalar=24,
        max_position_embeddings=256, sliding_window=window,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}},
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=0,
    )  # fmt: skip
    return _save(Gemma3ForCausalLM(config), tokenizer, folder, seed)


def tiny_marian(folder: Path, seed: int = 0, never_end: bool = True) -> Path:
    """A tiny random Marian translator. ``never_end`` makes the end token improbable, so
    that greedy decoding of random weights runs long enough to test the cache."""
    from transformers import AutoTokenizer, MarianConfig, MarianMTModel

    from explorer.train.tokenizer import build_marian_tokenizer

    build_marian_tokenizer(CORPUS, CORPUS, folder, vocab_size=240)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(seed)
    config = MarianConfig(
        vocab_size=len(tokenizer), decoder_vocab_size=len(tokenizer), d_model=64, encoder_layers=2,
        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
        decoder_ffn_dim=128, max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.pad_token_id,
        forced_eos_token_id=tokenizer.eos_token_id, activation_function="swish", scale_embedding=True,
    )  # fmt: skip
    model = MarianMTModel(config).eval()
    _randomise_norms(model, seed)
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 0.5)
        if never_end:
            model.final_logits_bias[0, tokenizer.eos_token_id] = -100.0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_bart(folder: Path, seed: int = 0, kind: str = "Bart") -> Path:
    """A tiny random BART (post-norm) or mBART (``kind="MBart"``: pre-norm, final norms, scaled
    embeddings): learned positions offset by two rows, a norm on each stack's embeddings; the
    end token made improbable, as the tiny Marian's, so that greedy decoding runs long."""
    import transformers
    from transformers import AutoTokenizer

    from explorer.train.tokenizer import build_marian_tokenizer

    build_marian_tokenizer(CORPUS, CORPUS, folder, vocab_size=240)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(seed)
    config = getattr(transformers, f"{kind}Config")(
        vocab_size=len(tokenizer), d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, forced_eos_token_id=None, scale_embedding=kind == "MBart",
    )  # fmt: skip
    model = getattr(transformers, f"{kind}ForConditionalGeneration")(config).eval()
    _randomise_norms(model, seed)
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 0.5)
        model.final_logits_bias[0, tokenizer.eos_token_id] = -100.0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_t5(folder: Path, seed: int = 0, gated: bool = False) -> Path:
    """A tiny random T5 (ReLU, output scaled by 1/sqrt(d_model)) or, ``gated``, a Flan-T5 kind
    (gated GELU): relative position buckets (8 of them, log-spaced up to 20) with random biases,
    a head size not d_model / heads, more decoder than encoder layers. The end token's row of
    the table is zero, so its logit is 0 while the others are random: greedy decoding runs long."""
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    from explorer.train.tokenizer import build_marian_tokenizer

    build_marian_tokenizer(CORPUS, CORPUS, folder, vocab_size=240)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(seed)
    config = T5Config(
        vocab_size=len(tokenizer), d_model=64, d_kv=24, d_ff=128, num_layers=2, num_decoder_layers=3, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=20,
        feed_forward_proj="gated-gelu" if gated else "relu", tie_word_embeddings=not gated,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    model = T5ForConditionalGeneration(config).eval()
    _randomise_norms(model, seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "relative_attention_bias" in name:
                p.normal_(0, 1.0)
        if gated:  # unscaled outputs: a smaller table keeps the logits in a range worth sampling from
            model.shared.weight.mul_(0.05)
        model.shared.weight[tokenizer.eos_token_id] = 0
        model.lm_head.weight[tokenizer.eos_token_id] = 0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _save(model: torch.nn.Module, tokenizer, folder: Path, seed: int) -> Path:
    _randomise_norms(model.eval(), seed)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _randomise_norms(model: torch.nn.Module, seed: int) -> None:
    """Freshly built norms are all ones and zeros; random ones catch swapped weights."""
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.split(".")[-2].startswith("ln"):
                p.add_(torch.randn(p.shape, generator=generator) * 0.1)


def stepped(checkpoint: Path, text: str, steps: int):
    """A session of ``text`` on a checkpoint folder, stepped ``steps`` times (greedy; fewer if
    its text ends first)."""
    import explorer

    session = explorer.GenerationSession(explorer.load_model(str(checkpoint)), text)
    for _ in range(steps):
        if not session.finished:
            session.step()
    return session


# A text for each tiny family that its tokenizer reads (the translator's: a number).
FAMILY_TEXTS = {"gpt2": "The quick brown fox jumps", "llama": "Attention is all you need", "marian": "twenty-one"}
