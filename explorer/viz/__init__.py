"""Arrays and token strings -> figures. No torch, no gradio: testable on their own."""

from .charts import timing_chart
from .heatmap import attention_heatmap, layer_profile_heatmap
from .lens import logit_lens_heatmap
from .roles import role_at, role_grid
from .thumbnails import head_at, head_grid, head_thumbnails

__all__ = [
    "attention_heatmap", "head_at", "head_grid", "head_thumbnails", "layer_profile_heatmap", "logit_lens_heatmap",
    "role_at", "role_grid", "timing_chart",
]  # fmt: skip
