"""Small images of every head's attention, for the all-heads grid."""

from __future__ import annotations

import numpy as np

MASK_RGB = np.array([189, 189, 189], dtype=np.float32)
LOW_RGB = np.array([255, 255, 255], dtype=np.float32)
HIGH_RGB = np.array([8, 48, 107], dtype=np.float32)


def head_thumbnails(attention: np.ndarray, causal: bool, size: int = 160, gamma: float = 0.5) -> list[np.ndarray]:
    """(heads, queries, keys) -> one (size, size, 3) uint8 image per head.

    A square gamma makes small weights visible; masked future cells are grey.
    """
    heads, n_q, n_k = attention.shape
    out = []
    offset = n_k - n_q
    masked = np.arange(n_k)[None, :] > (np.arange(n_q)[:, None] + offset) if causal else np.zeros((n_q, n_k), bool)
    for h in range(heads):
        w = np.clip(attention[h], 0.0, 1.0) ** gamma  # (Q, K)
        rgb = LOW_RGB + (HIGH_RGB - LOW_RGB) * w[..., None]  # (Q, K, 3)
        rgb[masked] = MASK_RGB
        scale_q, scale_k = max(1, size // n_q), max(1, size // n_k)
        image = np.repeat(np.repeat(rgb, scale_q, axis=0), scale_k, axis=1)
        out.append(image.astype(np.uint8))
    return out
