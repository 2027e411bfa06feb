// A teacher link opened (…/?workshop=K7PQ2M#teacher=SECRET; an older one had &teacher=SECRET in
// the query): the secret is taken out of the address at once (history.replaceState: it leaves the
// address bar, the history and every later request's URL and Referer) and kept for the page's
// load event, which sends it in its request's body (explorer/ui/workshop_events.on_load). Run by
// page.js as soon as it starts and by the load event itself, whichever comes first; returns the
// secret taken ('' when none).
() => {
  const hash = new URLSearchParams(location.hash.slice(1)), query = new URLSearchParams(location.search);
  const found = hash.get('teacher') || query.get('teacher');
  if (hash.has('teacher') || query.has('teacher')) {
    hash.delete('teacher');
    query.delete('teacher');
    const search = query.toString(), rest = hash.toString();
    history.replaceState(history.state, '', location.pathname + (search ? '?' + search : '') + (rest ? '#' + rest : ''));
  }
  if (found) window.__decoderTeacherSecret = found;
  return window.__decoderTeacherSecret || '';
}
