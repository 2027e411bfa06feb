// How long the workshop's long poll (static/workshop.js) pauses before it asks again, from the
// server's answer (explorer/ui/workshop_watch.py). An expression: the workshop's feature puts it
// into workshop.js (its waitParts); node runs it in tests/js/workshop_wait.test.js.
(() => {
  const AWAY_MS = 1000; // no answer, or an error without retry_s: the server is away (a restart)
  const BUSY_S = 60; // a 429 or 503 that names no retry_s
  const SPREAD = 0.25; // a class told "busy" at one moment comes back spread over a quarter more

  // Milliseconds before the next wait: none after an answer (200) or a seat gone (404 {gone});
  // "busy, try again in N s" (429 or 503 {retry_s: N}): N s, and at most a quarter more; else a second.
  function pauseMs(status, data, random = Math.random) {
    if (status === 200 || (status === 404 && data && data.gone)) return 0;
    if (status === 429 || status === 503) {
      const asked = Number(data && data.retry_s);
      const seconds = Number.isFinite(asked) && asked > 0 ? Math.min(asked, 3600) : BUSY_S;
      return 1000 * seconds * (1 + SPREAD * random());
    }
    return AWAY_MS;
  }

  return { pauseMs };
})()
