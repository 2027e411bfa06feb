// The page's keys (the frame's; explorer/ui/layout.py puts it into the page's script).
// Keys for a demo in front of a class: s steps, u undoes, the left and right arrows move the
// query one token. Not while typing (a text box has the focus) or with a modifier held (the
// browser's own shortcuts), and not while the button is off (a model still loading).
page => {
  const {tokens, selectedIndex} = page;
  const typing = e => e.target.closest('input, textarea, select, [contenteditable=""], [contenteditable="true"]');
  const press = id => { const b = document.getElementById(id); if (b && !b.disabled) b.click(); };
  const moveQuery = by => {
    const all = tokens();
    if (!all.length) return;
    let at = selectedIndex(all);
    if (at < 0) at = all.length - 1;  // no token picked: the newest is the query
    const next = Math.min(all.length - 1, Math.max(0, at + by));
    if (next !== at) all[next].click();
  };
  document.addEventListener('keydown', e => {
    const act = {s: () => press('step'), u: () => press('undo'), ArrowLeft: () => moveQuery(-1),
                 ArrowRight: () => moveQuery(1)}[e.key];
    if (!act) return;
    if (typing(e) || e.ctrlKey || e.metaKey || e.altKey || e.repeat) {
      // Left to the text box or the browser; counted, so that a test can see it was decided.
      document.body.dataset.shortcutsLeftAlone = Number(document.body.dataset.shortcutsLeftAlone || 0) + 1;
      return;
    }
    e.preventDefault();
    act();
  });
}
