// The approval page of `agent-controller serve`. It asks for the token once (kept in
// sessionStorage for this tab), lists what waits (GET /v1/pending), follows the events
// (GET /v1/events, read with fetch: EventSource cannot send the Authorization header) and sends
// decisions (POST /v1/sessions/{id}/decisions/{decisionId}).
//
// Every text a model, a file or a config wrote is drawn from the entry's `shown` object, which
// the server's library made: each hidden or control character arrives as its escape
// (`\u{202e}`), which is marked here. Text is only ever set with textContent: the plan is
// hostile, so no data ever goes through an HTML parser.
"use strict";

const TOKEN_KEY = "agent-controller-token";
const PAGE_LIMIT = 100;
const MAX_PAGES = 50;
const RETRY_MS = 2000;

const cards = new Map(); // "sessionId/decisionId" -> { sha256, element }
let lastEventId = null;
let refreshTimer = null;
let streamAbort = null;
let generation = 0; // counts the times the page was opened with a token: an old stream stops

const $ = (id) => document.getElementById(id);

// --- Elements, with text only -------------------------------------------------------------

/** An element `tag` with `className` and the children given (strings become text nodes). */
function el(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

/** `shown` text (escapes already in it) with every escape `\u{...}` marked. */
function shownText(tag, className, text) {
  const node = el(tag, className);
  const escape = /\\u\{[0-9a-f]{1,6}\}/g;
  let at = 0;
  for (const match of text.matchAll(escape)) {
    if (match.index > at) node.append(document.createTextNode(text.slice(at, match.index)));
    const mark = el("span", "escape", match[0]);
    mark.title = "a hidden or control character, shown as its escape";
    node.append(mark);
    at = match.index + match[0].length;
  }
  if (at < text.length) node.append(document.createTextNode(text.slice(at)));
  return node;
}

function button(label, className, onClick) {
  const node = el("button", className, label);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

function setStatus(text) {
  $("status").textContent = text;
}

// --- The token ----------------------------------------------------------------------------

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function askForToken(why) {
  generation += 1;
  sessionStorage.removeItem(TOKEN_KEY);
  if (streamAbort) streamAbort.abort();
  for (const { element } of cards.values()) element.remove();
  cards.clear();
  showUnreadable([]);
  $("login").hidden = false;
  $("forget").hidden = true;
  $("empty").hidden = true;
  $("login-error").textContent = why || "";
  setStatus("");
  $("token").focus();
}

/** The API at `path`, with the token; a 401 asks for the token again. */
async function api(path, options = {}) {
  const used = token();
  const headers = Object.assign({ Authorization: "Bearer " + used }, options.headers || {});
  const response = await fetch(path, Object.assign({}, options, { headers, cache: "no-store" }));
  if (response.status === 401) {
    // Only when it is still the token in use (another request may have been answered late).
    if (token() === used) askForToken("The server refused that token.");
    throw new Error("unauthorized");
  }
  return response;
}

// --- What waits ---------------------------------------------------------------------------

function keyOf(entry) {
  return entry.sessionId + "/" + entry.decisionId;
}

/** Every pending decision, a page at a time, and the stored records that cannot be read. */
async function listPending() {
  const entries = [];
  const unreadable = new Map(); // "sessionId\nlocation" -> record (pages may repeat one)
  let cursor = null;
  for (let page = 0; page < MAX_PAGES; page++) {
    const query = "?limit=" + PAGE_LIMIT + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
    const response = await api("/v1/pending" + query);
    if (!response.ok) throw new Error("GET /v1/pending answered " + response.status);
    const body = await response.json();
    entries.push(...body.pending);
    for (const record of body.unreadable || []) {
      unreadable.set(record.sessionId + "\n" + record.location, record);
    }
    cursor = body.nextCursor;
    if (!cursor) break;
  }
  return { entries, unreadable: [...unreadable.values()] };
}

/** The records that cannot be read: how many, and each one's session, place and reason. */
function showUnreadable(records) {
  const list = $("unreadable-list");
  list.replaceChildren();
  for (const record of records) {
    // Its `shown` texts: a path or a reason may hold any character.
    const shown = record.shown || {};
    const item = el("li");
    item.append(shownText("p", "meta", "session " + (shown.sessionId || "")));
    item.append(shownText("p", "meta", shown.location || ""));
    item.append(shownText("p", "text", shown.reason || ""));
    list.append(item);
  }
  const count = records.length;
  $("unreadable-count").textContent =
    count === 1 ? "1 stored record cannot be read" : count + " stored records cannot be read";
  $("unreadable").hidden = count === 0;
}

/** Shows exactly what waits: new cards added, decided ones removed, the others left as they are. */
async function refresh() {
  let entries;
  try {
    const listed = await listPending();
    entries = listed.entries;
    showUnreadable(listed.unreadable);
  } catch (error) {
    if (error.message !== "unauthorized") setStatus("Cannot read what waits: " + error.message);
    return;
  }
  const seen = new Set();
  const list = $("pending");
  for (const entry of entries) {
    const key = keyOf(entry);
    seen.add(key);
    const known = cards.get(key);
    if (known && known.sha256 === entry.sha256) continue;
    if (known) known.element.remove();
    const element = card(entry);
    cards.set(key, { sha256: entry.sha256, element });
    list.append(element);
  }
  for (const [key, { element }] of cards) {
    if (!seen.has(key)) {
      element.remove();
      cards.delete(key);
    }
  }
  $("empty").hidden = cards.size > 0;
}

function refreshSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refresh, 100);
}

function removeCard(sessionId, decisionId) {
  const key = sessionId + "/" + decisionId;
  const known = cards.get(key);
  if (known) {
    known.element.remove();
    cards.delete(key);
  }
  $("empty").hidden = cards.size > 0;
}

// --- One decision -------------------------------------------------------------------------

const KIND_NAMES = { plan: "plan", tool_call: "tool call", question: "question", suspension: "waits for an answer" };

function card(entry) {
  const shown = entry.shown || {};
  const node = el("li", "card");
  node.dataset.session = entry.sessionId;
  node.dataset.decision = entry.decisionId;
  node.dataset.kind = entry.kind;
  const heading =
    entry.kind === "plan" ? shown.title || "(a plan without a title)"
    : entry.kind === "tool_call" ? shown.toolName || ""
    : entry.kind === "question" ? "Question of " + (shown.toolName || "")
    : shown.toolName || "";
  node.append(el("p", "kind", KIND_NAMES[entry.kind] || entry.kind));
  node.append(shownText("h2", "title", heading));
  const where = "session " + entry.sessionId + " · " + entry.decisionId + " · mode " + shown.modeId;
  node.append(shownText("p", "meta", where));
  if (shown.workspace) node.append(shownText("p", "meta", "workspace " + shown.workspace));
  if (shown.approversNeeded) {
    const soFar = (shown.approvals || []).join("; ") || "none yet";
    const quorum = "needs " + shown.approversNeeded + " approvals by distinct people; "
      + (shown.approvals || []).length + " so far: " + soFar;
    node.append(shownText("p", "meta quorum", quorum));
  }
  if (entry.deadlineAtMs) {
    node.append(el("p", "meta", "decide before " + new Date(entry.deadlineAtMs).toLocaleString()));
  }
  if (entry.kind === "plan") planBody(node, shown);
  if (entry.kind === "tool_call") toolCallBody(node, shown);
  if (entry.kind === "question") questionBody(node, shown);
  if (entry.kind === "suspension") suspensionBody(node, shown, entry);
  node.append(shownText("p", "meta sha256", "sha256 " + shown.sha256));
  node.append(actions(node, entry, shown));
  return node;
}

function section(node, title, content) {
  node.append(el("h3", null, title), content);
}

function shownList(items, className, tag = "ul") {
  const list = el(tag, className);
  for (const item of items) list.append(shownText("li", null, item));
  return list;
}

function planBody(node, shown) {
  const lines = el("ol", "lines plan");
  shown.lines.forEach((text, index) => {
    const number = index + 1;
    const add = button("+", "comment-on", () => addComment(node, number));
    add.title = "comment on line " + number;
    add.setAttribute("aria-label", "comment on line " + number);
    lines.append(el("li", null, el("span", "number", String(number)), shownText("code", null, text), add));
  });
  section(node, "The plan, as written", lines);
  // Each step starts with its own number in the plan (a plan may skip one).
  if (shown.steps && shown.steps.length) section(node, "Steps", shownList(shown.steps, "steps"));
  if (shown.scope && shown.scope.length) {
    section(node, "Files it declares it writes", shownList(shown.scope, "scope"));
  }
  if (shown.diff !== undefined) {
    const diff = el("pre", "diff");
    for (const line of shown.diff.replace(/\n$/, "").split("\n")) {
      const kind = line.startsWith("+") ? "added" : line.startsWith("-") ? "removed" : null;
      diff.append(shownText("span", kind, line + "\n"));
    }
    section(node, "What changed since the previous revision", diff);
  }
  if (shown.comments && shown.comments.length) {
    section(node, "Comments on the previous revision", shownList(shown.comments, "comments"));
  }
  if (shown.review) section(node, "The reviewer says", shownText("p", "text review", shown.review));
}

function toolCallBody(node, shown) {
  section(node, "Arguments, whole", shownText("pre", "args", shown.args || ""));
  if (shown.locations && shown.locations.length) {
    section(node, "Where it acts", shownList(shown.locations, "locations"));
  }
  if (shown.drift) section(node, "Outside the approved plan", shownText("p", "text", shown.drift));
  if (shown.review) section(node, "The reviewer says", shownText("p", "text review", shown.review));
}

function questionBody(node, shown) {
  section(node, "The question", shownText("p", "text question", shown.question || ""));
}

function suspensionBody(node, shown, entry) {
  section(node, "What it shows", shownText("pre", "payload", shown.payload || ""));
  section(node, "The answer it takes (JSON Schema)", shownText("pre", "schema", shown.answerSchema || ""));
}

// --- Deciding -----------------------------------------------------------------------------

function addComment(node, line) {
  const comments = node.querySelector(".comments-given");
  const input = el("input");
  input.type = "text";
  input.dataset.line = String(line);
  input.setAttribute("aria-label", "comment on line " + line);
  const row = el("div", "comment", el("span", null, "line " + line), input,
    button("×", null, () => row.remove()));
  comments.append(row);
  input.focus();
}

function actions(node, entry, shown) {
  const box = el("div", "actions");
  const error = el("p", "error");
  error.setAttribute("role", "alert");
  const send = async (decision, sender) => {
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    error.textContent = "";
    try {
      const path = "/v1/sessions/" + encodeURIComponent(entry.sessionId) + "/decisions/" +
        encodeURIComponent(entry.decisionId);
      const response = await api(path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(decision),
      });
      if (response.ok) {
        removeCard(entry.sessionId, entry.decisionId);
        setStatus("Sent: " + sender + ".");
        refreshSoon();
        return;
      }
      const body = await response.json().catch(() => null);
      const message = body && body.error && body.error.message ? body.error.message : "";
      error.textContent = "Refused (" + response.status + "): " + message;
      if (response.status === 409) refreshSoon();
    } catch (failure) {
      if (failure.message !== "unauthorized") error.textContent = "Not sent: " + failure.message;
    }
    for (const b of box.querySelectorAll("button")) b.disabled = false;
  };

  const feedback = el("textarea", "feedback");
  feedback.rows = 2;
  feedback.placeholder = entry.kind === "plan"
    ? "Feedback: what to revise (with Reject), or a note for the next mode (with Approve)"
    : "Feedback for the model (optional)";
  feedback.setAttribute("aria-label", "feedback");
  const withFeedback = (decision) => {
    if (feedback.value.trim()) decision.feedback = feedback.value;
    return decision;
  };

  if (entry.kind === "question") box.append(answerInputs(entry, shown, send, withFeedback));
  if (entry.kind === "suspension") box.append(jsonAnswer(entry, send, error));
  box.append(feedback);

  let target = null;
  if (entry.kind === "plan") {
    box.append(el("div", "comments-given"));
    const targets = entry.targetModeIds && entry.targetModeIds.length ? entry.targetModeIds : [entry.targetModeId];
    if (targets.length > 1) {
      target = el("select", "target");
      target.setAttribute("aria-label", "the mode an approval hands over to");
      targets.forEach((id, index) => {
        const option = el("option", null, shown.targetModeIds[index] || id);
        option.value = id;
        target.append(option);
      });
      box.append(el("label", null, "Hand over to ", target));
    } else {
      box.append(shownText("p", "meta", "An approval hands over to " + (shown.targetModeIds[0] || "")));
    }
  }

  const row = el("div", "row");
  if (entry.kind === "plan" || entry.kind === "tool_call") {
    row.append(button("Approve", "approve", () => {
      const decision = withFeedback({ action: "approved", sha256: entry.sha256 });
      if (target) decision.targetModeId = target.value;
      send(decision, "approved");
    }));
  }
  row.append(button("Reject", "reject", () => {
    const decision = withFeedback({ action: "rejected", sha256: entry.sha256 });
    const comments = [...node.querySelectorAll(".comments-given input")]
      .filter((input) => input.value.trim())
      .map((input) => ({ line: Number(input.dataset.line), text: input.value }));
    if (comments.length) decision.comments = comments;
    send(decision, "rejected");
  }));
  box.append(row, error);
  return box;
}

/** The choices of a question (one or several of its options, or free text) and Answer. */
function answerInputs(entry, shown, send, withFeedback) {
  const box = el("fieldset", "answer");
  box.append(el("legend", null, "Your answer"));
  const options = (entry.payload && entry.payload.options) || [];
  const several = entry.payload && entry.payload.selectionMode === "multi_select";
  const name = "answer-" + entry.sessionId + "-" + entry.decisionId;
  let read;
  if (options.length) {
    const inputs = options.map((option, index) => {
      const input = el("input");
      input.type = several ? "checkbox" : "radio";
      input.name = name;
      input.value = String(index);
      const label = shown.options[index] || { label: "" };
      const text = el("span", null, shownText("span", "label", label.label),
        label.description ? shownText("span", "description", " · " + label.description) : null);
      box.append(el("label", "choice", input, text));
      return input;
    });
    // What is sent is the option's label as the tool gave it, never the text shown.
    read = () => {
      const chosen = inputs.filter((i) => i.checked).map((i) => options[Number(i.value)].label);
      if (!chosen.length) return undefined;
      return several ? chosen : chosen[0];
    };
  } else {
    const text = el("textarea", "free-text");
    text.rows = 3;
    text.setAttribute("aria-label", "your answer");
    box.append(text);
    read = () => (text.value.trim() ? text.value : undefined);
  }
  box.append(button("Answer", "approve answer", () => {
    const answer = read();
    if (answer === undefined) return;
    send(withFeedback({ action: "answered", sha256: entry.sha256, answer }), "answered");
  }));
  return box;
}

/** An answer written as JSON, for a tool's own form (a suspension). */
function jsonAnswer(entry, send, error) {
  const text = el("textarea", "json-answer");
  text.rows = 3;
  text.placeholder = "The answer, as JSON";
  text.setAttribute("aria-label", "the answer, as JSON");
  const box = el("div", "answer", text);
  box.append(button("Answer", "approve answer", () => {
    let answer;
    try {
      answer = JSON.parse(text.value);
    } catch (failure) {
      error.textContent = "The answer is not JSON: " + failure.message;
      return;
    }
    send({ action: "answered", sha256: entry.sha256, answer }, "answered");
  }));
  return box;
}

// --- The events ---------------------------------------------------------------------------

/** Follows GET /v1/events until the page leaves, reconnecting with Last-Event-ID. */
async function follow() {
  const mine = generation;
  while (token() && generation === mine) {
    const abort = new AbortController();
    streamAbort = abort;
    try {
      const headers = lastEventId ? { "Last-Event-ID": lastEventId } : {};
      const response = await api("/v1/events", { headers, signal: abort.signal });
      if (!response.ok) throw new Error("GET /v1/events answered " + response.status);
      setStatus("Live.");
      // Whatever changed while the stream was down.
      refreshSoon();
      await readEvents(response.body);
    } catch (error) {
      if (error.message === "unauthorized" || !token() || generation !== mine) return;
    }
    if (generation !== mine) return;
    setStatus("Reconnecting…");
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

/** Reads Server-Sent Events from `body` (a byte stream) until it ends. */
async function readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("id:")) lastEventId = line.slice(3).trim();
        else if (line.startsWith("data:")) data += (data ? "\n" : "") + line.slice(5).replace(/^ /, "");
      }
      if (data) onEvent(data);
    }
  }
}

function onEvent(data) {
  let event;
  try {
    event = JSON.parse(data);
  } catch {
    return;
  }
  if (event.type === "decision_settled" && event.sessionId && event.decisionId) {
    removeCard(event.sessionId, event.decisionId);
  }
  refreshSoon();
}

// --- Start --------------------------------------------------------------------------------

function open() {
  generation += 1;
  $("login").hidden = true;
  $("forget").hidden = false;
  setStatus("Connecting…");
  refresh();
  follow();
}

document.addEventListener("DOMContentLoaded", () => {
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    $("token").value = "";
    open();
  });
  $("forget").addEventListener("click", () => askForToken(""));
  if (token()) open();
  else askForToken("");
});
