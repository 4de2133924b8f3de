// judge annotate's page: one row at a time, labelled from the keyboard, each key saved by
// the server before the page moves on. Every text of the data goes in through textContent,
// never as markup, with its control characters shown as \uXXXX escapes.
(function () {
  "use strict";

  var token = new URLSearchParams(location.search).get("token") || "";
  var state = null; // the server's state: annotator, metric, question, totals
  var row = null; // the row shown, as the server gives it
  var marks = []; // the person's verdict on each claim: true, false or null (the judge's)
  var queue = Promise.resolve(); // saves, one after another, in key order
  var pending = 0;

  // C0 controls but tab and newline, DEL, C1, and the bidi marks and overrides: shown, not
  // obeyed (an override would reverse the text after it; ESC starts a terminal sequence).
  var CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

  function visible(text) {
    if (text === null || text === undefined) return "";
    return String(text).replace(CONTROLS, function (c) {
      return "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");
    });
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = visible(text);
    return node;
  }

  function $(id) {
    return document.getElementById(id);
  }

  function api(path, body) {
    var options = { headers: { "X-Judge-Token": token } };
    if (body !== undefined) {
      options.method = "POST";
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return fetch(path, options).then(function (response) {
      return response.json().then(function (data) {
        if (!response.ok) throw new Error(data.error || "the server said " + response.status);
        return data;
      });
    });
  }

  function setPending(delta) {
    pending += delta;
    document.body.dataset.pending = String(pending);
  }

  function progress() {
    var where = row ? "Row " + (row.position + 1) + " of " + state.total : "Done";
    $("progress").textContent = visible(
      where + " · " + state.labelled + " labelled · " + state.skipped + " skipped · annotator " +
        state.annotator
    );
  }

  function grade(context) {
    if (context.grade === null || context.grade === undefined) return null;
    return el("span", "grade", "grade " + context.grade);
  }

  function verdict(claim, index) {
    var mine = marks[index];
    var judged = claim.supported;
    var li = el("li");
    li.dataset.claim = String(claim.number);
    var tag = el(
      "span",
      "verdict " + (judged ? "supported" : "unsupported"),
      "judge: " + (claim.verdict || "no verdict") + (claim.context ? " (context " + claim.context + ")" : "")
    );
    li.appendChild(tag);
    li.appendChild(el("span", "claim", claim.text));
    if (mine !== null && mine !== undefined) {
      var you = el("span", "you " + (mine ? "yes" : "no"), "you: " + (mine ? "supported" : "not supported"));
      li.appendChild(you);
    }
    li.dataset.mine = mine === null || mine === undefined ? "" : String(mine);
    if (claim.reason) li.appendChild(el("span", "reason", claim.reason));
    return li;
  }

  function renderClaims() {
    var list = $("claims");
    list.replaceChildren.apply(list, row.claims.map(verdict));
    $("no-claims").hidden = row.claims.length > 0;
  }

  function renderMine() {
    var label = row.mine.label;
    var mine = $("mine");
    mine.className = label === 1 ? "yes" : label === 0 ? "no" : "";
    mine.textContent =
      label === 1 ? "yes (y)" : label === 0 ? "no (n)" : row.mine.skipped ? "skipped (s)" : "not labelled yet";
    $("row").dataset.label = label === null || label === undefined ? "" : String(label);
  }

  function render() {
    $("done").hidden = true;
    $("row").hidden = false;
    $("row").dataset.position = String(row.position);
    $("row").dataset.id = row.id === null ? "" : row.id;
    $("ask").textContent = visible(state.question);
    $("metric").textContent = visible(state.metric);
    $("score").textContent = visible(
      row.score === null ? "none" + (row.why_no_score ? " (" + row.why_no_score + ")" : "") : row.score.toFixed(3)
    );
    $("question").textContent = visible(row.question);
    $("answer").textContent = visible(row.answer);
    var contexts = row.contexts.map(function (context) {
      var li = el("li");
      var badge = grade(context);
      if (badge) li.appendChild(badge);
      li.appendChild(el("span", "context", context.text));
      if (context.reason) li.appendChild(el("span", "reason", context.reason));
      return li;
    });
    $("contexts").replaceChildren.apply($("contexts"), contexts);
    renderClaims();
    renderMine();
    $("status").textContent = "";
    progress();
  }

  // The person's saved verdict on each claim of a row; null where they left the judge's.
  function marksOf(shown) {
    return shown.claims.map(function (_, i) {
      var given = shown.mine.claims[i];
      return given === undefined ? null : given;
    });
  }

  function show(position) {
    return api("/api/rows/" + position).then(function (data) {
      row = data;
      marks = marksOf(row);
      render();
    });
  }

  function finished() {
    row = null;
    $("row").hidden = true;
    $("done").hidden = false;
    $("done-text").textContent = visible(
      "All " + state.total + " rows: " + state.labelled + " labelled, " + state.skipped +
        " skipped. Your labels are saved; stop the server (Ctrl-C) when you are finished, " +
        "or press ← to go back."
    );
    progress();
  }

  // Save this row's label (null: skipped) with the claims' verdicts; then, when `advance`,
  // show the next row not yet done.
  function save(label, advance) {
    var position = row.position;
    var body = { label: label, claims: marks.slice() };
    return api("/api/rows/" + position, body)
      .then(function (done) {
        row.mine = { label: label, claims: body.claims, skipped: label === null };
        state.labelled = done.labelled;
        state.skipped = done.skipped;
        renderMine();
        renderClaims();
        if (!advance) return progress();
        if (done.next === null) return finished();
        return show(done.next);
      })
      .catch(function (error) {
        // Not kept: the row stays as it was saved last, and the page says why.
        marks = marksOf(row);
        renderClaims();
        $("status").textContent = visible("not saved: " + error.message);
        $("status").className = "problems";
      });
  }

  function move(step) {
    if (row === null) return step < 0 ? show(state.total - 1) : undefined;
    var target = row.position + step;
    if (target < 0 || target >= state.total) return undefined;
    return show(target);
  }

  // One key: a promise settled once its label is saved and the next row shown.
  function handle(key) {
    if (key === "ArrowRight") return move(1);
    if (key === "ArrowLeft") return move(-1);
    if (row === null) return undefined;
    var labelled = row.mine.label === 0 || row.mine.label === 1;
    if (key === "y" || key === "n") return save(key === "y" ? 1 : 0, true);
    if (key === "s") {
      // A labelled row is passed over, its label kept; else the skip is saved.
      if (labelled) return move(1);
      return save(null, true);
    }
    if (/^[1-9]$/.test(key)) {
      var index = Number(key) - 1;
      if (index >= row.claims.length) return undefined;
      var current = marks[index];
      if (current === null || current === undefined) current = row.claims[index].supported === true;
      marks[index] = !current;
      // A labelled row's new verdicts are saved at once; else with the row's label.
      if (labelled) return save(row.mine.label, false);
      renderClaims();
      return undefined;
    }
    return undefined;
  }

  var KEYS = /^(y|n|s|[1-9]|ArrowLeft|ArrowRight)$/;

  document.addEventListener("keydown", function (event) {
    if (state === null || event.ctrlKey || event.metaKey || event.altKey) return;
    if (!KEYS.test(event.key)) return;
    event.preventDefault();
    // A key held down repeats: an arrow may move on, but a label is given once, to the row
    // the person saw, never to the rows after it.
    if (event.repeat && !/^Arrow/.test(event.key)) return;
    var key = event.key;
    setPending(1);
    // Keys are handled one after another, each on the row the one before it left shown.
    queue = queue
      .then(function () {
        return handle(key);
      })
      .catch(function (error) {
        $("status").textContent = visible(error.message);
      })
      .then(function () {
        setPending(-1);
      });
  });

  document.body.dataset.pending = "0";
  api("/api/state")
    .then(function (data) {
      state = data;
      $("sampled").textContent = visible(
        "Rows drawn: " + state.sampled + (state.random ? "" : " — these labels are not a random sample")
      );
      if (state.problems.length) {
        $("problems").hidden = false;
        $("problems").textContent = visible(state.problems.join("\n"));
      }
      if (state.start === null) return finished();
      return show(state.start);
    })
    .catch(function (error) {
      $("progress").textContent = visible("cannot load the rows: " + error.message);
    });
})();
