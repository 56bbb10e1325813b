// Gatehouse desk: the little the pages need beyond htmx.
//  - live pages reconnect with the last event seq they rendered, so the
//    server replays exactly what they missed;
//  - the task page's main element carries data-task-status, kept current;
//  - a page whose session ended goes to the login page, and back after;
//  - times are shown in the reader's time zone;
//  - every post form and htmx request carries the session's CSRF token,
//    read from <meta name="csrf-token">.
// No inline scripts anywhere: this file and the vendored ones are all.
(function () {
  "use strict";
  if (!window.htmx) return;

  // Reconnect soon after a drop (the extension's default waits up to 64 s),
  // with jitter so that a restarted replica is not hit by every page at once.
  htmx.config.wsReconnectDelay = function (retries) {
    var max = Math.min(250 * Math.pow(2, retries), 5000);
    return max / 2 + Math.random() * max / 2;
  };

  // A page whose reader picked a version or a diff no longer shows the
  // default artifact view, but the socket it opened still brings that
  // view's updates until it reconnects: drop them here, so htmx does not
  // report a swap with no target (htmx:oobErrorNoTarget).
  htmx.defineExtension("gh-live", {
    transformResponse: function (text) {
      if (text.indexOf("#artifact-view.follows-latest") < 0 || document.querySelector("#artifact-view.follows-latest")) {
        return text;
      }
      var t = document.createElement("template");
      t.innerHTML = text;
      t.content.querySelectorAll('[hx-swap-oob="outerHTML:#artifact-view.follows-latest"]').forEach(function (e) { e.remove(); });
      return t.innerHTML;
    }
  });

  function liveElement() {
    return document.getElementById("live");
  }

  // The extension keeps the URL it first read; rebuild it from what the
  // page holds now (after= the last seq rendered, the interrupt shown, the
  // version of the lists).
  htmx.createWebSocket = function (url) {
    var el = liveElement();
    if (el && el.dataset.liveBase) {
      var u = new URL(el.dataset.liveBase, window.location.href);
      u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
      ["after", "ik", "v", "av"].forEach(function (k) {
        var v = el.dataset[k];
        if (v !== undefined && v !== "") u.searchParams.set(k, v);
      });
      url = u.toString();
    }
    var sock = new WebSocket(url, []);
    sock.binaryType = htmx.config.wsBinaryType;
    return sock;
  };

  // Each live message ends with a #live-meta element: copy its facts where
  // the page (and the next reconnect) reads them.
  function applyMeta() {
    var meta = document.getElementById("live-meta");
    var el = liveElement();
    if (!meta || !el) return;
    ["after", "ik", "v"].forEach(function (k) {
      if (meta.dataset[k] !== undefined) el.dataset[k] = meta.dataset[k];
    });
    var main = document.querySelector("main[data-task-status]");
    if (main && meta.dataset.taskStatus) main.dataset.taskStatus = meta.dataset.taskStatus;
  }

  function setLiveState(state) {
    var badge = document.getElementById("live-state");
    if (!badge) return;
    badge.dataset.state = state;
    badge.textContent = state === "open" ? "Live" : state === "connecting" ? "Connecting…" : "Reconnecting…";
  }

  var timeFmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  var dateFmt = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  function localTimes(root) {
    var now = new Date();
    (root || document).querySelectorAll("time[datetime]:not([data-local])").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d)) return;
      // data-date: always with the date (lists of users, tokens, the
      // audit trail are read across days).
      var sameDay = d.toDateString() === now.toDateString() && !t.dataset.date;
      t.textContent = sameDay ? timeFmt.format(d) : dateFmt.format(d);
      t.title = d.toString();
      t.dataset.local = "1";
    });
  }

  document.addEventListener("htmx:wsConnecting", function () { setLiveState("connecting"); });
  document.addEventListener("htmx:wsOpen", function () { setLiveState("open"); });
  // Signing in again comes back to this page (the login page keeps only
  // local paths as next).
  var leaving = false;
  function toLogin(to) {
    if (leaving) return;
    leaving = true;
    location.assign(to || "/login?next=" + encodeURIComponent(location.pathname + location.search));
  }

  // A handshake refused because the session ended while the socket was
  // down reaches the page as a bare 1006 (browsers hide the 401), and the
  // extension retries 1006 forever. So after a 1006 the page asks the
  // server: sent as htmx sends requests, an ended session answers 401
  // with the login page in HX-Redirect rather than a redirect fetch would
  // follow. No answer at all (the server is down) leaves the retries be.
  var checking = false;
  function checkSession() {
    if (checking || leaving) return;
    checking = true;
    fetch("/live/session", {
      credentials: "same-origin", cache: "no-store", redirect: "manual",
      headers: { "HX-Request": "true", "HX-Current-URL": location.href }
    }).then(function (r) {
      if (r.status !== 401) return;
      var to = r.headers.get("HX-Redirect");
      toLogin(to && to.indexOf("/login?") === 0 ? to : "");
    }, function () {}).then(function () { checking = false; });
  }

  document.addEventListener("htmx:wsClose", function (e) {
    setLiveState("closed");
    var ev = e.detail && e.detail.event;
    var code = ev && ev.code;
    // 1008: the server ended an open socket because its session ended
    // (logged out, expired, password changed, user disabled).
    if (code === 1008) toLogin("");
    else if (code === 1006) checkSession();
  });
  document.addEventListener("htmx:wsAfterMessage", function () { applyMeta(); localTimes(); });
  document.addEventListener("htmx:afterSettle", function (e) {
    localTimes(e.target);
    // A version or diff picked by hand stops following the task: the
    // next reconnect no longer asks for the default artifact view.
    var el = liveElement();
    if (el && el.dataset.av !== undefined) {
      el.dataset.av = document.querySelector("#artifact-view.follows-latest") ? "1" : "";
    }
  });
  document.addEventListener("htmx:oobAfterSwap", function () { localTimes(); });
  document.addEventListener("DOMContentLoaded", function () { localTimes(); });

  // With sessions, every state-changing form carries the session's _csrf
  // token; forms that arrive live are shared by every viewer, so the page
  // adds its own.
  function addCSRF(root) {
    var meta = document.querySelector("meta[name=csrf-token]");
    if (!meta) return;
    (root || document).querySelectorAll("form[method=post]").forEach(function (f) {
      if (f.querySelector("input[name=_csrf]")) return;
      var i = document.createElement("input");
      i.type = "hidden"; i.name = "_csrf"; i.value = meta.content;
      f.appendChild(i);
    });
  }
  htmx.onLoad(function (elt) { addCSRF(elt.parentNode || document); });
  document.addEventListener("htmx:oobAfterSwap", function () { addCSRF(document); });
  // htmx requests carry the token as a header too (what the server checks
  // first), read from the page's meta tag: no inline script holds it.
  document.addEventListener("htmx:configRequest", function (e) {
    var meta = document.querySelector("meta[name=csrf-token]");
    if (meta && e.detail && e.detail.headers) e.detail.headers["X-CSRF-Token"] = meta.content;
  });
})();

// A form posted by htmx that is refused with 400 (text that cannot be
// stored, say) keeps what was typed — htmx does not swap a 400 — and shows
// the refusal's message in the form, above its buttons.
(function () {
  "use strict";
  document.addEventListener("htmx:responseError", function (e) {
    var xhr = e.detail && e.detail.xhr, elt = e.detail && e.detail.elt;
    if (!xhr || xhr.status !== 400 || !elt) return;
    var form = elt.closest ? (elt.tagName === "FORM" ? elt : elt.closest("form")) : null;
    if (!form) return;
    var doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
    var m = doc.querySelector("[data-error-message]");
    var box = form.querySelector(".alert[data-refused]");
    if (!box) {
      box = document.createElement("div");
      box.className = "alert";
      box.setAttribute("role", "alert");
      box.setAttribute("data-refused", "");
      form.insertBefore(box, form.firstChild);
    }
    box.textContent = m ? m.textContent : "Not recorded: the request was refused (" + xhr.status + ").";
  });
})();

// A select marked data-autosubmit submits its form when changed (the fork
// page's checkpoint picker); its form keeps a button for the same.
(function () {
  "use strict";
  document.addEventListener("change", function (e) {
    var s = e.target;
    if (s && s.matches && s.matches("select[data-autosubmit]") && s.form) {
      if (s.form.requestSubmit) s.form.requestSubmit(); else s.form.submit();
    }
  });
})();

// Forms and buttons marked data-confirm ask before they submit (revoke a
// token, disable a user); buttons marked data-copy copy the text of the
// element they name.
(function () {
  "use strict";
  document.addEventListener("submit", function (e) {
    var form = e.target, btn = e.submitter;
    var msg = (btn && btn.dataset && btn.dataset.confirm) || (form.dataset && form.dataset.confirm);
    if (msg && !window.confirm(msg)) e.preventDefault();
  }, true);
  document.addEventListener("click", function (e) {
    var btn = e.target.closest && e.target.closest("[data-copy]");
    if (!btn) return;
    var src = document.getElementById(btn.dataset.copy);
    if (!src || !navigator.clipboard) return;
    navigator.clipboard.writeText(src.textContent.trim()).then(function () {
      var was = btn.textContent;
      btn.textContent = "Copied";
      setTimeout(function () { btn.textContent = was; }, 1500);
    });
  });
})();

// Fields with a length limit say how much is left and, when over it, say
// so and refuse to submit, instead of cutting the text (maxlength would).
// A pattern field says in words what it wants.
(function () {
  "use strict";
  function check(el) {
    var max = parseInt(el.dataset.maxlength, 10);
    var out = document.querySelector('[data-count-for="' + el.id + '"]');
    var n = Array.from(el.value).length;
    var msg = "";
    if (max && n > max) {
      msg = "This is " + (n - max) + (n - max === 1 ? " character" : " characters") + " over the limit of " + max +
        "; shorten it (nothing was cut).";
    }
    el.setCustomValidity(msg);
    // The server's own message for the field, when the form came back with
    // one, says it already: the counter then gives the count only (the
    // message was shown twice), until the text changes.
    var served = document.getElementById(el.id + "-error");
    if (served && !el.dataset.edited) msg = "";
    if (out) {
      out.textContent = msg || (n + " of " + max + " characters");
      out.classList.toggle("over", !!msg);
    }
  }
  document.addEventListener("input", function (e) {
    var el = e.target;
    if (!el.dataset) return;
    if (el.dataset.maxlength) {
      el.dataset.edited = "1";
      var served = document.getElementById(el.id + "-error");
      if (served) served.remove();
      check(el);
    }
    if (el.dataset.patternMessage && !el.validationMessage.startsWith("This is ")) {
      el.setCustomValidity("");
      if (el.validity.patternMismatch) el.setCustomValidity(el.dataset.patternMessage);
    }
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-maxlength]").forEach(function (el) { if (el.value) check(el); });
  });
})();

// A deadline counts down live (data-countdown holds its time): "(in 2 h
// 05 min)", "(in 4 min 10 s)", "(in 9 s)", "(now)"; the server's live
// update follows when the deadline acts.
(function () {
  "use strict";
  function pad(n) { return n < 10 ? "0" + n : "" + n; }
  function left(ms) {
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " min " + pad(s % 60) + " s";
    var h = Math.floor(m / 60);
    if (h < 48) return h + " h " + pad(m % 60) + " min";
    return Math.floor(h / 24) + " d " + (h % 24) + " h";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var at = Date.parse(el.dataset.countdown);
      if (isNaN(at)) return;
      var text = at - now > 0 ? "(in " + left(at - now) + ")" : "(now)";
      if (el.textContent !== text) el.textContent = text;
    });
  }
  document.addEventListener("DOMContentLoaded", tick);
  document.addEventListener("htmx:afterSettle", tick);
  document.addEventListener("htmx:oobAfterSwap", tick);
  setInterval(tick, 1000);
})();

// The top bar is sticky and wraps on a narrow screen: anchors (the inbox's
// link to a decision, #decide) land below it, at its real height.
(function () {
  "use strict";
  function measure() {
    var bar = document.querySelector(".topbar");
    if (bar) document.documentElement.style.setProperty("--topbar-h", Math.ceil(bar.getBoundingClientRect().height) + "px");
  }
  document.addEventListener("DOMContentLoaded", function () {
    measure();
    var target = location.hash && document.getElementById(location.hash.slice(1));
    if (target) target.scrollIntoView();
  });
  window.addEventListener("resize", measure);
})();
