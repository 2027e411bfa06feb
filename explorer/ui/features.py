"""Every feature of the page, listed once: the view tabs (their modules, from the registry
``explorer.present.tabs``) and the panels (``explorer.ui.panels``). The page's frame reads what a
feature does through its record (``explorer.ui.feature.Feature``), never by its name."""

from __future__ import annotations

from explorer.present.tabs import TABS, Tab
from explorer.ui.feature import AfterEvent, Feature
from explorer.ui.panels.lessons import LESSONS
from explorer.ui.panels.model_choice import MODEL_CHOICE
from explorer.ui.panels.save_and_share import SAVE_AND_SHARE
from explorer.ui.panels.workshop import WORKSHOP
from explorer.ui.tabs import code


def tab_feature(tab: Tab) -> Feature:
    """A view tab's module as a feature (its ``wire`` and ``routes`` are optional)."""
    module = code(tab)
    return Feature(
        tab.id, wire=getattr(module, "wire", None), figures=module.figures, routes=getattr(module, "routes", None)
    )


FEATURES: tuple[Feature, ...] = (*(tab_feature(tab) for tab in TABS), LESSONS, WORKSHOP, MODEL_CHOICE, SAVE_AND_SHARE)


def after_event_hooks() -> tuple[AfterEvent, ...]:
    return tuple(feature.after_event for feature in FEATURES if feature.after_event is not None)
