// The heatmap's pure parts (explorer/ui/static/heatmap_parts.js) against the Python they mirror.
// Run by tests/test_page_script.py, which computes the expected values with that Python and
// passes them in a JSON file ($HEATMAP_EXPECTED), so the two cannot drift apart.
const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const parts = require("../../explorer/ui/static/heatmap_parts.js");

const expectedPath = process.env.HEATMAP_EXPECTED;
if (!expectedPath) throw new Error("HEATMAP_EXPECTED is not set: run these through tests/test_page_script.py");
const expected = JSON.parse(fs.readFileSync(expectedPath, "utf8"));

test("each scale's 256 colours are explorer.viz.colours.colour_table's", () => {
  for (const [name, { stops, table }] of Object.entries(expected.scales)) {
    assert.deepEqual(Array.from(parts.palette(stops)), table.flat(), `the ${name} scale`);
  }
});

test("the hover text is the trace's template filled as explorer/viz/heatmap.py's HOVER says", () => {
  for (const { template, values, text } of expected.hovers) {
    assert.equal(parts.fill(template, values), text, `${template} with ${JSON.stringify(values)}`);
  }
});

test("the label limits are explorer/viz/heatmap.py's", () => {
  assert.equal(parts.KEY_LABELS, expected.limits.keys, "MAX_KEY_LABELS");
  assert.equal(parts.QUERY_LABELS, expected.limits.queries, "MAX_QUERY_LABELS");
});

test("the ticks shown are tick_labels' (the whole figure: its own; zoomed: the range's)", () => {
  const wide = 1000; // pixels a cell: no tick is left out for want of room
  for (const { labels, axis, first, last, most, whole, zoomed } of expected.ticks) {
    const texts = (shown) => shown.map(([i, text]) => [labels[i], text]);
    assert.deepEqual(texts(parts.ticks(false, labels, axis, 0, labels.length, most, wide, 1)), whole);
    assert.deepEqual(texts(parts.ticks(true, labels, axis, first, last, most, wide, 1)), zoomed);
  }
});

test("ticks closer than the gap are thinned to every k-th", () => {
  const labels = Array.from({ length: 10 }, (_, i) => `${i} t`);
  const axis = { tickvals: labels, ticktext: labels };
  const shown = parts.ticks(false, labels, axis, 0, 10, 32, 5, 12); // 5 px apart, 12 wanted: every 3rd
  assert.deepEqual(shown.map(([i]) => i), [0, 3, 6, 9]);
});
