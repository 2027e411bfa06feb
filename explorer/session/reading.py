"""What a session shows, read from what it kept: attention computed on demand from the kept
queries and keys (``attention_store.py``; masked where a cache policy had evicted a key), and its
tokens as text. ``SessionReading`` is a part of ``SessionCore`` (core.py).
"""

from __future__ import annotations

import numpy as np


class SessionReading:
    """The views' reads of a session (``SessionCore`` holds what they read)."""

    def self_attention(self, layer: int, first: int = 0, last: int | None = None) -> np.ndarray:
        """(heads, queries, T) decoder self-attention of the queries at positions first .. last - 1
        (by default every position: (heads, T, T)), computed now from the kept queries and keys."""
        self._require_attention_kept()
        return self.attention.self_attention(layer, first, last)

    def query_attention(self, position: int) -> np.ndarray:
        """(layers, heads, position + 1) what the token at ``position`` read, in every layer."""
        self._require_attention_kept()
        return self.attention.query_attention(position, len(self.token_ids))

    def _require_attention_kept(self) -> None:
        self.cache_plan.refuse_views()

    def evicted(self, layer: int, first: int = 0, last: int | None = None) -> np.ndarray | None:
        """(kv_heads, queries, T) True where the cache policy had evicted the key before the query
        at that row ran (for the queries at positions first .. last - 1); None without eviction."""
        n = len(self.token_ids)
        return self.cache_plan.evicted(layer, first, n if last is None else last, n)

    def cross_attention(self, layer: int) -> np.ndarray:
        """(heads, T, S) cross-attention of every target token over the source."""
        return self.attention.cross_attention(layer)

    def encoder_attention(self, layer: int) -> np.ndarray:
        """(heads, S, S) encoder self-attention over the source."""
        return self.attention.encoder_attention(layer)

    # ------------------------------------------------------------------ text
    def token_texts(self) -> list[str]:
        """What each token of ``token_ids`` shows as text (byte pieces as their bytes)."""
        return list(self._token_texts)

    def source_texts(self) -> list[str]:
        return list(self._source_texts)

    def token_kinds(self) -> list[str]:
        """Where each token of ``token_ids`` came from: "prompt" (a decoder's input), "start" (a
        translator's start token), "generated" (the model's choice) or "forced" (the user's)."""
        forced = {s.position for s in self.steps if s.forced}
        given = "start" if self.is_encoder_decoder else "prompt"
        kinds = [given] * self.prompt_length
        kinds += ["forced" if i in forced else "generated" for i in range(self.prompt_length, len(self.token_ids))]
        return kinds

    def generated_text(self) -> str:
        return self.tokenizer.decode(self.generated_ids, skip_special_tokens=True)
