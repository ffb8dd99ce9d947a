// Stream Inspector: the capture page's lens matrix, and every Minimize form's progress
// (the capture page's button, and the lens matrix's per-lens forms, here or on the lens
// page).  Without this file all still work: the matrix is a link to its own page, and
// each button posts a plain form (the browser shows it loading).
(function () {
  "use strict";

  // --- the lens matrix, loaded into place -------------------------------------------------

  function loadLenses(section) {
    var body = section.querySelector("[data-lenses-body]");
    var status = section.querySelector("[data-lenses-status]");
    var link = section.querySelector("[data-lenses-load]");
    if (!body || section.dataset.state === "loading" || section.dataset.state === "loaded") {
      return;
    }
    section.dataset.state = "loading";
    if (status) {
      status.textContent = "computing what each library would do\u2026";
    }
    if (link) {
      link.setAttribute("aria-disabled", "true");
    }
    fetch(section.dataset.url, { headers: { Accept: "text/html" }, credentials: "same-origin" })
      .then(function (response) {
        return response.text().then(function (text) {
          return { ok: response.ok, text: text };
        });
      })
      .then(function (answer) {
        // The fragment is server-rendered and escaped; DOMParser runs no script.
        var doc = new DOMParser().parseFromString(answer.text, "text/html");
        var matrix = doc.getElementById("lens-matrix");
        if (!matrix) {
          throw new Error("no matrix in the answer");
        }
        keepFocusInView(function () {
          body.replaceChildren(document.importNode(matrix, true));
        });
        if (matrix.hasAttribute("data-lens-pending")) {
          // Still computing on the server: ask again in a moment.
          section.dataset.state = "pending";
          window.setTimeout(function () {
            delete section.dataset.state;
            loadLenses(section);
          }, 1000);
          return;
        }
        section.dataset.state = answer.ok ? "loaded" : "failed";
      })
      .catch(function () {
        section.dataset.state = "failed";
        if (status) {
          status.textContent = "could not compute the lenses here; open them on their own page";
        }
        if (link) {
          link.removeAttribute("aria-disabled");
        }
      });
  }

  function setUpLenses(root) {
    root.querySelectorAll("[data-lenses]").forEach(setUpLens);
  }

  function setUpLens(section) {
    var link = section.querySelector("[data-lenses-load]");
    if (link) {
      link.addEventListener("click", function (event) {
        if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) {
          return; // a new tab or window: the page of its own
        }
        event.preventDefault();
        loadLenses(section);
      });
    }
    if (section.hasAttribute("data-autoload")) {
      loadLenses(section);
    }
  }

  setUpLenses(document);
  // A live capture's page, closed: its finished main part (live.js) brings the matrix.
  document.addEventListener("inspector:inserted", function (event) {
    setUpLenses(event.target);
  });

  // --- Minimize: its progress while the POST runs -----------------------------------------
  // The time spent against the budget at once; then, polled from the status of the job the
  // form names (GET <action>/<job>), candidates tried and the size against the original.

  function newJobId() {
    var bytes = new Uint8Array(12);
    window.crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) {
      return ("0" + b.toString(16)).slice(-2);
    }).join("");
  }

  function progressText(p) {
    return (
      p.tests_run + " candidates tried \u00b7 " +
      p.frames + " of " + p.original_frames + " frames \u00b7 " +
      p.size + " of " + p.original_size + " bytes \u00b7 " +
      Number(p.elapsed_s).toFixed(1) + " of " + p.budget_s + " s"
    );
  }

  // The matrix sits above the frames: what a permalink points at, in view before the
  // matrix grew, is brought back into view after it. That is the element its #fragment
  // names (a call's fragment row, say) when there is one, else the frame's row: bringing
  // the frame's row back would scroll a fragment above the matrix out of view.
  function keepFocusInView(change) {
    var focus = document.querySelector(":target") ||
      document.querySelector("#frames-body tr[data-focus]");
    var inView = function () {
      var box = focus.getBoundingClientRect();
      return box.bottom > 0 && box.top < window.innerHeight;
    };
    var wasInView = focus !== null && inView();
    change();
    if (wasInView && !inView()) {
      focus.scrollIntoView({ block: "center" });
    }
  }

  function showStatus(form, status) {
    var bar = form.querySelector("[data-minimize-bar]");
    var detail = form.querySelector("[data-minimize-detail]");
    var p = status && status.progress;
    if (!p) {
      return;
    }
    form.dataset.progress = "reported";
    if (bar) {
      // The budget spent, while it runs; a search that has ended is complete,
      // however little of its budget it needed.
      bar.value = status.state === "done" ? 1 : p.fraction;
    }
    if (detail) {
      detail.textContent = progressText(p);
    }
  }

  function poll(form, url) {
    if (form.dataset.state !== "running") {
      return;
    }
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        return response.ok ? response.json() : null;
      })
      .then(function (status) {
        showStatus(form, status);
        return status && status.state !== "running";
      })
      .catch(function () {
        return false;
      })
      .then(function (ended) {
        if (ended) {
          return; // the POST's answer brings the page on
        }
        timers.push(window.setTimeout(function () {
          poll(form, url);
        }, 400));
      });
  }


  var timers = [];

  function reset(form) {
    var button = form.querySelector("[data-minimize-button]");
    var progress = form.querySelector("[data-minimize-progress]");
    var hint = form.querySelector("[data-minimize-hint]");
    delete form.dataset.state;
    delete form.dataset.progress;
    if (button) {
      button.disabled = false;
      if (button.dataset.label) {
        button.textContent = button.dataset.label;
      }
    }
    if (progress) {
      progress.hidden = true;
    }
    if (hint) {
      hint.hidden = false;
    }
  }

  // Back to this page from the history: the forms are ready again.
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) {
      timers.forEach(function (timer) {
        window.clearInterval(timer);
        window.clearTimeout(timer);
      });
      timers = [];
      document.querySelectorAll("form[data-minimize]").forEach(reset);
    }
  });

  var SEARCHING = "searching for the smallest stream that still fails the same way";

  function started(form) {
    var button = form.querySelector("[data-minimize-button]");
    var progress = form.querySelector("[data-minimize-progress]");
    var text = form.querySelector("[data-minimize-text]");
    var hint = form.querySelector("[data-minimize-hint]");
    var budget = parseFloat(form.dataset.budget) || 30;
    var searching = form.dataset.searching || SEARCHING;
    var begun = Date.now();
    form.dataset.state = "running";
    var job = form.querySelector("[data-minimize-job]");
    if (job && form.dataset.status && window.crypto) {
      job.value = newJobId();
      poll(form, form.dataset.status + job.value);
    }
    // Disabled after the submit has been sent, so the request still carries the form.
    window.setTimeout(function () {
      if (button) {
        button.dataset.label = button.dataset.label || button.textContent;
        button.disabled = true;
        button.textContent = "Minimizing\u2026";
      }
    }, 0);
    if (hint) {
      hint.hidden = true;
    }
    if (progress) {
      progress.hidden = false;
    }
    function tick() {
      var spent = Math.floor((Date.now() - begun) / 1000);
      if (!text) {
        return;
      }
      var bar = form.querySelector("[data-minimize-bar]");
      if (bar && form.dataset.progress !== "reported") {
        bar.value = Math.min(1, spent / budget);
      }
      if (form.dataset.progress === "reported") {
        text.textContent = searching + ":";
      } else if (spent < budget) {
        text.textContent = searching + ": " + spent + " s of at most " + budget + " s";
      } else {
        text.textContent =
          "the time budget is spent; storing the smallest stream found (" + spent + " s)";
      }
    }
    tick();
    timers.push(window.setInterval(tick, 500));
  }

  // One listener for every Minimize form, those the lens matrix brings into the page later
  // included.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.matches("form[data-minimize]")) {
      return;
    }
    if (form.dataset.state !== "running") {
      started(form);
    }
  });
})();
