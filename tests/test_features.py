"""The page as features (issue 42, item 2): every view tab and panel is one record of one contract
(``explorer.ui.feature.Feature``) in one registry (``explorer.ui.features``); the page's frame
names none of them, and a tab's state holds only typed slices."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from explorer.present.tabs import TABS
from explorer.present.views import ExplorerState
from explorer.ui.feature import Feature
from explorer.ui.features import FEATURES, after_event_hooks
from explorer.ui.page import Page
from explorer.ui.wiring import on

UI = Path(__file__).parents[1] / "explorer" / "ui"
FRAME = ("layout.py", "app.py", "wiring.py")
# What names a feature in the frame's code: its module, its components' and callbacks' names.
NAMES = {
    **{tab.id: (tab.module,) for tab in TABS},
    "workshop": ("workshop",),
    "lessons": ("lesson",),
    "save and share": ("save_", "export", "link_button", "open_file", "save_and_share"),
    "model choice": ("custom_model", "model_choice", "on_model_change"),
}


@pytest.mark.parametrize("feature", list(NAMES))
@pytest.mark.parametrize("frame", FRAME)
def test_the_pages_frame_names_no_feature(frame, feature):
    code = (UI / frame).read_text(encoding="utf-8")
    named = [word for word in NAMES[feature] if re.search(re.escape(word), code, re.IGNORECASE)]
    assert not named, f"explorer/ui/{frame} names the feature {feature!r}: {named}"


def test_every_tab_and_panel_is_one_feature_of_the_registry():
    assert all(isinstance(feature, Feature) for feature in FEATURES)
    names = [feature.name for feature in FEATURES]
    assert len(set(names)) == len(names)
    assert [tab.id for tab in TABS] == names[: len(TABS)]
    assert {"lessons", "workshop", "save and share", "model choice"} <= set(names)
    slices = {field.name for field in dataclasses.fields(ExplorerState)}
    assert all(feature.state in slices for feature in FEATURES if feature.state is not None)


def test_a_tabs_state_has_no_object_typed_field_and_no_untyped_dict():
    loose = [
        f"{field.name}: {field.type}"
        for field in dataclasses.fields(ExplorerState)
        if re.search(r"\bobject\b|\bAny\b|\bdict\b(?!\[)", str(field.type))
    ]
    assert not loose, loose


def test_the_generic_wiring_calls_every_features_hook_after_an_event():
    """The adapter knows no feature: it calls the hooks it is given with the event's inputs and updates."""
    seen = []
    page = Page()
    page.after_event = (lambda args, updates: seen.append((args, updates)),)
    assert on(page, lambda st: {})("a state") == {}
    assert seen == [(("a state",), {})]
    from explorer.ui.panels.workshop import after_event

    assert after_event in after_event_hooks()


def test_a_features_style_is_its_own_file_and_reaches_the_page():
    from explorer.ui.layout import CSS
    from explorer.ui.static_files import static

    styles = [name for feature in FEATURES for name in feature.styles]
    assert "model_choice.css" in styles
    assert all(static(name) in CSS for name in styles)
    assert "#model input" not in static("page.css")  # the model choice's rule lives in its own file


def test_a_feature_adds_its_own_routes_through_its_contract():
    """The Architecture tab's link to the model's source is served by the route its feature adds
    (the frame calls every feature's ``routes``, naming none)."""
    from fastapi import FastAPI

    routed = {feature.name: feature.routes for feature in FEATURES if feature.routes is not None}
    assert set(routed) == {"architecture", "model choice", "workshop"}
    app = FastAPI()
    routed["architecture"](app)
    assert "/source/explorer/model/{name}" in [route.path for route in app.router.routes]


def test_a_features_script_is_its_own_file_and_reaches_the_page():
    """The frame's script (page.js) names no feature; each feature's script is put into the page's."""
    from explorer.ui.layout import PAGE_SCRIPT
    from explorer.ui.static_files import static

    frame = static("page.js")
    named = [word for words in NAMES.values() for word in words if re.search(re.escape(word), frame, re.IGNORECASE)]
    assert not named, f"static/page.js names {named}"
    scripts = {feature.name: feature.scripts for feature in FEATURES if feature.scripts}
    assert set(scripts) >= {"workshop", "lessons"}
    assert all(script.strip() in PAGE_SCRIPT for found in scripts.values() for script in found)
