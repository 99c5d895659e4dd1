/* toollatch dashboard: theme, presentation mode, keyboard shortcuts, timeline scrubber.
 *
 * Loaded in <head> (not deferred) so the saved theme and presentation mode apply before
 * the first paint. Everything else waits for DOMContentLoaded. Controls are POSTed to the
 * session's control endpoint (the same one the buttons use) with `HX-Request: true`; the
 * answer is 204 and the WebSocket brings the new state. No argument text is ever handled
 * here: the script reads the data-* attributes of #status, and swaps in the triage panel
 * (GET /sessions/{id}/triage, the same HTML the page itself serves) when #status says the
 * replay state it shows is out of date.
 */
(() => {
  "use strict";

  const root = document.documentElement;
  const THEME_KEY = "toollatch-theme";
  const PRESENT_KEY = "toollatch-present";

  function load(key) {
    try { return window.localStorage.getItem(key); } catch (e) { return null; }
  }
  function save(key, value) {
    try {
      if (value === null) window.localStorage.removeItem(key);
      else window.localStorage.setItem(key, value);
    } catch (e) { /* private mode: the toggle still works for this page */ }
  }

  // ------------------------------------------------------------------ theme + presentation

  const savedTheme = load(THEME_KEY);
  if (savedTheme === "light" || savedTheme === "dark") root.dataset.theme = savedTheme;
  const params = new URLSearchParams(window.location.search);
  if (params.get("present") === "1" || (load(PRESENT_KEY) === "1" && params.get("present") !== "0")) {
    root.classList.add("present");
  }

  function darkNow() {
    if (root.dataset.theme) return root.dataset.theme === "dark";
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  }
  function toggleTheme() {
    const next = darkNow() ? "light" : "dark";
    root.dataset.theme = next;
    save(THEME_KEY, next);
    syncToggles();
  }
  function togglePresent() {
    const on = root.classList.toggle("present");
    save(PRESENT_KEY, on ? "1" : null);
    syncToggles();
  }
  function syncToggles() {
    document.querySelectorAll("[data-toggle=theme]").forEach((b) => {
      b.setAttribute("aria-pressed", String(darkNow()));
      b.textContent = darkNow() ? "Light theme" : "Dark theme";
    });
    document.querySelectorAll("[data-toggle=present]").forEach((b) => {
      b.setAttribute("aria-pressed", String(root.classList.contains("present")));
    });
  }

  // ------------------------------------------------------------------ session controls

  let live = null;         // #live, when this is a session page
  let dragging = false;    // the user holds the scrubber: do not move it under their pointer
  let seeking = false;     // a seek was posted and not yet answered
  let wantedSpeed = null;  // a speed asked for by +/- that #status does not show yet

  function control(action, fields) {
    if (!live) return Promise.resolve();
    const body = new FormData();
    body.set("action", action);
    Object.entries(fields || {}).forEach(([k, v]) => body.set(k, String(v)));
    return fetch(live.dataset.control, {
      method: "POST",
      body,
      headers: { "HX-Request": "true" },
      credentials: "same-origin",
    }).catch(() => { /* the WebSocket shows the real state; nothing to undo here */ });
  }

  function status() {
    const el = document.getElementById("status");
    if (!el) return null;
    return {
      status: el.dataset.status,
      position: Number(el.dataset.position),
      total: Number(el.dataset.total),
      speed: el.dataset.speed,
    };
  }

  function speeds() {
    const select = document.querySelector("#controls select[name=speed]");
    return select ? Array.from(select.options, (o) => o.value) : [];
  }

  function changeSpeed(delta) {
    // Start from a speed already asked for, so quick presses add up before the answer.
    const now = status();
    const current = wantedSpeed !== null ? wantedSpeed : now && now.speed;
    const list = speeds();
    const at = list.indexOf(current);
    const next = list[Math.max(0, Math.min(list.length - 1, (at < 0 ? list.indexOf("1") : at) + delta))];
    if (next === undefined || next === current) return;
    wantedSpeed = next;
    control("speed", { speed: next });
  }

  function syncFromStatus() {
    const now = status();
    if (!now) return;
    if (wantedSpeed === now.speed) wantedSpeed = null;
    const select = document.querySelector("#controls select[name=speed]");
    if (select && document.activeElement !== select && select.value !== now.speed) select.value = now.speed;
    const scrubber = document.getElementById("scrubber");
    const out = document.getElementById("scrubber-out");
    if (!scrubber || dragging || seeking) return;
    scrubber.max = String(now.total);
    scrubber.value = String(now.position);
    scrubber.setAttribute("aria-valuetext", `event ${now.position} of ${now.total}`);
    if (out) out.textContent = `event ${now.position.toLocaleString("en")} / ${now.total.toLocaleString("en")}`;
  }

  function wireScrubber() {
    const form = document.getElementById("seek");
    const scrubber = document.getElementById("scrubber");
    const out = document.getElementById("scrubber-out");
    if (!form || !scrubber) return;
    const seek = () => {
      seeking = true;
      control("seek", { position: scrubber.value }).finally(() => { seeking = false; });
    };
    scrubber.addEventListener("pointerdown", () => { dragging = true; });
    scrubber.addEventListener("pointerup", () => { dragging = false; });
    scrubber.addEventListener("pointercancel", () => { dragging = false; });
    scrubber.addEventListener("input", () => {
      if (out) out.textContent = `seek to event ${Number(scrubber.value).toLocaleString("en")} / ${Number(scrubber.max).toLocaleString("en")}`;
    });
    scrubber.addEventListener("change", seek);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      seek();
    });
  }

  // ------------------------------------------------------------------ triage panel

  // #status says which replay state the triage panel must show (data-triage); the panel
  // says which it shows (data-state). When they differ (a restart, a step back, a seek,
  // the end of the replay) the panel is fetched again. Its HTML never comes over the
  // WebSocket: revealed text stays out of the frames.
  let triageLoading = false;

  function syncTriage() {
    const st = document.getElementById("status");
    const panel = document.getElementById("triage");
    if (!st || !panel || !st.dataset.triage || !panel.dataset.src || triageLoading) return;
    if (panel.dataset.state === st.dataset.triage) return;
    const wanted = st.dataset.triage;
    if (wanted.endsWith(":done")) panel.setAttribute("aria-busy", "true");  // app.css says "Working it out…"
    triageLoading = true;
    fetch(panel.dataset.src, { headers: { "HX-Request": "true" }, credentials: "same-origin" })
      .then((response) => (response.ok ? response.text() : null))
      .then((html) => {
        const current = document.getElementById("triage");
        if (!html || !current) return;
        const template = document.createElement("template");
        template.innerHTML = html.trim();
        const fresh = template.content.querySelector("#triage");
        if (!fresh) return;
        current.replaceWith(fresh);
        if (window.htmx && typeof window.htmx.process === "function") window.htmx.process(fresh);
      })
      .catch(() => { /* the next status change tries again */ })
      .finally(() => {
        triageLoading = false;
        // The replay moved on while the panel was fetched: fetch once more.
        const now = document.getElementById("status");
        if (now && now.dataset.triage !== wanted) syncTriage();
      });
  }

  function onMessage() {
    syncFromStatus();
    syncTriage();
  }

  // Keys -> actions. Letters ignore case; "=" and "_" are + and - without Shift.
  const KEYS = {
    " ": () => control("toggle"),
    ArrowRight: () => control("step"),
    ArrowLeft: () => control("back"),
    "+": () => changeSpeed(1),
    "=": () => changeSpeed(1),
    "-": () => changeSpeed(-1),
    "_": () => changeSpeed(-1),
    r: () => control("restart"),
    c: () => control("cancel"),
  };
  const GLOBAL_KEYS = { p: togglePresent, t: toggleTheme };

  function onKey(event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    const target = event.target;
    const tag = target && target.tagName ? target.tagName.toLowerCase() : "";
    if (tag === "textarea" || tag === "select" || (target && target.isContentEditable)) return;
    if (tag === "input" && !(target.type === "range" && !event.key.startsWith("Arrow"))) return;
    if (tag === "button" && (event.key === " " || event.key === "Enter")) return; // the button's own action
    const key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    const action = GLOBAL_KEYS[key] || (live ? KEYS[key] : undefined);
    if (!action) return;
    event.preventDefault();
    action();
  }

  // ------------------------------------------------------------------ drag-and-drop upload

  // A [data-dropzone] holds a file input: a file dropped on the zone becomes the input's
  // file, as if chosen with its button. Nothing is read here; the form uploads it.
  function wireDropzones() {
    document.querySelectorAll("[data-dropzone]").forEach((zone) => {
      const input = zone.querySelector("input[type=file]");
      if (!input) return;
      const over = (event) => {
        if (!event.dataTransfer || !Array.from(event.dataTransfer.types || []).includes("Files")) return;
        event.preventDefault();
        zone.classList.add("dragging");
      };
      zone.addEventListener("dragenter", over);
      zone.addEventListener("dragover", over);
      zone.addEventListener("dragleave", (event) => {
        if (!zone.contains(event.relatedTarget)) zone.classList.remove("dragging");
      });
      zone.addEventListener("drop", (event) => {
        zone.classList.remove("dragging");
        const files = event.dataTransfer && event.dataTransfer.files;
        if (!files || !files.length) return;
        event.preventDefault();
        const one = new DataTransfer();
        one.items.add(files[0]);
        input.files = one.files;
        input.dispatchEvent(new Event("change", { bubbles: true }));
      });
      input.addEventListener("change", () => zone.classList.toggle("has-file", input.files.length > 0));
    });
  }

  // A page rendered as the answer to a form's POST (the index with an upload's error) names
  // the address it stands for: the address bar shows that, not the POST's, so a reload or a
  // shared link opens the page instead of posting the form again.
  function showPageUrl() {
    const url = document.body.dataset.pageUrl;
    if (url && window.location.pathname !== url) window.history.replaceState(window.history.state, "", url + window.location.hash);
  }

  function init() {
    showPageUrl();
    wireDropzones();
    live = document.getElementById("live");
    document.querySelectorAll("[data-toggle=theme]").forEach((b) => b.addEventListener("click", toggleTheme));
    document.querySelectorAll("[data-toggle=present]").forEach((b) => b.addEventListener("click", togglePresent));
    syncToggles();
    document.addEventListener("keydown", onKey);
    if (!live) return;
    wireScrubber();
    onMessage();
    // hx-ws fires this on #live after each message has been swapped in.
    live.addEventListener("htmx:ws:after:message:incoming", onMessage);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
