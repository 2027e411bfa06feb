// The Workshop panel's script (explorer.ui.panels.workshop: its feature puts it into the page's
// script, the teacher link's part filled in from Python): a function of the page's helpers.
page => {
  const {whenPageChanges} = page;
  // A teacher link's secret out of the address at once (static/teacher_link.js), before anything
  // else the page's script does (the features' scripts run first): kept for the workshop's load
  // event, which sends it in a request's body.
  (__TEACHER_LINK__)();

  // A following student who moves the view themselves (the s key, a token, a head, a tab) explores
  // on their own from then on: the server decides (the panel's after_event), and their panel
  // must say so at once, not at the teacher's next move. Once the browser has kept the moved view
  // (its wiring says so with an event, explorer/ui/panels/workshop/wiring.py), this presses the
  // hidden button that redraws the panel; only after a move of the person's (a pointer or a key
  // outside the Workshop panel), never after the teacher's view was taken. #workshop-focus is
  // ticked while a student follows.
  (() => {
    // The intro's "Join or run a workshop" link (#workshop): the Lessons and Workshop panels opened first.
    document.addEventListener('click', e => {
      if (!(e.target.closest && e.target.closest('#intro a[href="#workshop"]'))) return;
      e.preventDefault();
      document.getElementById('workshop-open')?.click();
    }, true);
    let acted = false;
    const mark = e => { if (!(e.target.closest && e.target.closest('#workshop'))) acted = true; };
    document.addEventListener('pointerdown', mark, true);
    document.addEventListener('keydown', mark, true);
    document.addEventListener('decoder-explorer-view-kept', () => {
      const following = document.querySelector('#workshop-focus input')?.checked;
      if (!acted || !following) return;
      acted = false;
      document.getElementById('workshop-own-move')?.click();
    });
  })();

  // The teacher asks: the class's count and chart come in below the buttons, off the screen of a
  // 720-pixel projector. Once drawn they are brought into view once (only where off screen, the
  // chart's top kept on screen), within ten seconds of the click, and not after the teacher has
  // done anything else (a click elsewhere, a scroll, a key): the page never moves under them.
  (() => {
    const ASKS = '#workshop-ask, #workshop-ask-next, #workshop-again';
    let until = 0;
    document.addEventListener('pointerdown', e => {
      until = e.target.closest && e.target.closest(ASKS) ? Date.now() + 10000 : 0;
    }, true);
    for (const name of ['wheel', 'touchmove', 'keydown']) document.addEventListener(name, () => { until = 0; }, true);
    whenPageChanges(() => {
      const chart = document.querySelector('#workshop-chart');
      if (Date.now() > until || !chart || !chart.querySelector('.js-plotly-plot')) return;
      const box = chart.getBoundingClientRect();
      if (!box.height) return;
      if (box.bottom > innerHeight) window.scrollBy(0, Math.min(box.bottom - innerHeight + 12, box.top - 12));
      until = 0;  // brought into view (or already there): once
    });
  })();

  // A workshop (explorer/ui/workshop_watch.py): a long poll, POST workshop/wait with the page's
  // seat in the body (a student's token or the teacher's secret: never in a URL), answers when the
  // workshop changed as this page's part sees it (nothing secret in it). A teacher's page then
  // presses the panel's hidden Sync button: one event of the page's queue per change, none while
  // nothing changes. A student's page asks for its question (POST workshop/round), draws it, and
  // sends its answers (POST workshop/answer) itself (explorer/ui/workshop_round.py): no Gradio
  // event for a question, an answer or a reveal. It presses a Sync only to take the teacher's
  // moved view. A tab in the background does not ask; shown again, it catches up at once.
  // When the seat is gone (404 {gone}: the workshop ended or expired, or the seat was removed;
  // the same answer as for a code that never existed) the page says so at once, turns Send off,
  // stops asking for that seat, and presses the panel's Sync: the server ends the tab's part
  // (the panel says the workshop ended; the page's own work stays). "Busy, try again in N s" (429,
  // 503): N s of pause first (static/workshop_wait.js), never a burst of asking again.
  (() => {
    const waitParts = __WAIT_PARTS__;
    const pause = ms => new Promise(done => setTimeout(done, ms));
    const SPREAD_MS = 600, TEACHER_EVERY_MS = 400;
    const UNREACHABLE = 'The server did not answer: try again in a moment.';
    const seat = () => {
      const box = document.querySelector('#workshop-live textarea, #workshop-live input');
      if (!box || !box.value) return null;
      try { return JSON.parse(box.value); } catch (e) { return null; }
    };
    const credentials = w => (w.role === 'teacher' ? {code: w.code, secret: w.secret} : {code: w.code, token: w.token});
    const sync = id => {
      document.getElementById(id)?.click();
      document.body.dataset.workshopSyncs = Number(document.body.dataset.workshopSyncs || 0) + 1;
    };
    // {status, data}: the answer's status (0 when none came) and its JSON (or {}).
    const ask = async (path, body) => {
      try {
        const answer = await fetch(new URL(path, location.href), {
          method: 'POST', cache: 'no-store', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body),
        });
        let data = {};
        try { data = await answer.json(); } catch (e) { data = {}; }
        return {status: answer.status, data};
      } catch (e) { return {status: 0, data: {}}; }
    };
    const post = async (path, body) => {
      const {status, data} = await ask(path, body);
      if (status === 404 && data.gone) return {gone: true, error: data.error};
      return status === 200 ? data : {error: data.error || UNREACHABLE};
    };
    let gonePlace = '';  // the seat (as the page's script read it) the server said is gone

    // A student's question as last read, what they picked but have not sent, and the last refusal.
    let shown = null, picked = {round: null, choice: null, typed: ''}, problem = '';
    const el = (tag, props = {}, ...children) => {
      const made = Object.assign(document.createElement(tag), props);
      made.append(...children);
      return made;
    };
    const mine = () => (picked.round === shown.round && picked.choice !== null ? picked.choice : shown.mine);
    // Drawn into the panel's HTML block when the question or the refusal changed, or when Gradio
    // put the block back (shown again); not at every change of the page, which would take the
    // typing cursor away (what the student picked or typed is kept across a redraw).
    const draw = () => {
      const body = document.querySelector('#workshop-round .workshop-round-body');
      const stamp = JSON.stringify([shown, problem]);
      if (!body || !shown || body.dataset.drawn === stamp) return;
      const open = shown.round !== null && !shown.revealed;
      const choices = el('fieldset', {id: 'workshop-choice'}, el('legend', {textContent: 'Your answer'}));
      for (const option of shown.options) {
        const input = el('input', {type: 'radio', name: 'workshop-choice', value: option, disabled: !open,
                                   checked: option === mine()});
        input.addEventListener('change', () => { picked = {...picked, round: shown.round, choice: option}; });
        choices.append(el('label', {}, input, document.createTextNode(option)));  // a token: text, never markup
      }
      const typed = el('input', {id: 'workshop-typed', type: 'text', maxLength: 40,
                                 value: picked.round === shown.round ? picked.typed : ''});
      typed.addEventListener('input', () => { picked = {...picked, round: shown.round, typed: typed.value}; });
      const send = el('button', {id: 'workshop-send', type: 'button', textContent: 'Send my answer', disabled: !open});
      send.addEventListener('click', () => answer(send));
      body.replaceChildren(
        el('div', {id: 'workshop-question', className: 'prose', innerHTML: shown.question_html}),  // made safe on the server
        choices,
        el('label', {id: 'workshop-typed-box', hidden: !shown.typed}, '…or type the token you expect', typed),
        send,
        el('p', {id: 'workshop-problem', role: 'alert', textContent: problem}),
        el('div', {id: 'workshop-result', className: 'prose', innerHTML: shown.result_html}),
      );
      body.dataset.drawn = stamp;
    };
    // What the cover below reads of the question: the sentence while it asks for the next token,
    // and the title of a revealed question (it ends the cover of that lesson step).
    const tellCover = () => {
      const covers = (shown && shown.covers) || '', revealed = (shown && shown.revealed && shown.title) || '';
      const d = document.body.dataset;
      if (d.roundCovers !== covers) d.roundCovers = covers;
      if (d.roundRevealed !== revealed) d.roundRevealed = revealed;
    };
    const show = view => {
      if (view.gone) return gone(view.error);
      if (view.error) problem = view.error;
      else { shown = view; problem = ''; }
      tellCover();
      draw();
    };
    // The seat is gone: said in the question's place at once, Send off; the panel's Sync makes
    // the server end the tab's part (and say so in the panel), once for this seat.
    const gone = said => {
      const w = seat();
      if (!w || JSON.stringify(w) === gonePlace) return;
      gonePlace = JSON.stringify(w);
      document.body.dataset.workshopGone = w.code;  // (for a test: the page knows)
      problem = said || '';
      if (shown) shown = {...shown, revealed: true, typed: false, covers: ''};  // nothing more can be sent
      else shown = {round: null, options: [], mine: null, revealed: true, typed: false, covers: '', question_html: '', result_html: ''};
      tellCover();  // an ended question hides nothing
      draw();
      document.querySelectorAll('#workshop-send, #workshop-choice input, #workshop-typed').forEach(b => { b.disabled = true; });
      sync('workshop-sync');
    };
    const answer = async send => {
      const w = seat();
      if (!w || !shown) return;
      send.disabled = true;
      const choice = picked.round === shown.round ? picked.choice : null;
      const typed = picked.round === shown.round ? picked.typed : '';
      const view = await post('workshop/answer', {code: w.code, token: w.token, round: shown.round, choice, typed});
      if (!view.error) picked = {round: null, choice: null, typed: ''};
      show(view);
      send.disabled = shown.round === null || shown.revealed;
    };
    whenPageChanges(draw);

    // Brought into view (only where it is off screen): the sentence that the workshop ended, once
    // the panel says it (the explorer's controls come back above it and push it down), and a new
    // question when it arrives, never while the student types in a box.
    const typing = () => document.activeElement?.closest('input, textarea, select, [contenteditable="true"]');
    const intoView = el => {
      const at = el && el.getBoundingClientRect();
      if (at && at.height && (at.top < 0 || at.bottom > innerHeight)) window.scrollBy(0, at.top - 12);  // a margin above
    };
    let endedSaid = false, askedRound = null;
    // (looked at again for a moment while the page settles: the explorer's controls come back
    // above the sentence, a change of style that no element's change announces)
    const keepInView = (el, until) => {
      intoView(el);
      if (Date.now() < until) setTimeout(() => keepInView(el, until), 200);
    };
    whenPageChanges(() => {
      const info = document.querySelector('#workshop-info');
      const ended = !!info && /has ended|removed your place/.test(info.textContent);
      if (ended && !endedSaid) keepInView(info.querySelector('p') || info, Date.now() + 2000);
      endedSaid = ended;
      const question = document.querySelector('#workshop-question');
      const round = shown && !shown.revealed && question ? shown.round : null;
      if (round !== null && round !== askedRound && !typing()) intoView(question);
      askedRound = round;
    });

    (async () => {
      let seen = '', place = '', last = null, token = null, lastSync = 0;
      for (;;) {
        const w = seat();
        if (!w || !w.code) { shown = null; tellCover(); }  // left: no question of theirs covers anything
        if (!w || !w.code || document.hidden || JSON.stringify(w) === gonePlace) { await pause(500); continue; }
        if (JSON.stringify(w) !== place) {  // joined, left, follows again
          if (w.token !== token) { shown = null; token = w.token; tellCover(); }  // another seat: another question
          place = JSON.stringify(w); seen = ''; last = null;
        }
        const {status, data} = await ask('workshop/wait', {...credentials(w), seen});
        if (status === 404 && data.gone) { gone(data.error); continue; }
        // Busy (429, 503: too many misses or waits here): the N s it said; away (a restart): a second.
        if (status !== 200) { await pause(waitParts.pauseMs(status, data)); continue; }
        const pulse = data;
        if (pulse.key !== seen) {  // (once more after a join or a reload: a change may have come between)
          const moved = !last || pulse.version !== last.version;
          seen = pulse.key;
          last = pulse;
          if (w.role === 'teacher') {
            // A class answering moves the teacher's count up to thirty times in five seconds: the
            // teacher's panel (count, chart, roll) is redrawn at most every TEACHER_EVERY_MS, each
            // time as it is then, so the last answer still shows within half a second.
            await pause(lastSync + TEACHER_EVERY_MS - Date.now());
            lastSync = Date.now();
            sync('workshop-sync');
          } else {
            // Thirty students' pages see a question at the same moment: each waits a random moment
            // (at most SPREAD_MS) first, so that their requests reach the server spread out
            // instead of as one burst in front of everyone's Steps (bench/bench_workshop.py).
            await pause(Math.random() * SPREAD_MS);
            show(await post('workshop/round', {code: w.code, token: w.token}));
            if (moved && w.following && JSON.stringify(w) !== gonePlace) sync('workshop-follow-sync');  // the teacher's view moved: taken
          }
        }
      }
    })();
  })();
}
