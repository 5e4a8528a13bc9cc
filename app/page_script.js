// The dashboard's own script, run in the page's <head>: page_script.py fills in its placeholders.
//
// 1. The Watch tab's status line and recovery line are fetched by this script, not sent by a Gradio
//    event: every Gradio event makes the page snapshot the props of each component that ever showed
//    a loading status, which on this page cost the browser ~25 % of a core at one tick a second; a
//    plain fetch of /gradio_api/run/watch_line and two innerHTML writes cost ~2 %. When the run's
//    state key changes (a failure, a recovery, the end) it presses the hidden draw-figures button,
//    so the figures are redrawn at once instead of at their own cadence.
// 2. Gradio 6 draws each gr.Plot update twice: the old plot div is redrawn with the new figure, then
//    a new div mounted in its place draws it again. A redraw of a drawn plot waits one task and is
//    skipped if its div is gone by then (and if it is drawn from the same figure as last time).
(() => {
  const POLL_MS = __POLL_MS__;
  const FETCH_TIMEOUT_MS = 10000;

  const drawnKeys = new WeakMap();  // plot div -> what it was last drawn from
  const dedupe = (plotly) => {
    if (!plotly || plotly.__zerolockDedupe) return plotly;
    const react = plotly.react;
    plotly.react = function (gd, data, layout) {
      const args = arguments;
      let key = null;
      try { key = JSON.stringify([data, layout]); } catch (err) { key = null; }
      if (!gd || !gd._fullLayout) {  // a new plot div: draw at once
        if (gd && key !== null) drawnKeys.set(gd, key);
        return react.apply(this, args);
      }
      if (key !== null && drawnKeys.get(gd) === key) return Promise.resolve(gd);  // nothing would change
      // A plot already drawn: Gradio hands the new figure to the old plot, then mounts a new one in its
      // place that draws it again. Wait a task: the old div is gone by then, and is not redrawn.
      return new Promise((resolve) => setTimeout(() => {
        if (!gd.isConnected) { resolve(gd); return; }
        if (key !== null) drawnKeys.set(gd, key);
        resolve(react.apply(this, args));
      }, 0));
    };
    plotly.__zerolockDedupe = true;
    return plotly;
  };
  let plotly = dedupe(window.Plotly);  // Gradio loads plotly with the first plot and sets window.Plotly
  Object.defineProperty(window, "Plotly", {configurable: true, get: () => plotly, set: (v) => { plotly = dedupe(v); }});

  const endpoint = () => new URL("gradio_api/run/watch_line", window.location.href.replace(/[?#].*$/, "").replace(/[^/]*$/, ""));
  const written = {};  // element id -> the HTML last written (the browser re-serialises innerHTML)
  const setLine = (id, html) => {
    const box = document.getElementById(id);
    const target = box && (box.querySelector(".__LINE_CLASS__") || box);
    if (!target || (written[id] === html && target.isConnected)) return;
    target.innerHTML = html;
    written[id] = html;
  };
  let lastKey = null;
  let inFlight = false;
  const tick = async () => {
    const status = document.getElementById("__STATUS_ID__");
    // only while this page shows the Watch tab: a hidden tab (offsetParent null) is sent nothing
    if (inFlight || document.hidden || !status || status.offsetParent === null) return;
    inFlight = true;
    try {
      const response = await fetch(endpoint(), {method: "POST", headers: {"Content-Type": "application/json"},
                                                body: '{"data": []}', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS)});
      if (!response.ok) return;
      const line = (await response.json()).data[0];
      setLine("__STATUS_ID__", line.status);
      setLine("__RECOVERY_ID__", line.recovery);
      if (lastKey !== null && line.key !== lastKey) document.getElementById("__DRAW_ID__")?.click();
      lastKey = line.key;
    } catch (err) {
      // the app went away or is busy: the next tick tries again
    } finally {
      inFlight = false;
    }
  };
  setInterval(tick, POLL_MS);
})();
