"""The page's components by name: each part of the layout adds its own, once.

Callbacks read and return values keyed by these names; ``explorer.ui.wiring.on`` turns the names
into components. A name is written where its component is made (``page.add(name=component)``),
nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import gradio as gr


class Placed(Protocol):
    """What the page reads of a feature (``explorer.ui.feature.Feature``, which imports this module)
    to lay it out."""

    places: tuple[str, ...]
    layout: Callable[[Page, str], None] | None


class Page:
    """Every component of the page that a callback reads or changes, by name."""

    def __init__(self) -> None:
        self._components: dict[str, gr.components.Component | gr.blocks.BlockContext] = {}
        # The features' hooks after every event (explorer.ui.feature), called by wiring.on.
        self.after_event: tuple[Callable[[tuple, object], None], ...] = ()
        # Every feature (the registry, set by the frame) and the key the browser's kept values are
        # encrypted with (gr.BrowserState's secret), for the features' layouts.
        self.features: tuple[Placed, ...] = ()
        self.browser_secret = ""

    def lay_out(self, place: str) -> None:
        """The features placed at ``place``, in the registry's order: the frame's places, and those
        a feature opens inside itself (the Workshop inside the Lessons panel)."""
        for feature in self.features:
            if place in feature.places:
                feature.layout(self, place)

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
