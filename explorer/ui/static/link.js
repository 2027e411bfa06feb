// A link's query string made whole with this page's own address; its box brought into sight (at
// 720 pixels it opened below the screen's edge, and Make a link looked like it did nothing).
(q) => {
  requestAnimationFrame(() => document.getElementById("share-link")?.scrollIntoView({ block: "nearest", behavior: "instant" }));
  return q ? location.origin + location.pathname + q : q;
}
