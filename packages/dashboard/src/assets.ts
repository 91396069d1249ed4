/** The page's script: live refresh of `#live` while the tab is visible, the refresh control, nothing else. */
export const SCRIPT = `"use strict";
(function () {
  var main = document.getElementById("live");
  var button = document.getElementById("refresh");
  var auto = document.getElementById("auto");
  var stamp = document.getElementById("refreshed");
  var state = { refreshes: 0, timer: null, busy: false };
  window.__dashboard = state;
  if (!main) return;
  var every = Number(main.getAttribute("data-refresh-ms")) || 0;
  function editing() {
    var active = document.activeElement;
    return active && main.contains(active) && (active.tagName === "INPUT" || active.tagName === "SELECT" || active.tagName === "TEXTAREA");
  }
  function refresh() {
    if (state.busy || editing()) return;
    state.busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "x-dashboard-refresh": "1" } })
      .then(function (answer) { return answer.ok ? answer.text() : Promise.reject(new Error(String(answer.status))); })
      .then(function (text) {
        var next = new DOMParser().parseFromString(text, "text/html").getElementById("live");
        if (next) main.replaceChildren.apply(main, Array.prototype.slice.call(next.childNodes));
        state.refreshes += 1;
        if (stamp) stamp.textContent = "updated " + new Date().toLocaleTimeString();
      })
      .catch(function (error) { if (stamp) stamp.textContent = "refresh failed: " + error.message; })
      .then(function () { state.busy = false; });
  }
  function stop() { if (state.timer !== null) { clearInterval(state.timer); state.timer = null; } }
  function start() {
    stop();
    if (every > 0 && !document.hidden && (!auto || auto.checked)) state.timer = setInterval(refresh, every);
  }
  state.refresh = refresh;
  state.running = function () { return state.timer !== null; };
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) stop(); else { refresh(); start(); }
  });
  if (button) button.addEventListener("click", refresh);
  if (auto) auto.addEventListener("change", start);
  start();
})();
`

/** The page's styles: states as colour, tables and cards, light and dark. */
export const STYLES = `
:root { --bg: #f6f7f9; --fg: #1d2330; --muted: #5f6b7a; --card: #fff; --line: #dde2e8; --link: #1f5fbf;
  --blue: #2f6fd6; --green: #1f8a4c; --red: #c53030; --orange: #c76a00; --grey: #7a8594; --violet: #7048c8; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #14171c; --fg: #e4e8ee; --muted: #9aa5b3; --card: #1d2128; --line: #2e343e; --link: #7fb0ff; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
a { color: var(--link); text-decoration: none; } a:hover { text-decoration: underline; }
header { display: flex; align-items: center; gap: 18px; padding: 10px 20px; background: var(--card); border-bottom: 1px solid var(--line); flex-wrap: wrap; }
header .brand { font-weight: 700; }
header nav a { margin-right: 14px; color: var(--muted); } header nav a.here { color: var(--fg); font-weight: 600; }
header .tools { margin-left: auto; display: flex; gap: 10px; align-items: center; color: var(--muted); font-size: 12px; }
.access { padding: 2px 8px; border-radius: 10px; border: 1px solid var(--line); }
main { padding: 16px 20px 40px; max-width: 1400px; }
h1 { font-size: 20px; margin: 4px 0 14px; } h2 { font-size: 15px; margin: 22px 0 8px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(230px, 1fr)); gap: 12px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.card h3 { margin: 0 0 8px; font-size: 13px; color: var(--muted); font-weight: 600; text-transform: uppercase; letter-spacing: .03em; }
.card .big { font-size: 24px; font-weight: 700; }
.card ul { list-style: none; margin: 0; padding: 0; } .card li { display: flex; justify-content: space-between; padding: 2px 0; }
.alert { border-left: 4px solid var(--red); } .calm { border-left: 4px solid var(--green); }
table { border-collapse: collapse; width: 100%; background: var(--card); border: 1px solid var(--line); border-radius: 8px; overflow: hidden; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; background: var(--bg); }
.lines { white-space: pre-line; }
.id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; word-break: break-all; }
td.id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; word-break: break-all; max-width: 340px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; color: #fff; background: var(--grey); white-space: nowrap; }
.s-attempted, .s-pending_verification, .s-listing, .s-started, .s-held { background: var(--blue); }
.s-committed, .s-verified, .s-complete, .s-done, .s-none { background: var(--green); }
.s-dead, .s-repair_failed, .s-failed, .s-given_up { background: var(--red); }
.s-reconcile_only, .s-stale, .s-refused, .s-partial, .s-paused, .s-in-doubt { background: var(--orange); }
.s-abandoned, .s-superseded, .s-open, .s-decided, .s-applied { background: var(--violet); }
.tabs { display: flex; gap: 6px; margin-bottom: 10px; flex-wrap: wrap; }
.tabs a { padding: 4px 12px; border-radius: 14px; border: 1px solid var(--line); background: var(--card); color: var(--fg); }
.tabs a.here { background: var(--fg); color: var(--bg); }
form.filters { display: flex; gap: 8px; flex-wrap: wrap; align-items: end; margin-bottom: 12px; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); gap: 2px; }
input, select, button { font: inherit; padding: 4px 8px; border: 1px solid var(--line); border-radius: 6px; background: var(--card); color: var(--fg); }
button { cursor: pointer; } button.act { border-color: var(--blue); color: var(--blue); } button.danger { border-color: var(--red); color: var(--red); }
button.primary { background: var(--blue); border-color: var(--blue); color: #fff; }
form.inline { display: inline; margin: 0 4px 0 0; }
.pager { margin: 10px 0; display: flex; gap: 12px; }
.muted { color: var(--muted); } .warn { color: var(--orange); } .error { color: var(--red); }
.notice { padding: 10px 14px; border-radius: 8px; background: var(--card); border: 1px solid var(--line); margin: 10px 0; }
.notice.refused, .notice.failed { border-left: 4px solid var(--red); } .notice.done { border-left: 4px solid var(--green); } .notice.partial { border-left: 4px solid var(--orange); }
dl.fields { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px; background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px; margin: 0; }
dl.fields dt { color: var(--muted); } dl.fields dd { margin: 0; word-break: break-all; font-family: ui-monospace, Menlo, monospace; font-size: 12px; }
pre { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px; overflow: auto; max-height: 320px; font-size: 12px; white-space: pre-wrap; word-break: break-all; }
ol.timeline { list-style: none; padding: 0 0 0 14px; border-left: 2px solid var(--line); margin: 0; }
ol.timeline li { position: relative; padding: 4px 0 10px 12px; }
ol.timeline li::before { content: ""; position: absolute; left: -21px; top: 9px; width: 10px; height: 10px; border-radius: 50%; background: var(--grey); }
ol.timeline li.t-ok::before { background: var(--green); } ol.timeline li.t-bad::before { background: var(--red); }
ol.timeline li.t-doubt::before { background: var(--orange); } ol.timeline li.t-run::before { background: var(--blue); }
ol.timeline .when { color: var(--muted); font-size: 12px; margin-right: 8px; }
svg.chart { background: var(--card); border: 1px solid var(--line); border-radius: 8px; width: 100%; max-width: 720px; height: 180px; }
svg.chart .grid { stroke: var(--line); stroke-width: 1; }
svg.chart .backlog { stroke: var(--blue); fill: none; stroke-width: 2; }
svg.chart .stuck { stroke: var(--red); fill: none; stroke-width: 2; }
svg.chart .done { fill: var(--green); opacity: .55; }
svg.chart text { fill: var(--muted); font-size: 11px; }
.legend span { margin-right: 14px; font-size: 12px; } .legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
.legend .l-backlog { background: var(--blue); } .legend .l-stuck { background: var(--red); } .legend .l-done { background: var(--green); }
`
