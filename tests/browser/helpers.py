"""Reading what the page shows."""

from __future__ import annotations

import os
import time
from pathlib import Path

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# The shared app's log (tests/browser/conftest.py): one app, and one log, per pytest-xdist worker.
APP_LOG = ARTIFACTS / f"app-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.log"


def generate_runs_ended() -> int:
    """How many Generate runs the shared app has ended: each logs its end, cancelled or not."""
    return APP_LOG.read_text().count("Generate ended after") if APP_LOG.exists() else 0


def wait_generate_ended(before: int, timeout: float = 60) -> None:
    """Until the app logs the end of one more Generate run than ``before``: from then on no
    Generate of this page can step, so a strip that stays as it is proves nothing stepped on."""
    deadline = time.time() + timeout
    while generate_runs_ended() <= before:
        assert time.time() < deadline, "the app never logged the end of the Generate run"
        time.sleep(0.1)  # polling the app's log for the event, not waiting for a time


def tokens(page) -> list[str]:
    return page.eval_on_selector_all("#token-strip .token .text", "els => els.map(e => e.textContent)")


def wait_token_count(page, n: int) -> None:
    page.wait_for_function("n => document.querySelectorAll('#token-strip .token').length === n", arg=n, timeout=120_000)


def plot(page, elem_id: str) -> dict:
    """Traces and title of the plotly figure inside a gr.Plot."""
    return page.evaluate(
        """id => {
            const g = document.querySelector(`#${id} :is(.js-plotly-plot, .attention-figure)`);
            if (!g || !g.data) return null;
            // the app sends arrays as plotly typed arrays {dtype, bdata (base64), shape}: decode to rows
            const kinds = {f8: Float64Array, f4: Float32Array, i4: Int32Array, i2: Int16Array, i1: Int8Array,
                           u4: Uint32Array, u2: Uint16Array, u1: Uint8Array};
            const rows = z => {
                if (!z) return [];
                if (!z.bdata) return Array.from(z, r => Array.from(r));
                const bin = atob(z.bdata);
                const bytes = new Uint8Array(bin.length);
                for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
                const flat = Array.from(new kinds[z.dtype](bytes.buffer));
                const shape = typeof z.shape === 'string' ? z.shape.split(',').map(Number) : z.shape;
                const out = [];
                for (let r = 0; r < shape[0]; r++) out.push(flat.slice(r * shape[1], (r + 1) * shape[1]));
                return out;
            };
            return {
                title: g.layout.title && (g.layout.title.text || g.layout.title),
                shapes: (g.layout.shapes || []).length,
                background: g.layout.plot_bgcolor,
                traces: g.data.map(d => ({
                    name: d.name, x: d.x ? d.x.length : 0,
                    rows: rows(d.z).length, cols: rows(d.z).length ? rows(d.z)[0].length : 0,
                    nan: rows(d.z).flat().filter(v => v === null || Number.isNaN(v)).length,
                    y: d.y ? Array.from(d.y) : [],
                    // each row's column of largest weight (masked cells are null)
                    argmax: rows(d.z).map(r => r.reduce((best, v, i) => (v !== null && !Number.isNaN(v)
                        && (best < 0 || v > r[best])) ? i : best, -1)),
                })),
            };
        }""",
        elem_id,
    )


def wait_plot_title(page, elem_id: str, text: str) -> None:
    page.wait_for_function(
        """([id, text]) => { const g = document.querySelector(`#${id} :is(.js-plotly-plot, .attention-figure)`);
            const t = g && g.layout && g.layout.title; return t && (t.text || t).includes(text); }""",
        arg=[elem_id, text],
    )


def wait_plot_rows(page, elem_id: str, n: int) -> None:
    page.wait_for_function(
        """([id, n]) => { const g = document.querySelector(`#${id} :is(.js-plotly-plot, .attention-figure)`);
            const z = g && g.data && g.data[0].z;
            return z && (z.shape ? Number(String(z.shape).split(',')[0]) : z.length) === n; }""",
        arg=[elem_id, n],
    )


def tick_labels_fit(page, elem_id: str, axes: str = "xy") -> bool:
    """Every tick label of a plotly figure lies inside the figure (none cut at an edge), and
    neighbouring x labels are far enough apart not to overlap (they slant at 60 degrees)."""
    return page.evaluate(
        """([id, axes]) => { const svg = document.querySelector(`#${id} :is(.main-svg, .attention-figure svg)`)
                .getBoundingClientRect();
            const inside = r => r.left >= svg.left - 1 && r.right <= svg.right + 1 && r.bottom <= svg.bottom + 1;
            const labels = a => Array.from(document.querySelectorAll(`#${id} .${a}tick text`));
            if (![...axes].every(a => labels(a).every(t => inside(t.getBoundingClientRect())))) return false;
            if (!axes.includes('x')) return true;
            const xs = labels('x').map(t => t.getBoundingClientRect().right).sort((a, b) => a - b);
            return xs.every((x, i) => i === 0 || x - xs[i - 1] >= 12); }""",
        [elem_id, axes],
    )


# The strip's "query" colour (explorer/viz/labels.py's TOKEN_COLORS), as a browser writes it in a style.
QUERY_RGB = "253, 174, 107"


def query_index(page) -> int:
    """Which token of the strip is the query (-1: none picked, the newest is)."""
    return page.evaluate(
        """c => Array.from(document.querySelectorAll('#token-strip .token'))
                .findIndex(t => t.style.backgroundColor.includes(c))""",
        QUERY_RGB,
    )


def wait_query_at(page, index: int) -> None:
    page.wait_for_function(
        "([c, i]) => document.querySelectorAll('#token-strip .token')[i].style.backgroundColor.includes(c)",
        arg=[QUERY_RGB, index],
    )


def status(page) -> str:
    return page.inner_text("#status")


def idle(page) -> None:
    """Wait until no Gradio event is pending."""
    page.wait_for_function("() => !document.querySelector('.generating, .pending')", timeout=120_000)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def choose_model(page, name: str) -> None:
    page.click("#model input")
    page.click(f"[role=option][aria-label*='{name}']")


def type_prompt(page, text: str) -> None:
    box = page.locator("#prompt textarea")
    box.fill(text)


def wait_strip_starts_with(page, text: str) -> None:
    """Wait until the token strip spells ``text`` (spaces are shown as ·)."""
    page.wait_for_function(
        """t => Array.from(document.querySelectorAll('#token-strip .token .text'))
                .map(e => e.textContent).join('').replace(/·/g, ' ').startsWith(t)""",
        arg=text,
    )


def choose_layer(page, layer: int) -> None:
    """Type a layer into the slider's box and press Enter, as a person does (the view follows the box)."""
    box = page.locator("#layer input[type=number]")
    box.fill(str(layer))
    box.press("Enter")


def choose_head(page, head: int) -> None:
    page.click("#head input")
    page.click(f"[role=option][aria-label='head {head}']")


PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}  # new_context(**PHONE)
DESKTOP = {"viewport": {"width": 1280, "height": 720}}


def opened(browser, app_url, screen: dict):
    """A new browser context at ``screen``'s size (PHONE, DESKTOP) and its page, opened on the app."""
    from tests.browser.conftest import wait_ready

    context = browser.new_context(**screen)
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(app_url)
    wait_ready(page)
    return context, page


def show_modebar(page, elem_id: str, screen: dict) -> None:
    """Show Plotly's mode bar over a chart as a person does: a tap on a phone, a hover on a desktop."""
    plot_area = page.locator(f"#{elem_id} .nsewdrag").first
    plot_area.scroll_into_view_if_needed()
    if screen.get("has_touch"):
        plot_area.tap()
    else:
        plot_area.hover()
    page.wait_for_selector(f"#{elem_id} .modebar")


# A chart's parts that must not cover each other: the page's label (top left), Plotly's mode bar
# (top right; a tap on the plot shows it on a phone), the figure's title, its legend.
CHART_PARTS = ["[data-testid=block-label]", ".modebar", ".gtitle", ".legend"]


def overlaps(page, elem_id: str, selectors: list[str]) -> list[str]:
    """Which pairs of the chart's parts (``selectors``, inside #``elem_id``) cover each other."""
    return page.evaluate(
        """([id, sels]) => { const box = s => document.querySelector('#' + id + ' ' + s).getBoundingClientRect();
            const found = [];
            sels.forEach((a, i) => sels.slice(i + 1).forEach(b => { const p = box(a), q = box(b);
                const crossed = p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom;
                if (crossed) found.push(a + ' / ' + b); }));
            return found; }""",
        [elem_id, selectors],
    )


def cut_titles(page, elem_id: str) -> list[str]:
    """The lines of a Plotly chart's title (and axis titles) that reach past the chart's right edge."""
    return page.evaluate(
        """id => { const right = document.querySelector('#' + id + ' .main-svg').getBoundingClientRect().right;
            return Array.from(document.querySelectorAll('#' + id + ' :is(.gtitle, .g-xtitle, .g-ytitle) tspan, '
                    + '#' + id + ' :is(.gtitle, .g-xtitle, .g-ytitle) > text'))
                .filter(t => t.getBoundingClientRect().right > right + 1).map(t => t.textContent); }""",
        elem_id,
    )
