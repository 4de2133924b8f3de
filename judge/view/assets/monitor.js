// judge view --monitor: a monitor state's page, drawn from window.JUDGE_MONITOR (data.js)
// with Chart.js. Every text of the data is user data (metric names, trace ids, questions,
// answers, the judge's reasons, skip reasons): it reaches the page through textContent and
// attributes only, never innerHTML, and isolated (a <bdi>, or FSI...PDI in plain strings)
// so that a bidi override in it cannot reorder what follows.
(function () {
  "use strict";

  var data = window.JUDGE_MONITOR;
  var LINKED_ALERTS = 12; // alerts linked under a metric's chart, the latest ones

  var dom = window.JudgeDom; // assets/dom.js
  var el = dom.el, num = dom.num, isolated = dom.isolated, bdi = dom.bdi, MISSING = dom.MISSING;
  var BLUE = dom.colours.BLUE, BAND = dom.colours.BAND, RED = dom.colours.RED;
  var GREY = dom.colours.GREY, GREY_BAND = dom.colours.GREY_BAND;

  function big(value) {
    if (value === null || value === undefined) return MISSING;
    return Math.abs(value) >= 1e4 ? Number(value).toExponential(3) : Number(value).toPrecision(4);
  }

  function interval(figures) {
    if (!figures || figures.mean === null || figures.mean === undefined) return MISSING;
    if (figures.ci_low === null || figures.ci_low === undefined) return num(figures.mean);
    return num(figures.mean) + " [" + num(figures.ci_low) + ", " + num(figures.ci_high) + "]";
  }

  function when(text) {
    return text ? String(text).replace("T", " ").replace(/:00\.000000Z$|Z$/, "") : "";
  }

  // A window on the chart's axis: its start time (a window of time is numbered from the
  // epoch, a number that says little), or its number (a window of N judged traces).
  function windowLabel(win) {
    return win.start ? when(win.start).slice(5, 16) : "#" + win.number;
  }

  function windowText(number, start, end) {
    var text = "window " + number;
    if (start) text += " (" + when(start) + " \u2013 " + when(end) + ")";
    return text;
  }

  function plural(n, one, many) {
    return n + " " + (n === 1 ? one : many);
  }

  var alertsById = {};

  // ---- settings and counts
  function drawSettings() {
    var s = data.settings || {};
    var parts = [];
    if (s.window) {
      parts.push(/^\d+$/.test(s.window) ? "windows of " + s.window + " judged traces" :
        "windows of " + s.window + " of the traces' start times", " \u00b7 ");
    }
    if (s.baseline) parts.push("baseline: ", bdi(s.baseline), " \u00b7 ");
    parts.push(plural(data.windows.length, "window", "windows") + " closed \u00b7 " +
      plural(data.alerts.length, "alert", "alerts"));
    var line = document.getElementById("settings");
    line.replaceChildren.apply(line, parts);
  }

  function drawCounts() {
    var c = data.counts || {};
    function n(key) { return c[key] || 0; }
    var statuses = ["skipped", "sampled_out", "over_budget", "pending", "judged"];
    var completed = statuses.reduce(function (t, k) { return t + n(k); }, 0);
    var rows = [
      ["spans", "spans received", n("spans"),
        n("duplicate_spans") + " duplicate, " + n("late_spans") + " late (their trace was " +
        "complete), " + n("rejected_spans") + " rejected (malformed ids)"],
      ["bad_lines", "bad lines", n("bad_lines"), "lines of followed files that are no OTLP request"],
      ["received", "traces received", completed, "completed, each trace id once"],
      ["skipped", "skipped", n("skipped"), "gave no row (by reason below)"],
    ];
    Object.keys(c).sort().forEach(function (key) {
      if (key.indexOf("skipped:") === 0) {
        rows.push([key, ["\u2003skipped: ", bdi(key.slice(8))], c[key], ""]);
      }
    });
    rows.push(
      ["sampled_out", "sampled out", n("sampled_out"), "left out by --sample-rate"],
      ["sampled", "sampled", n("pending") + n("over_budget") + n("judged"),
        "chosen by --sample-rate"],
      ["over_budget", "over budget", n("over_budget"), "sampled, not judged: over --budget"],
      ["pending", "pending", n("pending"), "waiting to be judged"],
      ["judged", "judged", n("judged"), "judged and recorded"],
      ["judge_requests", "judge requests", n("judge_requests"), "retries included"],
      ["judge_cache_hits", "judge cache hits", n("judge_cache_hits"),
        "judgments found in judge's cache"],
      ["open_traces", "open traces", data.open_traces || 0, "spans held until complete"]
    );
    var table = document.getElementById("counts");
    var body = el("tbody");
    rows.forEach(function (row) {
      body.appendChild(el("tr", { "data-count": row[0] }, [
        el("th", {}, typeof row[1] === "string" ? [row[1]] : row[1]),
        el("td", { className: "n", text: row[2] }),
        el("td", { className: "small", text: row[3] }),
      ]));
    });
    table.appendChild(body);
  }

  // ---- charts: per metric, each window's mean with its interval, the baseline, alerts
  function figure(win, metric, key) {
    var f = win.metrics[metric];
    return f ? f[key] : null;
  }

  function constant(value) {
    return data.windows.map(function () { return value; });
  }

  // A metric's baseline in words: its mean and interval, where it came from, the drop
  // test's reference and statistic now, or why the metric is not checked.
  function baselineNote(metric) {
    var b = data.baselines[metric] || {};
    var parts = [];
    function add(items) {
      if (parts.length) parts.push("; ");
      parts.push.apply(parts, items);
    }
    if (b.mean !== null && b.mean !== undefined) {
      add(["baseline " + interval(b) + (b.rows ? " over " + b.rows + " rows" : "")]);
    }
    if (b.source) add(["from ", bdi(b.source)]);
    if (b.reference !== null && b.reference !== undefined) add(["reference " + num(b.reference)]);
    if (b.statistic !== null && b.statistic !== undefined) {
      add(["drop test statistic now " + big(b.statistic) + " (alerts at " + big(b.threshold) +
        ")"]);
    }
    if (b.unchecked) add(["not checked for drops: ", bdi(b.unchecked)]);
    if (b.higher_is_better === false) add(["lower is better: an alert is a rise"]);
    return parts.length ? parts : ["no baseline yet"];
  }

  function drawCharts() {
    var holder = document.getElementById("charts");
    if (!data.windows.length) {
      holder.appendChild(el("p", { text: "No window closed yet." }));
      return;
    }
    data.metrics.forEach(function (metric, index) {
      var canvas = el("canvas", {
        id: "chart-" + index,
        "data-metric": metric,
        role: "img",
        "aria-label": isolated(metric) + " per window",
      });
      var alerts = data.alerts.filter(function (a) { return a.metric === metric; });
      // The latest alerts as links under the chart; the table below lists them all.
      var links = alerts.slice(-LINKED_ALERTS).map(function (a) {
        var link = el("a", {
          href: "#alert=" + a.id, className: "alert-link", "data-alert": a.id,
          text: "alert in window " + a.window,
        });
        link.addEventListener("click", function (event) {
          event.preventDefault();
          openAlert(a.id);
        });
        return link;
      });
      var box = el("div", { className: "chart", "data-metric": metric }, [
        el("h3", {}, [bdi(metric)]),
        el("p", { className: "small baseline-note" }, baselineNote(metric)),
        el("div", { className: "canvas-box" }, [canvas]),
        links.length ? el("p", { className: "small" }, links.reduce(function (parts, l, i) {
          return parts.concat(i ? [" \u00b7 ", l] : [l]);
        }, alerts.length > links.length ? [(alerts.length - links.length) +
          " earlier alerts in the table below; "] : [])) : null,
      ]);
      holder.appendChild(box);
      var b = data.baselines[metric] || {};
      var raised = data.windows.map(function (w) { return w.alerts.indexOf(metric) >= 0; });
      // Months of hourly windows: small points, or the line is hidden under them.
      var many = data.windows.length > 150;
      var radius = many ? 1.5 : 4, marker = many ? 6 : 9;
      var datasets = [
        // A window with no interval (one row, or scores all the same) breaks the band.
        { label: "95% interval", data: data.windows.map(function (w) {
          return figure(w, metric, "ci_high"); }),
        borderWidth: 0, pointRadius: 0, backgroundColor: BAND, fill: "+1", spanGaps: false },
        { label: "95% interval (low end)", data: data.windows.map(function (w) {
          return figure(w, metric, "ci_low"); }),
        borderWidth: 0, pointRadius: 0, backgroundColor: BAND, fill: false, spanGaps: false },
        {
          label: "window mean",
          data: data.windows.map(function (w) { return figure(w, metric, "mean"); }),
          borderColor: BLUE,
          backgroundColor: BLUE,
          fill: false,
          spanGaps: true,
          pointStyle: raised.map(function (r) { return r ? "triangle" : "circle"; }),
          pointRadius: raised.map(function (r) { return r ? marker : radius; }),
          pointHoverRadius: raised.map(function (r) { return r ? marker + 2 : radius + 2; }),
          pointBackgroundColor: data.windows.map(function (w, i) {
            return raised[i] ? RED : w.baseline ? "#fff" : BLUE;
          }),
          pointBorderColor: raised.map(function (r) { return r ? RED : BLUE; }),
        },
      ];
      if (b.mean !== null && b.mean !== undefined) {
        datasets.push({ label: "baseline mean", data: constant(b.mean), borderColor: GREY,
          borderWidth: 1.5, pointRadius: 0, fill: false });
      }
      if (b.ci_low !== null && b.ci_low !== undefined) {
        datasets.push(
          { label: "baseline interval", data: constant(b.ci_high), borderWidth: 0,
            pointRadius: 0, backgroundColor: GREY_BAND, fill: "+1" },
          { label: "baseline interval (low end)", data: constant(b.ci_low), borderWidth: 0,
            pointRadius: 0, backgroundColor: GREY_BAND, fill: false });
      }
      if (b.reference !== null && b.reference !== undefined) {
        datasets.push({ label: "reference", data: constant(b.reference), borderColor: GREY,
          borderDash: [6, 4], borderWidth: 1, pointRadius: 0, fill: false });
      }
      new Chart(canvas, {
        type: "line",
        data: { labels: data.windows.map(windowLabel), datasets: datasets },
        options: {
          animation: false,
          responsive: true,
          maintainAspectRatio: false,
          interaction: { mode: "index", intersect: false },
          scales: { y: { suggestedMin: 0, suggestedMax: 1 } },
          onClick: function (event, elements, chart) {
            var hit = chart.getElementsAtEventForMode(event, "index", { intersect: false }, false);
            if (!hit.length) return;
            var win = data.windows[hit[0].index];
            var found = alerts.filter(function (a) { return a.window === win.number; });
            if (found.length) openAlert(found[found.length - 1].id);
          },
          plugins: {
            legend: {
              labels: {
                filter: function (item) { return !/\(low end\)$/.test(item.text); },
              },
            },
            tooltip: {
              filter: function (item) { return !/\(low end\)$/.test(item.dataset.label); },
              callbacks: {
                title: function (items) {
                  var win = data.windows[items[0].dataIndex];
                  return windowText(win.number, win.start, win.end);
                },
                afterTitle: function (items) {
                  var win = data.windows[items[0].dataIndex];
                  var scored = figure(win, metric, "scored");
                  return (win.baseline ? "baseline window; " : "") + win.rows + " rows" +
                    (scored === null ? "" : ", " + scored + " scored") +
                    (raised[items[0].dataIndex] ? "; ALERT (click to see it)" : "");
                },
              },
            },
          },
        },
      });
    });
  }

  // ---- the alerts table; a click on a row shows the alert's worst traces
  function drawAlerts() {
    var table = document.getElementById("alerts");
    document.getElementById("alerts-note").textContent = data.alerts.length ?
      plural(data.alerts.length, "alert", "alerts") +
        ", in the order fired. Click one to see its worst traces." :
      "No alert fired.";
    if (!data.alerts.length) return;
    var head = ["#", "metric", "window", "window mean", "baseline", "reference",
      "statistic / threshold", "worst traces"];
    table.appendChild(el("thead", {}, [el("tr", {}, head.map(function (h) {
      return el("th", { text: h });
    }))]));
    var body = el("tbody");
    data.alerts.forEach(function (a) {
      var row = el("tr", { "data-alert": a.id, className: "alert-row", tabindex: 0 }, [
        el("td", { className: "n", text: a.id }),
        el("td", {}, [bdi(a.metric)]),
        el("td", { text: windowText(a.window, a.start, a.end) }),
        el("td", { className: "n", text: interval(a.current) }),
        el("td", {}, [interval(a.baseline) + (a.baseline.source ? " " : ""),
          a.baseline.source ? el("span", { className: "small" }, ["(", bdi(a.baseline.source),
            ")"]) : null]),
        el("td", { className: "n", text: num(a.reference) }),
        el("td", { className: "n", text: big(a.statistic) + " / " + big(a.threshold) }),
        el("td", { className: "n", text: a.worst.length }),
      ]);
      row.addEventListener("click", function () { openAlert(a.id); });
      row.addEventListener("keydown", function (event) {
        if (event.key === "Enter") openAlert(a.id);
      });
      body.appendChild(row);
    });
    table.appendChild(body);
  }

  function claimsTable(claims) {
    if (!claims || !claims.length) return null;
    return el("table", { className: "claims" }, [
      el("tr", {}, ["#", "claim", "verdict", "reason"].map(function (h) {
        return el("th", { text: h });
      })),
    ].concat(claims.map(function (claim) {
      return el("tr", {}, [
        el("td", { className: "n", text: claim.number === null ? "?" : claim.number }),
        el("td", { className: "text" }, [claim.claim === null ? MISSING : claim.claim]),
        el("td", { className: claim.verdict === "supported" ? "ok" : "bad",
          text: claim.verdict.replace(/_/g, " ") }),
        el("td", { className: "text" }, [claim.reason === null ? "" : claim.reason]),
      ]);
    })));
  }

  function evidenceBlock(text) {
    if (!text) return null;
    return el("details", { className: "evidence" }, [
      el("summary", { text: "the judge's evidence (JSON)" }),
      el("pre", { className: "text", text: text }),
    ]);
  }

  function traceHash(traceId) {
    return "trace=" + encodeURIComponent(traceId);
  }

  function showAlert(id) {
    var a = alertsById[id];
    if (!a) return;
    document.querySelectorAll("#alerts tbody tr").forEach(function (row) {
      row.classList.toggle("chosen", row.getAttribute("data-alert") === String(id));
    });
    var section = document.getElementById("alert-section");
    section.hidden = false;
    document.getElementById("alert-title").replaceChildren(
      "Alert " + a.id + ": ", bdi(a.metric), " in " + windowText(a.window, a.start, a.end));
    var note = document.getElementById("alert-note");
    note.replaceChildren(
      "Window mean " + interval(a.current) + " against the baseline's " +
      interval(a.baseline), a.baseline.source ? " (" : "",
      a.baseline.source ? bdi(a.baseline.source) : null, a.baseline.source ? ")" : "",
      "; reference " + num(a.reference) + "; " +
      (a.since_rows ? num(a.since_mean) + " over the " + a.since_rows +
        " scores of the evidence; " : "") +
      "statistic " + big(a.statistic) + " \u2265 " + big(a.threshold) + ". " +
      (a.worst.length === 1 ? "Its worst trace:" : "Its " + a.worst.length +
        " worst traces, worst first:"));
    var table = document.getElementById("worst");
    table.replaceChildren(el("thead", {}, [el("tr", {}, ["trace", "score",
      "the judge's claims and verdicts"].map(function (h) { return el("th", { text: h }); }))]));
    var body = el("tbody");
    a.worst.forEach(function (w) {
      var kept = Object.prototype.hasOwnProperty.call(data.traces, w.trace_id);
      var idCell = kept ? el("a", { href: "#" + traceHash(w.trace_id), className: "trace-link" },
        [el("code", {}, [bdi(w.trace_id)])]) : el("code", {}, [bdi(w.trace_id)]);
      if (kept) {
        idCell.addEventListener("click", function (event) {
          event.preventDefault();
          window.location.hash = traceHash(w.trace_id);
          showTrace(w.trace_id);
        });
      }
      body.appendChild(el("tr", { "data-trace": w.trace_id }, [
        el("td", {}, [idCell, kept ? null : el("div", { className: "small",
          text: "its row is no longer in the state" })]),
        el("td", { className: "n", text: num(w.score) }),
        el("td", {}, [claimsTable(w.claims) ||
          el("p", { className: "small", text: "no claims in the evidence" }),
        evidenceBlock(w.evidence)]),
      ]));
    });
    table.appendChild(body);
    section.scrollIntoView();
  }

  function openAlert(id) {
    window.location.hash = "alert=" + id;
    showAlert(id);
  }

  function showTrace(traceId) {
    // Own rows alone: a link naming "constructor" or "toString" is no trace of the page.
    var t = Object.prototype.hasOwnProperty.call(data.traces, traceId) ?
      data.traces[traceId] : null;
    var section = document.getElementById("trace-section");
    var holder = document.getElementById("trace");
    var note = document.getElementById("trace-note");
    section.hidden = false;
    holder.replaceChildren();
    document.getElementById("trace-title").replaceChildren("Trace ", el("code", {},
      [bdi(traceId)]));
    if (!t) {
      note.className = "bad";
      note.textContent = "The state keeps no judged row of this trace.";
      return;
    }
    note.className = "small";
    note.textContent = "The row judged, as the monitor made it from the trace" +
      (t.start_time ? ", started " + when(t.start_time) : "") +
      (t.window === null || t.window === undefined ? "" : ", in window " + t.window) + ".";
    var metrics = Object.keys(t.scores);
    holder.appendChild(el("table", { className: "scores" }, [
      el("tr", {}, metrics.map(function (m) { return el("th", {}, [bdi(m)]); })),
      el("tr", {}, metrics.map(function (m) {
        var error = t.errors[m];
        return el("td", { className: "n", text: num(t.scores[m]),
          title: error ? isolated(error) : null });
      })),
    ]));
    holder.appendChild(el("div", { className: "said" }, [el("b", { text: "question " }),
      el("span", { className: "text question" }, [t.question === null ? MISSING : t.question])]));
    holder.appendChild(el("div", { className: "said" }, [el("b", { text: "answer " }),
      el("span", { className: "text answer" }, [t.answer === null ? MISSING : t.answer])]));
    holder.appendChild(el("div", {}, [el("b", { text: "contexts" })]));
    holder.appendChild(t.contexts.length ? el("ol", { className: "contexts" },
      t.contexts.map(function (c) { return el("li", { className: "text" }, [c]); })) :
      el("p", { className: "small", text: "no contexts" }));
    if (t.more_contexts) {
      holder.appendChild(el("p", { className: "small",
        text: t.more_contexts + " more contexts not shown" }));
    }
    holder.appendChild(el("div", {}, [el("b", { text: "claims of the answer" })]));
    holder.appendChild(claimsTable(t.claims) ||
      el("p", { className: "small", text: "no claims judged" }));
    Object.keys(t.errors).forEach(function (m) {
      holder.appendChild(el("p", { className: "bad" }, [bdi(m), ": ", bdi(t.errors[m])]));
    });
    var evidence = evidenceBlock(t.evidence);
    if (evidence) holder.appendChild(evidence);
    section.scrollIntoView();
  }

  function fromHash() {
    var hash = window.location.hash;
    var trace = /^#trace=(.+)$/.exec(hash);
    if (trace) {
      var id = trace[1];
      try {
        id = decodeURIComponent(id);
      } catch (error) { // a malformed escape in a link: shown as it is
      }
      showTrace(id);
      return;
    }
    var alert = /^#alert=(\d+)$/.exec(hash);
    if (alert) showAlert(Number(alert[1]));
  }

  if (!data) {
    document.body.appendChild(el("p", { className: "bad",
      text: "data.js is missing or damaged: build the view again with judge view --monitor" }));
    return;
  }
  data.alerts.forEach(function (a) { alertsById[a.id] = a; });
  drawSettings();
  drawCounts();
  drawCharts();
  drawAlerts();
  fromHash();
})();
