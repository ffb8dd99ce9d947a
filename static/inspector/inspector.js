// Stream Inspector: copy-link buttons, and scrolling to the frame a permalink
// names.  Every page works without this file; it only adds conveniences.
(function () {
  "use strict";

  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.top = "0";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (error) {
      copied = false;
    }
    document.body.removeChild(area);
    return copied ? Promise.resolve() : Promise.reject(new Error("copy failed"));
  }

  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () {
        return fallbackCopy(text);
      });
    }
    return fallbackCopy(text);
  }

  function show(button, label, state) {
    var original = button.dataset.label || button.textContent;
    button.dataset.label = original;
    button.dataset.state = state;
    button.textContent = label;
    window.setTimeout(function () {
      button.textContent = original;
      delete button.dataset.state;
    }, 1500);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.copy-link");
    if (!button) {
      return;
    }
    var url = new URL(button.dataset.href, window.location.href).href;
    button.dataset.copied = url;
    copy(url).then(
      function () {
        show(button, "copied", "copied");
      },
      function () {
        window.prompt("Copy this link:", url);
      }
    );
  });

  // "copy JSON": the text of an element on the page (a call's final
  // arguments), or of a URL (a result document).
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.copy-json");
    if (!button) {
      return;
    }
    var text = button.dataset.copyFrom
      ? Promise.resolve(document.getElementById(button.dataset.copyFrom).textContent)
      : fetch(button.dataset.copyUrl, { credentials: "same-origin" }).then(function (answer) {
          return answer.text();
        });
    text
      .then(function (value) {
        button.dataset.copied = value;
        return copy(value);
      })
      .then(
        function () {
          show(button, "copied", "copied");
        },
        function () {
          show(button, "copy failed", "failed");
        }
      );
  });

  var SHOWN_WITH_SCRIPT = "button.copy-link[hidden], button.copy-json[hidden], [data-kbd-hint][hidden]";

  function showScripted(root) {
    root.querySelectorAll(SHOWN_WITH_SCRIPT).forEach(function (node) {
      node.hidden = false;
    });
  }

  showScripted(document);
  // What live.js inserts (rows, cards, the finished page's main part) gets the same.
  document.addEventListener("inspector:inserted", function (event) {
    showScripted(event.target);
  });

  // Keyboard: j/k next/previous frame, n/p next/previous anomaly or refusal,
  // c copy the focused frame's permalink, ? this help.
  var MARKED = ".is-anomaly, .is-refusal, .is-dropped";

  function frameRows() {
    return Array.prototype.slice.call(document.querySelectorAll("#frames-body tr[id^='f-']"));
  }

  function currentRow(rows) {
    var chosen = document.querySelector("#frames-body tr.is-kbd") ||
      document.querySelector("#frames-body tr[data-focus]");
    return rows.indexOf(chosen);
  }

  function choose(row) {
    document.querySelectorAll("#frames-body tr.is-kbd").forEach(function (other) {
      other.classList.remove("is-kbd");
    });
    row.classList.add("is-kbd");
    row.scrollIntoView({ block: "center" });
    window.history.replaceState(null, "", "#" + row.id);
  }

  function step(direction, onlyMarked) {
    var rows = frameRows();
    var at = currentRow(rows);
    for (var i = at + direction; i >= 0 && i < rows.length; i += direction) {
      if (!onlyMarked || rows[i].matches(MARKED)) {
        choose(rows[i]);
        return;
      }
    }
  }

  function toggleHelp(show) {
    var help = document.getElementById("kbd-help");
    if (help) {
      help.hidden = show === undefined ? !help.hidden : !show;
    }
  }

  var KEYS = {
    j: function () { step(1, false); },
    k: function () { step(-1, false); },
    n: function () { step(1, true); },
    p: function () { step(-1, true); },
    c: function () {
      var rows = frameRows();
      var row = rows[currentRow(rows)];
      var button = row && row.querySelector("button.copy-link");
      if (button) {
        button.click();
      }
    },
    "?": function () { toggleHelp(); },
    Escape: function () { toggleHelp(false); },
  };

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey || !frameRows().length) {
      return;
    }
    if (target.closest && target.closest("input, textarea, select, [contenteditable]")) {
      return;
    }
    var action = KEYS[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });

  // "show raw frames" / "fold raw frames": without this file a link to
  // ?raw=1 (or without it); here one click unfolds or folds every row's raw
  // text in place, and the address becomes that link's.
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("a[data-raw-toggle]");
    if (!toggle || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) {
      return;
    }
    event.preventDefault();
    var open = toggle.getAttribute("aria-pressed") !== "true";
    document.querySelectorAll("#frames-body details.raw-fold").forEach(function (fold) {
      fold.open = open;
    });
    var target = new URL(toggle.href, window.location.href);
    window.history.replaceState(null, "", target.pathname + target.search + window.location.hash);
    var back = new URL(target.href);
    if (open) {
      back.searchParams.delete("raw");
    } else {
      back.searchParams.set("raw", "1");
    }
    toggle.href = back.pathname + back.search + "#frames";
    toggle.setAttribute("aria-pressed", open ? "true" : "false");
    toggle.textContent = open ? "fold raw frames" : "show raw frames";
  });

  // A permalink opened without its #f-<n> fragment still lands on its frame.
  if (!window.location.hash) {
    var focus = document.querySelector("[data-focus]");
    if (focus) {
      focus.scrollIntoView({ block: "center" });
    }
  }
})();
