"""Images sent to the page as PNG files written here, at zlib's fastest level.

Gradio encodes a PIL image at the default level: 13-19 ms for the all-heads grid, on every Step.
Level 1 takes ~6 ms for a file within 10% of the size. The file is written where Gradio keeps its
cache, in a folder named by its content as Gradio names its own, so Gradio serves it without
copying it and its cache clean-up (``delete_cache``) removes it.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from pathlib import Path

from explorer.present.views import ExplorerState, heads_grid_image

FASTEST = 1  # zlib's level: the image is small and goes to a browser on the same network


def png_file(image) -> str:
    """The path of ``image`` (a PIL image) saved as PNG in Gradio's cache."""
    # Imported here: a module of the page that needs Gradio only when it writes a file.
    from explorer.ui.gradio_private import upload_folder

    with io.BytesIO() as buffer:
        image.save(buffer, format="png", compress_level=FASTEST)
        data = buffer.getvalue()
    folder = Path(upload_folder()) / hashlib.sha256(data).hexdigest()[:40]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "image.png"
    if not path.exists():  # the same image again (an undo and a redo): the same file
        # Written aside and renamed: a page fetching the file never reads half of it.
        partial = folder / f"image.{threading.get_ident()}.part"
        partial.write_bytes(data)
        os.replace(partial, path)
    return str(path)


def heads_image(state: ExplorerState) -> str:
    """Every head of the layer in one image, as a PNG file's path (``viz.head_at`` reads a click on it)."""
    return png_file(heads_grid_image(state))
