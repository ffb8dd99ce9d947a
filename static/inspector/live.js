// Stream Inspector, live parts: a capture still being recorded grows on its
// page (frames, call cards, argument evolution, outcome and refusal), and the
// capture list marks captures in progress.  Over /ws/captures/ (Channels).
//
// Stream content is untrusted.  A frame's row arrives as HTML the server
// rendered with the page's own template (autoescaped, as every row of the
// page), and is only inserted; everything else built here reaches the page as
// textContent (never innerHTML).  Every page renders completely without this
// file; after a capture closes, reloading its page gives the complete
// server-rendered view.
(function () {
  "use strict";

  var WINDOW = 300; // characters of text so far shown before a fragment (captures/pages/fragment_text.py)
  var FRAGMENT_SHOWN = 2000; // captures/pages/fragment_text.py
  var RETRY_MS = [500, 1000, 2000, 4000, 8000];

  // --- small DOM helpers ------------------------------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) {
      node.className = className;
    }
    if (text !== undefined && text !== null) {
      node.textContent = String(text);
    }
    return node;
  }

  function link(href, text, className) {
    var a = el("a", className, text);
    a.href = href;
    return a;
  }

  function chip(text, tone) {
    return el("span", "chip" + (tone ? " " + tone : ""), text);
  }

  function framePermalink(slug, number) {
    return "/c/" + encodeURIComponent(slug) + "/frames/" + number + "/#f-" + number;
  }

  function cutMiddle(text, limit) {
    if (text.length <= limit) {
      return text;
    }
    var half = Math.floor(limit / 2);
    return (
      text.slice(0, half) +
      "\u2026[" + (text.length - 2 * half) + " characters]\u2026" +
      text.slice(text.length - half)
    );
  }

  function codePoints(text) {
    var n = 0;
    for (var i = 0; i < text.length; i++) {
      var c = text.charCodeAt(i);
      if (c < 0xd800 || c > 0xdbff) {
        n += 1;
      }
    }
    return n;
  }

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

  // --- JSON state of arguments text (as inspector/assembly/scanner.py) ------------------

  function Scanner() {
    this.length = 0; // code points seen
    this.phase = 0; // 0 before the root, 1 inside it, 2 after it
    this.stack = [];
    this.inString = false;
    this.escape = false;
    this.closed = false;
    this.invalidAt = null;
  }

  Scanner.prototype.feed = function (text) {
    var offset = this.length;
    for (var ch of text) {
      if (this.invalidAt === null) {
        this.step(ch, offset);
      }
      offset += 1;
    }
    this.length = offset;
  };

  Scanner.prototype.step = function (ch, offset) {
    var blank = ch === " " || ch === "\t" || ch === "\n" || ch === "\r";
    if (this.phase !== 1) {
      if (blank) {
        return;
      }
      if (this.phase === 2 || ch !== "{") {
        this.invalidAt = offset;
        return;
      }
      this.phase = 1;
      this.stack.push("{");
      return;
    }
    if (this.inString) {
      if (this.escape) {
        this.escape = false;
      } else if (ch === "\\") {
        this.escape = true;
      } else if (ch === '"') {
        this.inString = false;
      }
      return;
    }
    if (ch === '"') {
      this.inString = true;
    } else if (ch === "{" || ch === "[") {
      this.stack.push(ch);
    } else if (ch === "}" || ch === "]") {
      if (this.stack[this.stack.length - 1] !== (ch === "}" ? "{" : "[")) {
        this.invalidAt = offset;
        return;
      }
      this.stack.pop();
      if (!this.stack.length) {
        this.phase = 2;
        this.closed = true;
      }
    }
  };

  function stateChips(depth, inString, complete, invalidFrom) {
    var chips = [];
    if (invalidFrom !== null && invalidFrom !== undefined) {
      chips.push(chip("invalid from offset " + invalidFrom, "bad"));
    }
    if (complete) {
      chips.push(chip("complete", "ok"));
    } else {
      chips.push(chip("depth " + depth, "muted"));
      if (inString) {
        chips.push(chip("inside a string", "muted"));
      }
    }
    return chips;
  }

  // --- the capture page -------------------------------------------------------------------

  function CapturePage(root) {
    var slug = root.dataset.slug;
    var follow = root.dataset.follow !== "0";
    var lastShown = parseInt(root.dataset.lastFrame, 10);
    if (isNaN(lastShown)) {
      lastShown = -1;
    }
    var finished = false;
    var cards = {}; // position -> card state
    var badge = root.querySelector("[data-outcome-badge]");
    var statusNode = root.querySelector("[data-live-status]");
    var framesBody = document.getElementById("frames-body");
    var callsBox = document.getElementById("live-calls");
    var refusalShown = null;
    var socket;

    function setCounts() {
      document.querySelectorAll("[data-frame-count]").forEach(function (node) {
        node.textContent = String(lastShown + 1);
      });
      var count = Object.keys(cards).length;
      document.querySelectorAll("[data-call-count]").forEach(function (node) {
        node.textContent = String(count);
      });
    }

    // Frames ---------------------------------------------------------------------------

    // The server renders each frame's row with the page's own template
    // (captures/pages/frames.py, live_frame_row); it is only inserted here.
    // Parsed into a document of its own (inert: nothing in it runs or loads),
    // then moved into the page.
    function frameRow(frame) {
      var parsed = new DOMParser().parseFromString(
        "<table><tbody>" + (frame.html || "") + "</tbody></table>",
        "text/html"
      );
      var row = parsed.querySelector("tbody > tr");
      if (!row) {
        return null;
      }
      row = document.adoptNode(row);
      row.classList.add("is-new");
      row.querySelectorAll("button.copy-link[hidden]").forEach(function (button) {
        button.hidden = false; // as inspector.js does for the rows the page came with
      });
      return row;
    }

    // inspector.js handles the clicks (one listener on the document).
    function copyCell(permalink) {
      var actions = el("td", "actions");
      var copy = el("button", "copy-link", "copy link");
      copy.type = "button";
      copy.dataset.href = permalink;
      actions.appendChild(copy);
      return actions;
    }

    function addFrames(frames) {
      if (!frames || !frames.length) {
        return;
      }
      var batch = document.createDocumentFragment();
      frames.forEach(function (frame) {
        if (frame.number <= lastShown) {
          return; // already shown (the snapshot and a live batch may overlap)
        }
        lastShown = frame.number;
        var row = follow && framesBody ? frameRow(frame) : null;
        if (row) {
          batch.appendChild(row);
        }
      });
      if (batch.childNodes.length) {
        var empty = framesBody.querySelector("[data-no-frames]");
        if (empty) {
          empty.remove();
        }
        framesBody.appendChild(batch);
      }
    }

    function touchFrame(number, position) {
      var row = document.getElementById("f-" + number);
      if (!row) {
        return;
      }
      var cell = row.querySelector("td.calls");
      var key = "call" + position;
      if (!cell || cell.dataset[key]) {
        return;
      }
      cell.dataset[key] = "1";
      cell.appendChild(link("#call-" + position, "#" + position));
      cell.appendChild(document.createTextNode(" "));
    }

    // Calls ----------------------------------------------------------------------------

    function newCard(call) {
      var position = call.position;
      var article = el("article", "call card is-live");
      article.id = "call-" + position;
      article.dataset.position = position;

      var head = el("header", "call-head");
      head.appendChild(link("#call-" + position, "#" + position, "call-pos"));
      var name = el("code", "call-name");
      var id = el("code", "call-id");
      var index = chip("");
      var choice = chip("");
      var started = chip("");
      var settled = chip("");
      head.appendChild(name);
      head.appendChild(id);
      head.appendChild(index);
      head.appendChild(choice);
      head.appendChild(started);
      head.appendChild(settled);
      var refusalBadge = el("span", "badge outcome-refused");
      refusalBadge.hidden = true;
      head.appendChild(refusalBadge);
      article.appendChild(head);

      var body = el("div", "call-body");
      var identity = el("section", "identity");
      identity.appendChild(el("h3", null, "Identity"));
      var facts = el("dl", "identity-facts");
      function fact(label) {
        var div = el("div");
        div.appendChild(el("dt", null, label));
        var dd = el("dd");
        div.appendChild(dd);
        facts.appendChild(div);
        return dd;
      }
      var idFact = fact("id");
      var nameFact = fact("name");
      var indexFact = fact("index");
      identity.appendChild(facts);
      body.appendChild(identity);
      var final = el("section", "final");
      final.appendChild(el("h3", null, "Final arguments"));
      var finalNote = el("p", "muted", "not checked yet: the stream is still being captured");
      final.appendChild(finalNote);
      body.appendChild(final);
      article.appendChild(body);

      var evolution = el("section", "evolution");
      var title = el("h3", null, "Argument evolution ");
      var summary = el("span", "muted");
      title.appendChild(summary);
      evolution.appendChild(title);
      var table = el("table", "fragments");
      var thead = el("thead");
      var headRow = el("tr");
      [["#", "n"], ["frame", "n"], ["offset", "n"], ["fragment"], ["text so far"], ["JSON state"], [""]].forEach(
        function (cell) {
          headRow.appendChild(el("th", cell[1] || null, cell[0]));
        }
      );
      thead.appendChild(headRow);
      table.appendChild(thead);
      var tbody = el("tbody");
      table.appendChild(tbody);
      evolution.appendChild(table);
      var noFragments = el("p", "muted", "No argument fragments yet.");
      evolution.appendChild(noFragments);
      table.hidden = true;
      article.appendChild(evolution);

      var card = {
        position: position,
        node: article,
        name: name,
        id: id,
        index: index,
        choice: choice,
        started: started,
        settled: settled,
        refusalBadge: refusalBadge,
        idFact: idFact,
        nameFact: nameFact,
        indexFact: indexFact,
        finalNote: finalNote,
        summary: summary,
        table: table,
        tbody: tbody,
        noFragments: noFragments,
        text: "", // the arguments so far
        length: 0, // in code points, as the server's offsets count
        seq: 0,
        scanner: new Scanner(),
      };
      placeCard(card);
      cards[position] = card;
      var none = document.querySelector("[data-no-calls]");
      if (none) {
        none.remove();
      }
      return card;
    }

    function placeCard(card) {
      var later = null;
      Object.keys(cards).forEach(function (key) {
        var other = cards[key];
        if (other.position > card.position && (!later || other.position < later.position)) {
          later = other;
        }
      });
      callsBox.insertBefore(card.node, later ? later.node : null);
    }

    function identityFact(dd, value) {
      dd.textContent = "";
      if (value === null || value === undefined || value === "") {
        dd.appendChild(el("span", "muted", "not arrived yet"));
      } else {
        dd.appendChild(el("code", null, value));
      }
    }

    function frameChip(node, label, frame, tone, otherwise) {
      node.textContent = "";
      if (frame === null || frame === undefined) {
        node.className = "chip";
        node.textContent = otherwise;
        return;
      }
      node.className = "chip" + (tone ? " " + tone : "");
      node.appendChild(document.createTextNode(label + " "));
      node.appendChild(link(framePermalink(slug, frame), frame));
    }

    function updateIdentity(card, call) {
      card.name.textContent = call.name || "(no name yet)";
      card.id.textContent = call.id || "(no id yet)";
      card.index.textContent = "index " + (call.index === null || call.index === undefined ? "\u2014" : call.index);
      card.choice.textContent = "choice " + call.choice;
      card.choice.hidden = !call.choice;
      frameChip(card.started, "started at frame", call.started_frame, "", "not started yet");
      frameChip(card.settled, "settled at frame", call.settled_frame, "ok", "not settled");
      identityFact(card.idFact, call.id);
      identityFact(card.nameFact, call.name);
      card.indexFact.textContent = "";
      if (call.index === null || call.index === undefined) {
        card.indexFact.appendChild(el("span", "muted", "none"));
      } else {
        card.indexFact.appendChild(el("code", null, call.index));
        card.indexFact.appendChild(document.createTextNode(" "));
        card.indexFact.appendChild(el("span", "muted", "the first one seen"));
      }
      if (call.started_frame !== null && call.started_frame !== undefined) {
        touchFrame(call.started_frame, call.position);
      }
    }

    function fragmentRow(card, fragment, invalidFrom) {
      var seq = card.seq;
      card.seq += 1;
      var before = card.text;
      card.text += fragment.text;
      card.length += codePoints(fragment.text);
      card.scanner.feed(fragment.text);
      var scanner = card.scanner;
      var invalid = scanner.invalidAt;
      if (invalid === null && invalidFrom !== null && invalidFrom !== undefined && invalidFrom < card.length) {
        invalid = invalidFrom;
      }

      var row = el("tr", "is-new");
      row.id = "frag-" + card.position + "-" + seq;
      var permalink = framePermalink(slug, fragment.frame).replace(/#.*$/, "") + "#" + row.id;
      var n = el("td", "n");
      var a = link(permalink, seq);
      a.title = "Permalink to this fragment";
      n.appendChild(a);
      row.appendChild(n);
      var frameCell = el("td", "n");
      frameCell.appendChild(link(framePermalink(slug, fragment.frame), fragment.frame));
      row.appendChild(frameCell);
      row.appendChild(el("td", "n", fragment.offset));
      var fragCell = el("td", "fragment");
      fragCell.appendChild(el("pre", null, cutMiddle(fragment.text, FRAGMENT_SHOWN)));
      row.appendChild(fragCell);
      var soFar = el("td", "so-far");
      var pre = el("pre");
      var start = Math.max(0, before.length - WINDOW);
      if (start > 0) {
        pre.appendChild(el("span", "ellipsis", "\u2026"));
      }
      pre.appendChild(document.createTextNode(before.slice(start)));
      pre.appendChild(el("mark", null, cutMiddle(fragment.text, FRAGMENT_SHOWN)));
      soFar.appendChild(pre);
      row.appendChild(soFar);
      var state = el("td", "state");
      stateChips(scanner.stack.length, scanner.inString, scanner.closed && invalid === null, invalid).forEach(
        function (node) {
          state.appendChild(node);
          state.appendChild(document.createTextNode(" "));
        }
      );
      row.appendChild(state);
      row.appendChild(copyCell(permalink));
      return row;
    }

    function updateCall(call) {
      var card = cards[call.position] || newCard(call);
      updateIdentity(card, call);
      var rows = document.createDocumentFragment();
      (call.fragments || []).forEach(function (fragment) {
        if (fragment.offset < card.length) {
          return; // already shown (a snapshot repeats a call's fragments)
        }
        rows.appendChild(fragmentRow(card, fragment, call.invalid_from));
        touchFrame(fragment.frame, call.position);
      });
      if (rows.childNodes.length) {
        card.tbody.appendChild(rows);
        card.table.hidden = false;
        card.noFragments.hidden = true;
      }
      card.summary.textContent =
        card.seq + " fragment" + (card.seq === 1 ? "" : "s") + ", " + card.length + " character" + (card.length === 1 ? "" : "s");
      card.node.dataset.complete = call.complete ? "1" : "0";
      if (call.invalid_from !== null && call.invalid_from !== undefined) {
        card.finalNote.className = "parse-error";
        card.finalNote.textContent = "Not one JSON object: invalid from offset " + call.invalid_from + ".";
      }
    }

    function addCalls(calls) {
      (calls || []).forEach(updateCall);
      setCounts();
    }

    // Outcome and refusal --------------------------------------------------------------

    function showRefusal(refusal) {
      if (!refusal || !refusal.code) {
        return;
      }
      var key = [refusal.code, refusal.frame, refusal.call].join("/");
      if (refusalShown === key) {
        return;
      }
      refusalShown = key;
      var code = root.querySelector("[data-refusal-code]");
      code.textContent = refusal.code;
      code.hidden = false;
      var box = root.querySelector("[data-live-refusal]");
      if (refusal.message) {
        root.querySelector("[data-refusal-message]").textContent = refusal.message;
      }
      var where = root.querySelector("[data-refusal-where]");
      where.textContent = "";
      if (refusal.frame !== null && refusal.frame !== undefined) {
        where.appendChild(document.createTextNode("at "));
        where.appendChild(link(framePermalink(slug, refusal.frame), "frame " + refusal.frame, "refusal-frame-link"));
        markRefusalFrame(refusal);
      } else {
        where.appendChild(document.createTextNode("at no frame"));
      }
      if (refusal.call !== null && refusal.call !== undefined) {
        where.appendChild(document.createTextNode(" \u00b7 call "));
        where.appendChild(link("#call-" + refusal.call, "#" + refusal.call));
        var card = cards[refusal.call];
        if (refusal.frame !== null && refusal.frame !== undefined) {
          touchFrame(refusal.frame, refusal.call);
        }
        if (card) {
          card.node.classList.add("is-refusal");
          card.refusalBadge.textContent = refusal.code;
          card.refusalBadge.hidden = false;
        }
      }
      if (refusal.retryable !== null && refusal.retryable !== undefined) {
        where.appendChild(document.createTextNode(" \u00b7 " + (refusal.retryable ? "retryable" : "not retryable")));
      }
      box.hidden = false;
    }

    function markRefusalFrame(refusal) {
      var row = document.getElementById("f-" + refusal.frame);
      if (!row || row.classList.contains("is-refusal")) {
        return;
      }
      row.classList.add("is-refusal");
      var marks = row.querySelector("td.marks");
      if (marks) {
        marks.appendChild(el("span", "mark mark-refusal", refusal.code));
      }
    }

    function showOutcome(outcome) {
      badge.textContent = outcome;
      badge.className = "badge big outcome-" + outcome;
      root.dataset.outcome = outcome;
      root.classList.remove("outcome-edge-live");
      root.classList.add("outcome-edge-" + outcome);
      // This capture's own entry in the attempt strip says the same.
      var attemptBadge = document.querySelector(".attempt.is-current .badge");
      if (attemptBadge) {
        attemptBadge.textContent = outcome;
        attemptBadge.className = "badge outcome-" + outcome;
      }
    }

    function finish(outcome, refusal, refusalCode) {
      finished = true;
      if (refusal) {
        showRefusal(refusal);
      } else if (refusalCode) {
        showRefusal({ code: refusalCode, frame: null, call: null });
      }
      showOutcome(outcome);
      Object.keys(cards).forEach(function (key) {
        cards[key].finalNote.textContent = "reload for the final arguments and the identity timeline";
      });
      var note = root.querySelector("[data-verdict-note]");
      note.textContent = "capture closed \u00b7 ";
      var reload = link(window.location.pathname, "reload for the full view", "reload-link");
      reload.dataset.reload = "";
      note.appendChild(reload);
      socket.stop("closed");
    }

    // Messages -------------------------------------------------------------------------

    function receive(message) {
      if (finished) {
        return;
      }
      if (message.type === "snapshot") {
        addFrames(message.frames);
        addCalls(message.calls);
        showRefusal(message.refusal); // decided before we joined
        if (message.outcome !== "live") {
          // It closed before we joined: the stored page is complete now.
          finish(message.outcome, null, message.refusal_code);
        }
      } else if (message.type === "frames") {
        addFrames(message.frames);
        addCalls(message.calls);
        showRefusal(message.refusal);
      } else if (message.type === "finished") {
        addFrames(message.frames);
        addCalls(message.calls);
        finish(message.outcome, message.refusal, null);
      }
      setCounts();
    }

    socket = new Socket(
      function () {
        return "/ws/captures/" + encodeURIComponent(slug) + "/?after=" + lastShown;
      },
      statusNode,
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
