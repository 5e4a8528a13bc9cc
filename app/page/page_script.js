// The dashboard's own script, run in the page's <head>: page_script.py fills in its placeholders.
//
// 1. The Watch tab's status line and recovery line are fetched by this script, not sent by a Gradio
//    event: every Gradio event makes the page snapshot the props of each component that ever showed
//    a loading status, which on this page cost the browser ~25 % of a core at one tick a second; a
//    plain fetch of /gradio_api/run/watch_line and two innerHTML writes cost ~2 %.
// 2. The Watch tab's figures, its per-stage table and its status JSON are drawn by this script too,
//    from one plain fetch of /gradio_api/run/watch_figures: Plotly.react into plot divs it keeps
//    (plotly.js served by the app, loaded while the page idles after start-up), where a Gradio plot would be re-mounted
//    and drawn afresh on every update. A part is asked for only when the run's figures key (on the
//    status line) or the view (window, unit) changed since it was drawn, and only while it is on
//    screen: at once when the run's state changed (its first actions, a failure, a recovery, the
//    end), when the part has just come into view or the view was changed, else at most every
//    FIGURES_MS. Nothing is fetched while the Watch tab is hidden, and nothing is drawn while nothing
//    changes (a finished run, an idle app).
// 3. A new failure pins the view: the answer says so, and the script checks "around the last
//    failure" in the window radio, as the user would.
// 4. Gradio 6 draws each gr.Plot update (the other tabs) twice: the old plot div is redrawn with the
//    new figure, then a new div mounted in its place draws it again. A redraw of a drawn plot waits
//    one task and is skipped if its div is gone by then (and if it is drawn from the same figure).
(() => {
  const POLL_MS = __POLL_MS__, FIGURES_MS = __FIGURES_MS__;
  const FETCH_TIMEOUT_MS = 10000, LOAD_TIMEOUT_MS = 60000, PRELOAD_AFTER_MS = 5000;
  const PARTS = __PARTS__;  // part -> the id of the element that holds it
  const PLOT_PARTS = __PLOT_PARTS__;  // the parts that are plotly figures
  const PLOT_CONFIG = {responsive: true, displaylogo: false};

  // ---- plotly: Gradio's copy (wrapped, see 4) and the app's copy for the Watch figures --------------
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
  let plotly = null, ours = null;  // window.Plotly (whoever set it last), and the copy of our version
  const adopt = (value) => {
    plotly = dedupe(value);
    if (value && value.version === "__PLOTLY_VERSION__" && ours === null) ours = plotly;
  };
  adopt(window.Plotly);
  Object.defineProperty(window, "Plotly", {configurable: true, get: () => plotly, set: adopt});

  const base = () => window.location.href.replace(/[?#].*$/, "").replace(/[^/]*$/, "");
  let loading = null;
  const loadPlotly = () => {
    if (ours !== null) return Promise.resolve(ours);
    loading ??= new Promise((resolve, reject) => {
      const tag = document.createElement("script");
      // every wait ends: a load that fails or does not finish in time is tried again at a later tick
      const fail = (why) => { clearTimeout(timer); loading = null; tag.remove(); reject(new Error(why)); };
      const timer = setTimeout(() => fail("plotly.js did not load in time"), LOAD_TIMEOUT_MS);
      tag.src = new URL("__PLOTLY_PATH__".replace(/^\//, ""), base()).href;
      tag.onload = () => {
        if (ours === null) { fail("plotly.js loaded without its Plotly"); return; }
        clearTimeout(timer);
        resolve(ours);
      };
      tag.onerror = () => fail("plotly.js could not be fetched");
      document.head.appendChild(tag);
    });
    return loading;
  };

  // ---- fetching ---------------------------------------------------------------------------------------
  const post = async (name, data) => {
    const response = await fetch(new URL(`gradio_api/run/${name}`, base()), {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({data}),
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS)});
    if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
    return (await response.json()).data[0];
  };

  const written = {};  // element id -> the HTML last written (the browser re-serialises innerHTML)
  const setLine = (id, html) => {
    const box = document.getElementById(id);
    const target = box && (box.querySelector(".__LINE_CLASS__") || box);
    if (!target || (written[id] === html && target.isConnected)) return;
    target.innerHTML = html;
    written[id] = html;
  };

  // ---- the Watch figures ------------------------------------------------------------------------------
  const holder = (part) => document.querySelector(`#${PARTS[part]} .__HOLDER_CLASS__`);
  const choice = (id) => document.querySelector(`#${id} input:checked`)?.value ?? null;
  const onScreen = (part) => {
    const box = holder(part);
    if (!box) return false;
    if (part === "status") return box.closest("details")?.open === true;
    const r = box.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight;
  };
  // a holder's content is whatever this script last put there, unless Gradio rebuilt the element since
  const isDrawn = (part) => holder(part)?.dataset.drawn === "1";

  let drawnFor = {};  // part -> "figures key|window|unit" it was drawn from
  let seen = null;  // the server's memory of this page (the run, the failures drawn): sent back as is
  let wasOnScreen = {};
  let lastDraw = -Infinity;

  const draw = async (parts, view) => {
    const answer = await post("watch_figures", [seen, view.window, view.unit, parts]);
    seen = answer.seen;
    const drawn = `${answer.key}|${answer.window}|${view.unit}`;
    for (const part of parts) {
      const box = holder(part);
      if (!box || !(part in answer.parts)) continue;
      const value = answer.parts[part];
      if (PLOT_PARTS.includes(part)) {
        const figure = JSON.parse(value);
        await (await loadPlotly()).react(box, figure.data, figure.layout, PLOT_CONFIG);
      } else if (part === "status") {
        box.textContent = JSON.stringify(value, null, 2);
      } else {
        box.innerHTML = value;
      }
      box.dataset.drawn = "1";
      drawnFor[part] = drawn;
    }
    if (answer.window !== view.window) {  // a new failure: show the user's radio what is drawn now
      document.querySelector(`#__WINDOW_ID__ input[value="${CSS.escape(answer.window)}"]`)?.click();
    }
  };

  let lastKey = null;  // the run's state key at the last fetch
  let wasShown = false;
  let pressing = false;  // the user changed the view, or a part was opened: draw at once
  let inFlight = false;
  const tick = async () => {
    const status = document.getElementById("__STATUS_ID__");
    // only while this page shows the Watch tab: a hidden tab (offsetParent null) is sent nothing
    if (document.hidden || !status || status.offsetParent === null) {
      wasShown = false;
      wasOnScreen = {};
      return;
    }
    if (inFlight) return;
    inFlight = true;
    try {
      const line = await post("watch_line", []);
      setLine("__STATUS_ID__", line.status);
      setLine("__RECOVERY_ID__", line.recovery);
      if (line.inject !== undefined) setLine("__INJECT_ID__", line.inject);  // absent while no run is watched
      const view = {window: choice("__WINDOW_ID__"), unit: choice("__UNIT_ID__")};
      let urgent = !wasShown || line.key !== lastKey || pressing;
      const want = [];
      for (const part of Object.keys(PARTS)) {
        const visible = onScreen(part);
        if (visible && line.figures && (drawnFor[part] !== `${line.figures}|${view.window}|${view.unit}` ||
                                        !isDrawn(part))) {
          want.push(part);
          if (!wasOnScreen[part]) urgent = true;  // just scrolled into view (or opened): not a stale picture
        }
        wasOnScreen[part] = visible;
      }
      lastKey = line.key;
      wasShown = true;
      pressing = false;
      if (want.length && (urgent || performance.now() - lastDraw >= FIGURES_MS)) {
        lastDraw = performance.now();
        await draw(want, view);
      }
    } catch (err) {
      // the app went away or is busy, or plotly.js did not load: the next tick tries again
    } finally {
      inFlight = false;
    }
  };
  const soon = (urgent) => {
    if (urgent) pressing = true;
    setTimeout(tick, 100);
  };

  // the Watch tab's button (the user's click, or the switch below): fetch as soon as the tab shows
  document.addEventListener("click", (event) => {
    if (!(event.target instanceof Element)) return;
    if (event.target.closest("#__WATCH_TAB_ID__-button")) soon(false);
    if (event.target.closest("#__JUMP_ID__")) {  // "jump to the last failure": that window, drawn at once
      document.querySelector(`#__WINDOW_ID__ input[value="${CSS.escape("__FAILURE_WINDOW__")}"]`)?.click();
      soon(true);
    }
  }, true);
  // the user picks another window or unit, or opens the status JSON: draw at once
  document.addEventListener("change", (event) => {
    if (event.target instanceof Element && event.target.closest("#__WINDOW_ID__, #__UNIT_ID__")) soon(true);
  }, true);
  document.addEventListener("toggle", (event) => {
    if (event.target instanceof Element && event.target.closest(`#${PARTS.status}`)) soon(true);
  }, true);
  // Run / Open / Resume started or opened something: show it, drawn afresh (the run or the view changed)
  document.addEventListener("__SHOW_WATCH_EVENT__", () => {
    drawnFor = {};
    seen = null;
    document.getElementById("__WATCH_TAB_ID__-button")?.click();
  });
  let scrolled = null;  // a scroll shows parts that were off screen: look again once it settles
  window.addEventListener("scroll", () => {
    clearTimeout(scrolled);
    scrolled = setTimeout(tick, 150);
  }, {passive: true});
  // plotly.js (3.5 MB) is parsed and run on its first use: 1.5-4 s of the main thread on a busy 2-core
  // machine, measured as the freeze after the first Run on a fresh page. Loaded while the page idles after
  // start-up instead (a failed load is tried again at the first draw).
  const preload = () => loadPlotly().catch(() => {});
  const whenIdle = () => ("requestIdleCallback" in window)
    ? requestIdleCallback(preload, {timeout: PRELOAD_AFTER_MS}) : setTimeout(preload, PRELOAD_AFTER_MS);
  // Gradio puts this script in the page once its app has mounted: usually after the load event
  if (document.readyState === "complete") whenIdle(); else window.addEventListener("load", whenIdle);
  setInterval(tick, POLL_MS);
})();
