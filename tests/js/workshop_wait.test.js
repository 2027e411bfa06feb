// The workshop long poll's pauses (explorer/ui/static/workshop_wait.js) against the server's own
// "busy" answers (explorer/ui/workshop_watch.py's busy()), which tests/test_page_script.py makes
// and passes in a JSON file ($WORKSHOP_BUSY_EXPECTED): a page told "try again in N s" waits N s.
const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");

const source = fs.readFileSync(path.join(__dirname, "../../explorer/ui/static/workshop_wait.js"), "utf8");
const parts = new Function(`return (${source});`)(); // an expression, as workshop.js takes it in
const expectedPath = process.env.WORKSHOP_BUSY_EXPECTED;
if (!expectedPath) throw new Error("WORKSHOP_BUSY_EXPECTED is not set: run these through tests/test_page_script.py");
const busy = JSON.parse(fs.readFileSync(expectedPath, "utf8"));

test("a busy answer (429, 503) pauses the N s it names, and at most a quarter more", () => {
  assert.ok(busy.length >= 2);
  for (const { status, body } of busy) {
    assert.ok(body.retry_s > 0, JSON.stringify(body));
    assert.equal(parts.pauseMs(status, body, () => 0), 1000 * body.retry_s, `${status} at least N s`);
    const most = parts.pauseMs(status, body, () => 0.999999);
    assert.ok(most >= 1000 * body.retry_s && most <= 1250 * body.retry_s, `${status}: ${most} ms`);
  }
});

test("an answer or a seat gone asks again at once; a server away after a second", () => {
  assert.equal(parts.pauseMs(200, { key: "v1" }), 0);
  assert.equal(parts.pauseMs(404, { gone: true }), 0);
  assert.equal(parts.pauseMs(0, {}), 1000); // no answer came
  assert.equal(parts.pauseMs(502, {}), 1000);
});

test("a busy answer without a usable retry_s still pauses a minute, never at once", () => {
  for (const body of [{}, { retry_s: "soon" }, { retry_s: -5 }, { retry_s: 0 }, null]) {
    assert.equal(parts.pauseMs(429, body, () => 0), 60000, JSON.stringify(body));
    assert.equal(parts.pauseMs(503, body, () => 0), 60000, JSON.stringify(body));
  }
  assert.equal(parts.pauseMs(503, { retry_s: 1e9 }, () => 0), 3600000); // at most an hour
});
