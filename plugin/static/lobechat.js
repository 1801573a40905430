/*
 * LobeChat's iframe protocol for DocAnchor's pages (the library page and the upload page), as
 * @lobehub/chat-plugin-sdk's PluginChannel names it and LobeChat's StandaloneType IFrameRender
 * sends it (SDK 1.32, tests/node/package.json):
 *   page -> top:  {type: "lobe-chat:plugin-ready-for-render"}            once loaded
 *   top -> page:  {type: "lobe-chat:init-standalone-plugin", payload, settings, state}
 *   top -> page:  {type: "lobe-chat:render-plugin-settings", value}      the settings, again
 *   page -> top:  {type: "lobe-chat:fill-plugin-content", content, triggerAiMessage: true}
 * LobeChat sends no theme or locale message: the theme comes from the plugin's own `theme`
 * setting (auto, light or dark) in those settings messages, else from the system.
 *
 * Messages are taken only from the LobeChat origins the server allows (data-lobechat-origins on
 * <body>, from DOCANCHOR_LOBECHAT_ORIGINS, which also make up the page's CSP frame-ancestors): a
 * page at another origin must not hand this page an API key or a namespace. Once LobeChat has
 * spoken, messages go to its origin only.
 *
 * window.DocAnchorLobeChat = {embedded, listen(handlers), fill(content), chatContent(doc), applyTheme(value)}
 */
(function () {
  "use strict";

  var CHANNEL = {
    ready: "lobe-chat:plugin-ready-for-render",
    init: "lobe-chat:init-standalone-plugin",
    settings: "lobe-chat:render-plugin-settings",
    fill: "lobe-chat:fill-plugin-content"
  };
  var THEMES = ["light", "dark"];

  var embedded = window.top !== window.self;
  var lobeOrigin = "";  // the allowed origin LobeChat spoke from

  function parents() {
    return window.parent === window.top ? [window.top] : [window.parent, window.top];
  }

  function post(message) {
    // Before LobeChat has spoken its origin is not known, hence "*" for the ready message, which
    // carries nothing; the anchor goes only to an allowed origin (the frame-ancestors CSP makes
    // sure every window above this one has one).
    var target = lobeOrigin || (message.type === CHANNEL.ready ? "*" : ancestorOrigin());
    if (!target) return false;
    parents().forEach(function (w) { w.postMessage(message, target); });
    return true;
  }

  /**
   * Follows LobeChat's messages and says the page is ready. handlers: init(settings, args) on
   * init-standalone-plugin (args: the tool call's arguments, parsed), settings(settings) on
   * render-plugin-settings, refused(origin) for a message from an origin not allowed. The
   * `theme` of either settings message is applied before the handler runs.
   */
  function listen(handlers) {
    window.addEventListener("message", function (e) {
      if (parents().indexOf(e.source) < 0) return;
      var data = e.data;
      if (!data || typeof data !== "object") return;
      if (!originAllowed(e.origin)) {
        if (handlers.refused) handlers.refused(e.origin);
        return;
      }
      if (data.type === CHANNEL.init) {
        lobeOrigin = e.origin;
        var settings = objectOr(data.settings);
        applyTheme(settings.theme);
        var payload = data.payload || data.props || {};
        handlers.init(settings, parseArguments(payload.arguments));
      } else if (data.type === CHANNEL.settings) {
        applyTheme(objectOr(data.value).theme);
        if (handlers.settings) handlers.settings(objectOr(data.value));
      }
    });
    post({ type: CHANNEL.ready });
  }

  function fill(content) {
    return post({ type: CHANNEL.fill, content: content, triggerAiMessage: true });
  }

  /** What "Insert into chat" writes into the conversation for a stored document. */
  function chatContent(doc) {
    var anchor = (doc.anchor || "").trim();
    var text = "The user uploaded \u201c" + (doc.title || "a document") + "\u201d to DocAnchor (doc_id: " +
      doc.doc_id + "). Its anchor:\n\n" + anchor;
    if (anchor.indexOf(doc.doc_id) < 0) text += "\n\ndoc_id: " + doc.doc_id;
    return text;
  }

  /** "light" or "dark" forces that theme on <html>; anything else ("auto") follows the system. */
  function applyTheme(value) {
    if (value === undefined) return;
    var root = document.documentElement;
    THEMES.forEach(function (t) { root.classList.toggle(t, t === value); });
  }

  function objectOr(value) { return value && typeof value === "object" ? value : {}; }

  function parseArguments(raw) {
    if (raw && typeof raw === "object") return raw;
    try {
      return objectOr(JSON.parse(raw || "{}"));
    } catch (err) {
      return {};
    }
  }

  // ------------------------------------------------------------------ origins
  function allowedOrigins() {
    return (document.body.getAttribute("data-lobechat-origins") || "").split(/\s+/).filter(Boolean);
  }

  // The CSP host-source match of frame-ancestors, for origins: scheme, host (a leading "*."
  // matches subdomains), port ("*" any; none means the scheme's default); "*" alone, any.
  function originAllowed(origin) {
    var url;
    try { url = new URL(origin); } catch (err) { return false; }
    if (url.origin === window.location.origin) return true;  // 'self'
    return allowedOrigins().some(function (pattern) {
      if (pattern === "*") return true;
      var m = /^(https?):\/\/(\*\.)?([^:\/]+)(?::(\d+|\*))?$/.exec(pattern);
      if (!m || url.protocol !== m[1] + ":") return false;
      var host = url.hostname.toLowerCase(), want = m[3].toLowerCase();
      var hostOk = m[2] ? host.slice(-(want.length + 1)) === "." + want : host === want;
      var port = url.port || (m[1] === "https" ? "443" : "80");
      var portOk = m[4] === "*" || port === (m[4] || (m[1] === "https" ? "443" : "80"));
      return hostOk && portOk;
    });
  }

  // The embedding page's origin when LobeChat never answered: Chromium and Safari name it in
  // location.ancestorOrigins; else the referrer. Empty unless it is allowed.
  function ancestorOrigin() {
    var origin = "";
    if (window.location.ancestorOrigins && window.location.ancestorOrigins.length) {
      origin = window.location.ancestorOrigins[0];
    } else if (document.referrer) {
      try { origin = new URL(document.referrer).origin; } catch (err) { origin = ""; }
    }
    return origin && originAllowed(origin) ? origin : "";
  }

  window.DocAnchorLobeChat = {
    embedded: embedded, listen: listen, fill: fill, chatContent: chatContent, applyTheme: applyTheme
  };
})();
