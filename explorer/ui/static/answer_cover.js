// The answer cover (the Lessons panel's script, explorer.ui.panels.lessons: its feature puts it
// into the page's script, the covered views filled in from explorer/ui/answer_cover.py).
page => {
  const {tokens, whenPageChanges} = page;
  // While a question asks which token comes next (explorer/ui/answer_cover.py), every view that
  // would name it is covered, the reason written in its place. Covered when the server's hidden
  // box says so (the teacher's page, a learner alone, a following student on such a lesson step:
  // while the strip holds the tokens it names, and until a question it names is revealed), or
  // when a student's open question does (the workshop's script, static/workshop.js). Looked at
  // whenever the page changes, and twice a second (a box's new value changes no element).
  (() => {
    const COVERED = __COVERED__;
    const told = () => {
      const box = document.querySelector('#answer-cover textarea, #answer-cover input');
      if (!box || !box.value) return null;
      try { return JSON.parse(box.value); } catch (e) { return null; }
    };
    const cover = () => {
      const d = document.body.dataset, box = told();
      let why = d.roundCovers || '';
      if (!why && box && box.why) {
        const held = box.tokens === null || box.tokens === tokens().length;
        const revealed = Array.isArray(box.ends) && box.ends.includes(d.roundRevealed);
        if (held && !revealed) why = box.why;
      }
      for (const selector of COVERED) {
        const view = document.querySelector(selector);
        if (!view) continue;
        if (why && view.dataset.answerHidden !== why) view.dataset.answerHidden = why;
        if (!why && view.dataset.answerHidden !== undefined) delete view.dataset.answerHidden;
      }
      if ((document.body.dataset.answerCovered || '') !== why) document.body.dataset.answerCovered = why;  // (for a test)
      holdSteps(d.roundCovers || '');
    };
    // A student's own Step and Generate wait while the class's question is open: a Step shows
    // the very token the class predicts (a fresh-eyes student stepped on their own, saw the
    // answer, then sent it). Only the buttons this script turned off are turned on again.
    const holdSteps = why => {
      for (const id of ['step', 'generate']) {
        const button = document.getElementById(id);
        if (!button) continue;
        if (why && !button.disabled) {
          button.disabled = true;
          button.dataset.heldForQuestion = why;
          button.title = why;
        } else if (!why && button.dataset.heldForQuestion) {
          delete button.dataset.heldForQuestion;
          button.removeAttribute('title');
          button.disabled = false;
        }
      }
    };
    whenPageChanges(cover);
    setInterval(cover, 500);
    cover();
  })();
}
