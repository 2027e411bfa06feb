"""A wait that times out says what it waited for, and where (issue 42).

Playwright's TimeoutError for ``page.wait_for_function`` says "Timeout 120000ms exceeded." and no
more: a test that waits for the page instead of asserting failed as a bare timeout, naming neither
the condition nor the line. ``named_waits`` (applied to every browser test by conftest.py) makes
each wait raise the same TimeoutError with the condition (its expression and argument, or its
selector), the test's lines that waited, and Playwright's own message.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

TESTS = Path(__file__).resolve().parents[1]
WAITS = ((Page, "wait_for_function"), (Page, "wait_for_selector"), (Locator, "wait_for"))


def waited_for(target, method: str, args: tuple, kwargs: dict) -> str:
    """The condition a wait was given, in words a failure can show."""
    if isinstance(target, Locator):
        condition = f"{target} to be {kwargs.get('state') or 'visible'}"
    else:
        condition = repr(args[0] if args else kwargs.get("expression") or kwargs.get("selector"))
    if kwargs.get("arg") is not None:
        condition += f" with arg {kwargs['arg']!r}"
    return f"{method}: {condition}"


def test_lines() -> str:
    """The lines of the tests (and their helpers) that led to the wait, innermost first."""
    here = Path(__file__).resolve()
    lines = [
        f"{Path(frame.filename).resolve().relative_to(TESTS.parent)}:{frame.lineno}"
        for frame in reversed(traceback.extract_stack())
        if Path(frame.filename).resolve().is_relative_to(TESTS) and Path(frame.filename).resolve() != here
    ]
    return " <- ".join(lines[:4]) or "(no test line)"


def named(wait, method: str):
    @functools.wraps(wait)
    def waiting(self, *args, **kwargs):
        try:
            return wait(self, *args, **kwargs)
        except PlaywrightTimeoutError as error:
            what = waited_for(self, method, args, kwargs)
            raise PlaywrightTimeoutError(
                f"The page never showed what {test_lines()} waited for: {what}\n{error.message}"
            ) from error

    return waiting


@contextlib.contextmanager
def named_waits():
    """Every Page.wait_for_function, Page.wait_for_selector and Locator.wait_for, while inside."""
    with pytest.MonkeyPatch.context() as patch:
        for owner, method in WAITS:
            patch.setattr(owner, method, named(getattr(owner, method), method))
        yield
