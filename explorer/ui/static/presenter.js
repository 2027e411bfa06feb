// Presenter mode on or off: the body's class (page.css); a resize event redraws the heatmaps
// (heatmap.js enlarges their text while the class is set).
(on) => { document.body.classList.toggle('presenter', on); window.dispatchEvent(new Event('resize')); return []; }
