// judge view: the run history's page, drawn from window.JUDGE_VIEW (data.js) with Chart.js.
// Every text of the data is user data (answers, questions, names): it reaches the page
// through textContent and attributes only, never innerHTML, and isolated (a <bdi>, or
// FSI...PDI in plain strings) so that a bidi override in it cannot reorder what follows.
(function () {
  "use strict";

  var data = window.JUDGE_VIEW;
  var CHART_NAME_CHARS = 24; // a run's name in a chart's labels; the whole name on hover

  var dom = window.JudgeDom; // assets/dom.js
  var el = dom.el, num = dom.num, isolated = dom.isolated, bdi = dom.bdi, MISSING = dom.MISSING;
  var BLUE = dom.colours.BLUE, BAND = dom.colours.BAND, RED = dom.colours.RED;

  // A run as text: its name (isolated) and the start of its id; the id alone without one.
  function runLabelText(run, nameChars) {
    if (!run.name) return run.id.slice(0, 12);
    var name = run.name;
    if (nameChars && name.length > nameChars) name = name.slice(0, nameChars - 1) + "\u2026";
    return isolated(name) + " (" + run.id.slice(0, 8) + ")";
  }

  // A run in the page: <span><bdi>name</bdi> (id)</span>.
  function runLabel(run) {
    if (!run.name) return el("span", { className: "run-label", text: run.id.slice(0, 12) });
    return el("span", { className: "run-label" },
      [bdi(run.name), " (" + run.id.slice(0, 8) + ")"]);
  }

  // Split a long text into lines of at most `width` characters (a tooltip does not wrap).
  function lines(text, width) {
    var out = [];
    for (var at = 0; at < text.length; at += width) out.push(text.slice(at, at + width));
    return out.length ? out : [""];
  }

  var runsById = {};

  // ---- charts: a metric's mean per run in time order, its 95% interval as a band
  function summaryOf(run, metric, key) {
    var values = run.summary[metric];
    return values ? values[key] : null;
  }

  function drawCharts() {
    var holder = document.getElementById("charts");
    data.metrics.forEach(function (metric, index) {
      var canvas = el("canvas", {
        id: "chart-" + index,
        "data-metric": metric,
        role: "img",
        "aria-label": isolated(metric) + " across runs",
      });
      var box = el("div", { className: "chart", "data-metric": metric }, [
        el("h3", { text: metric }),
        el("div", { className: "canvas-box" }, [canvas]),
      ]);
      holder.appendChild(box);
      var labels = data.runs.map(function (run) {
        var when = (run.created || "").replace("T", " ").replace("Z", "").slice(0, 16);
        return [runLabelText(run, CHART_NAME_CHARS), when];
      });
      var isBase = data.runs.map(function (run) {
        return run.id === data.baseline;
      });
      new Chart(canvas, {
        type: "line",
        data: {
          labels: labels,
          datasets: [
            {
              label: "95% interval",
              data: data.runs.map(function (run) { return summaryOf(run, metric, "ci_high"); }),
              borderWidth: 0,
              pointRadius: 0,
              backgroundColor: BAND,
              fill: "+1",
              // a run with no interval (one row, or scores all the same) breaks the band
              spanGaps: false,
            },
            {
              label: "95% interval (low end)",
              data: data.runs.map(function (run) { return summaryOf(run, metric, "ci_low"); }),
              borderWidth: 0,
              pointRadius: 0,
              backgroundColor: BAND,
              fill: false,
              spanGaps: false,
            },
            {
              label: "mean",
              data: data.runs.map(function (run) { return summaryOf(run, metric, "mean"); }),
              borderColor: BLUE,
              backgroundColor: BLUE,
              fill: false,
              spanGaps: true,
              pointStyle: isBase.map(function (b) { return b ? "rectRot" : "circle"; }),
              pointRadius: isBase.map(function (b) { return b ? 8 : 4; }),
              pointBackgroundColor: isBase.map(function (b) { return b ? RED : BLUE; }),
              pointBorderColor: isBase.map(function (b) { return b ? RED : BLUE; }),
            },
          ],
        },
        options: {
          animation: false,
          responsive: true,
          maintainAspectRatio: false,
          interaction: { mode: "index", intersect: false },
          scales: { y: { suggestedMin: 0, suggestedMax: 1 } },
          plugins: {
            legend: {
              labels: {
                filter: function (item) { return item.datasetIndex !== 1; },
              },
            },
            tooltip: {
              callbacks: {
                // The whole name, which the axis shows shortened.
                title: function (items) {
                  var run = data.runs[items[0].dataIndex];
                  var when = (run.created || "").replace("T", " ").replace("Z", "");
                  var name = run.name ? lines(run.name, 60).map(isolated) : [];
                  return name.concat([run.id + (when ? " \u00b7 " + when : "")]);
                },
                afterTitle: function (items) {
                  var run = data.runs[items[0].dataIndex];
                  var scored = summaryOf(run, metric, "scored");
                  return (run.id === data.baseline ? "baseline; " : "") +
                    (scored === null ? "" : scored + " scored");
                },
              },
            },
          },
        },
      });
    });
  }

  // ---- the runs table; a click on a row chooses it (two at most, the oldest dropped)
  var chosen = [];

  function drawRuns() {
    var table = document.getElementById("runs");
    var head = ["", "id", "name", "created", "command", "model", "app", "git", "rows"]
      .concat(data.metrics, ["tags"]);
    table.appendChild(el("thead", {}, [el("tr", {}, head.map(function (h) {
      return el("th", { text: h });
    }))]));
    var body = el("tbody");
    data.runs.forEach(function (run) {
      var box = el("input", { type: "checkbox", "aria-label": "choose run " + run.id });
      var nameCell = el("td", { className: "name" }, [bdi(run.name || "")]);
      if (run.id === data.baseline) {
        nameCell.appendChild(el("span", { className: "badge", text: "baseline" }));
      }
      var rows = data.results[run.id];
      if (rows && rows.status === "changed") {
        nameCell.appendChild(el("span", {
          className: "badge changed", text: "folder changed since recorded", title: rows.message,
        }));
      }
      var talks = rows && rows.status === "ok" ? conversationsOf(rows.rows) : [];
      if (talks.length) {
        var shared = sharedIds(talks);
        var link = el("a", {
          className: "conversations-link",
          href: "#conversations=" + encodeURIComponent(run.id),
          text: shared ? talks.length + " conversation ids (" + shared +
            (shared === 1 ? " names" : " name") + " several conversations)" :
            talks.length + (talks.length === 1 ? " conversation" : " conversations"),
        });
        // Opens the run's conversations; the click does not choose the row for Compare.
        link.addEventListener("click", function (event) {
          event.stopPropagation();
          event.preventDefault();
          window.location.hash = "conversations=" + encodeURIComponent(run.id);
          showConversations(run.id);
        });
        nameCell.appendChild(el("div", {}, [link]));
      }
      var git = run.git ? run.git.commit + (run.git.dirty ? " (dirty)" : "") : "";
      var cells = [
        el("td", {}, [box]),
        el("td", {}, [el("code", { text: run.id })]),
        nameCell,
        el("td", { text: run.created || "" }),
        el("td", { text: run.command || "" }),
        el("td", {}, [bdi(run.model || "")]),
        el("td", {}, [bdi(run.app || "")]),
        el("td", { text: git, title: run.git && run.git.dirty ? "uncommitted changes" : null }),
        el("td", { className: "n", text: run.rows === null ? "" : run.rows }),
      ].concat(data.metrics.map(function (metric) {
        return el("td", { className: "n", text: num(summaryOf(run, metric, "mean")) });
      }), [el("td", {}, (run.tags || []).reduce(function (parts, tag, i) {
        return parts.concat(i ? [", ", bdi(tag)] : [bdi(tag)]);
      }, []))]);
      var row = el("tr", {
        "data-run": run.id,
        className: run.id === data.baseline ? "baseline" : null,
      }, cells);
      row.addEventListener("click", function (event) {
        if (event.target !== box) box.checked = !box.checked;
        choose(run.id, box.checked);
      });
      body.appendChild(row);
    });
    table.appendChild(body);
    document.getElementById("compare").addEventListener("click", function () {
      if (chosen.length === 2) {
        window.location.hash = "compare=" + chosen.map(encodeURIComponent).join(",");
        compare(chosen[0], chosen[1]);
      }
    });
  }

  function choose(id, on) {
    chosen = chosen.filter(function (c) { return c !== id; });
    if (on) chosen.push(id);
    while (chosen.length > 2) chosen.shift();
    document.querySelectorAll("#runs tbody tr").forEach(function (row) {
      var picked = chosen.indexOf(row.getAttribute("data-run")) >= 0;
      row.classList.toggle("chosen", picked);
      row.querySelector("input").checked = picked;
    });
    document.getElementById("compare").disabled = chosen.length !== 2;
    var parts = chosen.length ? ["chosen: "] : [];
    chosen.forEach(function (id, i) {
      if (i) parts.push(" and ");
      parts.push(runLabel(runsById[id]));
    });
    document.getElementById("chosen").replaceChildren.apply(
      document.getElementById("chosen"), parts);
  }

  // ---- the drill-down: per question, both runs' scores and the difference (later - earlier)
  function keyOf(row, by) {
    return by === "id" ? row.id : (row.question_key || row.question);
  }

  function keyed(rows, by) {
    var out = new Map();
    rows.forEach(function (row) {
      var key = keyOf(row, by);
      if (key !== null && key !== undefined) out.set(key, row);
    });
    return out;
  }

  // The ids that name several rows of a run, in order of their rows.
  function repeatedIds(rows) {
    var seen = new Set(), repeated = new Set();
    rows.forEach(function (row) {
      if (row.id === null || row.id === undefined) return;
      if (seen.has(row.id)) repeated.add(row.id);
      seen.add(row.id);
    });
    return Array.from(repeated);
  }

  // Ids usually identify samples; when two runs numbered them differently, or an id names
  // several rows of a run, the question text is the better key if every question is unique
  // on both sides (as judge compare decides). An id that names several rows, and questions
  // that repeat: no pairs (`by` null), as keeping one row of each id would pair rows of
  // different samples.
  function pairRows(rowsA, rowsB) {
    var idsA = keyed(rowsA, "id"), idsB = keyed(rowsB, "id");
    var qsA = keyed(rowsA, "question"), qsB = keyed(rowsB, "question");
    var sharedIds = 0, sharedQs = 0;
    idsA.forEach(function (_, key) { if (idsB.has(key)) sharedIds++; });
    qsA.forEach(function (_, key) { if (qsB.has(key)) sharedQs++; });
    var repeated = [repeatedIds(rowsA), repeatedIds(rowsB)];
    var doubled = repeated[0].length > 0 || repeated[1].length > 0;
    var unique = [qsA.size === rowsA.length, qsB.size === rowsB.length];
    var byQuestion = (sharedQs > sharedIds || doubled) && unique[0] && unique[1];
    if (doubled && !byQuestion) {
      return { by: null, pairs: [], repeated: repeated, unique: unique };
    }
    var a = byQuestion ? qsA : idsA, b = byQuestion ? qsB : idsB;
    var pairs = [];
    a.forEach(function (rowA, key) {
      if (b.has(key)) pairs.push({ key: key, a: rowA, b: b.get(key) });
    });
    return { by: byQuestion ? "question" : "id", pairs: pairs, onlyA: a.size - pairs.length,
      onlyB: b.size - pairs.length, repeated: repeated };
  }

  // `start` + "A: 'x', 'y'; in B: 'x'" (five ids of a run at most), for the runs whose
  // ids repeat; each id isolated.
  function repeatedNote(start, runs, repeated) {
    var parts = [];
    runs.forEach(function (run, i) {
      var ids = repeated[i];
      if (!ids.length) return;
      parts.push(parts.length ? "; in " : start, runLabel(run), ": ");
      ids.slice(0, 5).forEach(function (id, at) {
        parts.push(at ? ", '" : "'", bdi(id), "'");
      });
      if (ids.length > 5) parts.push(" and " + (ids.length - 5) + " more");
    });
    return parts;
  }

  function diffMetrics(pairs) {
    var names = data.metrics.slice();
    pairs.forEach(function (pair) {
      Object.keys(pair.a.scores).concat(Object.keys(pair.b.scores)).forEach(function (m) {
        if (names.indexOf(m) < 0) names.push(m);
      });
    });
    return names.filter(function (m) {
      return pairs.some(function (p) { return m in p.a.scores || m in p.b.scores; });
    });
  }

  function delta(pair, metric) {
    var x = pair.a.scores[metric], y = pair.b.scores[metric];
    return x === null || x === undefined || y === null || y === undefined ? null : y - x;
  }

  // The sort key: the largest drop over the metrics (or of one metric); null sorts last.
  function dropOf(pair, metrics) {
    var worst = null;
    metrics.forEach(function (m) {
      var d = delta(pair, m);
      if (d !== null && (worst === null || d < worst)) worst = d;
    });
    return worst;
  }

  function sortPairs(pairs, metrics) {
    var keys = new Map(pairs.map(function (p) { return [p, dropOf(p, metrics)]; }));
    return pairs.slice().sort(function (p, q) {
      var x = keys.get(p), y = keys.get(q);
      if (x === null && y === null) return 0;
      if (x === null) return 1;
      if (y === null) return -1;
      return x - y;
    });
  }

  function answerCell(row) {
    return el("td", { className: "answer" }, [row.answer === null ? MISSING : row.answer]);
  }

  function scoreCell(row, metric) {
    var value = row.scores[metric];
    var reason = row.reasons && row.reasons[metric];
    return el("td", { className: "n", text: num(value), title: reason ? isolated(reason) : null });
  }

  function compare(idA, idB) {
    var runA = runsById[idA], runB = runsById[idB];
    if (!runA || !runB) return;
    // Earlier run first: the difference is what changed since.
    if ((runB.created || "") < (runA.created || "")) {
      var swap = runA; runA = runB; runB = swap;
    }
    var section = document.getElementById("diff-section");
    var note = document.getElementById("diff-note");
    var table = document.getElementById("diff");
    var controls = document.getElementById("diff-controls");
    section.hidden = false;
    table.replaceChildren();
    controls.replaceChildren();
    document.getElementById("diff-title").replaceChildren(
      "Per question: ", runLabel(runA), " \u2192 ", runLabel(runB));
    var resA = data.results[runA.id], resB = data.results[runB.id];
    var problems = [];
    [[runA, resA], [runB, resB]].forEach(function (x) {
      if (x[1].status === "ok") return;
      problems.push(problems.length ? " Run " : "Run ", runLabel(x[0]), ": ",
        bdi(x[1].message), ".");
    });
    if (problems.length) {
      problems.push(" The per-question scores cannot be shown.");
      note.replaceChildren.apply(note, problems);
      note.className = "bad";
      section.scrollIntoView();
      return;
    }
    var paired = pairRows(resA.rows, resB.rows);
    if (paired.by === null) {
      var why = repeatedNote("Ids name several rows in ", [runA, runB], paired.repeated);
      why.push(". Questions repeat in ");
      [runA, runB].filter(function (_, i) { return !paired.unique[i]; }).forEach(
        function (run, i) { why.push(i ? " and in " : "", runLabel(run)); });
      why.push(". The questions of these runs cannot be paired (by id, or by question " +
        "when every question is unique): give each sample its own id (an id column) and " +
        "evaluate again.");
      note.replaceChildren.apply(note, why);
      note.className = "bad";
      section.scrollIntoView();
      return;
    }
    var metrics = diffMetrics(paired.pairs);
    var skipped = resA.skipped + resB.skipped;
    note.className = "small";
    note.replaceChildren(paired.pairs.length + " questions in both runs, matched by " +
      paired.by + "; " + paired.onlyA + " only in ", runLabel(runA), ", " + paired.onlyB +
      " only in ", runLabel(runB),
      (skipped ? "; " + skipped + " rows with input errors left out" : "") +
      ". \u0394 = ", runLabel(runB), " \u2212 ", runLabel(runA),
      "; the largest drop first.");
    if (paired.by === "question" && (paired.repeated[0].length || paired.repeated[1].length)) {
      note.append.apply(note, repeatedNote(" Matched by question: ids name several rows in ",
        [runA, runB], paired.repeated).concat(["."]));
    }
    [runA, runB].forEach(function (run) {
      if (data.results[run.id].verified === false) {
        note.append(" The rows of ", runLabel(run), " cannot be checked against the run: " +
          "it was recorded by a judge that kept no hash of its results.jsonl.");
      }
    });
    var select = el("select", { id: "diff-sort", "aria-label": "sort by" },
      [el("option", { value: "", text: "largest drop, any metric" })].concat(
        metrics.map(function (m) {
          return el("option", { value: m, text: "largest drop: " + isolated(m) });
        })));
    controls.appendChild(el("label", {}, ["Sort by ", select]));

    var head = el("tr", {}, [el("th", { text: "question" })]);
    metrics.forEach(function (m) {
      head.appendChild(el("th", {}, [bdi(m), " A"]));
      head.appendChild(el("th", {}, [bdi(m), " B"]));
      head.appendChild(el("th", {}, [bdi(m), " \u0394"]));
    });
    head.appendChild(el("th", {}, ["answer A: ", runLabel(runA)]));
    head.appendChild(el("th", {}, ["answer B: ", runLabel(runB)]));
    table.appendChild(el("thead", {}, [head]));
    var body = el("tbody");
    table.appendChild(body);

    function fill() {
      body.replaceChildren();
      var by = select.value ? [select.value] : metrics;
      sortPairs(paired.pairs, by).forEach(function (pair) {
        var question = pair.a.question === null ? MISSING : pair.a.question;
        var row = el("tr", { "data-key": pair.key }, [el("td", {}, [
          el("div", { text: question }),
          pair.a.id === null ? null : el("div", { className: "small" }, ["id ", bdi(pair.a.id)]),
        ])]);
        metrics.forEach(function (m) {
          var d = delta(pair, m);
          row.appendChild(scoreCell(pair.a, m));
          row.appendChild(scoreCell(pair.b, m));
          row.appendChild(el("td", {
            className: "n delta" + (d === null ? "" : d < 0 ? " bad" : d > 0 ? " ok" : ""),
            "data-metric": m,
            "data-delta": d === null ? null : String(d),
            text: num(d, 3, "+"),
          }));
        });
        row.appendChild(answerCell(pair.a));
        row.appendChild(answerCell(pair.b));
        body.appendChild(row);
      });
    }
    select.addEventListener("change", fill);
    fill();
    section.scrollIntoView();
  }

  // ---- conversations: a run's rows that are turns, grouped by conversation_id, each
  // conversation's turns in order of `turn` (then of row), and the turns that repeat: a
  // conversation has one row per turn, so an id whose turn repeats names several
  // conversations (two given one id), whose turns cannot be told apart.
  function conversationsOf(rows) {
    var byId = new Map();
    rows.forEach(function (row, at) {
      if (row.conversation_id === undefined || row.conversation_id === null) return;
      if (!byId.has(row.conversation_id)) byId.set(row.conversation_id, []);
      byId.get(row.conversation_id).push({ row: row, at: at });
    });
    var out = [];
    byId.forEach(function (turns, id) {
      turns.sort(function (x, y) {
        var a = x.row.turn === null ? Infinity : x.row.turn;
        var b = y.row.turn === null ? Infinity : y.row.turn;
        return a === b ? x.at - y.at : a - b;
      });
      var repeats = [];
      turns.forEach(function (t, i) {
        var turn = t.row.turn;
        if (i && turn !== null && turn === turns[i - 1].row.turn &&
          repeats[repeats.length - 1] !== turn) repeats.push(turn);
      });
      out.push({ id: id, turns: turns.map(function (t) { return t.row; }), repeats: repeats });
    });
    return out;
  }

  // How many conversation ids name several conversations.
  function sharedIds(talks) {
    return talks.filter(function (t) { return t.repeats.length; }).length;
  }

  // "turn 2 repeats", "turns 2, 4 and 6 repeat".
  function repeatedTurns(repeats) {
    if (repeats.length === 1) return "turn " + repeats[0] + " repeats";
    return "turns " + repeats.slice(0, -1).join(", ") + " and " +
      repeats[repeats.length - 1] + " repeat";
  }

  function turnMetrics(turns) {
    var names = data.metrics.slice();
    turns.forEach(function (row) {
      Object.keys(row.scores).forEach(function (m) { if (names.indexOf(m) < 0) names.push(m); });
    });
    return names.filter(function (m) {
      return turns.some(function (row) { return m in row.scores; });
    });
  }

  function meanOf(turns, metric) {
    var values = turns.map(function (row) { return row.scores[metric]; })
      .filter(function (v) { return v !== null && v !== undefined; });
    if (!values.length) return null;
    return values.reduce(function (a, b) { return a + b; }, 0) / values.length;
  }

  function conversationHash(runId, conversationId) {
    return "conversation=" + encodeURIComponent(runId) + "," +
      encodeURIComponent(conversationId);
  }

  function showConversations(runId) {
    var run = runsById[runId];
    var results = data.results[runId];
    if (!run || !results || results.status !== "ok") return;
    var talks = conversationsOf(results.rows);
    var section = document.getElementById("conversations-section");
    var table = document.getElementById("conversations");
    section.hidden = false;
    table.replaceChildren();
    document.getElementById("conversations-title").replaceChildren(
      "Conversations of ", runLabel(run));
    var turns = talks.reduce(function (n, t) { return n + t.turns.length; }, 0);
    var shared = sharedIds(talks);
    document.getElementById("conversations-note").textContent = talks.length +
      (shared ? " conversation ids, " : " conversations, ") + turns + " judged turns, in " +
      "the order of the run's rows; each metric's mean over a conversation's turns. Open " +
      "one to read it turn by turn." + (shared ? " " + shared + (shared === 1 ?
        " id names several conversations (a turn of it repeats)" :
        " ids name several conversations (a turn of each repeats)") + ": their turns " +
      "cannot be told apart; give each conversation its own id and evaluate again." : "");
    var all = [];
    talks.forEach(function (t) { all = all.concat(t.turns); });
    var metrics = turnMetrics(all);
    table.appendChild(el("thead", {}, [el("tr", {}, [
      el("th", { text: "conversation" }), el("th", { text: "turns" }),
    ].concat(metrics.map(function (m) { return el("th", {}, [bdi(m)]); })))]));
    var body = el("tbody");
    talks.forEach(function (talk) {
      var open = el("a", { href: "#" + conversationHash(runId, talk.id) }, [bdi(talk.id)]);
      open.addEventListener("click", function (event) {
        event.preventDefault();
        window.location.hash = conversationHash(runId, talk.id);
        showConversation(runId, talk.id);
      });
      // No means over the turns of several conversations.
      var means = talk.repeats.length ? [el("td", {
        className: "bad",
        colspan: Math.max(metrics.length, 1),
        text: "several conversations have this id (" + repeatedTurns(talk.repeats) + ")",
      })] : metrics.map(function (m) {
        return el("td", { className: "n", text: num(meanOf(talk.turns, m)) });
      });
      body.appendChild(el("tr", { "data-conversation": talk.id }, [
        el("td", {}, [open]),
        el("td", { className: "n", text: talk.turns.length }),
      ].concat(means)));
    });
    table.appendChild(body);
    section.scrollIntoView();
  }

  // Where a claim's support was found: "context N", or the conversation's message.
  function sourceText(claim) {
    if (claim.source === "contexts") return "context " + claim.context;
    if (claim.source === "history") {
      return "conversation, turn " + claim.turn + " (" + claim.role + ")";
    }
    return MISSING;
  }

  function turnBlock(row, metrics) {
    var scores = el("table", { className: "scores" }, [
      el("tr", {}, metrics.map(function (m) { return el("th", {}, [bdi(m)]); })),
      el("tr", {}, metrics.map(function (m) { return scoreCell(row, m); })),
    ]);
    var contexts = row.contexts && row.contexts.length ?
      el("ol", { className: "contexts" }, row.contexts.map(function (c) {
        return el("li", { className: "text" }, [c]);
      })) : el("p", { className: "small", text: "no contexts" });
    var claims = row.claims && row.claims.length ? el("table", { className: "claims" }, [
      el("tr", {}, ["#", "claim", "verdict", "source", "reason"].map(function (h) {
        return el("th", { text: h });
      })),
    ].concat(row.claims.map(function (claim) {
      var verdict = claim.verdict.replace(/_/g, " ");
      return el("tr", { "data-source": claim.source || "" }, [
        el("td", { className: "n", text: claim.number === null ? "?" : claim.number }),
        el("td", { className: "text" }, [claim.claim === null ? MISSING : claim.claim]),
        el("td", { className: claim.verdict === "supported" ? "ok" : "bad", text: verdict }),
        el("td", { className: "source" }, [sourceText(claim)]),
        el("td", { className: "text" }, [claim.reason === null ? "" : claim.reason]),
      ]);
    }))) : el("p", { className: "small", text: "no claims judged" });
    return el("article", { className: "turn", "data-turn": row.turn === null ? "" : row.turn }, [
      el("h3", { text: "turn " + (row.turn === null ? "?" : row.turn) }),
      row.id === null ? null : el("div", { className: "small" }, ["id ", bdi(row.id)]),
      scores,
      el("div", { className: "said" }, [el("b", { text: "question " }),
        el("span", { className: "text question" }, [row.question === null ? MISSING :
          row.question])]),
      el("div", { className: "said" }, [el("b", { text: "answer " }),
        el("span", { className: "text answer" }, [row.answer === null ? MISSING :
          row.answer])]),
      el("div", {}, [el("b", { text: "contexts" })]),
      contexts,
      el("div", {}, [el("b", { text: "claims of the answer" })]),
      claims,
    ]);
  }

  function showConversation(runId, conversationId) {
    var run = runsById[runId];
    var results = data.results[runId];
    if (!run || !results || results.status !== "ok") return;
    var talk = conversationsOf(results.rows).filter(function (t) {
      return t.id === conversationId;
    })[0];
    var section = document.getElementById("conversation-section");
    var holder = document.getElementById("turns");
    var note = document.getElementById("conversation-note");
    section.hidden = false;
    holder.replaceChildren();
    document.getElementById("conversation-title").replaceChildren(
      "Conversation ", bdi(conversationId), " of ", runLabel(run));
    if (!talk) {
      note.className = "bad";
      note.textContent = "This run has no conversation of that id.";
      return;
    }
    if (talk.repeats.length) {
      note.className = "bad";
      note.replaceChildren("Several conversations of this run have the id ",
        bdi(conversationId), " (" + repeatedTurns(talk.repeats) + "): their turns cannot " +
        "be told apart, so none is shown; give each conversation its own id and evaluate " +
        "again.");
      section.scrollIntoView();
      return;
    }
    note.className = "small";
    note.textContent = talk.turns.length + " judged turns in order (a turn is the assistant " +
      "message's position among the conversation's messages). Each claim of an answer is " +
      "supported by the turn's contexts or by what the conversation said before it: its " +
      "source names which.";
    var metrics = turnMetrics(talk.turns);
    talk.turns.forEach(function (row) { holder.appendChild(turnBlock(row, metrics)); });
    section.scrollIntoView();
  }

  function fromHash() {
    var hash = window.location.hash;
    var one = /^#conversation=([^,]+),(.+)$/.exec(hash);
    if (one) {
      var runId = decodeURIComponent(one[1]);
      showConversations(runId);
      showConversation(runId, decodeURIComponent(one[2]));
      return;
    }
    var many = /^#conversations=(.+)$/.exec(hash);
    if (many) {
      showConversations(decodeURIComponent(many[1]));
      return;
    }
    var match = /^#compare=([^,]+),([^,]+)$/.exec(hash);
    if (!match) return;
    var ids = [decodeURIComponent(match[1]), decodeURIComponent(match[2])];
    if (runsById[ids[0]] && runsById[ids[1]]) {
      ids.forEach(function (id) { choose(id, true); });
      compare(ids[0], ids[1]);
    }
  }

  if (!data) {
    document.body.appendChild(el("p", { className: "bad",
      text: "data.js is missing or damaged: build the view again with judge view" }));
    return;
  }
  data.runs.forEach(function (run) {
    runsById[run.id] = run;
  });
  document.getElementById("generated").textContent += " \u00b7 " + data.runs.length + " runs";
  if (!data.runs.length) {
    document.getElementById("charts").appendChild(el("p", {
      text: "No runs yet: every judge eval and judge experiment records one." }));
  }
  drawCharts();
  drawRuns();
  fromHash();
})();
