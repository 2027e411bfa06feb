"""Token ids -> the text a person should see for each token.

Tokenizers store pieces in private alphabets: byte-level BPE writes a space as "Ġ" and
splits a multi-byte character over several tokens; SentencePiece writes a space as "▁".
Decoding a token in the context of the few before it gives the real text it adds.
"""

from __future__ import annotations

import contextlib
import unicodedata

CONTEXT = 6  # tokens of left context; enough to complete any UTF-8 character


def continuation_texts(tokenizer, context: list[int], candidates: list[int]) -> list[str]:
    """The text each candidate token would add after ``context`` (one batched decode)."""
    return continuation_texts_of_rows(tokenizer, [context], [candidates])[0]


def continuation_texts_of_rows(tokenizer, contexts: list[list[int]], candidates: list[list[int]]) -> list[list[str]]:
    """``continuation_texts`` for many rows (a batched step's sessions) in two batched decodes:
    row i's candidates ``candidates[i]`` after ``contexts[i]``; the same texts as row by row."""
    special = _special_ids(tokenizer)
    if _is_sentencepiece(tokenizer):
        # A SentencePiece piece is its own text, "▁" marking a space; decoding would move
        # spaces between pieces (a lone "▁" decodes to nothing at the end of a text).
        return [_pieces_as_text(tokenizer, row, special) for row in candidates]
    windows = [_window(context, special) for context in contexts]
    # Earlier pieces that end in half a character decode to U+FFFD; the piece that
    # completes the character is the one that shows it.
    befores = [text.rstrip("\ufffd") for text in tokenizer.batch_decode(windows)]
    throughs = iter(tokenizer.batch_decode([[*w, c] for w, row in zip(windows, candidates, strict=True) for c in row]))
    return [
        [_added_text(tokenizer, token_id, before, next(throughs), special) for token_id in row]
        for before, row in zip(befores, candidates, strict=True)
    ]


def _pieces_as_text(tokenizer, candidates: list[int], special: set[int]) -> list[str]:
    pieces = tokenizer.convert_ids_to_tokens(list(candidates))
    return [p if c in special else p.replace("▁", " ") for c, p in zip(candidates, pieces, strict=True)]


def _window(context: list[int], special: set[int]) -> list[int]:
    """The last ``CONTEXT`` tokens of ``context``, less the special tokens it begins with."""
    window = context[-CONTEXT:]
    while window and window[0] in special:
        window = window[1:]
    return window


def _added_text(tokenizer, token_id: int, before: str, through: str, special: set[int]) -> str:
    """The text ``token_id`` adds: the decode ``through`` it less the decode ``before`` it."""
    if token_id in special:
        return tokenizer.convert_ids_to_tokens(token_id)
    text = through[len(before) :] if through.startswith(before) else tokenizer.decode([token_id])
    if "\ufffd" in text:  # only part of a multi-byte character: show its bytes
        text = _bytes_of(tokenizer.convert_ids_to_tokens(token_id))
    return text


def piece_text(tokenizer, ids: list[int], index: int) -> str:
    """The text token ``ids[index]`` adds after the tokens before it."""
    return continuation_texts(tokenizer, ids[:index], [ids[index]])[0]


def piece_texts(tokenizer, ids: list[int]) -> list[str]:
    return [piece_text(tokenizer, ids, i) for i in range(len(ids))]


INVISIBLE_NAMES = {"\u200b": "ZWSP", "\u200c": "ZWNJ", "\u200d": "ZWJ", "\u2060": "WJ", "\ufeff": "BOM",
                   "\u00ad": "SHY", "\ufe0e": "VS15", "\ufe0f": "VS16"}  # fmt: skip
MARKS = ("Mn", "Me")  # combining marks and variation selectors: drawn on the character before them


def visible(text: str) -> str:
    """Make whitespace visible for labels: spaces as ·, newlines as ⏎, tabs as ⇥; characters that
    draw nothing (a zero-width joiner, a variation selector) by name, e.g. ⟨ZWJ⟩."""
    if text == "":
        return "∅"
    alone = all(unicodedata.category(ch) in MARKS for ch in text)  # nothing here to draw them on
    text = "".join(_shown(ch, alone) for ch in text)
    return text.replace(" ", "·").replace("\n", "⏎").replace("\t", "⇥").replace("\r", "␍")


def _shown(ch: str, marks_alone: bool) -> str:
    """A character as itself, or by name when it draws nothing: a format character (a zero-width
    joiner), or a mark with no character before it in the piece."""
    category = unicodedata.category(ch)
    if category == "Cf" or (marks_alone and category in MARKS):
        return f"⟨{INVISIBLE_NAMES.get(ch, f'U+{ord(ch):04X}')}⟩"
    return ch


def _is_sentencepiece(tokenizer) -> bool:
    """Marian's slow tokenizer keeps its SentencePiece models; their pieces are plain text."""
    return hasattr(tokenizer, "spm_source") or hasattr(tokenizer, "sp_model")


def _special_ids(tokenizer) -> set[int]:
    cached = getattr(tokenizer, "_explorer_special_ids", None)
    if cached is None:
        cached = set(tokenizer.all_special_ids)
        with contextlib.suppress(AttributeError):
            tokenizer._explorer_special_ids = cached
    return cached


def _bytes_of(token: str) -> str:
    """A byte-level BPE piece as hex bytes, e.g. '<e2 80>'."""
    try:
        data = bytes(_BYTE_DECODER[ch] for ch in token)
    except KeyError:
        return token
    return "<" + " ".join(f"{b:02x}" for b in data) + ">"


def _byte_decoder() -> dict[str, int]:
    """GPT-2's reversible map from bytes to printable characters, inverted."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


_BYTE_DECODER = _byte_decoder()
