/*
 * Counted words for DocAnchor's pages (the library page and the upload page), the rule of
 * docanchor.display.counted: plural(1, "page") is "1 page", plural(1204, "page") "1,204 pages".
 *
 * window.DocAnchorWords = {plural(n, word, plural?)}
 */
(function () {
  "use strict";

  function plural(n, word, pluralWord) {
    return n.toLocaleString("en") + " " + (n === 1 ? word : pluralWord || word + "s");
  }

  window.DocAnchorWords = { plural: plural };
})();
