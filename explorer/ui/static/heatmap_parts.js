// The attention heatmap's pure parts: no page, no state. explorer/ui/heatmap.py puts this before
// static/heatmap.js in gr.HTML's js_on_load; node runs them in tests/js/heatmap_parts.test.js
// against the Python they mirror (tests/test_page_script.py passes it the Python's values).
const heatmapParts = (() => {
  const KEY_LABELS = 32; // explorer/viz/heatmap.py's MAX_KEY_LABELS: when zoomed, every k-th label of the range
  const QUERY_LABELS = 48; // and MAX_QUERY_LABELS

  function hexRgb(hex) {
    const n = parseInt(hex.slice(1), 16);
    return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
  }

  // 256 colours along the scale's stops (linear in RGB between stops, as Plotly interpolates).
  function palette(scale) {
    const stops = scale.map(([at, hex]) => [at, hexRgb(hex)]);
    const out = new Uint8ClampedArray(256 * 3);
    for (let i = 0; i < 256; i++) {
      const v = i / 255;
      let k = 1;
      while (k < stops.length - 1 && stops[k][0] < v) k++;
      const [a, ca] = stops[k - 1],
        [b, cb] = stops[k];
      const t = b > a ? Math.min(1, Math.max(0, (v - a) / (b - a))) : 0;
      for (let c = 0; c < 3; c++) out[i * 3 + c] = ca[c] + (cb[c] - ca[c]) * t;
    }
    return out;
  }

  // Which labels of first..last to show: the figure's own ticks, or every k-th when zoomed; then
  // fewer where they would stand closer than `gap` pixels (a narrow screen, a phone). `keep` (an
  // index, or -1): a label always shown, its neighbours closer than `gap` dropped instead (the
  // selected query's row: thinned to every other label, the newest token's row had none).
  function ticks(zoomed, labels, axis, first, last, most, cellPixels, gap, keep = -1) {
    let shown = axis.tickvals.map((v, k) => [labels.indexOf(v), axis.ticktext[k]]);
    if (zoomed) {
      const step = Math.ceil((last - first) / most);
      shown = [];
      for (let i = first; i < last; i += step) shown.push([i, labels[i]]);
    }
    const apart = shown.length > 1 ? (shown[1][0] - shown[0][0]) * cellPixels : gap;
    const every = Math.max(1, Math.ceil(gap / apart));
    const thinned = shown.filter((_, k) => k % every === 0);
    if (keep < first || keep >= last || thinned.some(([i]) => i === keep)) return thinned;
    const near = ([i]) => Math.abs(i - keep) * cellPixels < gap;
    return [...thinned.filter((t) => !near(t)), [keep, labels[keep]]].sort((a, b) => a[0] - b[0]);
  }

  // A title longer than `chars` characters, in two lines broken at the ", " nearest its middle.
  function fitted(title, chars) {
    if (title.length <= chars || !title.includes(", ")) return title;
    const cuts = [...title.matchAll(/, /g)].map((m) => m.index);
    const cut = cuts.reduce((a, b) => (Math.abs(b - title.length / 2) < Math.abs(a - title.length / 2) ? b : a));
    return `${title.slice(0, cut + 1)}<br>${title.slice(cut + 2)}`;
  }

  function niceStep(n) {
    const raw = n / 5,
      ten = 10 ** Math.floor(Math.log10(raw));
    return [1, 2, 5, 10].map((m) => m * ten).find((s) => s >= raw);
  }

  // A cell's hover text, in the trace's own hover template (Plotly's %{key} and %{key:.Nf}).
  function fill(template, values) {
    return template.replace("<extra></extra>", "").replace(/%\{(\w)(?::\.(\d)f)?\}/g, (_, key, digits) => {
      const v = values[key];
      return digits !== undefined && typeof v === "number" ? v.toFixed(Number(digits)) : v;
    });
  }

  return { KEY_LABELS, QUERY_LABELS, hexRgb, palette, ticks, fitted, niceStep, fill };
})();
if (typeof module !== "undefined") module.exports = heatmapParts; // node's tests
