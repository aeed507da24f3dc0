// The operators' dashboard (docs/dashboard.md): one page of plain HTML, CSS and
// JavaScript, embedded in fenceqd at build time (daemon/http/embed.cmake) and
// served as files (the page's CSP allows no inline script or style), no
// library and nothing fetched from elsewhere (it works with no internet). It reads the
// JSON API of daemon/http/routes.cpp (/api/session, /api/overview, /api/jobs,
// /api/job, /api/results) and acts through its POSTs, each after a confirmation
// (C3.16: a queue's dead or cancelled jobs all at once, /api/retry_many a
// page at a time; the jobs selected on a page of jobs, one by one). Everything
// shown is set as text (never as HTML), so job data cannot script the page,
// and with its controls escaped (visible()), so no id or queue name can
// reorder what is shown after it (U+202E) or hide a line break.
"use strict";
let session = null;
let timer = null;
let drawn = null;  // the history the chart shows, drawn again on a resize
// Which refresh may draw: each one takes the next number, and a view checks,
// after each answer it waited for, that no later refresh (another address,
// an action's) started meanwhile; an earlier one's answer arriving last would
// otherwise draw the page that was left over the page now shown.
let drawing = 0;
const main = document.getElementById("main");

// Text from job data as shown: the C0 controls but tab and line breaks, the
// C1 controls, the line and paragraph separators and the bidirectional
// marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F,
// U+202A..U+202E, U+2066..U+2069) as \u{XXXX}, as the fenceq tool shows
// them: no id or queue name can reorder what is shown after it.
function visible(s) {
  return String(s).replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g,
    (c) => "\\u{" + c.codePointAt(0).toString(16).padStart(4, "0") + "}");
}
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined) continue;
    e.append(k instanceof Node ? k : document.createTextNode(visible(k)));
  }
  return e;
}
function status(text, bad) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = bad ? "error" : "";
}
// Every request's URL is built on location.origin, which never carries
// credentials: opened as http://user:password@host/, the page's own URL does,
// and a URL relative to it (fetch("/api/...")) would too, which fetch refuses
// ("Request cannot be constructed from a URL that includes credentials").
// The browser sends the login it was given for the page with each request.
function url(path) { return location.origin + path; }
async function api(path) {
  const r = await fetch(url("/api/" + path), { credentials: "same-origin", cache: "no-store" });
  const body = await r.json();
  if (!body.ok) throw new Error(body.error.code + ": " + body.error.message);
  return body.result;
}
// An action's POST: the API's answer, {ok, result} or {ok: false, error}.
async function post(action, params) {
  const q = new URLSearchParams(params).toString();
  const r = await fetch(url("/api/" + action + "?" + q), {
    method: "POST", credentials: "same-origin", headers: { "X-Fenceq-Csrf": session.csrf } });
  return r.json();
}
async function act(action, params, what) {
  if (!confirm(what)) return false;
  const body = await post(action, params);
  if (!body.ok) { status(action + " refused: " + body.error.message, true); return false; }
  status(action + ": " + JSON.stringify(body.result));
  refresh();
  return true;
}
// What a bulk action did (C3.16), under the header until the next
// action or another view: the status line is the refresh's.
function notice(text, bad) {
  const n = document.getElementById("notice");
  n.textContent = text ? visible(text) : "";
  n.hidden = !text;
  n.className = bad ? "error" : "";
}
function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }
function span(seconds) {
  const s = Math.abs(seconds);
  if (s < 1) return "now";
  if (s < 90) return Math.round(s) + " s";
  if (s < 5400) return Math.round(s / 60) + " min";
  if (s < 172800) return Math.round(s / 3600) + " h";
  return Math.round(s / 86400) + " d";
}
function when(job, now) {
  if (job.state === "leased") return "lease ends in " + span(job.until - now);
  if (job.state === "delayed") return "claimable in " + span(job.not_before - now);
  if (job.state === "suspended") return "waiting for a signal";
  return "";
}
function stateCell(state) { return el("td", { class: "state-" + state }, state); }
function attempts(j) { return j.max_attempts ? j.attempts + "/" + j.max_attempts : String(j.attempts); }

// --- overview ----------------------------------------------------------------
// Draws the history on canvas c, as wide as the page made it (the section's
// width, dashboard.css), in device pixels: called once c is in the page, and
// again when the window is resized.
function chart(c, history) {
  const w = Math.max(120, Math.round(c.clientWidth)), h = 150, pad = 28;
  const dpr = window.devicePixelRatio || 1;
  c.width = Math.round(w * dpr);
  c.height = Math.round(h * dpr);
  const g = c.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  // Completed first, claimed dashed over it (they are often equal), failed last.
  const series = [["completed", "#1a7f37", []], ["claimed", "#2f5bd3", [5, 4]],
                  ["failed", "#b42318", []]];
  // The window: the history there is (the daemon samples its counters every
  // 2 s from its start), at least a minute, at most five.
  const oldest = history.length ? history[0].ago : 0;
  const span = Math.min(300, Math.max(60, Math.ceil(oldest / 30) * 30));
  let top = 1;
  for (const p of history) for (const [k] of series) top = Math.max(top, p[k]);
  g.strokeStyle = "#e4e7ec"; g.fillStyle = "#667085"; g.font = "11px system-ui";
  for (let i = 0; i <= 2; i++) {
    const y = pad / 2 + (h - pad) * i / 2;
    g.beginPath(); g.moveTo(pad, y); g.lineTo(w, y); g.stroke();
    g.fillText((top * (2 - i) / 2).toFixed(top < 10 ? 1 : 0), 0, y + 4);
  }
  g.fillText("-" + (span >= 120 ? span / 60 + " min" : span + " s"), pad, h - 2);
  g.fillText("now", w - 24, h - 2);
  for (const [k, color, dash] of series) {
    g.strokeStyle = color; g.lineWidth = 2; g.setLineDash(dash); g.beginPath();
    let first = true;
    for (const p of history) {
      if (p.ago > span) continue;
      const x = pad + (w - pad) * (1 - p.ago / span);
      const y = pad / 2 + (h - pad) * (1 - p[k] / top);
      if (first) { g.moveTo(x, y); first = false; } else g.lineTo(x, y);
    }
    g.stroke();
  }
  c.dataset.points = String(history.filter((p) => p.ago <= span).length);
}
async function overview(current) {
  const st = await api("overview");
  if (!current()) return false;
  const last = st.history.length ? st.history[st.history.length - 1] : null;
  const facts = el("div", { class: "facts" },
    el("span", {}, "store ", el("b", {}, st.store)),
    el("span", {}, "clock ", el("b", {}, st.clock)),
    el("span", {}, "version ", el("b", {}, st.version)),
    el("span", {}, "up ", el("b", {}, span(st.uptime))),
    el("span", {}, "mean batch ", el("b", {}, st.mean_batch.toFixed(1))),
    el("span", {}, "commits/s ", el("b", {}, last ? last.commits.toFixed(1) : "-")),
    el("span", {}, "waiting claims ", el("b", {}, st.waiting_claims)),
    el("span", {}, "stale writes refused ", el("b", {},
      st.writes.renew.refused + st.writes.complete.refused + st.writes.release.refused +
      st.writes.fail.refused)));
  const rows = Object.entries(st.queues).map(([name, q]) => {
    const limits = [];
    if (q.max_leased) limits.push("max " + q.max_leased + " leased");
    if (q.rate) limits.push(q.rate + " per " + q.per + " s");
    // Each group's limits (C3.11): in the overview only for a queue that has some.
    if (q.group_max_leased) limits.push("max " + q.group_max_leased + " leased per group");
    if (q.group_rate) limits.push(q.group_rate + " per " + q.group_per + " s per group");
    // Groups with limits of their own (C3.25): how many, and the first 100 by name.
    const own = q.group_overrides ? el("details", { class: "own-limits" },
      el("summary", {}, q.group_overrides + (q.group_overrides === 1 ? " group" : " groups") +
        " with limits of its own"),
      el("ul", {}, Object.entries(q.group_config || {}).map(([g, o]) => {
        const parts = [];
        if (o.max_leased !== undefined) {
          parts.push(o.max_leased ? "max " + o.max_leased + " leased" : "no cap");
        }
        if (o.rate !== undefined) {
          parts.push(o.rate ? o.rate + " per " + (o.per !== undefined ? o.per : q.group_per) + " s"
                            : "no rate");
        } else if (o.per !== undefined) {
          parts.push("per " + o.per + " s");
        }
        return el("li", { "data-group": g }, g + ": " + parts.join(", "));
      }))) : null;
    return el("tr", { "data-queue": name },
      el("td", {}, el("a", { href: "#/jobs?queue=" + encodeURIComponent(name) }, name)),
      el("td", { class: "num" }, q.ready), el("td", { class: "num" }, q.delayed),
      el("td", { class: "num" }, q.leased), el("td", { class: "num" }, q.done),
      el("td", { class: "num" }, el("a", { href: "#/jobs?state=dead&queue=" +
                                      encodeURIComponent(name) }, q.dead)),
      el("td", { class: "num" }, q.cancelled),
      el("td", { class: "num" }, q.ready ? span(q.oldest_ready_age) : "-"),
      // How many groups have a ready job: in the overview only when some do.
      el("td", { class: "num groups" }, q.groups_waiting ? q.groups_waiting : ""),
      // Jobs waiting for others (C3.13): only when some are.
      el("td", { class: "num blocked" }, q.blocked ? el("a", { href: "#/jobs?state=blocked&queue=" +
                                                  encodeURIComponent(name) }, q.blocked) : ""),
      el("td", { class: q.paused ? "paused" : "" }, q.paused ? "paused" : ""),
      el("td", {}, limits.join(", "), own),
      el("td", {}, session.read_only ? "" : [
        q.paused
          ? el("button", { onclick: () => act("resume", { queue: name },
              "Resume queue " + name + "? Its jobs are handed out again.") }, "resume")
          : el("button", { onclick: () => act("pause", { queue: name },
              "Pause queue " + name + "? No job of it is handed out until it is resumed; " +
              "leases held now run on.") }, "pause"),
        " ",
        el("button", { onclick: () => limit(name, q) }, "limits"),
        " ",
        el("button", { onclick: () => groupLimit(name, q) }, "group limits"),
        " ",
        el("button", { class: "danger", onclick: () => purge(name) }, "purge"),
        // A queue's dead and cancelled jobs all at once (C3.16): only when it
        // has some, on a line of their own (the row keeps its width).
        q.dead || q.cancelled ? el("div", { class: "bulk" }, ["dead", "cancelled"].flatMap(
          (state) => q[state] ? [el("button", { class: "retry-all", "data-state": state,
            disabled: retrying, onclick: () => retryAll(name, state, q[state]) },
            "retry all " + q[state] + " " + state), " "] : [])) : null]));
  });
  const canvas = el("canvas", { id: "chart", "aria-label": "throughput" });
  main.replaceChildren(
    el("section", {}, el("h2", {}, "Daemon"), facts),
    el("section", {}, el("h2", {}, "Throughput (jobs per second)"),
      el("div", { class: "legend" }, el("span", { class: "claimed" }, "claimed"),
        el("span", { class: "completed" }, "completed"),
        el("span", { class: "failed" }, "failed")),
      canvas,
      el("div", { class: "note" }, "From the daemon's counters, sampled every 2 s since it " +
        "started (the last 5 minutes at most).")),
    el("section", {}, el("h2", {}, "Queues"),
      el("table", { id: "queues" },
        el("thead", {}, el("tr", {}, ["queue", "ready", "delayed", "leased", "done", "dead",
          "cancelled", "oldest ready", "groups waiting", "blocked", "", "limits", ""].map((t, i) =>
            el("th", { class: i >= 1 && i <= 9 ? "num" : "" }, t)))),
        el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {}, "no queues yet"))))));
  drawn = st.history;
  chart(canvas, drawn);
}
async function limit(queue, q) {
  const m = prompt("Queue " + queue + ": at most how many jobs leased at once? (0: no limit)",
                   q.max_leased || 0);
  if (m === null) return;
  const r = prompt("Queue " + queue + ": at most how many claims per period? (0: no limit)",
                   q.rate || 0);
  if (r === null) return;
  const p = prompt("The period in seconds", q.per || 1);
  if (p === null) return;
  await act("limit", { queue, max_leased: m, rate: r, per: p },
            "Set queue " + queue + " to max_leased " + m + ", rate " + r + " per " + p + " s?");
}
// Each group's limits (C3.11): the same three questions, per group.
async function groupLimit(queue, q) {
  const m = prompt("Queue " + queue + ": at most how many jobs of one group leased at once? " +
                   "(0: no limit)", q.group_max_leased || 0);
  if (m === null) return;
  const r = prompt("Queue " + queue + ": at most how many claims of one group per period? " +
                   "(0: no limit)", q.group_rate || 0);
  if (r === null) return;
  const p = prompt("The period in seconds", q.group_per || 1);
  if (p === null) return;
  await act("limit", { queue, group_max_leased: m, group_rate: r, group_per: p },
            "Set queue " + queue + " to group_max_leased " + m + ", group_rate " + r + " per " +
            p + " s?");
}
async function purge(queue) {
  const older = prompt("Remove queue " + queue +
    "'s done, dead and cancelled jobs finished at least how many seconds ago?", 86400);
  if (older === null) return;
  await act("purge", { queue, older_than: older },
            "Purge queue " + queue + "'s finished jobs older than " + older + " s? " +
            "Their ids keep their fences: enqueued again, they continue from them.");
}

// A queue's dead (or cancelled) jobs all retried (C3.16): /api/retry_many
// a page at a time, while it answers `more` (the daemon stops a page after
// 10 ms of work). At most the `n` the overview counted and the confirmation
// named: jobs that died since are left for the next click (the button then
// counts them). A page that retried none, or a refusal, ends it too.
const BULK_PAGE = 1000;
let retrying = false;  // one at a time: the overview's retry-all buttons are disabled meanwhile
async function retryAll(queue, state, n) {
  if (retrying) return;
  // The name as the page shows it (controls and bidirectional marks escaped).
  const of = plural(n, state + " job", state + " jobs") + " of queue " + visible(queue);
  if (!confirm("Retry all " + of + "? Their attempts start over and they can be claimed " +
               "at once; each one's next claim gets its next fence.")) return;
  retrying = true;
  let done = 0, more = true, error = null;
  try {
    while (more && done < n) {
      notice("Retrying the " + of + ": " + done + " so far");
      const body = await post("retry_many", { queue, state, limit: Math.min(n - done, BULK_PAGE) });
      if (!body.ok) { error = body.error.message; break; }
      done += body.result.count;
      more = body.result.more;
      if (!body.result.count) break;
    }
  } catch (e) {
    error = String(e.message || e);
  } finally {
    retrying = false;
  }
  const did = "Retried " + plural(done, state + " job", state + " jobs") + " of queue " +
    visible(queue);
  notice(error ? did + ", then: " + error : did + (more && done >= n ? "; more are " + state +
    " now" : "") + ".", error !== null);
  await refresh();
}

// --- jobs ----------------------------------------------------------------------
// The jobs checked on the page of jobs shown (C3.16), by id: kept while
// the page draws itself again (every 2 s), only those it still shows;
// forgotten on another page or filter, and once acted on.
let selected = new Set(), selectedOn = null;
let acting = false;  // while the selection's POSTs go (its buttons disabled)
// The checkboxes, the select-all box and the buttons as the selection says.
function syncSelection() {
  const boxes = [...document.querySelectorAll("#jobs tbody input.pick")];
  for (const b of boxes) b.checked = selected.has(b.dataset.id);
  const all = document.getElementById("select-all");
  if (all) {
    all.checked = boxes.length > 0 && selected.size === boxes.length;
    all.indeterminate = selected.size > 0 && selected.size < boxes.length;
  }
  for (const id of ["retry-selected", "cancel-selected"]) {
    const b = document.getElementById(id);
    if (b) b.disabled = selected.size === 0 || acting;
  }
  const n = document.getElementById("selected-count");
  if (n) n.textContent = selected.size ? selected.size + " selected" : "";
}
function pick(id, on) {
  if (on) selected.add(id); else selected.delete(id);
}
// Retry or cancel the selected jobs: each one's own POST /api/retry or
// /api/cancel (a few at a time), as the job's page does: a selection is any
// ids of the page, of any queues and states, which the daemon's filters
// (retry_many, cancel_many: one queue, by state) cannot name; each is logged
// as its job's action, and answers whether it changed the job (false for
// one in a state the action does not change, left as it was).
async function actOnSelected(action) {
  const ids = [...selected];
  if (!ids.length || acting) return;
  const n = plural(ids.length, "selected job", "selected jobs");
  const what = action === "retry"
    ? "Retry " + n + "? The dead and cancelled ones start over and can be claimed at once; " +
      "the others are left as they are."
    : "Cancel " + n + "? Each one's fence goes up: its current holder can no longer renew, " +
      "complete or fail it, and no result of that lease is ever stored. Done and cancelled " +
      "ones are left as they are; retry revives them.";
  if (!confirm(what)) return;
  acting = true;
  syncSelection();
  let changed = 0;
  const refused = [], queue = ids.slice();
  const one = async () => {
    for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
      try {
        const body = await post(action, { id });
        if (!body.ok) refused.push(id + ": " + body.error.message);
        else if (body.result === true) changed++;
      } catch (e) {
        refused.push(id + ": " + String(e.message || e));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(4, ids.length) }, one));
  acting = false;
  selected = new Set();
  const verb = action === "retry" ? "Retried " : "Cancelled ";
  notice(verb + changed + " of " + n + (changed < ids.length - refused.length
    ? " (the others were left as they were)" : "") +
    (refused.length ? "; refused: " + refused.join("; ") : "") + ".", refused.length > 0);
  await refresh();
}
// One row of the page of jobs, with its checkbox unless read-only.
function jobRow(j, now) {
  return el("tr", { "data-id": j.id },
    session.read_only ? null : el("td", { class: "pick" }, el("input", {
      type: "checkbox", class: "pick", "data-id": j.id, "aria-label": "select job " + visible(j.id),
      checked: selected.has(j.id),
      onchange: (e) => { pick(j.id, e.target.checked); syncSelection(); } })),
    el("td", {}, el("a", { href: "#/job/" + encodeURIComponent(j.id) }, j.id)),
    el("td", {}, j.queue), stateCell(j.state),
    el("td", { class: "num age", title: j.created ? new Date(j.created * 1000).toISOString() : "" },
      j.created ? span(now - j.created) : "-"),
    el("td", { class: "num" }, attempts(j)),
    el("td", { class: "num" }, j.fence), el("td", {}, j.owner || ""), el("td", {}, when(j, now)),
    el("td", { class: "err" }, j.error ? j.error.slice(0, 200) : ""));
}
function params() {
  const q = location.hash.indexOf("?");
  return new URLSearchParams(q < 0 ? "" : location.hash.slice(q + 1));
}
async function jobs(current) {
  const p = params();
  const query = new URLSearchParams();
  for (const k of ["queue", "state", "prefix", "after", "after_created"]) {
    if (p.get(k)) query.set(k, p.get(k));
  }
  // Oldest and newest first are the daemon's order (across pages); lease end
  // sorts the page at hand.
  const sort = p.get("sort") || "id";
  if (sort === "oldest") query.set("order", "created");
  if (sort === "newest") query.set("order", "-created");
  query.set("limit", "50");
  const page = await api("jobs?" + query.toString());
  if (!current()) return false;
  const now = Date.now() / 1000 - (session.skew || 0);
  const rows = page.jobs.slice();
  if (sort === "lease") rows.sort((a, b) => (a.until || Infinity) - (b.until || Infinity));
  const form = el("form", { class: "filters", onsubmit: (e) => {
      e.preventDefault();
      const f = new FormData(e.target);
      const n = new URLSearchParams();
      for (const [k, v] of f.entries()) if (v) n.set(k, v);
      location.hash = "#/jobs?" + n.toString();
    } },
    el("input", { name: "queue", placeholder: "queue", value: p.get("queue") || "" }),
    el("select", { name: "state" }, ["", "ready", "delayed", "leased", "done", "dead",
      "cancelled", "blocked", "suspended"].map((s) => el("option", { value: s, selected: (p.get("state") || "") === s },
        s || "any state"))),
    el("input", { name: "prefix", placeholder: "id prefix", value: p.get("prefix") || "" }),
    el("select", { name: "sort" }, [["id", "by id"], ["oldest", "oldest first"],
      ["newest", "newest first"], ["lease", "by lease end (this page)"]].map(([v, t]) =>
      el("option", { value: v, selected: sort === v }, t))),
    el("button", { type: "submit" }, "show"));
  // A redraw (the refresh every 2 s) keeps the filters the user changed and
  // has not submitted yet, rather than putting the address's values back.
  const before = main.querySelector("form.filters");
  if (before && before.dataset.hash === location.hash) {
    for (const f of before.elements) if (f.name && form.elements[f.name]) form.elements[f.name].value = f.value;
  }
  form.dataset.hash = location.hash;
  const next = new URLSearchParams(p);
  next.delete("after_created");
  for (const [k, v] of Object.entries(page.next || {})) next.set(k, String(v));
  if (selectedOn !== location.hash) { selected = new Set(); selectedOn = location.hash; }
  const shown = new Set(rows.map((j) => j.id));
  for (const id of selected) if (!shown.has(id)) selected.delete(id);
  const selectAll = session.read_only || !rows.length ? null : el("th", { class: "pick" },
    el("input", { type: "checkbox", id: "select-all", "aria-label": "select every job of this page",
      onchange: (e) => { for (const j of rows) pick(j.id, e.target.checked); syncSelection(); } }));
  const bulk = session.read_only || !rows.length ? null : el("div", { class: "selection" },
    el("button", { id: "retry-selected", onclick: () => actOnSelected("retry") }, "retry selected"),
    " ",
    el("button", { id: "cancel-selected", class: "danger", onclick: () => actOnSelected("cancel") },
      "cancel selected"),
    " ", el("span", { id: "selected-count", class: "note" }));
  main.replaceChildren(el("section", {}, el("h2", {}, "Jobs"), form, bulk,
    el("table", { id: "jobs" },
      el("thead", {}, el("tr", {}, selectAll, ["id", "queue", "state", "age", "attempts", "fence",
        "owner", "when", "error"].map((t) => el("th", {}, t)))),
      el("tbody", {}, rows.length ? rows.map((j) => jobRow(j, now)) :
        el("tr", {}, el("td", {}, "no jobs")))),
    page.more ? el("p", {}, el("a", { href: "#/jobs?" + next.toString() }, "next page")) : null));
  syncSelection();
}

// --- one job -------------------------------------------------------------------
// The jobs a job's page links to (C3.13: its parents and its children
// still blocked) by id, each to its {state, result} or null (no such job:
// a parent purged once done). One /api/results request for up to
// RESULTS_IDS of them in RESULTS_QUERY characters, side by side beyond: the
// daemon's HTTP server holds a request's line, headers and parsed query
// arguments in 16 KiB (about 200 short ids at most with a browser's headers).
const RESULTS_IDS = 100, RESULTS_QUERY = 4000;
async function outcomes(ids) {
  const chunks = [];
  let chunk = [], size = 0;
  for (const id of new Set(ids)) {
    const arg = "id=" + encodeURIComponent(id);
    if (chunk.length && (chunk.length === RESULTS_IDS || size + arg.length + 1 > RESULTS_QUERY)) {
      chunks.push(chunk);
      chunk = [];
      size = 0;
    }
    chunk.push(arg);
    size += arg.length + 1;
  }
  if (chunk.length) chunks.push(chunk);
  // The states alone (states=1): the page shows no result, so none is read.
  const answers = await Promise.all(chunks.map((c) => api("results?" + ["states=1"].concat(c).join("&"))));
  // A Map, not an object: an id such as "__proto__" is a key like any other.
  const found = new Map();
  for (const a of answers) for (const [k, v] of Object.entries(a)) found.set(k, v);
  return found;
}
// A list of linked jobs: each id a link to its page, with its state.
function linked(listId, ids, found, cut) {
  return el("ul", { class: "linked", id: listId }, ids.map((j) => {
    const o = found.get(j);
    const state = o ? o.state : "purged";
    return el("li", { "data-id": j }, el("a", { href: "#/job/" + encodeURIComponent(j) }, j), " ",
      el("span", { class: "state state-" + state }, state));
  }), cut ? el("li", { class: "note" }, "the first " + ids.length + " in id order; there may be more")
    : null);
}
async function job(id, current) {
  const d = await api("job?id=" + encodeURIComponent(id));
  if (!current()) return false;
  if (!d) { main.replaceChildren(el("section", {}, "No job " + id)); return; }
  // On the wire only for a job that has some (C3.13).
  const parents = d.after || [], children = d.blocked_children || [];
  const found = parents.length || children.length
    ? await outcomes(parents.concat(children)) : new Map();
  if (!current()) return false;
  const now = Date.now() / 1000 - (session.skew || 0);
  let payload = "none";
  if (d.payload) {
    const shown = d.payload.binary ? d.payload.hex : d.payload.text;
    payload = [el("pre", { id: "payload" }, shown),
      el("div", { class: "note" }, d.payload.size + " bytes" + (d.payload.binary ? ", binary (hex)" : "") +
        (d.payload.truncated ? ", the first " + (d.payload.binary ? shown.length / 2 : shown.length) +
          " shown" : ""))];
  }
  // Its steps, the signal that woke it, its suspension (C3.22, C3.23): only
  // when it has them.
  const shownValue = (v) => v === null ? "nil" : (v.binary ? v.hex : v.text) +
    (v.truncated ? " (" + v.size + " bytes, cut)" : "");
  const steps = Object.keys(d.steps || {}).sort();
  const stepList = steps.length ? el("ul", { id: "steps" }, steps.map((name) =>
    el("li", { "data-step": name }, el("b", {}, name), ": ", el("code", {}, shownValue(d.steps[name])))))
    : null;
  const suspended = d.suspended ? "until a signal, or " + (d.suspended.on_timeout === "fail"
    ? "dead" : "ready again") + " in " + span(d.suspended.timeout - now) + " (" +
    new Date(d.suspended.timeout * 1000).toISOString() + ")" : null;
  const finished = d.state === "done" || d.state === "cancelled";
  const actions = session.read_only ? [] : [
    d.state === "dead" || d.state === "cancelled"
      ? el("button", { id: "retry", onclick: () => act("retry", { id },
          "Retry job " + id + "? Its attempts start over and it can be claimed at once; " +
          "its next claim gets fence " + (d.fence + 1) + ".") }, "retry")
      : null,
    " ",
    !finished ? el("button", { id: "cancel", class: "danger", onclick: () => act("cancel", { id },
        "Cancel job " + id + "? Its fence goes up to " + (d.fence + 1) + ": its current holder" +
        (d.owner && d.state === "leased" ? " (" + d.owner + ")" : "") + " can no longer renew, " +
        "complete or fail it, and no result of that lease is ever stored. Retry revives it.") },
        "cancel") : null];
  main.replaceChildren(el("section", {}, el("h2", {}, "Job " + id),
    el("dl", { id: "detail" },
      el("dt", {}, "queue"), el("dd", {}, el("a", { href: "#/jobs?queue=" +
        encodeURIComponent(d.queue) }, d.queue)),
      el("dt", {}, "state"), el("dd", { class: "state-" + d.state, id: "state" }, d.state),
      d.group ? [el("dt", {}, "group"), el("dd", { id: "group" }, d.group)] : null,
      parents.length ? [el("dt", {}, "parents"),
        el("dd", {}, linked("parents", parents, found, false))] : null,
      children.length ? [el("dt", {}, "blocked children"),
        el("dd", {}, linked("blocked-children", children, found, children.length >= 1000))] : null,
      el("dt", {}, "enqueued"), el("dd", { id: "created" }, d.created
        ? span(now - d.created) + " ago (" + new Date(d.created * 1000).toISOString() + ")" : "-"),
      el("dt", {}, "attempts"), el("dd", {}, d.attempts + (d.max_attempts ? " of " + d.max_attempts
        : " (no limit)")),
      el("dt", {}, "fence"), el("dd", { id: "fence" }, d.fence),
      el("dt", {}, "owner"), el("dd", {}, d.owner || "-"),
      el("dt", {}, "lease"), el("dd", { id: "lease" }, d.state === "leased"
        ? "ends in " + span(d.until - now) + " (" + new Date(d.until * 1000).toISOString() + ")"
        : "-"),
      suspended ? [el("dt", {}, "suspended"), el("dd", { id: "suspended" }, suspended)] : null,
      "signal" in d ? [el("dt", {}, "signal"), el("dd", { id: "signal" },
        el("code", {}, shownValue(d.signal)))] : null,
      stepList ? [el("dt", {}, "steps"), el("dd", {}, stepList)] : null,
      el("dt", {}, "progress"), el("dd", {}, d.progress || "-"),
      el("dt", {}, "error"), el("dd", {}, d.error ? el("pre", {}, d.error) : "-"),
      el("dt", {}, "result"), el("dd", {}, d.result !== null ? el("pre", {}, d.result) : "-"),
      el("dt", {}, "payload"), el("dd", {}, payload)),
    el("p", {}, actions)));
}

// --- routing -------------------------------------------------------------------
async function refresh() {
  const h = location.hash || "#/";
  const mine = ++drawing;
  const current = () => mine === drawing && (location.hash || "#/") === h;
  try {
    let shown;
    if (h.startsWith("#/job/")) shown = await job(decodeURIComponent(h.slice(6)), current);
    else if (h.startsWith("#/jobs")) shown = await jobs(current);
    else shown = await overview(current);
    if (shown === false) return;  // a later refresh draws (and says when)
    // ISO 8601 in UTC, as every other time on the page.
    status("updated " + new Date().toISOString());
  } catch (e) {
    if (current()) status(String(e.message || e), true);
  }
}
async function start() {
  session = await api("session");
  document.getElementById("who").textContent = session.user + (session.read_only ? " (read-only)" : "");
  window.addEventListener("hashchange", () => { notice(""); refresh(); });
  window.addEventListener("resize", () => {
    const c = document.getElementById("chart");
    if (c && drawn) chart(c, drawn);
  });
  await refresh();
  // Every 2 s after the last update came (a slow page is not asked for
  // again while it is being read).
  const tick = async () => {
    // Not while a form field has the focus: the page would take it away.
    if (!document.activeElement || !["INPUT", "SELECT"].includes(document.activeElement.tagName)) {
      await refresh();
    }
    timer = setTimeout(tick, 2000);
  };
  timer = setTimeout(tick, 2000);
}
start().catch((e) => status(String(e.message || e), true));
