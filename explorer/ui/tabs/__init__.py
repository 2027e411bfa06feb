"""The views' tabs on the page: one module per tab (its layout, explanation, figures and own
events), listed once, with its id and title, in the registry ``explorer.present.tabs`` (plain data,
read without the page by links, lessons and saved sessions)."""

from __future__ import annotations

import importlib
from types import ModuleType

from explorer.present.tabs import Tab


def code(tab: Tab) -> ModuleType:
    """The module that lays out ``tab`` and draws its figures: ``explorer/ui/tabs/<tab.module>.py``."""
    return importlib.import_module(f"{__name__}.{tab.module}")
