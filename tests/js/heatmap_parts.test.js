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

test("the selected query's label is always shown, its too-close neighbours are not", () => {
  const labels = Array.from({ length: 14 }, (_, i) => `${i} t`);
  const axis = { tickvals: labels, ticktext: labels };
  // 10 px rows, 12 wanted: every other label, and the newest row (13) had none.
  assert.deepEqual(parts.ticks(false, labels, axis, 0, 14, 48, 10, 12).map(([i]) => i), [0, 2, 4, 6, 8, 10, 12]);
  const kept = parts.ticks(false, labels, axis, 0, 14, 48, 10, 12, 13);
  assert.deepEqual(kept.map(([i]) => i), [0, 2, 4, 6, 8, 10, 13]);
  assert.deepEqual(kept.at(-1), [13, "13 t"]);
  assert.deepEqual(parts.ticks(false, labels, axis, 0, 14, 48, 10, 12, 4).map(([i]) => i), [0, 2, 4, 6, 8, 10, 12]);
  const outside = parts.ticks(false, labels, axis, 0, 10, 48, 10, 12, 13); // zoomed away from it: as before
  assert.deepEqual(outside.map(([i]) => i), [0, 2, 4, 6, 8, 10, 12]);
});
