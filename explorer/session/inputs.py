"""What a session is given, checked: a prompt or source sentence (turned into token ids), and the
tokens of an earlier run being restored.

Both are untrusted: what a person types may be empty, huge, hold lone surrogates or outgrow the
model's window; a saved session or link may be altered. Each refusal says what to do.
"""

from __future__ import annotations

from explorer.errors import InputError
from explorer.loading import LoadedModel
from explorer.model import ModelConfig

MAX_TEXT_CHARS = 100_000


def encode_input(loaded: LoadedModel, text: str, chat: bool, max_positions: int) -> list[int]:
    """The token ids of ``text``: a decoder's prompt (rendered through the chat template when
    ``chat``), or a translator's source sentence. ``max_positions``: the session's cap."""
    config = loaded.config
    what = "source sentence" if config.is_encoder_decoder else "prompt"
    _check_text(text, what)
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot be tokenized
    ids = _tokenize(loaded, text, chat and not config.is_encoder_decoder)
    if config.is_encoder_decoder:
        limit = config.max_positions  # the encoder's own window
    else:
        limit = max_positions - 1  # leave room for at least one new token
    if len(ids) > limit:
        raise InputError(
            f"The {what} is {len(ids):,} tokens long; this model and explorer take at most {limit:,} "
            f"(context window {config.max_positions:,}, explorer cap {max_positions:,}). Shorten it."
        )
    if not ids:
        raise InputError(f"The {what} produced no tokens; type some words.")
    return ids


def _check_text(text: str, what: str) -> None:
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"The {what} is empty: type some text, or pick an example.")
    if len(text) > MAX_TEXT_CHARS:
        raise InputError(
            f"The {what} has {len(text):,} characters; the explorer takes at most {MAX_TEXT_CHARS:,}. Shorten it."
        )


def _tokenize(loaded: LoadedModel, text: str, chat: bool) -> list[int]:
    tokenizer = loaded.tokenizer
    if not chat:
        return tokenizer(text)["input_ids"]
    if not loaded.has_chat_template:
        raise InputError("This model has no chat template; switch the chat template off.")
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
    )
    return tokenizer(rendered, add_special_tokens=False)["input_ids"]


def check_recorded_tokens(token_ids: list[int], room: int, max_positions: int, config: ModelConfig) -> None:
    """Refuse, before anything runs, generated tokens that could not have come from this model:
    more than the session has ``room`` for, or ids outside its vocabulary."""
    if len(token_ids) > room:
        raise InputError(
            f"It holds {len(token_ids):,} generated tokens; this explorer holds at most "
            f"{max_positions:,} positions in all."
        )
    vocab = config.vocab_size
    for i, token in enumerate(token_ids):
        if not 0 <= token < vocab:
            raise InputError(
                f"Its generated token {i} is id {token}, outside this model's vocabulary (0 to {vocab - 1}): "
                "it was altered, or made for another model."
            )


def check_token_id(token_id: int, config: ModelConfig) -> None:
    if not 0 <= int(token_id) < config.vocab_size:
        raise InputError(f"token id {token_id} is outside the vocabulary (0 to {config.vocab_size - 1})")


def decoder_start_id(config: ModelConfig) -> int:
    """The token a translator's decoder starts from."""
    start = config.decoder_start_token_id
    return start if start is not None else config.pad_token_id
