// Memory Anchor web viewer: a single page over the worker's REST API.
//
// Every string that comes from memory (tool outputs, prompts, facts, agent
// names...) is untrusted. It reaches the page only as a text node, through
// `el()` below: this file never assigns HTML markup from data. The worker's
// Content-Security-Policy (no inline script) is the second line of defence.
//
// Data calls carry no token: the `memory_anchor_token` cookie (HttpOnly, set by
// `/?token=...`) authenticates them. A section whose endpoint this worker does
// not have (404) says "not available" instead of failing.
"use strict";

// --- safe DOM building -------------------------------------------------------

/** An element with attributes and children; strings become text nodes, never markup. */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Replace a node's content with these children (text-safe). */
function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

function shorten(text, max) {
  const flat = String(text ?? "").replace(/\s+/g, " ").trim();
  return flat.length > max ? flat.slice(0, max - 1) + "…" : flat;
}

/** An ISO 8601 time or epoch seconds (some tables answer with those) as local time. */
function when(value) {
  if (value === null || value === undefined || value === "") return "";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

/** When the words were said (an imported statement keeps its transcript's time), as epoch ms, for ordering. */
function saidAt(item) {
  const said = item.payload && item.payload.said_at;
  const value = said ?? item.happened_at ?? item.created_at;
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value || 0);
  return Number.isNaN(date.getTime()) ? 0 : date.getTime();
}

const newestSaidFirst = (rows) => [...rows].sort((a, b) => saidAt(b) - saidAt(a));
// A queue waits in the order its words were said: the oldest first (a stable sort keeps the rest as listed).
const oldestSaidFirst = (rows) => [...rows].sort((a, b) => saidAt(a) - saidAt(b));

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

// --- the API ---------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, { params, body } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  const options = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    options.body = JSON.stringify(body);
    options.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(url, options);
  } catch (err) {
    throw new ApiError(0, "unreachable", "the worker does not answer (is it running?)");
  }
  let data = null;
  try {
    data = await response.json();
  } catch (err) {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    if (response.status === 401) showLogin();
    throw new ApiError(response.status, error.code || `http_${response.status}`, error.message || response.statusText);
  }
  return data;
}

const enc = encodeURIComponent;

// --- page state ------------------------------------------------------------------

const scope = { project: "", session: "", branch: "", as_of: "" };
const sectionNode = () => document.getElementById("section");
const detailNode = () => document.getElementById("detail");

function scopeParams(extra) {
  return { project: scope.project, session_id: scope.session, branch: scope.branch, as_of: scope.as_of, ...extra };
}

function showLogin() {
  const notice = document.getElementById("notice");
  notice.hidden = false;
  fill(
    notice,
    "Not signed in to this worker. Run ",
    el("code", {}, "memory-anchor viewer"),
    " and open the URL it prints (it carries this worker's token).",
  );
}

function message(kind, ...text) {
  return el("p", { class: `message ${kind}` }, ...text);
}

/** What a section shows when its request failed. */
function failure(err, what) {
  // aiohttp's own 404/405 (no such route) say "Not Found" / "Method Not Allowed";
  // a handler's 404 (no such record) carries its own message.
  if ((err.status === 404 && err.message === "Not Found") || err.status === 405) {
    return message("muted", `${what} is not available in this worker.`);
  }
  return message(err.status === 404 ? "muted" : "error", `${what}: ${err.message}`);
}

/** Run a section's loader, with a loading line and a clear failure. */
async function load(node, what, loader) {
  fill(node, message("muted", "Loading…"));
  try {
    await loader(node);
  } catch (err) {
    if (!(err instanceof ApiError)) console.error(err);
    fill(node, failure(err, what));
  }
}

// --- records ---------------------------------------------------------------------

function badge(text, extra) {
  return text ? el("span", { class: `badge ${extra || ""}` }, text) : null;
}

// A subagent's tool use says whose work it was (worker/pipeline/observations.py: tool_origin).
function subagentBadge(record) {
  const subagent = record.data && record.data.subagent;
  return subagent ? badge(`subagent ${subagent.type || subagent.id}`) : null;
}

// A memory about code whose files moved on since it was written (worker/codebase: the Freshness model).
const STALE_STATES = new Set(["changed", "deleted", "moved", "superseded"]);
function codeBadge(record) {
  const code = record.freshness;
  if (!code || !STALE_STATES.has(code.state)) return null;
  const node = badge(code.state === "superseded" ? `superseded: ${code.detail}` : code.detail || code.state, "warn stale");
  node.title = "The code this memory is about changed since it was written";
  return node;
}

function recordCard(record, extra) {
  const headline = record.title || record.memory;
  return el(
    "li",
    { class: "card record", tabindex: "0", "data-id": record.id, "data-seq": record.seq,
      onclick: () => showRecord(record.id), onkeydown: (e) => e.key === "Enter" && showRecord(record.id) },
    el(
      "div",
      { class: "meta" },
      badge(record.kind, "kind"),
      record.type !== record.kind ? badge(record.type) : null,
      record.status && record.status !== "active" ? badge(record.status, "warn") : null,
      record.branch && record.branch !== "main" ? badge(record.branch, "branch") : null,
      subagentBadge(record),
      record.score !== undefined && record.score !== null ? badge(`score ${Number(record.score).toFixed(3)}`) : null,
      // A search returns a memory said several times once, and folds more hits under one title.
      record.count > 1 ? badge(`said ${record.count} times`) : null,
      record.similar > 0 ? badge(`+${record.similar} more like it`) : null,
      record.confidence !== undefined && record.confidence !== null ? badge(`conf ${Number(record.effective_confidence ?? record.confidence).toFixed(2)}`) : null,
      record.needs_verification ? badge("needs re-verification", "warn") : null,
      codeBadge(record),
      el("time", {}, when(record.happened_at || record.created_at)),
    ),
    el("div", { class: "headline" }, shorten(headline, 200)),
    record.title && record.memory ? el("div", { class: "body" }, shorten(record.memory, 300)) : null,
    el("div", { class: "where" }, shorten(record.project || "", 80), record.session_id ? ` · session ${shorten(record.session_id, 12)}` : ""),
    extra instanceof Node ? extra : null, // not Array.map's index
  );
}

function recordList(results) {
  if (!results.length) return message("muted", "Nothing here.");
  return el("ul", { class: "cards" }, results.map(recordCard));
}

function fields(pairs) {
  const list = el("dl", { class: "fields" });
  for (const [name, value] of pairs) {
    if (value === undefined || value === null || value === "") continue;
    append(list, [el("dt", {}, name), el("dd", {}, typeof value === "object" ? pretty(value) : String(value))]);
  }
  return list;
}

async function showRecord(id) {
  const node = detailNode();
  node.hidden = false;
  const close = el("button", { class: "close", type: "button", onclick: () => { node.hidden = true; } }, "Close");
  fill(node, close, message("muted", "Loading…"));
  const params = { branch: scope.branch, as_of: scope.as_of };
  let record = null;
  try {
    record = await api("GET", `/api/v1/memories/${enc(id)}`, { params });
  } catch (err) {
    if (err.status !== 404) return fill(node, close, failure(err, "Record"));
  }
  let history = [];
  try {
    history = (await api("GET", `/api/v1/memories/${enc(id)}/history`, { params })).results || [];
  } catch (err) {
    return fill(node, close, failure(err, "History"));
  }
  const shown = record || history[history.length - 1];
  if (!shown) return fill(node, close, message("muted", "This record is not visible here."));
  fill(
    node,
    close,
    el("h2", {}, shorten(shown.title || shown.memory || shown.id, 120)),
    record ? null : message("warn", "Deleted (or not visible) in this view; its history follows."),
    el("pre", { class: "text" }, shown.memory || ""),
    fields([
      ["id", shown.id], ["kind", shown.kind], ["layer", shown.layer], ["type", shown.type],
      ["status", shown.status], ["confidence", shown.confidence], ["branch", shown.branch],
      ["project", shown.project], ["session", shown.session_id], ["agent", shown.agent_id],
      ["code", shown.freshness && shown.freshness.state !== "unknown" ? `${shown.freshness.state}${shown.freshness.detail ? `: ${shown.freshness.detail}` : ""}` : null],
      ["user", shown.user_id], ["happened", when(shown.happened_at)], ["seq", shown.seq],
      ["version", shown.version], ["data", Object.keys(shown.data || {}).length ? shown.data : null],
      ["metadata", Object.keys(shown.metadata || {}).length ? shown.metadata : null],
    ]),
    el("h3", {}, `History (${history.length} version${history.length === 1 ? "" : "s"})`),
    el(
      "ol",
      { class: "history" },
      history.map((v) =>
        el(
          "li",
          { class: v.deleted ? "deleted" : "" },
          el("div", { class: "meta" }, badge(`v${v.version}`), badge(`seq ${v.seq}`), badge(v.branch, "branch"),
             badge(v.reason), v.deleted ? badge("deleted", "warn") : null,
             el("span", {}, `${v.actor || "-"} · ${when(v.created_at)}`)),
          v.deleted ? null : el("pre", { class: "text small" }, v.memory || ""),
        ),
      ),
    ),
  );
}

// --- live timeline ---------------------------------------------------------------------

let liveStream = null;

function stopFollowing() {
  if (liveStream) liveStream.close();
  liveStream = null;
  delete document.body.dataset.live;
}

/** Prepend records to the timeline as the worker writes them (server-sent events). */
function followTimeline(list, summary) {
  stopFollowing();
  const seqs = [...list.querySelectorAll("li.record")].map((li) => Number(li.dataset.seq) || 0);
  const params = scopeParams({ after: Math.max(0, ...seqs) });
  const url = new URL("/api/v1/timeline/stream", window.location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  const stream = new EventSource(url);
  liveStream = stream;
  let added = 0;
  // The flash fades after a few seconds; the page keeps whether it is following (body[data-live]).
  stream.addEventListener("open", () => {
    document.body.dataset.live = "yes";
    flash("Live: new records appear as they are captured.");
  });
  stream.addEventListener("error", () => {
    if (stream === liveStream) document.body.dataset.live = "reconnecting";
  });
  stream.addEventListener("record", (event) => {
    const record = JSON.parse(event.data);
    let ul = list.querySelector("ul.cards");
    if (!ul) {
      ul = el("ul", { class: "cards" });
      fill(list, ul);
    }
    for (const old of ul.querySelectorAll("li.record")) {
      if (old.dataset.id === record.id) old.remove(); // a new version replaces the old card
    }
    const card = recordCard(record);
    card.classList.add("fresh");
    ul.prepend(card);
    added += 1;
    fill(summary, `${added} new since the page loaded (live); newest first; every kind interleaved.`);
  });
  // EventSource reconnects by itself (resuming after the last id it saw) if the worker restarts.
}

// --- sections ----------------------------------------------------------------------

const PAGE = 50;

const sections = {
  async timeline(node) {
    let offset = 0;
    const list = el("div");
    const more = el("button", { type: "button", class: "more" }, "Older");
    const summary = el("p", { class: "muted" });
    fill(node, el("h2", {}, "Timeline"), summary, list, more);
    async function page() {
      const data = await api("GET", "/api/v1/timeline", { params: scopeParams({ limit: PAGE, offset }) });
      const results = data.results || [];
      if (offset === 0) fill(list, recordList(results));
      else if (results.length) list.querySelector("ul")?.append(...results.map(recordCard));
      offset += results.length;
      fill(summary, `${offset} of ${data.total ?? offset} records, newest first; every kind interleaved.`);
      more.hidden = data.total === undefined ? results.length < PAGE : offset >= data.total;
    }
    more.addEventListener("click", () => page().catch((err) => append(node, failure(err, "Timeline"))));
    await page();
    if (!scope.as_of) followTimeline(list, summary);
  },

  async search(node) {
    const input = el("input", { type: "search", name: "query", placeholder: "What do you want to remember?", required: true });
    const mode = el("select", { name: "mode" }, ["hybrid", "keyword", "vector"].map((m) => el("option", { value: m }, m)));
    const results = el("div");
    const form = el("form", { class: "searchbar" }, input, mode, el("button", { type: "submit" }, "Search"));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const filters = {};
      if (scope.project) filters.project = scope.project;
      if (scope.session) filters.session_id = scope.session;
      const body = { query: input.value, top_k: 30, mode: mode.value, filters };
      if (scope.branch) body.branch = scope.branch;
      if (scope.as_of) body.as_of = scope.as_of;
      await load(results, "Search", async (target) => {
        const data = await api("POST", "/api/v1/memories/search", { body });
        fill(target, recordList(data.results || []));
      });
    });
    fill(node, el("h2", {}, "Search"), form, results);
    input.focus();
  },

  async facts(node) {
    const choices = [["active", "active"], ["pending", "pending approval"], ["disputed", "disputed"],
                     ["active,pending,disputed", "all"], ["forgotten", "forgotten"]];
    const status = el("select", {}, choices.map(([value, label]) => el("option", { value }, label)));
    const steps = el("div");
    const list = el("div");
    const reloadSteps = () =>
      load(steps, "Next steps", async (target) => {
        const data = await api("GET", "/api/v1/next-steps", { params: { project: scope.project } });
        const rows = data.results || [];
        fill(target, rows.length ? el("ul", { class: "cards" }, rows.map((step) => stepCard(step, reloadSteps)))
                                 : message("muted", "No open next steps."));
      });
    const reload = () =>
      load(list, "Facts", async (target) => {
        const params = scopeParams({ limit: 500, status: status.value });
        const data = await api("GET", "/api/v1/facts", { params });
        const results = newestSaidFirst(data.results || []);
        fill(target, el("p", { class: "muted" }, `${data.total ?? results.length} facts, newest said first; click one for its history.`),
             results.length ? el("ul", { class: "cards" }, results.map((fact) => factCard(fact, reload))) : message("muted", "Nothing here."));
      });
    status.addEventListener("change", reload);
    fill(node, el("h2", {}, "Open next steps"), steps, el("h2", {}, "Facts"),
         message("muted", "Rules, decisions, preferences and what sessions established. Forget what is wrong, or edit it: ",
                 "extracting the same words again does not bring it back."),
         el("label", {}, "Status ", status), list);
    await Promise.all([reloadSteps(), reload()]);
  },

  async identity(node) {
    const data = await api("GET", "/api/v1/identity", { params: { project: scope.project, branch: scope.branch, as_of: scope.as_of } });
    const items = data.results || data.items || [];
    fill(
      node,
      el("h2", {}, "Identity (L0)"),
      message("muted", "Always injected at session start. Only a human changes it, with three confirmations: ",
              el("code", {}, "memory-anchor identity ..."), "; agents' proposals wait under Approvals."),
      recordList(items),
    );
  },

  approvals(node) {
    return decisionQueue(node, "Approvals", "/api/v1/approvals", ["pending", "approved", "rejected"], approvalCard, "Nothing waiting.");
  },

  conflicts(node) {
    return decisionQueue(node, "Conflicts", "/api/v1/conflicts", ["open", "resolved"], conflictCard, "No conflicts.");
  },

  async inbox(node) {
    const data = await api("GET", "/api/v1/inbox");
    const counts = Object.entries(data.counts || {}).map(([k, v]) => `${k} ${v}`).join(", ");
    const items = data.quarantined || [];
    fill(
      node,
      el("h2", {}, "Inbox"),
      message("muted", `Captured events: ${counts || "none"}.`),
      items.length
        ? el("ul", { class: "cards" }, items.map((item) => quarantineCard(item, () => sections.inbox(node))))
        : message("muted", "Nothing quarantined: every captured event went through."),
    );
  },

  async branches(node) {
    const data = await api("GET", "/api/v1/branches");
    const rows = data.results || [];
    const diff = el("div", { class: "diff" });
    const table = el(
      "table",
      { class: "grid" },
      el("thead", {}, el("tr", {}, ["Branch", "Parent", "Fork seq", "Status", "Own writes", "Created", "Description", ""].map((h) => el("th", {}, h)))),
      el(
        "tbody",
        {},
        rows.map((b) =>
          el(
            "tr",
            {},
            el("td", {}, el("strong", {}, b.name)),
            el("td", {}, b.parent || "—"),
            el("td", {}, b.fork_seq ?? "—"),
            el("td", {}, b.status || ""),
            el("td", {}, b.own_writes ?? ""),
            el("td", {}, when(b.created_at)),
            el("td", {}, shorten(b.description || "", 80)),
            el("td", {}, b.parent ? el("button", { type: "button", onclick: () => showDiff(diff, b.name, b.parent) }, `Diff vs ${b.parent}`) : null),
          ),
        ),
      ),
    );
    fill(node, el("h2", {}, "Branches"), table, diff);
  },
};

/** A list of things a human decides (approvals, conflicts), filtered by status. */
async function decisionQueue(node, title, path, statuses, card, empty) {
  const status = el("select", {}, statuses.map((s) => el("option", { value: s }, s)));
  const list = el("div");
  const reload = () =>
    load(list, title, async (target) => {
      const data = await api("GET", path, { params: { status: status.value, project: scope.project } });
      const rows = oldestSaidFirst(data.results || []);
      fill(target, rows.length ? el("ul", { class: "cards" }, rows.map((row) => card(row, reload))) : message("muted", empty));
    });
  status.addEventListener("change", reload);
  fill(node, el("h2", {}, title), el("label", {}, "Status ", status), list);
  await reload();
}

/** An event (or record version) that kept failing: its error, and the user's two choices. */
function quarantineCard(item, reload) {
  async function act(method, path, done) {
    try {
      await api(method, path, method === "POST" ? { body: {} } : {});
      flash(`quarantined #${item.id} ${done}`);
      refreshCounts();
      reload();
    } catch (err) {
      flash(`quarantined #${item.id}: ${err.message}`, true);
    }
  }
  const what = item.stage === "capture" ? `inbox event ${item.inbox_id}` : `record version ${item.record_seq} (indexing)`;
  return el(
    "li",
    { class: "card quarantine" },
    el("div", { class: "meta" }, badge("quarantined", "warn"), el("strong", {}, `#${item.id} ${item.event || ""}`),
       el("span", {}, what), el("span", {}, `session ${item.session_id || "-"}`), el("span", {}, `${item.attempts} attempts`),
       el("span", {}, new Date(item.quarantined_at * 1000).toLocaleString())),
    el("pre", { class: "text small error" }, item.error),
    item.preview ? el("pre", { class: "text small" }, item.preview) : null,
    el("div", { class: "actions" },
       decisionButton("Retry", "ok", () => act("POST", `/api/v1/inbox/quarantine/${enc(item.id)}/retry`, "back in line")),
       decisionButton("Drop", "danger", () => act("DELETE", `/api/v1/inbox/quarantine/${enc(item.id)}`, "dropped"))),
  );
}

// --- corrections: forget or edit a fact or an open next step -----------------------------

const LIVE_FACT = new Set(["active", "pending", "disputed"]);

/** Forget and Edit buttons for one item; `path` is its correction route without the action. */
function correctionActions(what, path, text, reload) {
  const actions = el("div", { class: "actions correction" });
  async function correct(action, body, done) {
    try {
      const out = await api("POST", `${path}/${action}`, { body });
      flash(`${out.ref} ${done}`);
      refreshCounts();
      reload();
    } catch (err) {
      flash(`${what}: ${err.message}`, true);
    }
  }
  function forget(event) {
    event.stopPropagation();
    if (!window.confirm(`Forget this ${what}? It leaves the briefing, recall and search, and does not come back when the same words are extracted again.`)) return;
    correct("forget", {}, "forgotten");
  }
  function edit(event) {
    event.stopPropagation();
    const input = el("textarea", { class: "edit-text", rows: 2, "aria-label": `new text of the ${what}` });
    input.value = text;
    const save = decisionButton("Save", "ok", (e) => {
      e.stopPropagation();
      if (input.value.trim()) correct("edit", { text: input.value.trim() }, "edited");
    });
    const cancel = decisionButton("Cancel", "", (e) => { e.stopPropagation(); fill(actions, ...buttons()); });
    input.addEventListener("click", (e) => e.stopPropagation());
    fill(actions, input, save, cancel);
    input.focus();
  }
  const buttons = () => [decisionButton("Edit", "", edit), decisionButton("Forget", "danger", forget)];
  return fill(actions, ...buttons());
}

function factCard(fact, reload) {
  const what = ["rule", "convention", "decision", "preference"].includes(fact.type) ? fact.type : "fact";
  const actions = LIVE_FACT.has(fact.status) ? correctionActions(what, `/api/v1/facts/${enc(fact.id)}`, fact.memory ?? fact.text ?? "", reload) : null;
  return recordCard(fact, actions);
}

function stepCard(step, reload) {
  return el(
    "li",
    { class: "card step", "data-id": step.id },
    el("div", { class: "meta" }, badge(step.ref, "kind"), el("span", {}, `session ${shorten(step.session_id, 16)}`),
       el("time", {}, `open since ${when(step.opened_at)}`)),
    el("div", { class: "headline" }, step.text),
    el("div", { class: "where" }, shorten(step.project || "", 80)),
    correctionActions("next step", `/api/v1/next-steps/${enc(step.id)}`, step.text, reload),
  );
}

function decisionButton(label, kind, onclick) {
  return el("button", { type: "button", class: kind, onclick }, label);
}

function approvalCard(approval, reload) {
  const note = el("input", { type: "text", placeholder: "note (optional)" });
  const identity = approval.kind === "identity_change";
  async function decide(verb) {
    let confirmations = 0;
    if (identity && verb === "approve") {
      // The seeds' triple confirmation for identity changes, asked here one by one.
      const questions = [
        "Approve this change to the identity layer (always injected into every session)?",
        "Confirm a second time: this identity change affects every future session.",
        "Third and last confirmation: apply the identity change now?",
      ];
      for (const question of questions) {
        if (!window.confirm(question)) return;
        confirmations += 1;
      }
    }
    try {
      await api("POST", `/api/v1/approvals/${enc(approval.id)}/${verb}`, { body: { note: note.value || null, confirmations } });
      flash(`approval ${approval.id} ${verb === "approve" ? "approved" : "rejected"}`);
      refreshCounts();
      reload();
    } catch (err) {
      flash(`approval ${approval.id}: ${err.message}`, true);
    }
  }
  const pending = approval.status === "pending";
  return el(
    "li",
    { class: "card" },
    el("div", { class: "meta" }, badge(`#${approval.id}`), badge(approval.kind, "kind"), badge(approval.action),
       approval.status !== "pending" ? badge(approval.status, "warn") : null,
       el("span", {}, `${approval.agent_id || "-"} · `),
       el("time", {}, approval.payload && approval.payload.said_at ? `said ${when(approval.payload.said_at)}` : when(approval.created_at))),
    approval.reason ? el("div", { class: "headline" }, approval.reason) : null,
    el("pre", { class: "text small" }, pretty(approval.payload || {})),
    approval.record_id ? el("button", { type: "button", class: "link", onclick: () => showRecord(approval.record_id) }, "Show record") : null,
    pending ? el("div", { class: "actions" }, note, decisionButton("Approve", "ok", () => decide("approve")),
                 decisionButton("Reject", "danger", () => decide("reject"))) : null,
    approval.decision_note ? el("div", { class: "muted" }, `note: ${approval.decision_note}`) : null,
  );
}

function conflictSide(label, side, id) {
  return el("div", { class: "side" }, el("h4", {}, label),
            side ? el("pre", { class: "text small" }, side.text || "") : message("muted", "(no longer visible)"),
            side ? el("div", { class: "meta" }, side.confidence != null ? badge(`conf ${Number(side.confidence).toFixed(2)}`) : null,
                      badge(side.status), el("span", {}, side.actor || "")) : null,
            id ? el("button", { type: "button", class: "link", onclick: () => showRecord(id) }, "History") : null);
}

function conflictCard(conflict, reload) {
  const note = el("input", { type: "text", placeholder: "note (optional)" });
  async function resolve(resolution) {
    try {
      await api("POST", `/api/v1/conflicts/${enc(conflict.id)}/resolve`, { body: { resolution, note: note.value || null } });
      flash(`conflict ${conflict.id} resolved (${resolution})`);
      refreshCounts();
      reload();
    } catch (err) {
      flash(`conflict ${conflict.id}: ${err.message}`, true);
    }
  }
  return el(
    "li",
    { class: "card" },
    el("div", { class: "meta" }, badge(`#${conflict.id}`), badge(conflict.fact_key, "kind"), badge(conflict.branch, "branch"),
       conflict.status !== "open" ? badge(`${conflict.status}: ${conflict.resolution || ""}`, "warn") : null,
       el("span", {}, when(conflict.created_at))),
    conflict.reason ? el("div", { class: "headline" }, conflict.reason) : null,
    el("div", { class: "sides" }, conflictSide("Existing", conflict.existing, conflict.existing_id),
       conflictSide("New", conflict.candidate, conflict.candidate_id)),
    conflict.status === "open"
      ? el("div", { class: "actions" }, note, decisionButton("Keep existing", "ok", () => resolve("keep_existing")),
           decisionButton("Keep new", "ok", () => resolve("keep_new")), decisionButton("Keep both", "", () => resolve("keep_both")))
      : null,
  );
}

function changeList(title, changes) {
  return el("div", { class: "side" }, el("h4", {}, `${title} (${changes.length})`),
            changes.length ? el("ul", { class: "plain" }, changes.map((c) =>
              el("li", { onclick: () => showRecord(c.id), class: "clickable" }, badge(c.change, c.change === "invalidated" ? "warn" : ""),
                 badge(c.kind, "kind"), shorten(c.title || c.text || c.id, 160)))) : message("muted", "none"));
}

async function showDiff(node, source, target) {
  await load(node, "Diff", async (out) => {
    const diff = await api("GET", `/api/v1/branches/${enc(source)}/diff`, { params: { target } });
    const conflicts = diff.conflicts || [];
    fill(
      out,
      el("h3", {}, `${source} → ${target}`, diff.base ? ` (base ${diff.base})` : ""),
      el("div", { class: "sides" }, changeList(`Only on ${source}`, diff.source_changes || []),
         changeList(`Only on ${target}`, diff.target_changes || [])),
      el("h4", {}, `Conflicts (${conflicts.length})`),
      conflicts.length ? el("ul", { class: "plain" }, conflicts.map((c) =>
        el("li", {}, badge(c.type, "warn"), shorten(c.reason, 120), el("div", { class: "sides" },
           el("pre", { class: "text small" }, c.source?.text || ""), el("pre", { class: "text small" }, c.target?.text || ""))))) : null,
      message("muted", "Merge with ", el("code", {}, `memory-anchor branch merge ${source} --into ${target}`), " or the memory-branch skill."),
    );
  });
}

// --- chrome ----------------------------------------------------------------------

let flashTimer = null;
function flash(text, isError) {
  const status = document.getElementById("status");
  fill(status, text);
  status.className = `status ${isError ? "error" : "ok"}`;
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => fill(status), 6000);
}

async function refreshCounts() {
  const counts = [
    ["count-approvals", "/api/v1/approvals", { status: "pending" }],
    ["count-conflicts", "/api/v1/conflicts", { status: "open" }],
  ];
  counts.push(["count-inbox", "/api/v1/inbox", {}]);
  for (const [id, path, params] of counts) {
    try {
      const data = await api("GET", path, { params });
      const n = data.counts ? data.counts.quarantined : data.total ?? (data.results || []).length;
      fill(document.getElementById(id), n ? String(n) : "");
    } catch (err) {
      fill(document.getElementById(id));
    }
  }
}

async function fillChoices() {
  try {
    const sessions = (await api("GET", "/api/v1/sessions", { params: { limit: 200 } })).results || [];
    const projects = [...new Set(sessions.map((s) => s.project).filter(Boolean))];
    fill(document.getElementById("projects"), projects.map((p) => el("option", { value: p })));
    fill(document.getElementById("sessions"), sessions.map((s) => el("option", { value: s.session_id }, shorten(s.project, 60))));
  } catch (err) {
    /* the inputs still take free text */
  }
  try {
    const branches = (await api("GET", "/api/v1/branches")).results || [];
    fill(document.getElementById("branches"), branches.map((b) => el("option", { value: b.name })));
  } catch (err) {
    /* no branch registry endpoint: free text */
  }
}

function currentSection() {
  const name = window.location.hash.replace(/^#/, "");
  return Object.prototype.hasOwnProperty.call(sections, name) ? name : "timeline";
}

const TITLES = { timeline: "Timeline", search: "Search", facts: "Facts", identity: "Identity", approvals: "Approvals", conflicts: "Conflicts", branches: "Branches", inbox: "Inbox" };

function render() {
  stopFollowing();
  const name = currentSection();
  for (const link of document.querySelectorAll("#tabs a")) {
    link.classList.toggle("active", link.dataset.section === name);
  }
  load(sectionNode(), TITLES[name], sections[name]);
}

function init() {
  const form = document.getElementById("scope");
  const params = new URLSearchParams(window.location.search);
  for (const key of Object.keys(scope)) {
    scope[key] = params.get(key) || "";
    if (form.elements[key]) form.elements[key].value = scope[key];
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const key of Object.keys(scope)) {
      scope[key] = form.elements[key].value.trim();
      if (scope[key]) query.set(key, scope[key]);
    }
    // The scope lives in the address so a view can be bookmarked or reloaded.
    const search = query.toString();
    window.history.replaceState(null, "", `${window.location.pathname}${search ? "?" + search : ""}${window.location.hash}`);
    detailNode().hidden = true;
    render();
  });
  window.addEventListener("hashchange", render);
  api("GET", "/api/v1/status")
    .then((s) => fill(document.getElementById("status"), `${Object.values(s.records || {}).reduce((a, b) => a + b, 0)} versions stored`))
    .catch(() => {});
  fillChoices();
  refreshCounts();
  render();
}

document.addEventListener("DOMContentLoaded", init);
