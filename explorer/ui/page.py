"""The page's components by name: each part of the layout adds its own, once.

Callbacks read and return values keyed by these names; ``explorer.ui.wiring.on`` turns the names
into components. A name is written where its component is made (``page.add(name=component)``),
nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr


class Page:
    """Every component of the page that a callback reads or changes, by name."""

    def __init__(self) -> None:
        self._components: dict[str, gr.components.Component | gr.blocks.BlockContext] = {}
        # The features' hooks after every event (explorer.ui.feature), called by wiring.on.
        self.after_event: tuple[Callable[[tuple, object], None], ...] = ()

    def add(self, **components) -> None:
        for name, component in components.items():
            if name in self._components:
                raise ValueError(f"two components are named {name!r}")
            self._components[name] = component

    def __getattr__(self, name: str):
        components = self.__dict__.get("_components", {})
        if name not in components:
            raise AttributeError(f"the page has no component named {name!r}")
        return components[name]

    def names(self) -> list[str]:
        return list(self._components)

    def pick(self, *names: str) -> list:
        """The components with these names, in order (an event's inputs or outputs)."""
        return [getattr(self, name) for name in names]
