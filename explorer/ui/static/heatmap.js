// The attention heatmap, drawn in the page (explorer/ui/heatmap.py; its pure parts: heatmap_parts.js).
//
// It reads the figure the server builds in Plotly's form (explorer/viz/heatmap.py, window.py):
// data[0] is the heatmap (z as a typed array, x and y labels, colour scale, hover template),
// data[1] an optional overview, layout the title, ticks, margins, axis domains and outlined rows.
// The cells are painted into canvases at one pixel per cell (the scale in 256 steps) and scaled
// up without smoothing, so no cell is blended with its neighbours; the text, outlines and colour
// bar are one SVG over them. Plotly lays a figure out anew on every update (tens of ms a Step);
// this takes a few.
//
// Runs as gr.HTML's js_on_load: `element`, `props` and `watch` come from Gradio.
(() => {
  const figureBox = element.querySelector(".attention-figure");
  const tip = element.querySelector(".attention-tip");
  const download = element.querySelector(".attention-download");
  const rowTable = element.querySelector(".attention-table");
  const NS = "http://www.w3.org/2000/svg";
  const FONT = "'Open Sans', Arial, sans-serif";
  const COLORBAR_SPACE = 64; // the colour bar and its labels, right of the plot
  // The pure parts (static/heatmap_parts.js, put before this script by explorer/ui/heatmap.py).
  const { KEY_LABELS, QUERY_LABELS, hexRgb, palette, fitted, niceStep, fill } = heatmapParts;
  const ticks = (...args) => heatmapParts.ticks(Boolean(zoom), ...args); // zoomed: every k-th label
  let zoom = null; // {r0, r1, c0, c1}: the rows and columns shown, or null for all
  let drawn = null; // what the last draw placed where, for the hover and the zoom
  let textScale = 1; // 1, or larger in presenter mode

  const KINDS = { f4: Float32Array, f8: Float64Array };

  function decode(z) {
    const text = atob(z.bdata);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    const [rows, cols] = String(z.shape).split(",").map(Number);
    return { values: new KINDS[z.dtype](bytes.buffer), rows, cols };
  }

  // Paint the cells r0..r1 x c0..c1 into a canvas, one pixel per cell (the page scales it up
  // without smoothing); an empty (NaN) cell takes the background colour (grey for the future).
  function paintCells(grid, trace, r0, r1, c0, c1, background) {
    const w = c1 - c0,
      h = r1 - r0,
      colours = palette(trace.colorscale),
      empty = hexRgb(background);
    const lo = trace.zmin ?? 0,
      span = (trace.zmax ?? 1) - lo;
    const canvas = document.createElement("canvas");
    canvas.width = w;
    canvas.height = h;
    const context = canvas.getContext("2d");
    const image = context.createImageData(w, h),
      px = image.data;
    for (let r = 0; r < h; r++) {
      for (let c = 0; c < w; c++) {
        const v = grid.values[(r + r0) * grid.cols + c + c0];
        const p = (r * w + c) * 4;
        const rgb = Number.isNaN(v) ? empty : null;
        const i = rgb ? 0 : Math.round(Math.min(1, Math.max(0, (v - lo) / span)) * 255) * 3;
        px[p] = rgb ? rgb[0] : colours[i];
        px[p + 1] = rgb ? rgb[1] : colours[i + 1];
        px[p + 2] = rgb ? rgb[2] : colours[i + 2];
        px[p + 3] = 255;
      }
    }
    context.putImageData(image, 0, 0);
    return canvas;
  }

  // The part of box `a` inside box `b`.
  function clipTo(a, b) {
    const x = Math.max(a.x, b.x),
      y = Math.max(a.y, b.y);
    return { x, y, w: Math.min(a.x + a.w, b.x + b.w) - x, h: Math.min(a.y + a.h, b.y + b.h) - y };
  }

  // A painted canvas placed over `box` of the figure.
  function place(canvas, box) {
    canvas.className = "attention-cells";
    Object.assign(canvas.style, { left: `${box.x}px`, top: `${box.y}px`, width: `${box.w}px`, height: `${box.h}px` });
    return canvas;
  }

  const position = (label) => parseInt(label, 10); // axis labels are "position token" (explorer/viz/labels.py)
  // A masked cell is a later key, or (a sliding layer: layout.meta.window) one the window left behind,
  // or (a cache policy: layout.meta.evicted_by) one the cache had evicted before the query ran.
  const maskedWhy = (query, key) => {
    const meta = props.value?.layout?.meta || {};
    if (position(key) > position(query)) return "a later token";
    if (meta.evicted_by) return `evicted from the cache by ${meta.evicted_by}`;
    return `outside the sliding window of ${meta.window}`;
  };

  const escapeText = (s) =>
    String(s)
      .replace(/&(?!(amp|lt|gt);)/g, "&amp;")
      .replace(/</g, "&lt;");

  function textLines(text, x, y, attrs) {
    const lines = String(text).split("<br>");
    const spans = lines.map((line, i) => `<tspan x="${x}" dy="${i ? "1.2em" : 0}">${escapeText(line)}</tspan>`);
    return `<text x="${x}" y="${y}" ${attrs}>${spans.join("")}</text>`;
  }

  // Masked cells (NaN) drawn over their colour, one path for each kind, so that they are told
  // from a zero weight without relying on hue (explorer/viz/colours.py): the model's own mask (a
  // later token, or one outside a sliding window) hatched; a key a cache policy had evicted
  // (layout.meta.evicted_by) dotted, so the two are never mistaken for each other (issue 40).
  const PATTERNS = {
    masked: `<line x1="0" y1="0" x2="0" y2="7" stroke="#6e6e6e" stroke-width="1.2"/>`,
    evicted: `<circle cx="2" cy="2" r="1.3" fill="#8c2d04"/><circle cx="5.5" cy="5.5" r="1.3" fill="#8c2d04"/>`,
  };
  function pattern(parts, kind) {
    const id = `${kind}-${Math.random().toString(36).slice(2, 9)}`;
    const turn = kind === "masked" ? ` patternTransform="rotate(45)"` : "";
    parts.push(`<pattern id="${id}" width="7" height="7" patternUnits="userSpaceOnUse"${turn}>${PATTERNS[kind]}</pattern>`);
    return `url(#${id})`;
  }

  function hatchMasked(parts, grid, trace, evictedBy, r0, r1, c0, c1, box) {
    const cw = box.w / (c1 - c0),
      rh = box.h / (r1 - r0);
    const paths = { masked: "", evicted: "" };
    const kindOf = (r, c) => (evictedBy && position(trace.x[c]) <= position(trace.y[r]) ? "evicted" : "masked");
    for (let r = r0; r < r1; r++) {
      let start = -1,
        kind = null;
      for (let c = c0; c <= c1; c++) {
        const empty = c < c1 && Number.isNaN(grid.values[r * grid.cols + c]);
        const now = empty ? kindOf(r, c) : null;
        if (start >= 0 && now !== kind) {
          const x = box.x + (start - c0) * cw,
            y = box.y + (r - r0) * rh;
          paths[kind] += `M${x.toFixed(1)} ${y.toFixed(1)}h${((c - start) * cw).toFixed(1)}v${rh.toFixed(1)}h${(-(c - start) * cw).toFixed(1)}Z`;
          start = -1;
        }
        if (empty && start < 0) [start, kind] = [c, now];
      }
    }
    for (const [kind, path] of Object.entries(paths)) {
      if (path) parts.push(`<path class="${kind}" d="${path}" fill="${pattern(parts, kind)}"/>`);
    }
    return Boolean(paths.evicted);
  }

  // Which marking is which, in two lines above the plot, where a cache policy left some keys out
  // (explorer/viz/heatmap.py leaves room for them).
  function maskLegend(parts, evictedBy, box) {
    const size = 11 * textScale,
      swatch = 11 * textScale;
    const entry = (kind, y, words) =>
      `<rect x="${box.x}" y="${y}" width="${swatch}" height="${swatch}" fill="${pattern(parts, kind)}" stroke="#6e6e6e" stroke-width="0.5"/>` +
      `<text x="${box.x + swatch + 4}" y="${y + swatch / 2}" dominant-baseline="middle" font-size="${size}">${escapeText(words)}</text>`;
    const first = entry("masked", box.y - 31 * textScale, "hatched: a later token (the causal mask)");
    const second = entry("evicted", box.y - 16 * textScale, `dotted: evicted from the cache by ${evictedBy}`);
    parts.push(`<g class="mask-legend">${first}${second}</g>`);
  }

  function drawMain(parts, cells, figure, box) {
    const trace = figure.data[0],
      layout = figure.layout;
    const grid = decode(trace.z);
    const { r0, r1, c0, c1 } = zoom || { r0: 0, r1: grid.rows, c0: 0, c1: grid.cols };
    const cw = box.w / (c1 - c0),
      rh = box.h / (r1 - r0);
    const xOf = (i) => box.x + (i - c0 + 0.5) * cw,
      yOf = (i) => box.y + (i - r0 + 0.5) * rh; // a cell's centre
    const rowEdge = (v) => box.y + (v + 0.5 - r0) * rh; // v in rows: -0.5 is the first row's top
    const colEdge = (v) => box.x + (v + 0.5 - c0) * cw; // v in columns: -0.5 is the first column's left
    cells.push(place(paintCells(grid, trace, r0, r1, c0, c1, layout.plot_bgcolor || "#ffffff"), box));
    const evictedBy = layout.meta?.evicted_by || "";
    if (hatchMasked(parts, grid, trace, evictedBy, r0, r1, c0, c1, box)) maskLegend(parts, evictedBy, box);
    for (const shape of layout.shapes || []) {
      // an outlined row (x0 -0.5 to the last column) or one cell, cut to what the zoom shows
      if (shape.xref !== "x") continue;
      const y0 = Math.max(box.y, rowEdge(shape.y0)),
        y1 = Math.min(box.y + box.h, rowEdge(shape.y1));
      const x0 = Math.max(box.x, colEdge(shape.x0)),
        x1 = Math.min(box.x + box.w, colEdge(shape.x1));
      if (y1 <= y0 || x1 <= x0) continue; // zoomed away from the outlined row or cell
      parts.push(`<rect class="outline" data-name="${String(shape.name || "").replace(/[^a-z ]/gi, "")}" x="${x0}" y="${y0}"
        width="${x1 - x0}" height="${y1 - y0}" fill="none" stroke="${shape.line.color}" stroke-width="${shape.line.width}"/>`);
    }
    for (const [i, text] of ticks(trace.x, layout.xaxis, c0, c1, KEY_LABELS, cw, 14 * textScale)) {
      if (i < c0 || i >= c1) continue;
      const x = xOf(i),
        y = box.y + box.h;
      parts.push(`<line x1="${x}" x2="${x}" y1="${y}" y2="${y + 5}" stroke="#444"/>`);
      parts.push(`<g class="xtick"><text transform="translate(${x + 3},${y + 8}) rotate(${layout.xaxis.tickangle || 0})"
        text-anchor="end" dominant-baseline="middle">${text}</text></g>`);
    }
    for (const [i, text] of ticks(trace.y, layout.yaxis, r0, r1, QUERY_LABELS, rh, 12 * textScale, outlinedRow(layout))) {
      if (i < r0 || i >= r1) continue;
      const y = yOf(i);
      parts.push(`<line x1="${box.x - 5}" x2="${box.x}" y1="${y}" y2="${y}" stroke="#444"/>`);
      parts.push(
        `<g class="ytick"><text x="${box.x - 7}" y="${y}" text-anchor="end" dominant-baseline="middle">${text}</text></g>`,
      );
    }
    const height = layout.height;
    parts.push(
      textLines(layout.xaxis.title.text, box.x + box.w / 2, height - 8, `text-anchor="middle" font-size="${14 * textScale}"`),
    );
    const yTitle = box.y + box.h / 2;
    parts.push(
      `<text transform="translate(${16 * textScale},${yTitle}) rotate(-90)" text-anchor="middle" font-size="${14 * textScale}">${escapeText(layout.yaxis.title.text)}</text>`,
    );
    return { grid, trace, r0, r1, c0, c1, cw, rh, box };
  }

  function drawOverview(parts, cells, figure, box) {
    const trace = figure.data[1],
      layout = figure.layout;
    const grid = decode(trace.z);
    const [xa, xb] = layout.xaxis2.range,
      [ya, yb] = layout.yaxis2.range; // y reversed: ya at the bottom
    const px = (v) => box.x + ((v - xa) / (xb - xa)) * box.w;
    const py = (v) => box.y + box.h - ((v - ya) / (yb - ya)) * box.h;
    const half = trace.dx / 2,
      x0 = trace.x0 - half,
      y0 = trace.y0 - trace.dy / 2;
    // The last blocks reach past the last position (they are padded): only the axes' range is shown.
    const shownCols = Math.min(grid.cols, Math.ceil((xb - x0) / trace.dx));
    const shownRows = Math.min(grid.rows, Math.ceil((ya - y0) / trace.dy));
    const painted = paintCells(grid, trace, 0, shownRows, 0, shownCols, layout.plot_bgcolor || "#ffffff");
    const left = px(x0),
      top = py(y0);
    const cellBox = {
      x: left,
      y: top,
      w: px(x0 + shownCols * trace.dx) - left,
      h: py(y0 + shownRows * trace.dy) - top,
    };
    cells.push(place(painted, clipTo(cellBox, box)));
    for (const shape of layout.shapes || []) {
      if (shape.xref !== "x2") continue;
      parts.push(`<rect x="${px(shape.x0)}" y="${py(shape.y0)}" width="${px(shape.x1) - px(shape.x0)}"
        height="${py(shape.y1) - py(shape.y0)}" fill="none" stroke="${shape.line.color}" stroke-width="${shape.line.width}"/>`);
    }
    const step = niceStep(xb - xa);
    for (let v = 0; v <= xb; v += step) {
      parts.push(`<text x="${px(v)}" y="${box.y + box.h + 12}" text-anchor="middle" font-size="9">${v}</text>`);
      parts.push(
        `<text x="${box.x - 4}" y="${py(v)}" text-anchor="end" dominant-baseline="middle" font-size="9">${v}</text>`,
      );
    }
    const title = layout.xaxis2.title;
    parts.push(
      textLines(
        title.text,
        box.x + box.w / 2,
        box.y + box.h + 30,
        `text-anchor="middle" font-size="${title.font?.size || 12}"`,
      ),
    );
    return { grid, trace, px, py, box };
  }

  function drawColorbar(parts, trace, x, y, h) {
    const gradient = trace.colorscale.map(([at, hex]) => `<stop offset="${1 - at}" stop-color="${hex}"/>`).reverse();
    const id = `bar-${Math.random().toString(36).slice(2, 9)}`;
    parts.push(`<linearGradient id="${id}" x1="0" x2="0" y1="0" y2="1">${gradient.join("")}</linearGradient>`);
    parts.push(
      `<text x="${x}" y="${y - 8}" font-size="${12 * textScale}">${escapeText(trace.colorbar?.title?.text || "")}</text>`,
    );
    parts.push(
      `<rect x="${x}" y="${y}" width="12" height="${h}" fill="url(#${id})" stroke="#444" stroke-width="0.5"/>`,
    );
    for (let v = 0; v <= 1.0001; v += 0.2) {
      const ty = y + h - v * h;
      parts.push(
        `<text x="${x + 16}" y="${ty}" dominant-baseline="middle" font-size="${11 * textScale}">${+v.toFixed(1)}</text>`,
      );
    }
  }

  // The figure's height: the server's (rows tall enough for their labels), or less where the
  // heatmap starts on the first screen and would reach below it (a projector at 1280x720: the
  // Step button, the strip and the heatmap stay in sight together). Further down the page (a
  // phone), it keeps its height: it is scrolled to anyway.
  const FEWEST_PIXELS = 260;
  const PRESENTER_SCALE = 1.4;
  function fittedHeight(wanted) {
    const top = figureBox.getBoundingClientRect().top + window.scrollY;
    const room = window.innerHeight - top - 12;
    return room >= FEWEST_PIXELS ? Math.min(wanted, room) : wanted;
  }

  // The outlined query's row, or -1 when no row is outlined.
  function outlinedRow(layout) {
    const outline = (layout.shapes || []).find((s) => s.name === "selected query");
    return outline ? Math.round(outline.y0 + 0.5) : -1;
  }

  // The row a screen reader is told about and the table shows: the outlined query, else the last.
  function selectedRow(figure) {
    const trace = figure.data[0],
      grid = decode(trace.z);
    const outlined = outlinedRow(figure.layout);
    const r = outlined >= 0 ? outlined : grid.rows - 1;
    const weights = Array.from(grid.values.subarray(r * grid.cols, (r + 1) * grid.cols));
    const keys = weights.map((w, c) => ({ key: trace.x[c], w })).filter((k) => !Number.isNaN(k.w));
    const strongest = [...keys].sort((a, b) => b.w - a.w).slice(0, 3);
    return { query: trace.y[r], keys, strongest };
  }

  function describe(figure, title) {
    const { query, strongest } = selectedRow(figure);
    const top = strongest.map((k) => `${k.key} (${k.w.toFixed(2)})`).join(", ");
    return `${title}. Row ${query} reads most: ${top}.`;
  }

  // The table is built only while it is open (a long text has a thousand keys a row).
  function fillTable() {
    const figure = props.value;
    if (!rowTable.open || !figure || !figure.data) return;
    const { query, keys } = selectedRow(figure);
    const rows = keys.map((k) => `<tr><td>${escapeText(k.key)}</td><td class="weight">${k.w.toFixed(4)}</td></tr>`);
    const valueName = escapeText(figure.layout?.meta?.value_name || "weight"); // what the cells hold (viz/heatmap.py)
    rowTable.querySelector(".attention-rows").innerHTML = `<table><caption>Row ${escapeText(query)}: its ${valueName} on each key
      it may read</caption><thead><tr><th scope="col">key</th><th scope="col">${valueName}</th></tr></thead>
      <tbody>${rows.join("")}</tbody></table>`;
  }
  rowTable.addEventListener("toggle", fillTable);

  function draw() {
    const figure = props.value;
    const width = figureBox.clientWidth;
    if (!figure || !figure.data || !width) {
      figureBox.innerHTML = "";
      drawn = null;
      return;
    }
    const started = performance.now();
    // Presenter mode (a class on the body): larger text, and margins and height to hold it.
    const big = document.body.classList.contains("presenter") ? PRESENTER_SCALE : 1;
    const wanted = figure.layout,
      m = { ...wanted.margin, l: wanted.margin.l * big, b: wanted.margin.b * big, t: wanted.margin.t * big };
    const heading = { ...wanted.title, font: { ...wanted.title.font, size: (wanted.title.font?.size || 14) * big } };
    const height = fittedHeight(wanted.height * big + (big - 1) * 60);
    textScale = big;
    const layout = { ...wanted, margin: m, title: heading, height },
      shown = { ...figure, layout };
    const plot = { x: m.l, y: m.t, w: width - m.l - m.r - COLORBAR_SPACE, h: height - m.t - m.b };
    const domain = layout.xaxis.domain || [0, 1];
    const mainBox = { x: plot.x + domain[0] * plot.w, y: plot.y, w: (domain[1] - domain[0]) * plot.w, h: plot.h };
    const parts = [],
      cells = [];
    const trace = figure.data[0];
    const zoomed = zoom
      ? ` · zoomed: queries ${position(trace.y[zoom.r0])}-${position(trace.y[zoom.r1 - 1])}, keys ${position(trace.x[zoom.c0])}-${position(trace.x[zoom.c1 - 1])} (double-click for all)`
      : "";
    const title = layout.title.text + zoomed,
      size = layout.title.font?.size || 14;
    const lines = fitted(title, width / (0.55 * size)); // two lines start higher, clear of the plot
    parts.push(
      textLines(lines, width * (layout.title.x ?? 0.01), lines.includes("<br>") ? 14 : 22, `font-size="${size}"`),
    );
    const main = drawMain(parts, cells, shown, mainBox);
    let overview = null;
    if (figure.data[1]) {
      const [a, b] = layout.xaxis2.domain,
        [c, d] = layout.yaxis2.domain;
      const box = { x: plot.x + a * plot.w, w: (b - a) * plot.w, y: plot.y + (1 - d) * plot.h, h: (d - c) * plot.h };
      overview = drawOverview(parts, cells, shown, box);
    }
    drawColorbar(parts, figure.data[0], plot.x + plot.w + 16, plot.y + 12, plot.h - 12);
    // The cells' canvases under one SVG of text and outlines.
    figureBox.style.height = `${height}px`;
    const label = describe(figure, title);
    const svg = `<svg xmlns="${NS}" width="${width}" height="${height}" role="img" aria-label="${escapeText(label).replace(/"/g, "&quot;")}"`;
    figureBox.innerHTML = `${svg} font-family="${FONT}" font-size="${12 * big}" fill="#2a3f5f">${parts.join("")}</svg>`;
    figureBox.prepend(...cells);
    fillTable();
    drawn = { main, overview };
    // What the tests and bench/bench_ui.py read: the figure shown, and when it was drawn.
    figureBox.data = figure.data;
    figureBox.layout = layout;
    figureBox.drawnAt = performance.now();
    figureBox.drawMs = figureBox.drawnAt - started;
    figureBox.dispatchEvent(new CustomEvent("drawn", { detail: { started, ms: figureBox.drawMs } }));
    download.textContent = `⤓ ${(figure.config?.toImageButtonOptions?.format || "png").toUpperCase()}`;
  }

  function cellAt(event) {
    if (!drawn) return null;
    const rect = figureBox.getBoundingClientRect();
    const x = event.clientX - rect.left,
      y = event.clientY - rect.top;
    const { main, overview } = drawn;
    const inside = (b) => x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + b.h;
    if (inside(main.box)) {
      const r = Math.min(main.r1 - 1, main.r0 + Math.floor((y - main.box.y) / main.rh));
      const c = Math.min(main.c1 - 1, main.c0 + Math.floor((x - main.box.x) / main.cw));
      const z = main.grid.values[r * main.grid.cols + c];
      const text = Number.isNaN(z)
        ? `query ${main.trace.y[r]}<br>key ${main.trace.x[c]}<br>masked: ${maskedWhy(main.trace.y[r], main.trace.x[c])}`
        : fill(main.trace.hovertemplate, { x: main.trace.x[c], y: main.trace.y[r], z });
      return { x, y, r, c, text, query: position(main.trace.y[r]) };
    }
    if (overview && inside(overview.box)) {
      const t = overview.trace,
        layout = props.value.layout;
      const [xa, xb] = layout.xaxis2.range,
        [ya, yb] = layout.yaxis2.range;
      const vx = xa + ((x - overview.box.x) / overview.box.w) * (xb - xa);
      const vy = ya + ((overview.box.y + overview.box.h - y) / overview.box.h) * (yb - ya);
      const c = Math.floor((vx - t.x0 + t.dx / 2) / t.dx),
        r = Math.floor((vy - t.y0 + t.dy / 2) / t.dy);
      const z = overview.grid.values[r * overview.grid.cols + c];
      const query = Math.min(Math.max(Math.round(vy), 0), Math.round(ya - 0.5)); // the row under the pointer
      if (r < 0 || c < 0 || r >= overview.grid.rows || c >= overview.grid.cols || Number.isNaN(z))
        return { x, y, query, text: null };
      return { x, y, query, text: fill(t.hovertemplate, { x: t.x0 + c * t.dx, y: t.y0 + r * t.dy, z }) };
    }
    return null;
  }

  figureBox.addEventListener("pointermove", (event) => {
    const cell = cellAt(event);
    if (!cell || !cell.text) {
      tip.hidden = true;
      return;
    }
    tip.innerHTML = cell.text;
    tip.hidden = false;
    tip.style.left = `${cell.x + 14}px`;
    tip.style.top = `${cell.y + 14}px`;
  });
  figureBox.addEventListener("pointerleave", () => (tip.hidden = true));

  // Zoom: drag over the heatmap to show those rows and columns; double-click to show all again.
  let dragFrom = null,
    dragged = false,
    pendingSelect = null;
  figureBox.addEventListener("pointerdown", (event) => {
    const cell = cellAt(event);
    dragFrom = cell && cell.r !== undefined ? cell : null;
  });
  figureBox.addEventListener("pointerup", (event) => {
    const cell = cellAt(event);
    dragged = Boolean(
      dragFrom &&
      cell &&
      cell.r !== undefined &&
      (Math.abs(cell.r - dragFrom.r) > 1 || Math.abs(cell.c - dragFrom.c) > 1),
    );
    if (dragged)
      zoomTo(
        Math.min(cell.r, dragFrom.r),
        Math.max(cell.r, dragFrom.r) + 1,
        Math.min(cell.c, dragFrom.c),
        Math.max(cell.c, dragFrom.c) + 1,
      );
    dragFrom = null;
  });
  figureBox.addEventListener("click", (event) => {
    const cell = cellAt(event);
    const selectsQuery = figureBox.dataset.selectsQuery === "yes"; // the template says it (heatmap.py)
    if (dragged || !selectsQuery || !cell || cell.query === undefined || event.detail !== 1) return;
    // A click picks that query, as a click on its token does; wait a moment in case it is a double-click.
    clearTimeout(pendingSelect);
    pendingSelect = setTimeout(() => trigger("select", { index: cell.query, value: cell.query }), 250);
  });
  figureBox.addEventListener("dblclick", () => {
    clearTimeout(pendingSelect);
    zoom = null;
    draw();
  });

  // The zoom is kept by its labels: a new figure (a Step) keeps it while the same rows and columns
  // are where they were; another view (a layer, a head, a moved window) shows all of it.
  function zoomTo(r0, r1, c0, c1) {
    const { x, y } = props.value.data[0];
    zoom = {
      r0,
      r1,
      c0,
      c1,
      labels: [y[r0], y[r1 - 1], x[c0], x[c1 - 1]].join("\n"),
      title: props.value.layout.title.text,
    };
    draw();
  }

  function zoomStillFits(figure) {
    if (!zoom) return false;
    const { x, y } = figure.data[0],
      { r0, r1, c0, c1 } = zoom;
    const sameView =
      figure.layout.title.text.split(",").slice(0, 3).join() === zoom.title.split(",").slice(0, 3).join();
    return sameView && [y[r0], y[r1 - 1], x[c0], x[c1 - 1]].join("\n") === zoom.labels;
  }

  // Download what is shown: the SVG itself, or drawn into a canvas at twice the size for a PNG.
  download.addEventListener("click", () => {
    const shown = figureBox.querySelector("svg");
    if (!shown) return;
    const svg = shown.cloneNode(true); // with the cells as images under the text and outlines
    for (const canvas of [...figureBox.querySelectorAll("canvas")].reverse()) {
      const image = document.createElementNS(NS, "image");
      const at = { x: canvas.style.left, y: canvas.style.top, width: canvas.style.width, height: canvas.style.height };
      for (const [name, value] of Object.entries(at)) image.setAttribute(name, parseFloat(value));
      image.setAttribute("preserveAspectRatio", "none");
      image.setAttribute("style", "image-rendering: pixelated");
      image.setAttribute("href", canvas.toDataURL("image/png"));
      svg.prepend(image);
    }
    const options = props.value.config?.toImageButtonOptions || {};
    const name = options.filename || "heatmap",
      format = options.format || "png";
    const blob = new Blob([new XMLSerializer().serializeToString(svg)], { type: "image/svg+xml" });
    const save = (file) => {
      const link = document.createElement("a");
      link.href = URL.createObjectURL(file);
      link.download = `${name}.${format}`;
      link.click();
      setTimeout(() => URL.revokeObjectURL(link.href), 1000);
    };
    if (format === "svg") return save(blob);
    const image = new Image();
    image.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = shown.width.baseVal.value * 2;
      canvas.height = shown.height.baseVal.value * 2;
      const context = canvas.getContext("2d");
      context.fillStyle = "white";
      context.fillRect(0, 0, canvas.width, canvas.height);
      context.imageSmoothingEnabled = false;
      context.drawImage(image, 0, 0, canvas.width, canvas.height);
      canvas.toBlob(save, "image/png");
    };
    image.src = URL.createObjectURL(blob);
  });

  watch("value", () => {
    if (!zoomStillFits(props.value)) zoom = null;
    draw();
  });
  new ResizeObserver(() => draw()).observe(figureBox);
  window.addEventListener("resize", () => draw());
  draw();
})();
