// A field that must hold JSON (data-json="object": a JSON object, e.g. an
// approval request's edited payload) is checked in the browser as it is
// typed: the parse error, with its line and column, is shown beside the
// field (the element data-json-error-for names it) and the form is not
// submitted while it stands. The server checks the value all the same.
// No inline scripts: this file is loaded by the layout.
(function () {
  "use strict";

  // scan finds the first place text stops being JSON: {at, what} (at an
  // offset in text), or null when it is JSON. JSON.parse's own messages
  // say where only sometimes; people need the line and the column.
  function scan(text) {
    var i = 0, n = text.length;
    function fail(what) { throw { at: i, what: what }; }
    function ws() { while (i < n && " \t\n\r".indexOf(text[i]) >= 0) i++; }
    function lit(word) {
      for (var k = 0; k < word.length; k++, i++) {
        if (text[i] !== word[k]) fail("unexpected " + (i < n ? "'" + text[i] + "'" : "end") + " in " + word);
      }
    }
    function str() {
      i++; // the opening quote
      for (;;) {
        if (i >= n) fail("a string that never ends");
        var c = text[i];
        if (c === '"') { i++; return; }
        if (c < " ") fail("a control character in a string (write \\n, \\t)");
        if (c === "\\") {
          i++;
          if (i < n && text[i] === "u") {
            if (!/^[0-9a-fA-F]{4}$/.test(text.substr(i + 1, 4))) fail("a bad \\u escape");
            i += 5;
          } else if (i < n && '"\\/bfnrt'.indexOf(text[i]) >= 0) {
            i++;
          } else {
            fail("a bad escape");
          }
          continue;
        }
        i++;
      }
    }
    function num() {
      var m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
      if (!m || !m[0] || m[0] === "-") fail("a bad number");
      i += m[0].length;
    }
    function value() {
      ws();
      if (i >= n) fail("the text ends where a value should be");
      var c = text[i];
      if (c === "{") {
        i++; ws();
        if (text[i] === "}") { i++; return; }
        for (;;) {
          ws();
          if (text[i] !== '"') fail("a property name in double quotes expected");
          str(); ws();
          if (text[i] !== ":") fail("':' expected after a property name");
          i++; value(); ws();
          if (text[i] === ",") { i++; continue; }
          if (text[i] === "}") { i++; return; }
          fail("',' or '}' expected");
        }
      } else if (c === "[") {
        i++; ws();
        if (text[i] === "]") { i++; return; }
        for (;;) {
          value(); ws();
          if (text[i] === ",") { i++; continue; }
          if (text[i] === "]") { i++; return; }
          fail("',' or ']' expected");
        }
      } else if (c === '"') {
        str();
      } else if (c === "-" || (c >= "0" && c <= "9")) {
        num();
      } else if (c === "t") {
        lit("true");
      } else if (c === "f") {
        lit("false");
      } else if (c === "n") {
        lit("null");
      } else {
        fail("unexpected '" + c + "'");
      }
    }
    try {
      value(); ws();
      if (i < n) fail("more after the value");
      return null;
    } catch (e) {
      if (e && typeof e.at === "number") return e;
      throw e;
    }
  }

  // where is "line L, column C" of offset at in text.
  function where(text, at) {
    var line = 1, col = 1;
    for (var i = 0; i < at && i < text.length; i++) {
      if (text[i] === "\n") { line++; col = 1; } else { col++; }
    }
    return "line " + line + ", column " + col;
  }

  // problem is what is wrong with el's value ("" when nothing is).
  function problem(el) {
    var text = el.value;
    if (text.trim() === "") return "The payload is empty: it must be a JSON object.";
    var bad = scan(text);
    if (bad) return "Not JSON at " + where(text, bad.at) + ": " + bad.what + ".";
    var v;
    try {
      v = JSON.parse(text);
    } catch (err) {
      return "Not JSON: " + err.message;
    }
    if (el.dataset.json === "object" && (v === null || typeof v !== "object" || Array.isArray(v))) {
      return "This JSON is not an object: the payload must be one, {…}.";
    }
    return "";
  }

  function errorFor(el) {
    return document.querySelector('[data-json-error-for="' + el.id + '"]');
  }

  // check shows el's problem beside it and tells the form; true when fine.
  function check(el) {
    var msg = problem(el);
    el.setCustomValidity(msg);
    var out = errorFor(el);
    if (out) {
      out.textContent = msg;
      out.hidden = !msg;
    }
    if (msg) {
      el.setAttribute("aria-invalid", "true");
    } else if (!document.getElementById(el.id + "-error")) {
      el.removeAttribute("aria-invalid");
    }
    return !msg;
  }

  document.addEventListener("input", function (e) {
    var el = e.target;
    if (!el.dataset || !el.dataset.json) return;
    // The server's message for the field stood for the text it was given.
    var served = document.getElementById(el.id + "-error");
    if (served) served.remove();
    check(el);
  });

  // Before htmx or the browser sends the form (capture phase): a form
  // whose JSON does not parse stays, its problem beside the field, even
  // when the browser's own checks are off (novalidate).
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.querySelectorAll) return;
    var ok = true;
    form.querySelectorAll("[data-json]").forEach(function (el) {
      if (!check(el)) {
        if (ok) el.focus();
        ok = false;
      }
    });
    if (!ok) {
      e.preventDefault();
      e.stopImmediatePropagation();
    }
  }, true);
})();
