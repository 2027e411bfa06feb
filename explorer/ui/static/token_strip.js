// The token strip's selection (the frame's; explorer/ui/layout.py puts it into the page's script):
// the selected token (the query) marked by an attribute, data-selected, which the keys, the strip's
// scrolling and the answer cover read. Gradio's HighlightedText writes a token's category nowhere
// in the page, only its colour; the strip's own legend says which colour is "query", so it is
// found here, once, and no colour is written in any script: a change of palette in Python
// (explorer/viz/labels.py) cannot part the two.
page => {
  const rgbOf = colour => (colour.match(/[\d.]+/g) || []).slice(0, 3).join(',');  // rgba()'s alpha aside
  const mark = all => {
    const legend = Array.from(document.querySelectorAll('#token-strip .legend-item'))
      .find(item => item.textContent.trim() === 'query');
    const colour = legend && rgbOf(legend.style.backgroundColor);
    all.forEach(t => {
      const selected = !!colour && rgbOf(t.style.backgroundColor) === colour;
      if (selected !== t.hasAttribute('data-selected')) t.toggleAttribute('data-selected', selected);
    });
  };
  const {tokens, selectedIndex} = page;

  // The token strip scrolls inside its box (page.css): to the newest token when one is added, and
  // to the query when another is picked (from a heatmap, it may be out of the box's view).
  const follow = () => {
    const strip = document.querySelector('#token-strip');
    if (!strip) return setTimeout(follow, 200);
    let count = 0;
    new MutationObserver(() => {
      const box = strip.querySelector('.textfield');
      const all = tokens();
      mark(all);  // first: a query picked elsewhere changes only the tokens' colours (no node the page's observer sees)
      if (box && all.length > count) box.scrollTop = box.scrollHeight;
      else if (box) {
        const query = all[selectedIndex(all)];
        const at = query && query.getBoundingClientRect(), shown = box.getBoundingClientRect();
        if (at && (at.top < shown.top || at.bottom > shown.bottom)) {
          box.scrollTop += at.top - shown.top - box.clientHeight / 2;
        }
      }
      count = all.length;
    }).observe(strip, {childList: true, subtree: true, attributes: true, attributeFilter: ['style']});
  };
  follow();
  page.whenPageChanges(() => mark(tokens()));  // (and wherever Gradio drew the strip anew)
}
