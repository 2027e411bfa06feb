"""The server as a class would use it: many sessions at once, bad input at the endpoints, tabs
that close, and a start with the network cut off (every app in these tests runs that way)."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.browser.conftest import APP_LOG
from tests.browser.helpers import idle, status
from tests.browser.load import SETTINGS, ClassPlan, outputs_by_label, simulate_users, strip_text
from tests.test_bad_input import FAMOUS, PRIVATE

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.parametrize("client_kind", ["page", "gradio_client"])
def test_users_stepping_at_once_keep_their_own_tokens(app_url, client_kind):
    """A small load (bench/bench_load.py runs twenty users): no error, no cross-talk; users that
    speak the page's queue protocol (as the bench's do) and users of the API's own client."""
    report = simulate_users(app_url, users=4, steps=6, plan=ClassPlan(client=client_kind))
    assert not report.errors, report.errors
    assert not report.crosstalk, report.crosstalk
    assert len(report.latencies) == 4 * 6


@pytest.fixture(scope="module")
def client(app_url):
    from gradio_client import Client

    client = Client(app_url, verbose=False, download_files=False)
    client.predict("smollm2-135m-instruct", "The capital of France is", *SETTINGS, None, api_name="/on_load")
    return client


# The client sends JSON through httpx, which cannot encode lone surrogates (a browser escapes them;
# the session API's own test covers them).
NO_SURROGATES = [t for t in FAMOUS if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
ENDPOINT_TEXTS = st.one_of(
    st.sampled_from(NO_SURROGATES), st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=ENDPOINT_TEXTS)
def test_step_endpoint_survives_any_text(client, text):
    """Whatever the text, the server answers (a session, or a warning) and keeps serving.

    (An exception on the server would fail this call, and the app fixture fails on any traceback.)
    """
    client.predict(text, *SETTINGS, api_name="/on_step")  # refused text is a warning, not an error
    result = client.predict("The capital of France is", *SETTINGS, api_name="/on_step")
    shown = strip_text(outputs_by_label(client, "/on_step", result)["strip"]).replace("·", " ")  # visible spaces
    assert shown.startswith("The capital of France is")


def step_outputs(client) -> dict:
    result = client.predict("The capital of France is", *SETTINGS, api_name="/on_step")
    return outputs_by_label(client, "/on_step", result)


def plot_title(value) -> str:
    """The title of a gr.Plot's value, or of the heatmap's (explorer/ui/heatmap.py: the figure itself)."""
    import json

    if isinstance(value, dict) and "layout" in value:
        return value["layout"]["title"]["text"]
    plot = value.get("plot") if isinstance(value, dict) else None
    return json.loads(plot)["layout"]["title"]["text"] if plot else ""


# What Gradio says when it refuses each: to the caller, and in one line of the app's log.
REFUSALS = {
    (99, "mean"): "Value 99 is greater than maximum value",
    (-1, "mean"): "Value -1 is less than minimum value",
    (0, "12"): "Value: 12 is not in the list of choices",
    (0, "../../etc/passwd"): "Value: ../../etc/passwd is not in the list of choices",
    (0, "-3"): "Value: -3 is not in the list of choices",
}


@pytest.mark.parametrize(("layer", "head"), list(REFUSALS))
def test_views_out_of_range_are_refused_and_the_view_stays(client, layer, head):
    """The page offers only layers and heads that exist; sent anyway, they are refused with a message."""
    from gradio_client.exceptions import AppError

    client.predict(2, "1", api_name="/on_layer_or_head")
    with pytest.raises(AppError, match=r"maximum|minimum|choices") as error:
        client.predict(layer, head, api_name="/on_layer_or_head")
    assert REFUSALS[(layer, head)] in str(error.value)
    logged = [line for line in APP_LOG.read_text().splitlines() if "refused an input of on_layer_or_head" in line]
    assert logged and REFUSALS[(layer, head)] in logged[-1]
    title = plot_title(step_outputs(client)["Self-attention heatmap"])
    assert "layer 2, head 1" in title, title


OUTSIDE = ["../../etc", "/etc", "~/.ssh", "owner/../../x", "C:\\Windows", "a" * 500]


def test_custom_model_outside_the_allowed_places(page):
    """Typed into "Another model", each is refused with the message that says what to do, and the
    model in use stays."""
    box = page.locator("#custom-model textarea, #custom-model input").first
    for name in OUTSIDE:
        box.fill(name)
        box.press("Enter")
        toast = page.locator("[data-testid=toast-body]", has_text="That model is not offered here")
        toast.wait_for()
        assert "Choose one from the list; local folders are accepted only inside" in toast.inner_text()
        toast.locator("[data-testid=toast-close]").click()
        toast.wait_for(state="detached")
        idle(page)
        assert "smollm2-135m-instruct" in status(page)  # the model in use stayed


@pytest.mark.parametrize("name", OUTSIDE)
def test_model_names_outside_the_allowed_places_are_refused(monkeypatch, tmp_path, name):
    from explorer.loading import ModelLoadError
    from explorer.present import model_store

    monkeypatch.setenv(model_store.MODEL_DIRS_ENV, str(tmp_path))
    monkeypatch.setenv(model_store.ALLOW_HUB_ENV, "1")
    with pytest.raises(ModelLoadError, match="not offered here") as error:
        model_store.resolve_custom(name)
    assert not PRIVATE.search(str(error.value))


def test_closing_a_tab_frees_its_session(browser, app_url):
    """The log names the released tab, so other tests' tabs closing at the same time do not count."""
    from explorer.ui.tab import tab_tag

    context = browser.new_context()
    page = context.new_page()
    hashes = set()
    page.on("request", lambda r: hashes.update(re.findall(r'"session_hash":\s*"([^"]+)"', r.post_data or "")))
    page.goto(app_url)
    page.wait_for_selector("#token-strip .token", timeout=180_000)
    page.click("#step")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('1 generated')")
    assert len(hashes) == 1, hashes
    line = f"released the session of a closed browser tab (tab {tab_tag(hashes.pop())[:12]})"
    log = APP_LOG
    assert line not in log.read_text()
    context.close()
    deadline = time.time() + 30
    while time.time() < deadline and line not in log.read_text():
        time.sleep(0.5)
    assert log.read_text().count(line) == 1


def test_the_app_started_without_a_network(page):
    """Every app in these tests runs with sockets to anything but loopback refused: the Hub
    models are offered as unavailable, and the embedded ones work (the page fixture stepped)."""
    page.click("#model input")
    labels = page.eval_on_selector_all("[role=option]", "els => els.map(e => e.getAttribute('aria-label'))")
    hub = [label for label in labels if ", Hub)" in label]
    assert len(hub) == 10 and all("unavailable" in label for label in hub), labels
    assert not any("unavailable" in label for label in labels if "embedded" in label), labels
