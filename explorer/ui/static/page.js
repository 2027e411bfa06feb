// What the page runs once it has loaded (Gradio's launch js): the frame. explorer/ui/layout.py
// puts in, below the helpers, each feature's own script (explorer.ui.feature.Feature.scripts) and the
// token strip's and the keys' (static/token_strip.js, keys.js), each a function called with the
// helpers below, and fills in the button names.
() => {
  // What the parts read of the page. The strip's tokens, and which one is selected (the query; -1
  // when none is marked: static/token_strip.js marks it with data-selected).
  const tokens = () => Array.from(document.querySelectorAll('#token-strip .token'));
  const selectedIndex = all => all.findIndex(t => t.hasAttribute('data-selected'));
  // ``fn`` once per animation frame after anything in the page changed (Gradio redrew a part):
  // read by the charts' labels below and by the features' scripts.
  const whenPageChanges = fn => {
    let queued = false;
    new MutationObserver(() => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => { queued = false; fn(); });
    }).observe(document.body, {childList: true, subtree: true});
  };
  const page = {tokens, selectedIndex, whenPageChanges};

  __PARTS__

  // Names for a screen reader that Gradio's components leave out or get wrong, set again whenever
  // the page changes (a rAF after the last change): Plotly's figures get their title and a
  // heatmap's strongest cell (the attention heatmaps describe themselves, heatmap.js); images
  // that take clicks and the file drop zone get a name that matches what they show.
  (() => {
    const kinds = {f8: Float64Array, f4: Float32Array};
    const grid = z => {  // {values, cols}: z as the server sends it (a typed array in base64) or as rows
      if (!z) return null;
      if (!z.bdata) return {values: Array.from(z).flatMap(r => Array.from(r)), cols: z[0] ? z[0].length : 0};
      if (!kinds[z.dtype]) return null;
      const text = atob(z.bdata), bytes = new Uint8Array(text.length);
      for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
      return {values: new kinds[z.dtype](bytes.buffer), cols: +String(z.shape).split(',')[1]};
    };
    const strongest = trace => {
      const g = grid(trace.z);
      if (!g || !g.cols) return '';
      let best = null;
      g.values.forEach((v, i) => {
        if (v !== null && !Number.isNaN(v) && (!best || v > best.v)) best = {v, r: Math.floor(i / g.cols), c: i % g.cols};
      });
      if (!best) return '';
      const x = trace.x ? trace.x[best.c] : best.c, y = trace.y ? trace.y[best.r] : best.r;
      return ` Strongest cell: ${y}, ${x} (${(+best.v).toFixed(2)}).`;
    };
    const names = __BUTTON_NAMES__;
    const label = () => {
      for (const [id, name] of Object.entries(names)) {
        const button = document.querySelector(`#${id} button:not([aria-label])`);
        if (button) button.setAttribute('aria-label', name);
      }
      // An empty gr.Plot is a div named "empty value" with no role (not allowed a name): an image.
      for (const empty of document.querySelectorAll('.empty[aria-label]:not([role])')) empty.setAttribute('role', 'img');
      // The drop zone is named "Click to upload or drop files" but shows other words: its own.
      for (const zone of document.querySelectorAll('button.upload-container')) {
        const shown = zone.textContent.replace(/\s+/g, ' ').trim();
        if (shown && zone.getAttribute('aria-label') !== shown) zone.setAttribute('aria-label', shown);
      }
      for (const g of document.querySelectorAll('.js-plotly-plot')) {
        if (!g.data || g._labelled === g.data) continue;
        const title = (g.layout && g.layout.title && (g.layout.title.text || g.layout.title)) || 'A chart';
        const heat = g.data.find(t => t.type === 'heatmap');
        g.setAttribute('role', 'figure');
        g.setAttribute('aria-label', String(title).replace(/<br>/g, ' ') + (heat ? strongest(heat) : ''));
        g._labelled = g.data;
      }
    };
    whenPageChanges(label);
    label();
  })();

  // The server this page talks to (explorer/ui/health.py): GET health every 2 s names it. A
  // process that answers with another name (another replica behind nginx, or the app started
  // again) holds none of the page's state: the page reloads, and the session this browser kept
  // comes back on that process, its tokens replayed. After the reload one line says so. A short
  // request, not one held open: a browser allows six connections to one server for all its tabs.
  (() => {
    const MOVED = 'decoder-explorer-moved', EVERY_MS = 2000;
    const pause = ms => new Promise(done => setTimeout(done, ms));
    if (sessionStorage.getItem(MOVED)) {
      sessionStorage.removeItem(MOVED);
      const line = document.createElement('div');
      line.id = 'server-moved';
      line.setAttribute('role', 'status');
      line.textContent = 'The server this page was on stopped: your session was brought back on another one. ' +
        'Click to close.';
      line.onclick = () => line.remove();
      document.body.prepend(line);
      setTimeout(() => line.remove(), 30000);
    }
    const asked = async () => {  // the server's name, or null when nobody answers
      try {
        const answer = await fetch(new URL('health', location.href), {cache: 'no-store'});
        return answer.ok ? (await answer.json()).server : null;
      } catch (e) { return null; }
    };
    (async () => {
      let mine = null;
      for (;; await pause(EVERY_MS)) {
        if (document.hidden) continue;  // a tab in the background asks once it is shown again
        const server = await asked();
        if (!server) continue;  // the server is away: asked again soon
        if (mine && server !== mine) {
          sessionStorage.setItem(MOVED, '1');
          location.reload();
          return;
        }
        mine = server;
        document.body.dataset.server = mine;  // (for a test: which process this page is on)
      }
    })();
  })();
}
