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

  document.querySelectorAll("button.copy-link[hidden]").forEach(function (button) {
    button.hidden = false;
  });

  // A permalink opened without its #f-<n> fragment still lands on its frame.
  if (!window.location.hash) {
    var focus = document.querySelector("[data-focus]");
    if (focus) {
      focus.scrollIntoView({ block: "center" });
    }
  }
})();
