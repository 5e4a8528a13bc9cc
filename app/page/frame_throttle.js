// Put first in the page's <head> (early_script.py), before any of Gradio's modules loads: they keep
// the browser's requestAnimationFrame when they load, so a later script cannot reach their loops.
//
// Gradio 6 leaves animation-frame loops running on an idle page (a hidden status tracker's elapsed-time
// timer, its loader's spring): 60 frames a second cost headless Chromium ~5-7 % of a core while
// nothing on screen changes, also in a 3-line Gradio app. A loop that has run for LOOP_AGE_MS gets
// its next frames at most every LOOP_FRAME_MS; a frame asked for by anything else (an event, a
// plotly draw, a short transition) comes at the next frame, as before.
(() => {
  const LOOP_AGE_MS = 1000, LOOP_FRAME_MS = __LOOP_FRAME_MS__;
  const request = window.requestAnimationFrame.bind(window);
  const cancel = window.cancelAnimationFrame.bind(window);
  const later = new Map();  // our id of a postponed frame -> {timer, frame}
  let nextId = -1;  // postponed frames get negative ids: the browser's are positive
  let loopStart = null;  // while a frame callback runs: when the loop it belongs to began
  const inLoop = (start, callback) => (time) => {
    loopStart = start;
    try { callback(time); } finally { loopStart = null; }
  };
  window.requestAnimationFrame = (callback) => {
    const start = loopStart ?? performance.now();
    if (loopStart === null || performance.now() - start < LOOP_AGE_MS) return request(inLoop(start, callback));
    const id = nextId--;
    const entry = {frame: 0, timer: setTimeout(() => {
      entry.frame = request((time) => { later.delete(id); inLoop(start, callback)(time); });
    }, LOOP_FRAME_MS)};
    later.set(id, entry);
    return id;
  };
  window.cancelAnimationFrame = (id) => {
    const entry = later.get(id);
    if (entry === undefined) return cancel(id);
    clearTimeout(entry.timer);
    if (entry.frame) cancel(entry.frame);
    later.delete(id);
  };
})();
