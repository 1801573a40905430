/*
 * DocAnchor's upload page: one file, its progress and its anchor, opened directly (GET /ui/upload)
 * or framed by LobeChat; LobeChat's messages and origin checks are static/lobechat.js's.
 *
 * The file goes to POST ../v1/documents of the server that served this page (multipart "file";
 * "Authorization: Bearer <apiKey>" from the settings, and their namespace as the percent-encoded
 * ?namespace= query parameter: browsers refuse header values beyond Latin-1, such as 财务); a 202
 * answer is a job, polled at ../v1/jobs/<job_id>?namespace= until it is done, failed or cancelled.
 */
(function () {
  "use strict";

  var lobe = window.DocAnchorLobeChat;
  var plural = window.DocAnchorWords.plural;
  var FIRST_POLL_MS = 150;
  var POLL_MS = 400;
  var MAX_POLL_FAILURES = 5;
  var STAGES = {
    queued: "Waiting in the queue",
    fetching: "Fetching the link",
    parsing: "Reading the file",
    ocr: "Reading scanned pages (OCR)",
    loading: "Loading the embedding model",
    chunking: "Splitting it into sections",
    embedding: "Embedding the sections",
    storing: "Storing the sections",
    anchoring: "Writing the anchor"
  };

  var embedded = lobe.embedded;
  var handshake = false;
  var args = {};
  var busy = false;
  var inserted = "";
  var el = {};

  function $(id) { return document.getElementById(id); }

  function init() {
    ["mode", "drop", "file", "limits", "connection", "api-key", "namespace", "progress", "stage", "percent",
     "bar", "error", "error-code", "error-message", "result", "doc-title", "doc-meta", "anchor", "insert",
     "copy", "again", "notice"].forEach(function (id) { el[id] = $(id); });

    var maxBytes = maxUploadBytes();
    if (maxBytes) el.limits.textContent += " · up to " + formatBytes(maxBytes);

    el.file.addEventListener("change", function () {
      if (el.file.files && el.file.files[0]) upload(el.file.files[0]);
    });
    ["dragenter", "dragover"].forEach(function (name) {
      el.drop.addEventListener(name, function (e) { e.preventDefault(); el.drop.classList.add("over"); });
    });
    ["dragleave", "dragend"].forEach(function (name) {
      el.drop.addEventListener(name, function () { el.drop.classList.remove("over"); });
    });
    el.drop.addEventListener("drop", function (e) {
      e.preventDefault();
      el.drop.classList.remove("over");
      var files = e.dataTransfer && e.dataTransfer.files;
      if (files && files.length) upload(files[0]);
    });
    el.insert.addEventListener("click", insertIntoChat);
    el.copy.addEventListener("click", copyAnchor);
    el.again.addEventListener("click", reset);

    el.insert.hidden = !embedded;
    if (embedded) {
      setMode("Waiting for LobeChat…");
      lobe.listen({ init: onInit, settings: applySettings, refused: onRefused });
      setTimeout(function () {
        if (!handshake) setMode("No answer from LobeChat; the upload still works, and so does Insert into chat.");
      }, 2000);
    } else {
      setMode("Opened directly: upload a file, then copy its anchor into your chat.");
    }
  }

  // ------------------------------------------------------------------ LobeChat messages
  function onInit(settings, callArgs) {
    handshake = true;
    applySettings(settings);
    args = callArgs;
    setMode("Connected to LobeChat: upload a file, then insert its anchor into the chat.");
  }

  function onRefused(origin) {
    setMode("Ignored a message from " + origin + ": this DocAnchor server takes messages only from the " +
      "LobeChat origins in DOCANCHOR_LOBECHAT_ORIGINS.");
  }

  function applySettings(settings) {
    if (typeof settings.apiKey === "string") el["api-key"].value = settings.apiKey.trim();
    if (typeof settings.namespace === "string") el.namespace.value = settings.namespace.trim();
  }

  // ------------------------------------------------------------------ upload and job
  function apiUrl(path) {
    // Relative to the page (<base>/ui/upload), so a path prefix in front of DocAnchor still works.
    var url = new URL("../" + path, window.location.href);
    var ns = el.namespace.value.trim();
    if (ns) url.searchParams.set("namespace", ns);  // percent-encoded UTF-8, which the server reads
    return url.toString();
  }

  function headers() {
    var h = { Accept: "application/json" };
    var key = el["api-key"].value.trim();
    if (key) h.Authorization = "Bearer " + key;
    return h;
  }

  function upload(file) {
    if (busy) return;
    reset();
    var maxBytes = maxUploadBytes();
    if (maxBytes && file.size > maxBytes) {
      showError("too_large", file.name + " is " + formatBytes(file.size) + "; this server takes files up to " +
        formatBytes(maxBytes) + ". Upload a smaller file.");
      return;
    }
    setBusy(true);
    showProgress("Uploading " + file.name + "…", null);
    var form = new FormData();
    form.append("file", file, file.name);
    if (typeof args.title === "string" && args.title.trim()) form.append("title", args.title.trim());
    // No server-side wait: the job comes back at once (202) and the page shows its progress.
    form.append("wait_s", "0");
    request(apiUrl("v1/documents"), { method: "POST", body: form }).then(function (answer) {
      if (answer.status === 202) return poll(answer.body.job_id, 0, FIRST_POLL_MS);
      if (answer.ok) return showResult(answer.body);
      showHttpError(answer);
    }).catch(function (err) {
      showError("network_error", "Could not reach DocAnchor at " + window.location.origin + " (" + err.message +
        "). Check that the server is running, then try again.");
    }).then(function () { setBusy(false); });
  }

  function poll(jobId, failures, delayMs) {
    return sleep(delayMs).then(function () {
      return request(apiUrl("v1/jobs/" + encodeURIComponent(jobId)), { method: "GET", cache: "no-store" });
    }).then(function (answer) {
      if (!answer.ok) return showHttpError(answer);
      var job = answer.body;
      if (job.status === "failed" || job.status === "cancelled") {
        return showError(job.error_code || "ingest_failed", job.error_message || "Indexing the document failed.");
      }
      if (job.status === "done" && job.result) return showResult(job.result);
      showProgress(stageText(job), job.percent);
      return poll(jobId, 0, POLL_MS);
    }, function (err) {
      if (failures + 1 >= MAX_POLL_FAILURES) throw err;
      return poll(jobId, failures + 1, POLL_MS);
    });
  }

  function request(url, options) {
    options.headers = headers();
    return fetch(url, options).then(function (resp) {
      return resp.text().then(function (text) {
        var body = null;
        try { body = text ? JSON.parse(text) : null; } catch (err) { body = null; }
        return { ok: resp.ok, status: resp.status, body: body || {} };
      });
    });
  }

  function stageText(job) {
    var text = STAGES[job.stage] || "Working";
    if (job.total && (job.stage === "ocr" || job.stage === "embedding" || job.stage === "storing")) {
      text += " (" + job.done + " of " + job.total + ")";
    }
    return text + "…";
  }

  // ------------------------------------------------------------------ views
  function setMode(text) { el.mode.textContent = text; }

  function setBusy(value) {
    busy = value;
    el.drop.classList.toggle("busy", value);
    el.file.disabled = value;
  }

  function reset() {
    el.drop.hidden = false;
    el.connection.hidden = false;
    el.progress.hidden = true;
    el.error.hidden = true;
    el.result.hidden = true;
    el.notice.textContent = "";
    el.insert.disabled = false;
    el.file.value = "";
    inserted = "";
  }

  function showProgress(text, percent) {
    el.progress.hidden = false;
    el.stage.textContent = text;
    if (typeof percent === "number") {
      el.bar.value = percent;
      el.percent.textContent = percent + " %";
    } else {
      el.bar.removeAttribute("value");
      el.percent.textContent = "";
    }
  }

  function showError(code, message, status) {
    el.progress.hidden = true;
    el.result.hidden = true;
    el.error.hidden = false;
    el["error-code"].textContent = code;
    el["error-message"].textContent = message;
    if (status === 401 || status === 403 || code === "invalid_namespace") el.connection.open = true;  // to fix
  }

  function showHttpError(answer) {
    var err = answer.body && answer.body.error;
    if (err && err.code) {
      showError(err.code, err.message || "", answer.status);
    } else {
      showError("http_" + answer.status, "DocAnchor answered with HTTP status " + answer.status + ".", answer.status);
    }
  }

  function showResult(doc) {
    // The result takes the drop zone's place so everything fits LobeChat's 440 px frame.
    el.drop.hidden = true;
    el.connection.hidden = true;
    el.progress.hidden = true;
    el.error.hidden = true;
    el.result.hidden = false;
    el["doc-title"].textContent = doc.title || "Untitled document";
    var meta = [doc.doc_id];
    if (doc.n_chunks) meta.push(plural(doc.n_chunks, "section"));
    if (doc.n_tokens) meta.push(doc.n_tokens.toLocaleString("en") + " tokens kept out of the chat");
    if (doc.duplicate) meta.push("already stored");
    el["doc-meta"].textContent = meta.join(" · ");
    el.anchor.textContent = doc.anchor || "";
    inserted = lobe.chatContent(doc);
    el.anchor.dataset.docId = doc.doc_id || "";
  }

  function insertIntoChat() {
    if (!inserted) return;
    if (!lobe.fill(inserted)) {
      el.notice.textContent = "Not inserted: the page around this one is not a LobeChat origin this server allows.";
      return;
    }
    el.insert.disabled = true;
    el.notice.textContent = "Inserted into the chat.";
  }

  function copyAnchor() {
    var text = el.anchor.textContent;
    var done = function () { el.notice.textContent = "Copied."; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, selectAnchor);
    } else {
      selectAnchor();
    }
  }

  function selectAnchor() {
    var range = document.createRange();
    range.selectNodeContents(el.anchor);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    el.notice.textContent = "Selected: press Ctrl+C (⌘C) to copy.";
  }

  // ------------------------------------------------------------------ helpers
  function maxUploadBytes() {
    var n = parseInt(document.body.getAttribute("data-max-upload-bytes"), 10);
    return isFinite(n) && n > 0 ? n : 0;
  }

  function formatBytes(n) {
    if (n >= 1024 * 1024) return (n / (1024 * 1024)).toFixed(n >= 10 * 1024 * 1024 ? 0 : 1) + " MB";
    if (n >= 1024) return Math.round(n / 1024) + " KB";
    return n + " bytes";
  }

  function sleep(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
