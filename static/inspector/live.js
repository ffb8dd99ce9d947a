// Stream Inspector, live parts: a capture still being recorded grows on its
// page, and the capture list marks captures in progress.  Over /ws/captures/
// (Channels).
//
// Stream content is untrusted.  Every row (frame, call card, refusal) arrives
// as HTML the server rendered with the capture page's own templates
// (autoescaped, as every row of the page): this file only inserts it by its
// DOM id, scrolls and counts; it builds no row and knows no rule of the
// stream.  When the capture closes, the finished page's main part takes the
// live one's place.  Every page renders completely without this file.
(function () {
  "use strict";

  var RETRY_MS = [500, 1000, 2000, 4000, 8000];

  function wsUrl(path) {
    return (window.location.protocol === "https:" ? "wss://" : "ws://") + window.location.host + path;
  }

  // --- connection status ------------------------------------------------------------------

  function setStatus(node, state, label) {
    if (!node) {
      return;
    }
    node.hidden = false;
    node.dataset.state = state;
    node.textContent = label;
    node.title = "live updates: " + label;
  }

  // A websocket that reconnects (with backoff) until `stop()`; `path()` is asked
  // again at every attempt, so a capture viewer resumes after its last frame.
  function Socket(path, statusNode, onMessage) {
    var self = this;
    var attempt = 0;
    var stopped = false;
    var socket = null;

    function open() {
      setStatus(statusNode, attempt ? "reconnecting" : "connecting", attempt ? "reconnecting\u2026" : "connecting\u2026");
      socket = new WebSocket(wsUrl(path()));
      socket.onopen = function () {
        attempt = 0;
        setStatus(statusNode, "live", "live");
      };
      socket.onmessage = function (event) {
        var message;
        try {
          message = JSON.parse(event.data);
        } catch (error) {
          return;
        }
        onMessage(message);
      };
      socket.onclose = function (event) {
        socket = null;
        if (stopped) {
          return;
        }
        if (event.code === 4404) {
          stopped = true;
          setStatus(statusNode, "closed", "closed (no such capture)");
          return;
        }
        var delay = RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)];
        attempt += 1;
        setStatus(statusNode, "reconnecting", "reconnecting\u2026");
        window.setTimeout(open, delay);
      };
    }

    self.stop = function (label) {
      stopped = true;
      setStatus(statusNode, "closed", label || "closed");
      if (socket) {
        socket.close(1000);
      }
    };

    open();
  }

  // --- the capture page -------------------------------------------------------------------

  // Server-rendered HTML (the capture page's own templates, escaped there) as
  // nodes of this document.  DOMParser gives an inert document: nothing in it
  // runs or loads.  `wrap` is what the markup needs around it to parse
  // (table rows need a table).
  function nodes(html, wrap, selector) {
    var doc = new DOMParser().parseFromString(wrap[0] + (html || "") + wrap[1], "text/html");
    return Array.prototype.map.call(doc.querySelectorAll(selector), function (node) {
      return document.adoptNode(node);
    });
  }

  var ROW = ["<table><tbody>", "</tbody></table>"];
  var PLAIN = ["", ""];

  // inspector.js shows the copy buttons of what was inserted, as for the page's own rows.
  function inserted(node) {
    node.dispatchEvent(new CustomEvent("inspector:inserted", { bubbles: true }));
  }

  // Put `node` in place of the element with its id, else before `before` in `parent`.
  function place(node, parent, before) {
    var old = document.getElementById(node.id);
    if (old) {
      old.replaceWith(node);
    } else {
      parent.insertBefore(node, before || null);
    }
    inserted(node);
  }

  function CapturePage(root) {
    var slug = root.dataset.slug;
    var follow = root.dataset.follow !== "0";
    var lastShown = parseInt(root.dataset.lastFrame, 10);
    var framesBody = document.getElementById("frames-body");
    var callsBox = document.getElementById("live-calls");
    var finished = false;
    var socket;
    if (isNaN(lastShown)) {
      lastShown = -1;
    }

    function setCounts() {
      document.querySelectorAll("[data-frame-count]").forEach(function (node) {
        node.textContent = String(lastShown + 1);
      });
      document.querySelectorAll("[data-call-count]").forEach(function (node) {
        node.textContent = String(callsBox ? callsBox.children.length : 0);
      });
    }

    // A row the viewer has is replaced (the server says more about it now);
    // a new one goes last.
    function addFrames(frames) {
      (frames || []).forEach(function (frame) {
        var isNew = frame.number > lastShown;
        lastShown = Math.max(lastShown, frame.number);
        if (!framesBody || (isNew && !follow)) {
          return;
        }
        nodes(frame.html, ROW, "tbody > tr").forEach(function (row) {
          if (isNew || document.getElementById(row.id)) {
            row.classList.add("is-new");
            place(row, framesBody, null);
          }
        });
      });
      var empty = framesBody && framesBody.querySelector("[data-no-frames]");
      if (empty && framesBody.children.length > 1) {
        empty.remove();
      }
    }

    // Cards in position order, each replaced whole when it changed.
    function addCalls(calls) {
      (calls || []).forEach(function (call) {
        nodes(call.html, PLAIN, "body > article").forEach(function (card) {
          var later = Array.prototype.find.call(callsBox.children, function (other) {
            return parseInt(other.id.slice(5), 10) > call.position;
          });
          card.classList.add("is-live");
          place(card, callsBox, later);
        });
      });
      var none = callsBox.children.length && document.querySelector("[data-no-calls]");
      if (none) {
        none.remove();
      }
    }

    function showRefusal(html) {
      var slot = document.getElementById("live-refusal");
      if (html && slot) {
        slot.replaceChildren.apply(slot, nodes(html, PLAIN, "body > *"));
      }
    }

    // The dialect note, once the first frames told the dialect.
    function showDialect(html) {
      nodes(html, PLAIN, "body > #dialect-note").forEach(function (note) {
        place(note, null, null);
      });
    }

    // The capture closed: its finished page's main part, rendered by the same
    // view (?partial=main), takes this one's place; no reload.
    function finish() {
      finished = true;
      socket.stop("closed");
      var url = window.location.pathname + "?partial=main&page=" + encodeURIComponent(root.dataset.framesPage || "1");
      fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin" })
        .then(function (answer) {
          if (!answer.ok) {
            throw new Error("HTTP " + answer.status);
          }
          return answer.text();
        })
        .then(function (html) {
          var main = nodes(html, PLAIN, "#capture-main")[0];
          if (!main) {
            throw new Error("no main part in the answer");
          }
          place(main, null, null);
        })
        .catch(function () {
          window.location.reload();
        });
    }

    function receive(message) {
      if (finished) {
        return;
      }
      addFrames(message.frames);
      addCalls(message.calls);
      showRefusal(message.refusal_html);
      showDialect(message.dialect_html);
      setCounts();
      if (message.type === "finished" || (message.type === "snapshot" && message.outcome !== "live")) {
        finish();
      }
    }

    socket = new Socket(
      function () {
        return "/ws/captures/" + encodeURIComponent(slug) + "/?after=" + lastShown;
      },
      root.querySelector("[data-live-status]"),
      receive
    );
  }

  // --- the capture list -------------------------------------------------------------------

  function CaptureList(root) {
    var statusNode = root.querySelector("[data-live-status]");
    var notice = document.querySelector("[data-new-captures]");
    var unseen = {};

    function rowOf(slug) {
      var rows = document.querySelectorAll("tr[data-slug]");
      for (var i = 0; i < rows.length; i++) {
        if (rows[i].dataset.slug === slug) {
          return rows[i];
        }
      }
      return null;
    }

    function changed(message) {
      if (message.type !== "changed" || !message.slug) {
        return;
      }
      var row = rowOf(message.slug);
      if (!row) {
        unseen[message.slug] = true;
        var count = Object.keys(unseen).length;
        notice.querySelector("[data-new-count]").textContent =
          count + " new capture" + (count === 1 ? "" : "s");
        notice.hidden = false;
        return;
      }
      var badge = row.querySelector("[data-outcome-badge]");
      var outcome = String(message.outcome || "");
      badge.textContent = outcome;
      badge.className = "badge outcome-" + outcome + (outcome === "live" ? " live-badge" : "");
      row.dataset.outcome = outcome;
      if (outcome !== "live") {
        row.classList.add("is-updated");
      }
    }

    var reload = notice && notice.querySelector("[data-reload]");
    if (reload) {
      reload.href = window.location.pathname + window.location.search;
    }
    new Socket(
      function () {
        return "/ws/captures/";
      },
      statusNode,
      changed
    );
  }

  var capture = document.querySelector("[data-live-capture]");
  if (capture && capture.dataset.outcome === "live" && "WebSocket" in window) {
    CapturePage(capture);
  }
  var list = document.querySelector("[data-live-list]");
  if (list && "WebSocket" in window) {
    CaptureList(list);
  }
})();
