<script>
// Each tab keeps its own session (issue 40). Gradio's gr.BrowserState keeps the session in
// localStorage, which every tab of the browser shares: a reload of one tab brought back the text
// of the tab that changed last. This runs in the page's <head>, before Gradio reads the kept
// session: for the session's key (__KEY__) this tab's own copy, kept in sessionStorage (one per
// tab, kept across reloads of the tab), comes first; the shared localStorage copy is read only by
// a tab without one (a new tab), and still written at every change, for the next new tab.
// (docs/serving.md, "A reload loses nothing".)
(() => {
  const KEY = '__KEY__';
  const proto = Storage.prototype;
  const get = proto.getItem, set = proto.setItem, remove = proto.removeItem;
  const shared = () => window.localStorage, own = () => window.sessionStorage;
  const quietly = fn => { try { return fn(); } catch (e) { return null; } };  // (sessionStorage refused)
  const isKept = (storage, key) => storage === shared() && key === KEY;
  proto.getItem = function (key) {
    if (isKept(this, key)) {
      const mine = quietly(() => get.call(own(), key));
      if (mine !== null) return mine;
    }
    return get.call(this, key);
  };
  proto.setItem = function (key, value) {
    if (isKept(this, key)) quietly(() => set.call(own(), key, value));
    return set.call(this, key, value);
  };
  proto.removeItem = function (key) {
    if (isKept(this, key)) quietly(() => remove.call(own(), key));
    return remove.call(this, key);
  };
  // A lesson link (?lesson=3&step=2) opened over this tab's own work: the work is put aside, and
  // the next page load without a lesson link in this tab (the browser's Back) brings it back.
  // "Back to your text" brings it back in the page itself, so then nothing is put aside any more.
  const ASIDE = KEY + ':before-lesson-link';
  quietly(() => {
    const linked = new URLSearchParams(window.location.search).has('lesson');
    const mine = get.call(own(), KEY), aside = get.call(own(), ASIDE);
    if (linked && mine !== null && aside === null) set.call(own(), ASIDE, mine);
    if (!linked && aside !== null) {
      set.call(own(), KEY, aside);
      remove.call(own(), ASIDE);
    }
  });
  document.addEventListener('click', e => {
    if (e.target.closest && e.target.closest('#lesson-back')) quietly(() => remove.call(own(), ASIDE));
  }, true);
})();
</script>
