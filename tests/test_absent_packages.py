"""Packages Gradio looks for on every event, remembered as absent (explorer/ui/absent_packages.py)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from explorer.ui import absent_packages


def test_an_absent_package_fails_to_import_at_once(monkeypatch):
    name = "decoder_explorer_no_such_package"
    monkeypatch.delitem(sys.modules, name, raising=False)
    assert absent_packages.remember_absent((name,)) == [name]
    assert sys.modules[name] is None  # found in a dictionary, without a search of every folder of sys.path
    assert importlib.util.find_spec(name) is None
    with pytest.raises(ImportError):
        __import__(name)
    monkeypatch.delitem(sys.modules, name)


def test_an_installed_package_is_left_alone():
    assert absent_packages.remember_absent(("json", "numpy")) == []
    assert sys.modules["json"] is not None and importlib.util.find_spec("numpy") is not None
