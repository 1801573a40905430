/*
 * DocAnchor's document library page (GET /ui/), a client of this same server's /v1 API:
 *   GET    ../v1/documents?limit&cursor&title&type&tag&sort&order   a page, next_cursor pages on
 *   GET    ../v1/documents/<doc_id>                                  anchor, outline, flags
 *   POST   ../v1/read {doc_id, from: <heading>, budget_tokens}       a heading's window
 *   POST   ../v1/documents (multipart, one "file" part per file)     one job per file
 *   PUT    ../v1/documents/<doc_id> (multipart)                      replace
 *   DELETE ../v1/documents/<doc_id>
 *   GET    ../v1/jobs/<job_id>                                        polled until done, failed or cancelled
 * "Authorization: Bearer <key>" and the namespace (the percent-encoded ?namespace= query parameter
 * of every call: browsers refuse header values beyond Latin-1, such as 财务) come from the
 * connection fields (kept in sessionStorage for this tab). Errors are shown as the server words
 * them, with the code.
 *
 * In LobeChat (the standalone plugin of /ui/manifest.json) the page speaks LobeChat's iframe
 * protocol through static/lobechat.js: the key, namespace and theme come from the plugin's
 * settings, a single upload takes the tool call's `title`, and "Insert into chat" (on a stored
 * upload's row and on an open document) writes the document's anchor into the conversation.
 * The theme: the `theme` setting (light, dark or auto), else ?theme=, else the system's.
 */
(function () {
  "use strict";

  var PAGE_SIZE = 25;
  var READ_BUDGET_TOKENS = 600;
  var POLL_MS = 400;
  var HANDSHAKE_MS = 2000;
  var STAGES = {
    queued: "Waiting in the queue", fetching: "Fetching the link", parsing: "Reading the file",
    ocr: "Reading scanned pages (OCR)", loading: "Loading the embedding model", chunking: "Splitting it into sections",
    embedding: "Embedding the sections", storing: "Storing the sections", anchoring: "Writing the anchor"
  };

  var lobe = window.DocAnchorLobeChat;
  var plural = window.DocAnchorWords.plural;
  var el = {};
  var state = { cursors: [null], page: 0, sort: "title", order: "asc", next: null, doc: null };
  var args = {};  // the LobeChat tool call's arguments

  function $(id) { return document.getElementById(id); }

  function init() {
    ["status", "connection", "connect", "api-key", "namespace", "drop", "files", "limits", "uploads", "filters",
     "q", "type", "tag", "summary", "docs", "prev", "page", "next", "doc", "doc-title", "doc-meta", "doc-flags",
     "doc-anchor", "outline", "outline-more", "reading", "reading-title", "reading-text", "replace-file", "delete",
     "close", "confirm", "confirm-text", "insert"].forEach(function (id) { el[id] = $(id); });
    lobe.applyTheme(new URLSearchParams(location.search).get("theme") || "auto");
    el["api-key"].value = sessionStorage.getItem("docanchor.apiKey") || "";
    el.namespace.value = sessionStorage.getItem("docanchor.namespace") || "";

    el.connect.addEventListener("submit", function (e) {
      e.preventDefault();
      sessionStorage.setItem("docanchor.apiKey", el["api-key"].value.trim());
      sessionStorage.setItem("docanchor.namespace", el.namespace.value.trim());
      firstPage().then(function (ok) { if (ok) say("Connected."); });
    });
    el.filters.addEventListener("submit", function (e) { e.preventDefault(); firstPage(); });
    el.files.addEventListener("change", function () { uploadFiles(el.files.files); el.files.value = ""; });
    ["dragenter", "dragover"].forEach(function (n) {
      el.drop.addEventListener(n, function (e) { e.preventDefault(); el.drop.classList.add("over"); });
    });
    ["dragleave", "dragend"].forEach(function (n) {
      el.drop.addEventListener(n, function () { el.drop.classList.remove("over"); });
    });
    el.drop.addEventListener("drop", function (e) {
      e.preventDefault();
      el.drop.classList.remove("over");
      if (e.dataTransfer && e.dataTransfer.files.length) uploadFiles(e.dataTransfer.files);
    });
    el.docs.querySelectorAll("th[data-sort] button").forEach(function (b) {
      b.addEventListener("click", function () { sortBy(b.parentNode.getAttribute("data-sort")); });
    });
    el.prev.addEventListener("click", function () { state.page -= 1; loadPage(); });
    el.next.addEventListener("click", function () {
      state.cursors[state.page + 1] = state.next;
      state.page += 1;
      loadPage();
    });
    el.close.addEventListener("click", closeDocument);
    el.insert.hidden = !lobe.embedded;
    el.insert.addEventListener("click", function () { insertIntoChat(state.doc); });
    el["delete"].addEventListener("click", deleteDocument);
    el["replace-file"].addEventListener("change", function () {
      var file = el["replace-file"].files[0];
      el["replace-file"].value = "";
      if (file) replaceDocument(file);
    });
    var maxBytes = parseInt(document.body.getAttribute("data-max-upload-bytes"), 10);
    if (maxBytes > 0) el.limits.textContent += " · up to " + formatBytes(maxBytes) + " each";
    if (lobe.embedded) connectToLobeChat();
    else firstPage().then(function (ok) { if (ok) say("Ready."); });
  }

  // ------------------------------------------------------------------ LobeChat
  function connectToLobeChat() {
    var started = false;
    function start(text) {
      if (started) return;
      started = true;
      firstPage().then(function (ok) { if (ok) say(text); });
    }
    say("Waiting for LobeChat…");
    lobe.listen({
      init: function (settings, callArgs) {
        applySettings(settings);
        args = callArgs;
        start("Connected to LobeChat.");
      },
      settings: function (settings) { if (applySettings(settings) && started) firstPage(); },
      refused: function (origin) {
        say("Ignored a message from " + origin + ": this DocAnchor server takes messages only from the " +
          "LobeChat origins in DOCANCHOR_LOBECHAT_ORIGINS.");
      }
    });
    setTimeout(function () { start("No answer from LobeChat; type the API key below if the server needs one."); },
      HANDSHAKE_MS);
  }

  /** Puts LobeChat's apiKey and namespace settings into the fields; true when one changed. */
  function applySettings(settings) {
    var changed = false;
    [["apiKey", "api-key"], ["namespace", "namespace"]].forEach(function (pair) {
      var v = settings[pair[0]];
      if (typeof v === "string" && v.trim() !== el[pair[1]].value) { el[pair[1]].value = v.trim(); changed = true; }
    });
    return changed;
  }

  function insertIntoChat(doc) {
    if (!doc) return;
    say(lobe.fill(lobe.chatContent(doc)) ? "Inserted the anchor of " + doc.title + " into the chat." :
      "Not inserted: the page around this one is not a LobeChat origin this server allows.");
  }

  // ------------------------------------------------------------------ the API
  function headers() {
    var h = {};
    var key = el["api-key"].value.trim();
    if (key) h.Authorization = "Bearer " + key;
    return h;
  }

  /** ../v1/<path> with the namespace field as ?namespace= (percent-encoded UTF-8, which the server reads). */
  function apiUrl(path) {
    var url = new URL("../v1/" + path, location.href);
    var ns = el.namespace.value.trim();
    if (ns) url.searchParams.set("namespace", ns);
    return url.toString();
  }

  function api(method, path, body) {
    var h = headers();
    var init = { method: method, headers: h };
    if (body instanceof FormData) init.body = body;
    else if (body !== undefined) { h["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    return fetch(apiUrl(path), init).then(function (resp) {
      return resp.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
        if (!resp.ok) {
          var err = (data && data.error) || { code: "http_" + resp.status, message: "The server answered " + resp.status + "." };
          if (err.code === "unauthorized" || err.code === "invalid_namespace") el.connection.open = true;
          throw err;
        }
        return data;
      });
    }, function () {
      throw { code: "network", message: "The server could not be reached; check that DocAnchor is running." };
    });
  }

  function say(text) { el.status.textContent = text; }
  function sayError(err) { say((err.code ? err.code + ": " : "") + err.message); }

  // ------------------------------------------------------------------ the list
  function firstPage() {
    state.cursors = [null];
    state.page = 0;
    return loadPage();
  }

  function sortBy(key) {
    state.order = state.sort === key && state.order === "asc" ? "desc" : "asc";
    state.sort = key;
    el.docs.querySelectorAll("th[data-sort]").forEach(function (th) {
      var on = th.getAttribute("data-sort") === key;
      th.setAttribute("aria-sort", on ? (state.order === "asc" ? "ascending" : "descending") : "none");
    });
    firstPage();
  }

  function listQuery() {
    var q = new URLSearchParams({ limit: String(PAGE_SIZE), sort: state.sort, order: state.order });
    if (state.cursors[state.page]) q.set("cursor", state.cursors[state.page]);
    if (el.q.value.trim()) q.set("title", el.q.value.trim());
    if (el.type.value) q.set("type", el.type.value);
    if (el.tag.value.trim()) q.set("tag", el.tag.value.trim().toLowerCase());
    return q.toString();
  }

  function loadPage() {
    return api("GET", "documents?" + listQuery()).then(function (data) {
      renderRows(data.documents);
      state.next = data.next_cursor;
      var first = state.page * PAGE_SIZE;
      el.summary.textContent = data.total === 0 ? "No documents match." :
        "Documents " + (first + 1) + "–" + (first + data.count) + " of " + data.total + " in " + data.namespace;
      el.page.textContent = "Page " + (state.page + 1) + " of " + Math.max(1, Math.ceil(data.total / PAGE_SIZE));
      el.prev.disabled = state.page === 0;
      el.next.disabled = !data.next_cursor;
      return true;
    }, function (err) {
      clearList();
      sayError(err);
    });
  }

  /** After a refused list (a refused namespace or key, the server gone): no rows, no paging and no
   * open document, whose buttons would send the refused connection again. */
  function clearList() {
    renderRows([]);
    closeDocument();
    state.next = null;
    el.summary.textContent = "No list: the last request failed.";
    el.page.textContent = "";
    el.prev.disabled = true;
    el.next.disabled = true;
  }

  function cell(row, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  function chips(td, items, cls) {
    items.forEach(function (t) {
      var s = document.createElement("span");
      s.className = cls;
      s.textContent = t;
      td.appendChild(s);
    });
  }

  function renderRows(docs) {
    var body = el.docs.tBodies[0];
    body.textContent = "";
    docs.forEach(function (d) {
      var tr = document.createElement("tr");
      var title = cell(tr, "");
      var open = document.createElement("button");
      open.type = "button";
      open.className = "open";
      open.textContent = d.title;
      open.addEventListener("click", function () { openDocument(d.doc_id); });
      title.appendChild(open);
      cell(tr, d.doc_type);
      cell(tr, d.n_pages == null ? "–" : String(d.n_pages), "num");
      cell(tr, d.n_tokens.toLocaleString("en"), "num");
      chips(cell(tr, ""), d.tags || [], "tag");
      chips(cell(tr, ""), flagWords(d.flags || {}), "flag");
      cell(tr, d.added_at ? d.added_at.slice(0, 16).replace("T", " ") : "");
      body.appendChild(tr);
    });
  }

  // The flags that say a document's text may be incomplete or wrong (see the README's upload row);
  // other entries of "flags" (encoding, parser...) are facts, not warnings.
  var QUALITY_FLAGS = {
    hidden_text: "hidden text", garbled_pages: "garbled pages", unreadable_pages: "unreadable pages",
    image_only_pages: "image-only pages (no OCR)", text_quality: "doubtful text", private_use_chars: "unknown glyphs"
  };

  function flagWords(flags) {
    var out = [];
    Object.keys(QUALITY_FLAGS).forEach(function (k) {
      var v = flags[k];
      if (!v || (Array.isArray(v) && !v.length)) return;
      // a list of pages, a count, or {count, how} (hidden_text: passages skipped and how they hid)
      var count = Array.isArray(v) ? v.length : (typeof v === "number" ? v : v.count);
      var n = typeof count === "number" ? " (" + count + ")" : "";
      out.push(QUALITY_FLAGS[k] + n);
    });
    return out;
  }

  // ------------------------------------------------------------------ one document
  function openDocument(docId) {
    return api("GET", "documents/" + encodeURIComponent(docId)).then(function (d) {
      state.doc = d;
      el["doc-title"].textContent = d.title;
      el["doc-meta"].textContent = [d.doc_id, d.doc_type, d.n_pages ? plural(d.n_pages, "page") : "",
        d.n_tokens.toLocaleString("en") + " tokens offloaded", (d.tags || []).join(", ")].filter(Boolean).join(" · ");
      el["doc-flags"].textContent = "";
      flagWords(d.flags || {}).forEach(function (w) {
        var li = document.createElement("li");
        li.className = "flag";
        li.textContent = w;
        el["doc-flags"].appendChild(li);
      });
      el["doc-anchor"].textContent = d.anchor;
      el.outline.textContent = "";
      (d.outline || []).forEach(function (heading) {
        var li = document.createElement("li");
        li.appendChild(document.createTextNode(heading));
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = "Read";
        b.setAttribute("aria-label", "Read " + heading);
        b.addEventListener("click", function () { readHeading(heading); });
        li.appendChild(b);
        el.outline.appendChild(li);
      });
      showOutlineMore(d);
      el.reading.hidden = true;
      el.doc.hidden = false;
      el.doc.focus();
      say("Opened " + d.title + ".");
    }, sayError);
  }

  // The stored outline lists the first 50 headings (summarize.outline.OUTLINE_LIMIT);
  // outline_total counts them all.
  function showOutlineMore(d) {
    var more = (d.outline_total || 0) - (d.outline || []).length;
    el["outline-more"].hidden = more <= 0;
    el["outline-more"].textContent = more > 0 ? "+" + plural(more, "more heading") +
      "; readDocument(from=\"<heading>\") reads any of them, in the chat or through POST /v1/read." : "";
  }

  function closeDocument() {
    el.doc.hidden = true;
    state.doc = null;
  }

  function readHeading(heading) {
    var d = state.doc;
    return api("POST", "read", { doc_id: d.doc_id, from: heading, budget_tokens: READ_BUDGET_TOKENS })
      .then(function (r) {
        el["reading-title"].textContent = heading;
        el["reading-text"].textContent = r.text || r.message;
        el.reading.hidden = false;
      }, sayError);
  }

  function confirmThen(text, ok) {
    el["confirm-text"].textContent = text;
    el.confirm.returnValue = "";
    el.confirm.addEventListener("close", function done() {
      el.confirm.removeEventListener("close", done);
      if (el.confirm.returnValue === "ok") ok();
    });
    el.confirm.showModal();
  }

  function deleteDocument() {
    var d = state.doc;
    confirmThen("Delete “" + d.title + "” and all of its sections? This cannot be undone.", function () {
      api("DELETE", "documents/" + encodeURIComponent(d.doc_id)).then(function () {
        closeDocument();
        return loadPage().then(function () { say("Deleted " + d.title + "."); });
      }, sayError);
    });
  }

  function replaceDocument(file) {
    var d = state.doc;
    confirmThen("Replace “" + d.title + "” with " + file.name + "? The old version stays until the new one is ready.",
      function () {
        var row = uploadRow(file.name);
        var form = new FormData();
        form.append("file", file);
        form.append("wait_s", "0");
        api("PUT", "documents/" + encodeURIComponent(d.doc_id), form).then(function (job) {
          follow(job, row).then(function (done) { if (done) { loadPage(); openDocument(done.doc_id); } });
        }, function (err) { rowFailed(row, err); });
      });
  }

  // ------------------------------------------------------------------ uploads
  function uploadFiles(fileList) {
    var files = Array.prototype.slice.call(fileList);
    if (!files.length) return;
    var rows = files.map(function (f) { return uploadRow(f.name); });
    var form = new FormData();
    files.forEach(function (f) { form.append("file", f); });
    if (files.length === 1 && typeof args.title === "string" && args.title.trim()) form.append("title", args.title.trim());
    form.append("wait_s", "0");
    say("Uploading " + plural(files.length, "file") + "…");
    api("POST", "documents", form).then(function (data) {
      var jobs = data.jobs || [data];
      var follows = jobs.map(function (job, i) { return follow(job, rows[i]); });
      Promise.all(follows).then(function (results) {
        var ok = results.filter(Boolean).length;
        loadPage().then(function () {
          say(ok + " of " + plural(files.length, "file") + " stored.");
        });
      });
    }, function (err) {
      rows.forEach(function (row) { rowFailed(row, err); });
      sayError(err);
    });
  }

  function uploadRow(name) {
    var li = document.createElement("li");
    var n = document.createElement("span");
    n.className = "name";
    n.textContent = name;
    var s = document.createElement("span");
    s.className = "state muted small";
    s.textContent = "Uploading…";
    var bar = document.createElement("progress");
    bar.max = 100;
    bar.setAttribute("aria-label", "Progress of " + name);
    var m = document.createElement("span");
    m.className = "message";
    li.appendChild(n); li.appendChild(s); li.appendChild(bar); li.appendChild(m);
    el.uploads.appendChild(li);
    return { li: li, state: s, bar: bar, message: m };
  }

  /** Ends an upload row with ``err`` ({code, message}): "Failed", or "Cancelled" (not marked as a
   *  fault: someone stopped it) for a job whose status is cancelled. */
  function rowFailed(row, err, cancelled) {
    row.li.className = cancelled ? "cancelled" : "failed";
    row.state.textContent = cancelled ? "Cancelled" : "Failed";
    row.bar.hidden = true;
    row.message.textContent = (err.code ? err.code + ": " : "") + err.message;
    row.message.setAttribute("role", cancelled ? "status" : "alert");
  }

  function rowDone(row, result) {
    row.li.className = "done";
    row.bar.value = 100;
    row.state.textContent = result.duplicate ? "Already stored" : "Stored";
    row.message.textContent = result.title + " · " + result.doc_id;
    if (lobe.embedded && result.anchor) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = "insert";
      b.textContent = "Insert into chat";
      b.setAttribute("aria-label", "Insert " + result.title + " into the chat");
      b.addEventListener("click", function () { insertIntoChat(result); });
      row.li.appendChild(b);
    }
  }

  /** Resolves with the stored document ({doc_id, title, ...}) or null when the job failed or was cancelled. */
  function follow(job, row) {
    if (job.doc_id && job.anchor !== undefined) { rowDone(row, job); return Promise.resolve(job); }
    if (job.status === "done") { rowDone(row, job.result); return Promise.resolve(job.result); }
    if (job.status === "failed" || job.status === "cancelled" || !job.job_id) {
      rowFailed(row, { code: job.error_code, message: job.error_message }, job.status === "cancelled");
      return Promise.resolve(null);
    }
    row.state.textContent = STAGES[job.stage] || "Working";
    row.bar.value = job.percent || 0;
    return new Promise(function (resolve) { setTimeout(resolve, POLL_MS); }).then(function () {
      return api("GET", "jobs/" + encodeURIComponent(job.job_id)).then(function (j) { return follow(j, row); },
        function (err) { rowFailed(row, err); return null; });
    });
  }

  function formatBytes(n) {
    if (n >= 1048576) return Math.round(n / 1048576) + " MB";
    return Math.round(n / 1024) + " KB";
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
