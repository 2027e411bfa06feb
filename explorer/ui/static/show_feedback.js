// After Check: the lesson's feedback scrolled into sight (only as far as needed), once drawn.
() => { requestAnimationFrame(() => document.getElementById('lesson-feedback')
          ?.scrollIntoView({block: 'nearest', behavior: 'instant'})); return []; }
