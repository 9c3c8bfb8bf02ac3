/* Bifocal's live dashboard: three pages drawn from the JSON API of
 * `bifocal dashboard` (docs/dashboard.md) with the report's parts
 * (report.js): all sweeps; one sweep (live progress of its running jobs,
 * the structure-gap figure and comparison as jobs finish, the job table
 * filtered by any swept field and status); one job (config, attempts,
 * training curves, evaluations per depth, frequency trajectories of every
 * learnable head).  Each page polls every poll_ms; the sweep page holds
 * one page of the job table (the server filters and sorts) and fetches it
 * again when the counts move, the job page asks only for the curves'
 * buckets since its cursor, so nothing whole is fetched again. */
"use strict";

var BifocalDashboard = (function () {
  var R = BifocalReport, el = R.el, fmt = R.fmt;
  var config = { poll_ms: 1000 };
  var statusLine = null;

  /* ---- plumbing ---------------------------------------------------------- */

  function api(path) {
    return fetch(path, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        return r.json().then(function (body) {
          if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
          return body;
        });
      });
  }

  /* Runs step (a function returning a promise) now and again poll_ms after
   * each end, until it resolves to false.  A failure is shown, not thrown,
   * and the poll goes on (the dashboard or the network may come back). */
  function poll(step) {
    function again(delay) { setTimeout(tick, delay); }
    function tick() {
      step().then(function (more) {
        setStatus("updated " + new Date().toLocaleTimeString(), false);
        if (more !== false) again(config.poll_ms);
      }, function (e) {
        setStatus("not updated: " + e.message, true);
        again(config.poll_ms * 3);
      });
    }
    tick();
  }

  function setStatus(text, stale) {
    if (!statusLine) return;
    statusLine.textContent = text;
    statusLine.className = "bf-status" + (stale ? " bf-stale" : "");
  }

  function time(ms) {
    return ms === null || ms === undefined ? "" : new Date(ms).toLocaleString();
  }

  function duration(s) {
    if (s === null || s === undefined || !isFinite(s)) return "";
    if (s >= 3600) return Math.floor(s / 3600) + "h" + ("0" + Math.floor(s / 60) % 60).slice(-2) + "m";
    if (s >= 60) return Math.floor(s / 60) + "m" + ("0" + Math.floor(s) % 60).slice(-2) + "s";
    return s.toFixed(1) + "s";
  }

  function bar(fraction, small) {
    var f = Math.max(0, Math.min(1, fraction || 0));
    return el("span", { class: "bf-bar" + (small ? " bf-small" : ""),
                        title: Math.round(100 * f) + "%" },
              [el("span", { style: "width:" + (100 * f).toFixed(1) + "%" })]);
  }

  function link(href, text) { return el("a", { href: href, text: String(text) }); }

  function statusCell(s) { return el("span", { class: "bf-status-" + s, text: s }); }

  /* A table whose cells may be nodes; columns: {title, get(row)}. */
  function liveTable(parent, rows, columns, cls) {
    var t = el("table", { class: cls || "bf-table" });
    t.appendChild(el("thead", {}, [el("tr", {}, columns.map(function (c) {
      return el("th", { text: c.title });
    }))]));
    var body = el("tbody");
    rows.forEach(function (r) {
      body.appendChild(el("tr", {}, columns.map(function (c) {
        var v = c.get(r);
        if (v instanceof Node) return el("td", {}, [v]);
        return el("td", { text: typeof v === "number" ? fmt(v) : (v === null || v === undefined ? "" : R.short(v)) });
      })));
    });
    t.appendChild(body);
    parent.textContent = "";
    parent.appendChild(el("div", { class: "bf-scroll" }, [t]));
  }

  function header(root, title, links) {
    root.appendChild(el("nav", { class: "bf-nav" }, links));
    root.appendChild(el("h1", { text: title }));
    statusLine = el("div", { class: "bf-status" });
    root.appendChild(statusLine);
  }

  function workersNote(w) {
    if (!w) return el("span");
    if (w.connected > 0)
      return el("span", { text: w.connected + " worker" + (w.connected === 1 ? "" : "s") + " connected" });
    return el("div", { class: "bf-warn" }, [
      document.createTextNode("0 workers connected: start one with "),
      el("code", { text: w.hint })]);
  }

  /* Jobs of a sweep's counts (a sweep_progress row) that ended. */
  function ended(c) {
    return c.succeeded + c.failed + c.cancelled + c.pruned;
  }

  function countsLine(parent, c, eta, workers) {
    var done = ended(c);
    parent.textContent = "";
    parent.appendChild(bar(c.total ? done / c.total : 0));
    [done + "/" + c.total + " ended", "running " + c.running, "queued " + c.queued,
     "succeeded " + c.succeeded, "failed " + c.failed, "cancelled " + c.cancelled,
     "pruned " + c.pruned,
     "status " + c.status, "ETA " + (eta === null || eta === undefined ? "?" : duration(eta))]
      .forEach(function (t) { parent.appendChild(el("span", { text: t })); });
    if (workers && c.status === "active" && workers.connected === 0 && c.queued > 0)
      parent.appendChild(workersNote(workers));
  }

  /* ---- all sweeps -------------------------------------------------------- */

  function sweepsPage(root) {
    header(root, "Sweeps", [link("/", "all sweeps")]);
    var workers = el("div", { class: "bf-counts" }), holder = el("div");
    root.appendChild(workers);
    root.appendChild(holder);
    poll(function () {
      return api("/api/sweeps").then(function (d) {
        workers.textContent = "";
        workers.appendChild(workersNote(d.workers));
        liveTable(holder, d.sweeps, [
          { title: "sweep", get: function (s) { return link("/sweeps/" + s.sweep_id, s.sweep_id); } },
          { title: "name", get: function (s) { return s.name; } },
          { title: "status", get: function (s) { return s.status; } },
          { title: "progress", get: function (s) {
              return bar(s.total ? ended(s) / s.total : 0); } },
          { title: "ended", get: function (s) { return ended(s) + "/" + s.total; } },
          { title: "running", get: function (s) { return s.running; } },
          { title: "queued", get: function (s) { return s.queued; } },
          { title: "failed", get: function (s) { return s.failed; } },
          { title: "ETA", get: function (s) { return duration(s.eta_s); } },
          { title: "file", get: function (s) { return s.filename; } },
          { title: "submitted", get: function (s) { return time(s.submitted_ms); } },
        ], "bf-table bf-sweeps");
      });
    });
  }

  /* ---- one sweep --------------------------------------------------------- */

  var JOB_COLUMNS = ["status", "train_loss", "eval_loss", "eval_accuracy",
                     "ood_depth", "ood_loss", "ood_accuracy", "started", "took",
                     "error"];
  var STATUSES = ["waiting", "queued", "running", "succeeded", "failed", "cancelled",
                  "pruned"];
  var PAGE_ROWS = 100;

  /* The sweep page.  The job table is a page of the server's (filtered and
   * sorted there): the page holds PAGE_ROWS rows whatever the sweep's size,
   * and fetches its page again when the counts move. */
  function sweepPage(root, id) {
    var st = { summary: null, counts: null, filters: {}, sort: "job_id", desc: false,
               offset: 0, total: 0 };
    header(root, "Sweep " + id, [link("/", "all sweeps")]);
    var counts = el("div", { class: "bf-counts" });
    root.appendChild(counts);
    var running = R.section(root, "Running jobs",
      "Newest logged step of each running job, its loss, throughput and ETA " +
      "from its observed step rate.");
    var runningBox = el("div");
    running.appendChild(runningBox);
    var summaryBox = el("div");
    root.appendChild(summaryBox);
    var jobsSec = R.section(root, "Jobs", "Every job of the sweep; filter by " +
                            "status and by any swept field, sort by a column title.");
    var filters = el("div", { class: "bf-filters" }), pager = el("div", { class: "bf-pager" }),
        jobsBox = el("div");
    jobsSec.appendChild(filters);
    jobsSec.appendChild(pager);
    jobsSec.appendChild(jobsBox);

    function renderSummary() {
      var s = st.summary;
      document.querySelector("h1").textContent = "Sweep " + id + ": " + s.sweep.name;
      summaryBox.textContent = "";
      R.adaptiveSection(summaryBox, s);
      if (s.compare === null) {   /* a sweep just read: computed next */
        R.section(summaryBox, "Structure gap",
                  "Comparing the succeeded jobs...");
      } else if (s.compare.length) {
        R.depthFigures(summaryBox, s);
        R.compareSection(summaryBox, s);
      } else {
        R.section(summaryBox, "Structure gap",
                  "Drawn once a job has succeeded.");
      }
    }

    /* A select per field: its values as the server lists them (JSON text,
     * so 64 and "64" or two close seeds stay apart). */
    function renderFilters() {
      filters.textContent = "";
      var fields = [["status", STATUSES]].concat(st.summary.varying.map(function (f) {
        return [f, st.summary.values ? st.summary.values[f] : null];
      }));
      fields.forEach(function (fv) {
        var field = fv[0], values = fv[1];
        if (!values) return;      /* too many to list (seeds of a huge sweep) */
        var pick = el("select", { "data-field": field });
        pick.appendChild(el("option", { value: "", text: "any" }));
        values.forEach(function (v) {
          pick.appendChild(el("option", { value: JSON.stringify(v),
                                          text: typeof v === "number" ? fmt(v) : String(v) }));
        });
        pick.value = st.filters[field] || "";
        if (pick.value !== (st.filters[field] || "")) delete st.filters[field];
        pick.addEventListener("change", function () {
          if (pick.value) st.filters[field] = pick.value;
          else delete st.filters[field];
          st.offset = 0;
          loadPage();
        });
        filters.appendChild(el("label", {}, [document.createTextNode(field + " "), pick]));
      });
    }

    function pageQuery() {
      var q = ["offset=" + st.offset, "limit=" + PAGE_ROWS,
               "sort=" + encodeURIComponent(st.sort), "desc=" + (st.desc ? 1 : 0)];
      Object.keys(st.filters).forEach(function (f) {
        var v = f === "status" ? JSON.parse(st.filters[f]) : st.filters[f];
        q.push(encodeURIComponent(f) + "=" + encodeURIComponent(v));
      });
      return q.join("&");
    }

    function sortable(field) {
      return field === "job_id" || field === "status" ||
             (st.summary && st.summary.varying.indexOf(field) >= 0);
    }

    function renderJobs(rows) {
      var cols = [{ title: "job", field: "job_id",
                    get: function (r) { return link("/jobs/" + r.job_id, r.job_id); } }];
      st.summary.varying.forEach(function (f) {
        cols.push({ title: f, field: f, get: function (r) { return r[f]; } });
      });
      JOB_COLUMNS.forEach(function (k) {
        cols.push({ title: k.replace(/_/g, " "), field: k, get: k === "status"
          ? function (r) { return statusCell(r.status); } : function (r) { return r[k]; } });
      });
      liveTable(jobsBox, rows, cols, "bf-table bf-jobs");
      jobsBox.querySelectorAll("th").forEach(function (th, i) {
        var f = cols[i].field;
        if (!sortable(f)) return;
        th.classList.add("bf-sortable");
        if (f === st.sort) th.textContent += st.desc ? " \u25bc" : " \u25b2";
        th.addEventListener("click", function () {
          st.desc = st.sort === f ? !st.desc : false;
          st.sort = f;
          st.offset = 0;
          loadPage();
        });
      });
    }

    function renderPager() {
      pager.textContent = "";
      var first = st.total ? st.offset + 1 : 0, last = Math.min(st.offset + PAGE_ROWS, st.total);
      var prev = el("button", { text: "previous", class: "bf-prev" }),
          next = el("button", { text: "next", class: "bf-next" });
      prev.disabled = st.offset === 0;
      next.disabled = last >= st.total;
      prev.addEventListener("click", function () {
        st.offset = Math.max(0, st.offset - PAGE_ROWS); loadPage(); });
      next.addEventListener("click", function () { st.offset += PAGE_ROWS; loadPage(); });
      pager.appendChild(prev);
      pager.appendChild(el("span", { class: "bf-rows",
        text: "jobs " + first + "-" + last + " of " + st.total }));
      pager.appendChild(next);
      jobsSec.querySelector(".bf-note").textContent = st.total + " of " +
        (st.counts ? st.counts.total : "?") + " jobs match; filter by status and " +
        "by any swept field, sort by a column title.";
    }

    function loadPage() {
      var asked = pageQuery();
      return api("/api/sweeps/" + id + "/jobs?" + asked).then(function (p) {
        if (p.pending || asked !== pageQuery()) return;   /* a newer one is on its way */
        st.total = p.total;
        renderJobs(p.jobs);
        renderPager();
      });
    }

    function loadSummary() {
      return api("/api/sweeps/" + id).then(function (s) {
        if (s.pending) {
          summaryBox.textContent = "";
          summaryBox.appendChild(el("p", { class: "bf-note",
            text: "Reading the sweep's jobs..." }));
          return false;
        }
        var first = !st.summary;
        st.summary = s;
        renderSummary();
        renderFilters();
        return first ? loadPage() : true;
      });
    }

    function renderRunning(live) {
      if (!live.running.length) {
        runningBox.textContent = "";
        runningBox.appendChild(el("p", { class: "bf-note", text: "No job is running." }));
        return;
      }
      var varying = st.summary ? st.summary.varying : [];
      var cols = [{ title: "job", get: function (r) { return link("/jobs/" + r.job_id, r.job_id); } }];
      varying.forEach(function (f) {
        cols.push({ title: f, get: function (r) { return r.fields[f]; } });
      });
      cols.push(
        { title: "progress", get: function (r) { return bar(r.steps ? (r.step || 0) / r.steps : 0, true); } },
        { title: "step", get: function (r) { return (r.step === null ? 0 : r.step) + "/" + r.steps; } },
        { title: "loss", get: function (r) { return typeof r.loss === "number" ? fmt(r.loss) : r.loss; } },
        { title: "tokens/s", get: function (r) { return r.tokens_per_s === null ? "" : Math.round(r.tokens_per_s); } },
        { title: "ETA", get: function (r) { return duration(r.eta_s); } },
        { title: "worker", get: function (r) { return r.worker; } },
        { title: "attempt", get: function (r) { return r.attempt_no; } });
      liveTable(runningBox, live.running, cols, "bf-table bf-running");
    }

    function update() {
      return api("/api/sweeps/" + id + "/live").then(function (live) {
        renderRunning(live);
        if (live.pending || !live.counts) return;
        countsLine(counts, live.counts, live.eta_s, live.workers);
        var moved = JSON.stringify(live.counts) !== JSON.stringify(st.counts);
        st.counts = live.counts;
        /* A new success changes the summary (its comparison), which a
         * sweep just read has yet to compute; any move
         * changes the job table's statuses, the first load of the summary
         * loads the table itself. */
        var work = [];
        if (!st.summary || st.summary.compare === null ||
            st.summary.counts.succeeded !== live.counts.succeeded ||
            st.summary.counts.total !== live.counts.total)
          work.push(loadSummary());
        if (moved && st.summary)
          work.push(loadPage());
        return Promise.all(work);
      });
    }

    poll(update);
  }

  /* ---- one job ----------------------------------------------------------- */

  /* Drops what a reply from `since` on replaces, then appends it. */
  function mergeSeries(held, fresh, since, keys) {
    var keep = held.step.filter(function (s) { return s < since; }).length;
    keys.forEach(function (k) { held[k] = held[k].slice(0, keep).concat(fresh[k]); });
    held.step = held.step.slice(0, keep).concat(fresh.step);
  }

  function mergeCurves(held, fresh) {
    var since = fresh.since;
    Object.keys(fresh.metrics).forEach(function (k) {
      if (!held.metrics[k]) held.metrics[k] = fresh.metrics[k];
      else mergeSeries(held.metrics[k], fresh.metrics[k], since, ["mean", "min", "max"]);
    });
    fresh.evals.forEach(function (e) {
      var h = held.evals.filter(function (x) { return x.depth === e.depth; })[0];
      if (!h) held.evals.push(e);
      else mergeSeries(h, e, since, ["loss", "accuracy"]);
    });
    fresh.frequencies.forEach(function (f) {
      var h = held.frequencies.filter(function (x) {
        return x.layer === f.layer && x.head === f.head; })[0];
      if (!h) { held.frequencies.push(f); return; }
      var keep = h.step.filter(function (s) { return s < since; }).length;
      h.ratio = f.ratio.map(function (ys, p) {
        return (h.ratio[p] || h.step.map(function () { return null; })).slice(0, keep).concat(ys);
      });
      h.step = h.step.slice(0, keep).concat(f.step);
    });
    held.metric_keys = fresh.metric_keys;
    held.next_since = fresh.next_since;
  }

  function jobPage(root, id) {
    header(root, "Job " + id, [link("/", "all sweeps")]);
    var nav = root.querySelector("nav");
    var facts = el("div"), progress = el("div", { class: "bf-counts" });
    root.appendChild(facts);
    root.appendChild(progress);
    var train = R.section(root, "Training", "Downsampled to the page's width: " +
      "per bucket of steps the mean (loss: with its min-max band).");
    var evalSec = R.section(root, "Evaluation", "Accuracy and loss at each " +
      "evaluated depth over the steps.");
    var freqSec = R.section(root, "Learned frequencies", "log(omega(step) / " +
      "omega(first recorded)) of every learnable pair as a heatmap; the raw " +
      "lines, one figure per learnable head, on demand.");
    var freqRaw = el("input", { type: "checkbox", id: "bf-freq-lines" });
    var freqBox = el("div", { class: "bf-heads" });
    freqSec.appendChild(freqBox);
    var attemptsSec = R.section(root, "Attempts", "Every lease of the job: " +
      "worker, times, outcome and error.");
    var attemptsBox = el("div");
    attemptsSec.appendChild(attemptsBox);
    var configSec = R.section(root, "Config", "The job's full configuration.");
    var configBox = el("pre", { class: "bf-config" });
    configSec.appendChild(configBox);

    var curves = null, figs = {}, width = Math.max(16, Math.min(4096,
      Math.round(train.clientWidth || 1000)));
    var sweepLinked = false;

    function draw(parent, key, spec) {
      if (figs[key]) figs[key].update(spec);
      else figs[key] = R.figure(parent, spec);
    }

    function drawCurves() {
      /* The training metrics are the server's (metric_keys: common/records.h). */
      curves.metric_keys.forEach(function (m, i) {
        var s = curves.metrics[m.key];
        if (!s || !s.step.length) return;
        draw(train, m.key, { id: "fig-" + m.key.replace(/_/g, "-"), title: m.title,
          xLabel: "step", yLabel: m.key, x: s.step, logY: !!m.log, logToggle: !!m.log,
          height: 240,
          series: [{ label: m.key, color: R.color(i), y: s.mean,
                     low: m.band ? s.min : null, high: m.band ? s.max : null }] });
      });
      if (curves.evals.length) {
        var a = R.align(curves.evals.map(function (e) { return { x: e.step }; }));
        ["accuracy", "loss"].forEach(function (k) {
          draw(evalSec, "eval-" + k, { id: "fig-eval-" + k, title: "Eval " + k + " per depth",
            xLabel: "step", yLabel: k, x: a.x, height: 260, logToggle: k === "loss",
            series: curves.evals.map(function (e, i) {
              return { label: "depth " + e.depth, color: R.color(i), y: a.on({ x: e.step }, e[k]) };
            }) });
        });
      }
      drawFrequencies();
    }

    /* Every learnable pair as a row of one heatmap (hundreds stay
     * readable); the raw lines per head on demand, their legend only
     * while a head has at most a dozen pairs. */
    function drawFrequencies() {
      if (!curves.frequencies.length) return;
      var a = R.align(curves.frequencies.map(function (h) { return { x: h.step }; }));
      var rows = [];
      curves.frequencies.forEach(function (h) {
        h.ratio.forEach(function (ys, p) {
          rows.push({ layer: h.layer, head: h.head, pair: p, y: a.on({ x: h.step }, ys) });
        });
      });
      var spec = { id: "fig-freq-heatmap", title: "log(omega / omega(0)) over training",
                   x: a.x, rows: rows };
      if (figs.heatmap) figs.heatmap.update(spec);
      else figs.heatmap = R.heatmap(freqLinesToggle(), spec);
      if (!freqRaw.checked) {
        Object.keys(figs).forEach(function (k) { if (/^freq-/.test(k)) delete figs[k]; });
        freqBox.textContent = "";
        return;
      }
      curves.frequencies.forEach(function (h) {
        draw(freqBox, "freq-" + h.layer + "-" + h.head, {
          id: "fig-freq-l" + h.layer + "-h" + h.head,
          title: "Layer " + h.layer + ", head " + h.head + ": omega / omega(0)",
          xLabel: "step", yLabel: "ratio", x: h.step, height: 220,
          legend: h.ratio.length <= 12,
          series: h.ratio.map(function (ys, p) {
            return { label: "pair " + p, color: R.color(p), y: ys };
          }) });
      });
    }

    /* The heatmap's place, after the "raw lines" switch (made once). */
    function freqLinesToggle() {
      freqSec.insertBefore(el("div", { class: "bf-tools" }, [el("label", {}, [
        freqRaw, document.createTextNode(" raw lines, one figure per head")])]), freqBox);
      var place = el("div");
      freqSec.insertBefore(place, freqBox);
      freqRaw.addEventListener("change", drawFrequencies);
      return place;
    }

    function noteEmpty() {
      [[train, curves && Object.keys(curves.metrics).length, "No training metrics yet."],
       [evalSec, curves && curves.evals.length, "No evaluation yet."],
       [freqSec, curves && curves.frequencies.length,
        "No learned frequencies (this job's heads are all geometric, or none recorded yet)."]]
        .forEach(function (x) {
          var p = x[0].querySelector(".bf-empty");
          if (x[1] && p) p.remove();
          if (!x[1] && !p) x[0].appendChild(el("p", { class: "bf-note bf-empty", text: x[2] }));
        });
    }

    function renderJob(d) {
      var j = d.job;
      if (!sweepLinked) {
        nav.appendChild(link("/sweeps/" + j.sweep_id, "sweep " + j.sweep_id + ": " + j.sweep_name));
        sweepLinked = true;
      }
      var fields = Object.keys(d.fields).map(function (k) {
        var v = d.fields[k];
        return k + "=" + (typeof v === "string" ? v : JSON.stringify(v));
      });
      document.querySelector("h1").textContent = R.short("Job " + id + (fields.length ? ": " + fields.join(" ") : ""));
      facts.textContent = "";
      var line = el("div", { class: "bf-counts" }, [statusCell(j.status),
        el("span", { text: "attempts " + j.attempts }),
        el("span", { text: "started " + (time(j.started_ms) || "-") }),
        el("span", { text: "finished " + (time(j.finished_ms) || "-") }),
        el("span", { text: "checkpoint step " + (j.checkpoint_step === null ? "-" : j.checkpoint_step) })]);
      facts.appendChild(line);
      if (j.error) facts.appendChild(el("div", { class: "bf-error", text: j.error }));
      progress.textContent = "";
      if (d.live) {
        var l = d.live;
        progress.appendChild(bar(l.steps ? (l.step || 0) / l.steps : 0));
        ["step " + (l.step || 0) + "/" + l.steps,
         "loss " + (typeof l.loss === "number" ? fmt(l.loss) : l.loss),
         "tokens/s " + (l.tokens_per_s === null ? "?" : Math.round(l.tokens_per_s)),
         "ETA " + (l.eta_s === null ? "?" : duration(l.eta_s)),
         "on " + l.worker].forEach(function (t) { progress.appendChild(el("span", { text: t })); });
      }
      liveTable(attemptsBox, d.attempts, [
        { title: "attempt", get: function (a) { return a.attempt_no; } },
        { title: "worker", get: function (a) { return a.worker; } },
        { title: "started", get: function (a) { return time(a.started_ms); } },
        { title: "ended", get: function (a) { return time(a.ended_ms); } },
        { title: "outcome", get: function (a) { return statusCell(a.outcome); } },
        { title: "error", get: function (a) { return a.error; } },
      ], "bf-table bf-attempts");
      configBox.textContent = JSON.stringify(j.config, null, 2);
    }

    var last = false;
    poll(function () {
      var q = "/api/jobs/" + id + "/curves?width=" + width +
              (curves ? "&since=" + curves.next_since : "");
      return Promise.all([api("/api/jobs/" + id), api(q)]).then(function (r) {
        renderJob(r[0]);
        if (!curves) curves = r[1];
        else mergeCurves(curves, r[1]);
        drawCurves();
        noteEmpty();
        /* One more poll after the job ends picks up its last rows. */
        var open = r[0].job.status === "running" || r[0].job.status === "queued";
        if (open) { last = false; return true; }
        if (last) return false;
        last = true;
        return true;
      });
    });
  }

  /* ---- start ------------------------------------------------------------- */

  function start(root, cfg) {
    config = cfg || config;
    var m;
    if ((m = location.pathname.match(/^\/sweeps\/(\d+)$/))) sweepPage(root, Number(m[1]));
    else if ((m = location.pathname.match(/^\/jobs\/(\d+)$/))) jobPage(root, Number(m[1]));
    else sweepsPage(root);
  }

  return { start: start, mergeCurves: mergeCurves };
})();
