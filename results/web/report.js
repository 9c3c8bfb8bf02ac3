/* Bifocal's front-end: draws a sweep's report from the JSON that the C
 * client produces (`bifocal report --json`, docs/results.md) with uPlot.
 * `BifocalReport.render(element, data)` fills the element; the page of
 * `bifocal report` calls it with the data inlined.  The dashboard's pages
 * (dashboard.js) are built of the same parts: figures (which it updates in
 * place as data arrives), tables, the structure-gap figures and the
 * comparison.  Every figure shows values on hover (uPlot's
 * legend), toggles a group by a click on its legend entry, and saves as PNG
 * and its data as CSV.  window.bifocalFigures lists the figures drawn. */
"use strict";

var BifocalReport = (function () {
  /* 24 qualitative colours, a group's by its index in the report's groups
   * (data.groups), so a group keeps its colour in every figure; past 24
   * the colours repeat dashed (dashOf).  The greys come last: a grey line
   * reads as a reference, not a group. */
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                 "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79",
                 "#ad494a", "#637939", "#8c6d31", "#7b4173", "#00a087",
                 "#e6550d", "#3182bd", "#f781bf", "#4dac26", "#a65628",
                 "#6baed6", "#fdae6b", "#7f7f7f", "#636363"];

  function color(i) { return PALETTE[i % PALETTE.length]; }

  function dashOf(i) { return i >= PALETTE.length ? [6, 3] : undefined; }

  function fade(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) +
           "," + alpha + ")";
  }

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { e.appendChild(c); });
    return e;
  }

  /* A number as a table cell: integers (steps, seeds, counts) exactly,
   * others to `digits` significant digits (4). */
  function fmt(x, digits) {
    if (x === null || x === undefined || !isFinite(x)) return "";
    if (Number.isSafeInteger(Number(x))) return String(Number(x));
    return Number(x).toPrecision(digits || 4).replace(/\.?0+(e|$)/, "$1");
  }

  /* Every decimal number in a text to 4 significant digits (a group's
   * label carries the config's full precision: lr=0.00010000000000000009
   * reads lr=0.0001); integers stay as they are. */
  function short(text) {
    return String(text).replace(/-?(?:\d*\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+)/gi,
                                function (m) { return fmt(Number(m)); });
  }

  /* An axis tick: 4 significant digits, powers of ten beyond 1e-3 .. 1e6
   * as 1e-4 (uPlot's own ticks keep a few decimals: a learning rate's
   * axis read 0, 0, 0). */
  function tick(v) {
    if (v === null || v === undefined) return "";
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6))
      return Number(v).toExponential(3).replace(/\.?0+e/, "e").replace("e+", "e");
    return fmt(Number(Number(v).toPrecision(12)));
  }

  function ticks(u, splits) { return splits.map(tick); }

  function download(name, href) {
    var a = el("a", { href: href, download: name });
    document.body.appendChild(a);
    a.click();
    a.remove();
  }

  /* ---- figures ---------------------------------------------------------- */

  /* spec: {id, title, xLabel, yLabel, x: [...], series: [{label, y, color,
   * low, high, dash}], logY, logToggle, xTicksAtData, marks: [{x, label}]}.  Bands (low/high) are
   * drawn as two hidden series filled between, shown and hidden with their
   * line. */
  function figure(parent, spec) {
    var box = el("figure", { class: "bf-figure", id: spec.id });
    box.appendChild(el("figcaption", { text: short(spec.title) }));
    var tools = el("div", { class: "bf-tools" });
    box.appendChild(tools);
    var plotBox = el("div", { class: "bf-plot" });
    box.appendChild(plotBox);
    if (spec.key) box.appendChild(keyOf(spec.key));
    parent.appendChild(box);

    var state = { logY: !!spec.logY, plot: null, spec: spec };
    function build() {
      if (state.plot) state.plot.destroy();
      state.plot = makePlot(plotBox, state.spec, state.logY);
      registry[spec.id] = { id: spec.id, title: spec.title, plot: state.plot,
                            spec: spec };
    }
    /* New data for the same figure (a live page): redrawn in place when
     * the series are the same, rebuilt when they are not. */
    state.update = function (next) {
      var same = next.series.length === state.spec.series.length &&
        next.series.every(function (s, i) {
          var old = state.spec.series[i];
          return s.label === old.label && !s.low === !old.low &&
                 (s.seeds || []).length === (old.seeds || []).length;
        });
      state.spec = next;
      if (same) state.plot.setData(plotData(next, state.logY).data);
      else build();
    };
    if (spec.logToggle) {
      var cb = el("input", { type: "checkbox" });
      cb.checked = state.logY;
      cb.addEventListener("change", function () { state.logY = cb.checked; build(); });
      tools.appendChild(el("label", {}, [cb, document.createTextNode(" log scale")]));
    }
    var png = el("button", { type: "button", text: "PNG" });
    png.addEventListener("click", function () { savePng(state.plot, state.spec); });
    var csv = el("button", { type: "button", text: "CSV" });
    csv.addEventListener("click", function () { saveCsv(state.spec); });
    tools.appendChild(png);
    tools.appendChild(csv);
    build();
    return state;
  }

  /* A key of at most MAX_KEY entries [{label, color}] (a figure whose
   * uPlot legend would list hundreds of lines shows this instead). */
  var MAX_KEY = 12;
  function keyOf(entries) {
    var key = el("div", { class: "bf-key" });
    entries.slice(0, MAX_KEY).forEach(function (e) {
      key.appendChild(el("span", { class: "bf-key-entry" }, [
        el("span", { class: "bf-swatch", style: "background:" + e.color }),
        document.createTextNode(short(e.label))]));
    });
    return key;
  }

  /* -1 (blue) .. 0 (white) .. +1 (red). */
  function diverging(t) {
    t = Math.max(-1, Math.min(1, t));
    var a = Math.round(255 * (1 - Math.abs(t)));
    return t < 0 ? "rgb(" + a + "," + a + ",255)" : "rgb(255," + a + "," + a + ")";
  }

  /* A heatmap of log(ratio) with rows (layer, head, pair) and columns the
   * steps: hundreds of learnable pairs stay readable where as many lines
   * would not.  spec: {id, title, x: steps, rows: [{layer, head, pair,
   * y: ratios}], max}; the colour scale is symmetric about 0 (no change)
   * up to max, the largest |log ratio| of every heatmap of the page
   * (maxLogRatio), so one colour means one change in all of them; its bar
   * is the only key.  Registered like
   * the uPlot figures (data, series, ctx) for the tests.  Returns
   * {update(spec)}. */
  function heatmap(parent, spec) {
    var canvas = el("canvas", { class: "bf-heatmap" }), bar = el("div", { class: "bf-key" });
    var box = el("figure", { class: "bf-figure", id: spec.id },
                 [el("figcaption", { text: spec.title }), canvas, bar]);
    parent.appendChild(box);
    var state = {};
    state.update = function (next) {
      spec = next;
      var scale = drawHeatmap(canvas, bar, spec);
      registry[spec.id] = { id: spec.id, title: spec.title, spec: {
        yLabel: "omega / omega(0)", logY: true, scale: scale,
        series: spec.rows.map(function (r) { return { label: rowLabel(r), y: r.y }; }) },
        plot: { root: box, ctx: canvas.getContext("2d"),
                series: [{}].concat(spec.rows),
                data: [spec.x].concat(spec.rows.map(function (r) { return r.y; })) } };
    };
    state.update(spec);
    return state;
  }

  /* The largest |log ratio| of lists of heatmap rows (1e-9 for none). */
  function maxLogRatio(lists) {
    var max = 0;
    lists.forEach(function (rows) {
      rows.forEach(function (r) {
        r.y.forEach(function (v) { if (v > 0) max = Math.max(max, Math.abs(Math.log(v))); });
      });
    });
    return max > 0 ? max : 1e-9;
  }

  function rowLabel(r) { return "L" + r.layer + " H" + r.head + " p" + r.pair; }

  function drawHeatmap(canvas, bar, spec) {
    var rows = spec.rows, nx = spec.x.length, dpr = window.devicePixelRatio || 1;
    var left = 70, top = 6, bottom = 34, width = 900;
    var rowH = Math.max(1, Math.min(12, Math.floor(520 / Math.max(1, rows.length))));
    var height = top + rows.length * rowH + bottom, cellW = (width - left - 10) / Math.max(1, nx);
    canvas.width = width * dpr;
    canvas.height = height * dpr;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    var ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    var max = spec.max || maxLogRatio([rows]);
    rows.forEach(function (r, i) {
      r.y.forEach(function (v, j) {
        if (!(v > 0)) return;
        ctx.fillStyle = diverging(Math.log(v) / max);
        ctx.fillRect(left + j * cellW, top + i * rowH, Math.ceil(cellW), rowH);
      });
    });
    ctx.fillStyle = "#333";
    ctx.strokeStyle = "#999";
    ctx.font = "10px sans-serif";
    var last = null, labelled = -1e9;
    rows.forEach(function (r, i) {
      var head = r.layer + "/" + r.head, y = top + i * rowH;
      if (head === last) return;
      last = head;
      ctx.beginPath();
      ctx.moveTo(left, y);
      ctx.lineTo(width - 10, y);
      ctx.stroke();
      if (y - labelled >= 11) {
        ctx.fillText("L" + r.layer + " H" + r.head, 4, y + 10);
        labelled = y;
      }
    });
    var ticks = Math.min(nx, 6), yAxis = top + rows.length * rowH;
    for (var t = 0; t < ticks; t++) {
      var j = ticks > 1 ? Math.round(t * (nx - 1) / (ticks - 1)) : 0;
      ctx.fillText(tick(spec.x[j]), left + (j + 0.5) * cellW - 8, yAxis + 14);
    }
    ctx.fillText("step", left + (width - left) / 2 - 10, yAxis + 28);
    bar.textContent = "";
    var grad = el("span", { class: "bf-colorbar", style: "background: linear-gradient(" +
                            "to right, " + diverging(-1) + ", #fff, " + diverging(1) + ")" });
    bar.appendChild(el("span", { text: "log(omega / omega(0)): " +
                                 fmt(-max) }));
    bar.appendChild(grad);
    bar.appendChild(el("span", { text: "+" + fmt(max) }));
    bar.appendChild(el("span", { text: "(one scale for every heatmap of this page; " +
      "blue: the frequency fell; white: unchanged; red: rose); rows: " + rows.length +
      " pairs by layer and head" }));
    return max;
  }

  /* uPlot's data, series and bands of a spec.  A line's companions, kept
   * out of the legend and shown and hidden with it, are its band (low/high:
   * two series filled between) or its seeds (seeds: thin lines, where a
   * band of one or two seeds would mean nothing).  A scatter series
   * (scatter: true) draws its points only, size `size`. */
  function plotData(spec, logY) {
    /* a log axis cannot show 0 or less (a band's low end with few seeds) */
    var shown = function (ys) {
      return logY ? ys.map(function (y) { return y > 0 ? y : null; }) : ys;
    };
    var data = [spec.x], bands = [];
    var series = [{ label: spec.xLabel, value: function (u, v) { return fmt(v); } }];
    var bandOf = {};     /* line series index -> its companion series */
    function companion(ys, label, width, stroke) {
      data.push(shown(ys));
      series.push({ label: label, stroke: stroke, width: width, spanGaps: true,
                    points: { show: false }, bfBand: true });
      return series.length - 1;
    }
    spec.series.forEach(function (s) {
      data.push(shown(s.y));
      var at = series.length;
      var line = { label: short(s.label), stroke: s.color, width: s.width || 2,
                   spanGaps: true, dash: s.dash, points: { show: spec.x.length <= 30 },
                   value: function (u, v) { return fmt(v); } };
      if (s.scatter) {
        line.paths = function () { return null; };
        line.points = { show: true, size: s.size || 7, width: 2,
                        fill: s.fill || s.color, stroke: s.color };
      }
      series.push(line);
      bandOf[at] = [];
      if (s.low && s.high) {
        bandOf[at].push(companion(s.high, s.label + " high", 0, "transparent"),
                          companion(s.low, s.label + " low", 0, "transparent"));
        bands.push({ series: [at + 1, at + 2], fill: fade(s.color, 0.18) });
      }
      (s.seeds || []).forEach(function (ys, k) {
        bandOf[at].push(companion(ys, s.label + " seed " + (k + 1), 1, fade(s.color, 0.7)));
      });
    });
    return { data: data, series: series, bands: bands, bandOf: bandOf };
  }

  function makePlot(target, spec, logY) {
    var p = plotData(spec, logY), bandOf = p.bandOf;
    var width = Math.max(320, Math.min(target.clientWidth || 900, 1100));
    var opts = {
      width: width,
      height: spec.height || 320,
      series: p.series,
      bands: p.bands,
      legend: { show: spec.legend !== false },
      scales: { x: spec.logX ? { time: false, distr: 3 } : { time: false },
                y: logY ? { distr: 3 } : {} },
      axes: [spec.xTicksAtData
               ? { label: spec.xLabel, values: ticks, splits: function () { return spec.x; } }
               : { label: spec.xLabel, values: ticks },
             { label: spec.yLabel, size: 70, values: ticks }],
      cursor: { drag: { x: true, y: false } },
      hooks: {
        init: [function (u) {
          /* band series are not groups: keep them out of the legend */
          u.series.forEach(function (s, i) {
            var row = u.root.querySelectorAll(".u-legend .u-series")[i];
            if (s.bfBand && row) row.style.display = "none";
          });
        }],
        setSeries: [function (u, i) {
          (bandOf[i] || []).forEach(function (b) {
            if (u.series[b].show !== u.series[i].show)
              u.setSeries(b, { show: u.series[i].show });
          });
        }],
        draw: [function (u) { drawMarks(u, spec.marks || []); }],
      },
    };
    return new uPlot(opts, p.data, target);
  }

  function drawMarks(u, marks) {
    var ctx = u.ctx;
    marks.forEach(function (m) {
      var x = u.valToPos(m.x, "x", true);
      if (!isFinite(x)) return;
      ctx.save();
      ctx.strokeStyle = "#555";
      ctx.setLineDash([6, 4]);
      ctx.lineWidth = 1.5 * devicePixelRatio;
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      ctx.fillStyle = "#333";
      ctx.font = (11 * devicePixelRatio) + "px sans-serif";
      ctx.fillText(m.label, x + 4 * devicePixelRatio, u.bbox.top + 12 * devicePixelRatio);
      ctx.restore();
    });
  }

  function savePng(plot, spec) {
    var src = plot.ctx.canvas;
    var out = document.createElement("canvas");
    out.width = src.width;
    out.height = src.height;
    var ctx = out.getContext("2d");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.drawImage(src, 0, 0);
    download(spec.id + ".png", out.toDataURL("image/png"));
  }

  function csvCell(v) {
    var s = v === null || v === undefined ? "" : String(v);
    return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  function figureCsv(spec) {
    var head = [spec.xLabel], cols = [];
    spec.series.forEach(function (s) {
      head.push(s.label); cols.push(s.y);
      if (s.low && s.high) {
        head.push(s.label + " ci_low", s.label + " ci_high");
        cols.push(s.low, s.high);
      }
      (s.seeds || []).forEach(function (ys, k) {
        head.push(s.label + " seed " + (k + 1));
        cols.push(ys);
      });
    });
    var lines = [head.map(csvCell).join(",")];
    spec.x.forEach(function (x, i) {
      lines.push([x].concat(cols.map(function (c) { return c[i]; })).map(csvCell).join(","));
    });
    return lines.join("\n") + "\n";
  }

  function saveCsv(spec) {
    download(spec.id + ".csv",
             "data:text/csv;charset=utf-8," + encodeURIComponent(figureCsv(spec)));
  }

  /* ---- the sections ------------------------------------------------------ */

  /* Sorted union of xs, and each series' values re-indexed on it. */
  function align(lists) {
    var set = {};
    lists.forEach(function (l) { l.x.forEach(function (x) { set[x] = true; }); });
    var xs = Object.keys(set).map(Number).sort(function (a, b) { return a - b; });
    var pos = {};
    xs.forEach(function (x, i) { pos[x] = i; });
    return {
      x: xs,
      on: function (l, ys) {
        var out = xs.map(function () { return null; });
        l.x.forEach(function (x, i) { out[pos[x]] = ys[i]; });
        return out;
      },
    };
  }

  /* A group's colour (and dash past the palette) by its index in
   * data.groups, whatever figure it is drawn in; a compare row's group
   * that data.groups does not name comes after them, in the order of the
   * comparison's rows. */
  function groupStyle(data, labelText) {
    var known = (data.groups || []).map(function (g) { return g.label; });
    var i = known.indexOf(labelText);
    if (i < 0) {
      var others = [];
      (data.compare || []).forEach(function (r) {
        if (known.indexOf(r.group) < 0 && others.indexOf(r.group) < 0) others.push(r.group);
      });
      i = known.length + others.indexOf(labelText);
    }
    return { color: color(i), dash: dashOf(i) };
  }

  /* Compare rows of the groups a search section shows (its trials), which
   * the figures and the comparison leave to it. */
  function searchTrial(data, r) {
    return !!r.search_trial && (data.selections || []).length > 0;
  }

  // The compare rows that keep() accepts, one series per group over the eval
  // depths: series(mean, low, high) names the row fields to draw.  A point of
  // n <= 2 seeds has no band (its interval spans decades: a band of two
  // seeds means nothing); its seeds are the point itself.
  function depthSeries(data, keep) {
    var byGroup = {};
    (data.compare || []).filter(function (r) {
      return keep(r) && !searchTrial(data, r);
    }).forEach(function (r) {
      var g = byGroup[r.group] || (byGroup[r.group] = { label: r.group, rows: [] });
      g.rows.push(r);
    });
    var groups = Object.keys(byGroup).map(function (k) { return byGroup[k]; });
    groups.forEach(function (g) { g.x = g.rows.map(function (r) { return r.eval_depth; }); });
    var a = align(groups);
    return {
      x: a.x,
      series: function (mean, low, high) {
        return groups.map(function (g) {
          function col(k) {
            return a.on(g, g.rows.map(function (r) { return r.n > 2 || k === mean ? r[k] : null; }));
          }
          var band = g.rows.some(function (r) { return r.n > 2; }), st = groupStyle(data, g.label);
          return { label: g.label, color: st.color, dash: st.dash, y: col(mean),
                   low: band ? col(low) : null, high: band ? col(high) : null };
        });
      },
    };
  }

  // The forest plot heading the report: each group's geometric-mean loss
  // ratio to its baseline with its 95% interval, per eval depth, log axis
  // (1 = no change; below 1 = lower loss).
  function forestFigure(root, data) {
    var d = depthSeries(data, function (r) {
      return r.loss_ratio !== undefined && r.loss_ratio !== null;
    });
    if (!d.x.length) return;
    var sec = section(root, "Comparisons",
      "Loss ratio to the baseline (geometric mean over seeds, paired by seed) " +
      "with its log-scale 95% interval, per eval depth; 1 is no change, below " +
      "1 lower loss. Verdicts with adjusted p-values are under Comparison.");
    figure(sec, { id: "fig-forest", title: "Loss ratio to baseline vs eval depth",
                  xLabel: "eval depth", yLabel: "loss ratio", x: d.x, xTicksAtData: true,
                  series: d.series("loss_ratio", "loss_ratio_ci_low", "loss_ratio_ci_high"),
                  logY: true, logToggle: true });
  }

  function depthFigures(root, data) {
    var d = depthSeries(data, function () { return true; });
    var marks = (data.train_depths || []).map(function (x) {
      return { x: x, label: "train depth " + x };
    });
    function series(key) { return d.series(key + "_mean", key + "_ci_low", key + "_ci_high"); }
    var sec = section(root, "Structure gap",
      "Final evaluation against eval depth per group: accuracy's mean over seeds " +
      "with its 95% band over seeds (inside [0, 1]), loss's geometric mean " +
      "with its log-scale 95% band (never below zero), no band for a group of " +
      "one or two seeds; dashed lines mark the training depths.");
    figure(sec, { id: "fig-accuracy-depth", title: "Exact-match accuracy vs eval depth",
                  xLabel: "eval depth", yLabel: "accuracy", x: d.x, xTicksAtData: true,
                  series: series("accuracy"), marks: marks });
    figure(sec, { id: "fig-loss-depth", title: "Eval loss vs eval depth",
                  xLabel: "eval depth", yLabel: "loss", x: d.x, xTicksAtData: true,
                  series: series("loss"), marks: marks, logY: true, logToggle: true });
  }

  function label(data, g) { return data.groups[g].label; }

  function lossFigure(root, data) {
    var trials = {};
    (data.compare || []).forEach(function (r) { if (searchTrial(data, r)) trials[r.group] = true; });
    var curves = (data.train_loss || []).filter(function (c) { return !trials[label(data, c.group)]; });
    var sec = section(root, "Training loss",
      "Geometric mean over seeds per group with its log-scale 95% band, downsampled to at most " +
      "201 points per group (each job's last point kept); a group of one or two seeds " +
      "shows its seeds as thin lines instead of a band.");
    if (!curves.length) { sec.appendChild(el("p", { text: "No training loss recorded." })); return; }
    var lists = curves.map(function (c) { return { x: c.step }; });
    var a = align(lists);
    figure(sec, { id: "fig-train-loss", title: "Training loss", xLabel: "step",
                  yLabel: "loss", x: a.x, logY: true, logToggle: true,
                  series: curves.map(function (c, i) {
                    var st = groupStyle(data, label(data, c.group));
                    function on(ys) { return a.on(lists[i], ys); }
                    return { label: label(data, c.group), color: st.color, dash: st.dash,
                             y: on(c.mean), low: c.seeds ? null : on(c.low),
                             high: c.seeds ? null : on(c.high),
                             seeds: (c.seeds || []).map(on) };
                  }) });
  }

  /* The raw omega / omega(0) lines, on demand: one figure per layer, a
   * line per (head, pair) coloured by head, keyed by head (no legend of
   * hundreds of entries). */
  function rawLines(holder, f, name) {
    var layers = [];
    f.series.forEach(function (s) {
      if (layers.indexOf(s.layer) < 0) layers.push(s.layer);
    });
    layers.forEach(function (layer) {
      var mine = f.series.filter(function (s) { return s.layer === layer; });
      var heads = [];
      mine.forEach(function (s) { if (heads.indexOf(s.head) < 0) heads.push(s.head); });
      figure(holder, { id: "fig-freq-lines-l" + layer, title: "omega / omega(0), layer " +
                         layer + ", " + name, xLabel: "step", yLabel: "omega / omega(0)",
                       x: f.step, height: 220, legend: false,
                       key: heads.map(function (h) {
                         return { label: "head " + h, color: color(h) };
                       }),
                       series: mine.map(function (s) {
                         return { label: rowLabel(s), color: color(s.head), y: s.ratio };
                       }) });
    });
  }

  /* The final spectrum against the geometric init: a line per learnable
   * (layer, head), coloured by head; the legend lists them while they are
   * few, a key of heads stands in for it past a dozen. */
  function spectrumFigure(holder, f, name) {
    var sp = f.spectrum, few = sp.final.length < MAX_KEY;
    var heads = [];
    sp.final.forEach(function (h) { if (heads.indexOf(h.head) < 0) heads.push(h.head); });
    figure(holder, { id: "fig-spectrum", title: "Final spectrum vs geometric init, " + name,
                     xLabel: "pair index", yLabel: "omega", x: sp.pair, logY: true,
                     xTicksAtData: sp.pair.length <= 32, legend: few,
                     key: few ? null : [{ label: "initial (geometric)", color: "#000000" }]
                       .concat(heads.slice(0, MAX_KEY - 1).map(function (h) {
                         return { label: "head " + h + " (every layer)", color: color(h + 1) };
                       })),
                     series: [{ label: "initial (geometric)", color: "#000000",
                                y: sp.initial, dash: [6, 4] }].concat(
                       sp.final.map(function (h, k) {
                         return { label: "final L" + h.layer + " H" + h.head,
                                  color: color(few ? k + 1 : h.head + 1), y: h.omega };
                       })) });
  }

  function frequencyFigures(root, data) {
    var freq = data.frequencies || [];
    var sec = section(root, "Spectral evolution",
      "Learnable heads only, mean over seeds: log(omega(step) / omega(0)) of " +
      "every (layer, head, pair) as a heatmap over the steps (the raw lines on " +
      "demand, one figure per layer); and the final spectrum (log omega against " +
      "pair index) against the geometric initialisation.");
    if (!freq.length) {
      sec.appendChild(el("p", { text: "No group has learnable frequencies." }));
      return;
    }
    var pick = el("select", { id: "bf-freq-group" });
    freq.forEach(function (f, i) {
      pick.appendChild(el("option", { value: String(i), text: short(label(data, f.group)) }));
    });
    var max = maxLogRatio(freq.map(function (f) {
      return f.series.map(function (s) { return { y: s.ratio }; });
    }));
    var raw = el("input", { type: "checkbox", id: "bf-freq-lines" });
    sec.appendChild(el("div", { class: "bf-tools" }, [
      el("label", {}, [document.createTextNode("group "), pick]),
      el("label", {}, [raw, document.createTextNode(" raw lines")])]));
    var holder = el("div");
    sec.appendChild(holder);
    function show() {
      var f = freq[Number(pick.value)], name = label(data, f.group);
      holder.textContent = "";
      Object.keys(registry).forEach(function (k) {
        if (/^fig-(freq|spectrum)/.test(k)) delete registry[k];
      });
      heatmap(holder, { id: "fig-freq-heatmap", title: "log(omega / omega(0)) over " +
                          "training, " + name, x: f.step,
                        max: max, rows: f.series.map(function (s) {
                          return { layer: s.layer, head: s.head, pair: s.pair, y: s.ratio };
                        }) });
      if (raw.checked) rawLines(holder, f, name);
      spectrumFigure(holder, f, name);
    }
    pick.addEventListener("change", show);
    raw.addEventListener("change", show);
    show();
  }

  function table(parent, rows, columns, cls) {
    var t = el("table", { class: cls || "bf-table" });
    t.appendChild(el("thead", {}, [el("tr", {}, columns.map(function (c) {
      /* a column's name wraps at its underscores */
      return el("th", { text: c.title || c.key.replace(/_/g, " ") });
    }))]));
    var body = el("tbody");
    rows.forEach(function (r) {
      body.appendChild(el("tr", {}, columns.map(function (c) {
        var v = c.get ? c.get(r) : r[c.key];
        return el("td", { text: typeof v === "number" ? fmt(v) : (v === null || v === undefined ? "" : short(v)) });
      })));
    });
    t.appendChild(body);
    parent.appendChild(el("div", { class: "bf-scroll" }, [t]));
    return t;
  }

  // Accuracy: mean ± sd.  Loss: geometric mean ×/ exp(sd of the logs).
  function meanSd(r, k, digits) {
    var m = fmt(r[k + "_mean"], digits);
    if (r[k + "_log_sd"] !== undefined) {
      var f = r[k + "_log_sd"] === null ? "" : fmt(Math.exp(r[k + "_log_sd"]), digits);
      return f ? m + " ×/ " + f : m;
    }
    var s = fmt(r[k + "_sd"], digits);
    return s ? m + " ± " + s : m;
  }

  function ci(r, k, digits) {
    var lo = r[k + "_ci_low"], hi = r[k + "_ci_high"];
    return lo === null || lo === undefined ? "" : "[" + fmt(lo, digits) + ", " + fmt(hi, digits) + "]";
  }

  // Adaptive seeds: each comparison's state, interval and seeds spent.
  function adaptiveSection(root, data) {
    var rows = data.adaptive_seeds || [];
    if (!rows.length)
      return;
    var sec = section(root, "Adaptive seeds",
      "Seed pairs added until each comparison is decided by the anytime-valid " +
      "confidence sequence of the loss ratio, at alpha / m for the m comparisons " +
      "of its stage (docs/results.md, Seeds until decided).");
    table(sec, rows, [
      { key: "variant" }, { key: "baseline" },
      { key: "eval_depth", title: "eval depth" },
      { title: "state", get: function (r) {
          if (r.state === "running")
            return "still running";
          if (r.state === "cancelled")
            return "cancelled undecided at seed " + r.decided_seed + " (sweep cancelled)";
          return (r.state === "undecided" ? "undecided at max, seed " :
                  r.state + ", decided at seed ") + r.decided_seed;
        } },
      { title: "seeds", get: function (r) { return r.seeds + " of at most " + r.seeds_max; } },
      { title: "loss ratio interval", get: function (r) {
          return r.ratio_low === null ? "not bounded yet" :
                 "[×" + fmt(r.ratio_low, 3) + ", ×" + fmt(r.ratio_high, 3) + "]" +
                 (r.alpha === null || r.alpha === undefined ? "" :
                  " (" + fmt(100 * (1 - r.alpha), 4) + "% sequence)");
        } },
    ], "bf-table bf-adaptive");
  }

  /* A searched field's slice (Optuna's slice plot): each trial's value of
   * the field (x, a log axis for loguniform) against the selection's
   * metric, a series of points per cell, the chosen trials ringed, the
   * pruned ones ringed in grey at their value at the rung they were stopped. */
  function sliceFigure(sec, stage, field, space, cells) {
    var points = [];
    cells.forEach(function (c, ci) {
      c.chosen.concat(c.runners_up).concat(c.pruned || []).forEach(function (t) {
        var x = (t.values || {})[field];
        if (typeof x === "number")
          points.push({ cell: ci, x: x, y: t.value, chosen: c.chosen.indexOf(t) >= 0,
                        pruned: (c.pruned || []).indexOf(t) >= 0 });
      });
    });
    if (!points.length) return;
    var a = align([{ x: points.map(function (p) { return p.x; }) }]);
    function at(keep) {
      var ys = a.x.map(function () { return null; });
      points.filter(keep).forEach(function (p) { ys[a.x.indexOf(p.x)] = p.y; });
      return ys;
    }
    var first = cells[0];
    figure(sec, { id: "fig-slice-" + (stage || "search") + "-" + field.replace(/\W/g, "-"),
                  title: "Slice: " + first.metric + " at depth " + first.eval_depth + " vs " +
                         field + (stage ? ", stage " + stage : ""),
                  xLabel: field, yLabel: first.metric, x: a.x,
                  logX: !!(space && space.loguniform),
                  series: [{ label: "chosen", color: "#000000", fill: "#ffffff", scatter: true,
                             size: 16, y: at(function (p) { return p.chosen; }) },
                           { label: "pruned (at its rung)", color: "#888888", fill: "#ffffff",
                             scatter: true, size: 12,
                             y: at(function (p) { return p.pruned; }) }].concat(
                    cells.map(function (c, ci) {
                      return { label: c.cell + " trials", color: color(ci), scatter: true,
                               y: at(function (p) { return p.cell === ci; }) };
                    })) });
  }

  /* Each cell's trials, best first: values, metric, rank, and what came of
   * the chosen ones. */
  function trialRows(cells) {
    var rows = [];
    cells.forEach(function (c) {
      c.chosen.concat(c.runners_up).forEach(function (t, k) {
        var chosen = k < c.chosen.length;
        rows.push({ cell: c.cell, trial: t.trial, job: t.job_id, rank: k + 1,
          values: Object.keys(t.values || {}).map(function (f) {
            return f + "=" + (typeof t.values[f] === "number" ? fmt(t.values[f]) : t.values[f]);
          }).join(" "),
          metric: c.metric + " at depth " + c.eval_depth, value: t.value,
          outcome: chosen ? "finished, chosen" + (c.taken_by.length ?
                   ": values taken by jobs " + c.taken_by.join(", ") : "") : "finished" });
      });
      (c.pruned || []).forEach(function (t) {
        rows.push({ cell: c.cell, trial: t.trial, job: t.job_id, rank: "",
          values: Object.keys(t.values || {}).map(function (f) {
            return f + "=" + (typeof t.values[f] === "number" ? fmt(t.values[f]) : t.values[f]);
          }).join(" "),
          metric: c.metric + " at depth " + c.eval_depth + ", step " + t.rung,
          value: t.value, outcome: "pruned at step " + t.rung });
      });
    });
    return rows;
  }

  // A search shown as a search: per stage that selects (docs/sweeps.md,
  // Selection), a slice figure per searched field and its trials per cell.
  function searchSection(root, data) {
    var cells = data.selections || [];
    if (!cells.length)
      return;
    var sec = section(root, "Search",
      "Each cell's trials ranked by their final metric at the selection's " +
      "depth once all had ended, the chosen ones ringed; a later stage with " +
      "from: trained the chosen values (docs/sweeps.md, Selection). Only " +
      "trials that finished are ranked; a pruned trial shows its value at " +
      "the rung where its prune rule stopped it (ringed in grey in the slice).");
    var stages = [];
    cells.forEach(function (c) { if (stages.indexOf(c.stage) < 0) stages.push(c.stage); });
    stages.forEach(function (stage) {
      var mine = cells.filter(function (c) { return c.stage === stage; });
      var space = (data.searches || {})[stage || ""] || {};
      Object.keys(space).forEach(function (field) {
        sliceFigure(sec, stage, field, space[field], mine);
      });
      table(sec, trialRows(mine), [
        { key: "cell" }, { key: "trial" }, { key: "job" }, { key: "values" },
        { key: "metric" }, { key: "value" }, { key: "rank" }, { key: "outcome" },
      ], "bf-table bf-search");
    });
  }

  function compareSection(root, data) {
    var sec = section(root, "Comparison",
      "Per group and eval depth over seeds: loss as a geometric mean ×/ spread " +
      "factor with its log-scale 95% CI, accuracy as mean ± sd with its 95% CI " +
      "over seeds (one seed: Wilson's over its examples); against the " +
      "baseline, the geometric-mean loss ratio with " +
      "its 95% CI (* : adjusted p below the sweep's alpha, Holm within its " +
      "declared primary family, Benjamini-Hochberg elsewhere; docs/results.md).");
    table(sec, data.compare.filter(function (r) { return !searchTrial(data, r); }), [
      { key: "group" }, { key: "eval_depth", title: "eval depth" }, { key: "n" },
      { title: "loss", get: function (r) { return meanSd(r, "loss"); } },
      { title: "loss 95% CI", get: function (r) { return ci(r, "loss"); } },
      { title: "accuracy", get: function (r) { return meanSd(r, "accuracy", 3); } },
      { title: "accuracy 95% CI", get: function (r) { return ci(r, "accuracy", 3); } },
      { title: "train loss", get: function (r) { return meanSd(r, "train_loss"); } },
      { title: "loss ratio to baseline", get: function (r) {
          if (r.loss_ratio === undefined || r.loss_ratio === null)
            return r.baseline ? "baseline" : "";
          var s = "×" + fmt(r.loss_ratio, 3) + " (" +
                  fmt(100 * (r.loss_ratio - 1), 3) + "%)";
          if (r.loss_ratio_ci_low !== null)
            s += " [×" + fmt(r.loss_ratio_ci_low, 3) + ", ×" +
                 fmt(r.loss_ratio_ci_high, 3) + "]";
          return s + (r.loss_p_adjusted !== null && r.loss_p_adjusted < r.alpha ? " *" : "");
        } },
    ], "bf-table bf-compare");
    var verdicts = data.compare.filter(function (r) { return r.verdict; });
    if (verdicts.length) {
      var ul = el("ul", { class: "bf-verdicts" });
      verdicts.forEach(function (r) { ul.appendChild(el("li", { text: r.verdict })); });
      sec.appendChild(ul);
    }
  }

  function jobsSection(root, data) {
    var rows = data.jobs || [], total = (data.sweep || {}).n_jobs;
    var sec = section(root, "Jobs", rows.length < total
      ? "The first " + rows.length + " of the sweep's " + total + " jobs by id; " +
        "bifocal results " + data.sweep.sweep_id + " lists every one."
      : "One row per job of the sweep.");
    var keys = [];
    rows.forEach(function (r) {
      Object.keys(r).forEach(function (k) { if (keys.indexOf(k) < 0) keys.push(k); });
    });
    table(sec, rows, keys.map(function (k) { return { key: k }; }), "bf-table bf-jobs");
  }

  function section(root, title, text) {
    var s = el("section", {}, [el("h2", { text: title })]);
    if (text) s.appendChild(el("p", { class: "bf-note", text: text }));
    root.appendChild(s);
    return s;
  }

  var registry = {};

  /* Every figure drawn so far (the browser tests read their plots). */
  window.bifocalFigures = function () {
    return Object.keys(registry).map(function (k) { return registry[k]; });
  };

  function render(root, data) {
    registry = {};
    root.textContent = "";
    var sw = data.sweep || {};
    root.appendChild(el("h1", { text: "Sweep " + sw.sweep_id + ": " + sw.name }));
    root.appendChild(el("p", { class: "bf-note", text:
      sw.n_jobs + " jobs, status " + sw.status + ", file " + sw.filename +
      "; grouped by " + ((data.fields || []).join(", ") || "nothing") +
      "; report generated " + data.generated + " by bifocal." }));
    if ((sw.warnings || []).length) {
      var warn = el("ul", { class: "bf-warnings" });
      sw.warnings.forEach(function (w) { warn.appendChild(el("li", { text: "warning: " + w })); });
      root.appendChild(warn);
    }
    forestFigure(root, data);
    adaptiveSection(root, data);
    searchSection(root, data);
    depthFigures(root, data);
    lossFigure(root, data);
    frequencyFigures(root, data);
    compareSection(root, data);
    jobsSection(root, data);
    var src = section(root, "Sweep file", "As submitted.");
    src.appendChild(el("pre", { class: "bf-source", text: sw.source || "" }));
  }

  /* The report's page, and the parts the dashboard's pages are built of. */
  return { render: render, figureCsv: figureCsv, figure: figure, heatmap: heatmap,
           table: table,
           section: section, el: el, fmt: fmt, short: short, tick: tick, color: color,
           align: align,
           depthFigures: depthFigures, compareSection: compareSection,
           adaptiveSection: adaptiveSection };
})();
