// Stream Inspector, the upload form: while the file is sent, a progress bar
// and a disabled submit button.  Without this file the form posts as usual;
// with it the same POST goes through XMLHttpRequest (for its upload events),
// then the browser opens the page the server answered: the capture, or the
// form again with its errors.
(function () {
  "use strict";

  function showAnswer(xhr) {
    if (xhr.status < 400 && xhr.responseURL && xhr.responseURL !== window.location.href) {
      window.location.assign(xhr.responseURL); // the stored capture (or the HAR's list)
      return;
    }
    // The form again with why nothing was stored: put its page's main in place.
    var answer = new DOMParser().parseFromString(xhr.responseText, "text/html");
    var main = answer.querySelector("main");
    if (main) {
      document.querySelector("main").replaceWith(document.adoptNode(main));
      document.title = answer.title;
    }
  }

  function setProgress(form, state, loaded, total) {
    var box = form.querySelector("[data-upload-progress]");
    var bar = form.querySelector("[data-upload-bar]");
    var text = form.querySelector("[data-upload-text]");
    box.hidden = false;
    box.dataset.state = state;
    if (state === "sending" && total) {
      bar.max = total;
      bar.value = loaded;
      text.textContent = "sending… " + Math.round((100 * loaded) / total) + " %";
    } else if (state === "assembling") {
      bar.removeAttribute("value"); // indeterminate: the server is storing it
      text.textContent = "sent; assembling and storing…";
    } else {
      text.textContent = "sending…";
    }
  }

  function send(form) {
    var button = form.querySelector("button[type=submit]");
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    xhr.upload.addEventListener("progress", function (event) {
      setProgress(form, "sending", event.loaded, event.lengthComputable ? event.total : 0);
    });
    xhr.upload.addEventListener("load", function () {
      setProgress(form, "assembling");
    });
    xhr.addEventListener("load", function () {
      showAnswer(xhr);
    });
    xhr.addEventListener("error", function () {
      button.disabled = false;
      form.querySelector("[data-upload-text]").textContent =
        "the upload failed (the connection dropped): try again";
    });
    button.disabled = true;
    setProgress(form, "starting");
    xhr.send(new FormData(form));
  }

  document.addEventListener("submit", function (event) {
    var form = event.target.closest("form[data-upload]");
    if (!form || !window.FormData || !window.DOMParser) {
      return;
    }
    event.preventDefault();
    send(form);
  });
})();
