// Opens bifocal HTML reports in one headless chromium (Debian's) at 1400 px
// and checks that every figure drew data, that no band leaves its possible
// range, that the console shows no errors, and that the report reads at a
// glance: no number of more than 4 significant digits in a legend, label,
// tick, title or cell; a group's colour the same in every figure; no
// horizontal scrollbar; no band for a group of n <= 2 seeds; one colour
// scale for every frequency heatmap; a search's slice plot and trials.
// Saves a screenshot of each.  Exit status 0 only if all holds.
//
//   node check_report.js REPORT.html SCREENSHOT.png MIN_FIGURES MAX_HEIGHT PAIRS [REPORT.html ...]
//
// Five arguments per report; the last one's MIN_FIGURES (1), MAX_HEIGHT and
// PAIRS may be left out.  MAX_HEIGHT (pixels, 0: none) crops the
// full-page screenshot to the top of the page.  PAIRS (0: none): the
// spectral heatmap must have that many rows, and the raw lines (switched
// on) must draw them all, one figure per layer.
"use strict";
const path = require("path");
const { launch, figureStats, watchErrors, longNumber, tickProblems } = require("./chromium");

/* The checks of one report on page; its problems pushed to problems. */
async function checkOne(page, problems, args) {
  const [report, shot, minFiguresArg, maxHeightArg, pairsArg] = args;
  const minFigures = Number(minFiguresArg || 1);
  const maxHeight = Number(maxHeightArg || 0);
  const pairs = Number(pairsArg || 0);
  const fail = (msg) => problems.push(path.basename(report) + ": " + msg);
  await page.goto("file://" + path.resolve(report));
  await page.waitForFunction(() => typeof window.bifocalFigures === "function");
  const figures = await figureStats(page);
  for (const f of figures) {
    console.log(`${f.id}: ${f.series} series, ${f.points} points, ${f.inked} inked pixels`);
    if (f.points === 0) fail(`${f.id} (${f.title}) has no data`);
    if (f.inked < 200) fail(`${f.id} (${f.title}) drew almost nothing`);
  }
  await checkGlance(page, fail);
  // No band or line leaves its possible range: every figure's values are
  // losses, frequencies or ratios (> 0 where drawn on a log axis, never
  // below 0) or accuracies (inside [0, 1]).
  const outside = await page.evaluate(() => window.bifocalFigures().map((f) => {
    const fraction = /accuracy/i.test(f.spec.yLabel || "");
    const bad = [];
    (f.spec.series || []).forEach((s) => ["y", "low", "high"].forEach((k) =>
      (s[k] || []).forEach((v) => {
        if (v === null || v === undefined) return;
        if (v < 0 || (fraction && v > 1) || (f.spec.logY && v <= 0))
          bad.push(`${s.label} ${k}=${v}`);
      })));
    return { id: f.id, bad: bad.slice(0, 3) };
  }));
  for (const o of outside)
    if (o.bad.length) fail(`${o.id} draws outside its range: ${o.bad.join(", ")}`);
  if (figures.length < minFigures)
    fail(`${figures.length} figures drawn, expected at least ${minFigures}`);
  const height = await page.evaluate(() => document.documentElement.scrollHeight);
  await page.screenshot({ path: shot, fullPage: true,
                          clip: { x: 0, y: 0, width: 1400,
                                  height: maxHeight ? Math.min(height, maxHeight) : height } });
  console.log("screenshot: " + shot);
  // A click on a legend entry hides that group (uPlot's toggle).
  const toggled = await page.evaluate(() => {
    const f = window.bifocalFigures()[0].plot;
    f.root.querySelector(".u-legend .u-series:nth-child(2) th").click();
    return f.series[1].show === false;
  });
  if (!toggled) fail("clicking a legend entry did not hide its series");
  // No legend (uPlot's, visible) or key lists more than a dozen entries.
  const checkLegends = async (when) => {
    const long = await page.evaluate(() => Array.from(document.querySelectorAll(
      ".u-legend, .bf-key")).map((l) => {
        const fig = l.closest("figure");
        const n = l.classList.contains("bf-key")
          ? l.querySelectorAll(".bf-key-entry").length
          : Array.from(l.querySelectorAll(".u-series")).filter(
              (r, i) => i > 0 && r.style.display !== "none").length;
        return { id: fig ? fig.id : "?", n, shown: l.offsetParent !== null };
      }).filter((l) => l.shown && l.n > 12));
    for (const l of long) fail(`${when}: ${l.id} has a legend of ${l.n} entries`);
  };
  await checkLegends("report");
  if (pairs) {
    const heat = (await figureStats(page)).find((f) => f.id === "fig-freq-heatmap");
    if (!heat || heat.series !== pairs || heat.inked < 1000)
      fail(`the spectral heatmap: ${JSON.stringify(heat)}, expected ${pairs} rows drawn`);
    await page.check("#bf-freq-lines");
    const lines = (await figureStats(page)).filter((f) => f.id.startsWith("fig-freq-lines-"));
    const drawn = lines.reduce((n, f) => n + f.series, 0);
    console.log(`raw lines: ${lines.length} figures, ${drawn} series`);
    if (drawn !== pairs || lines.some((f) => f.inked < 200))
      fail(`raw lines drew ${drawn} series in ${lines.length} figures, expected ${pairs}`);
    await checkLegends("raw lines");
  }
  await checkHeatmapScale(page, fail);
}

/* What a reader sees at a glance: numbers of at most 4 significant digits
 * in every legend, key, tick, title and cell (no axis reading "0, 0, 0"),
 * one colour per group in every figure, no band for a group of n <= 2,
 * nothing wider than the page, and a search's slice plot with its trials. */
async function checkGlance(page, fail, dataUrl) {
  const seen = await page.evaluate(async (dataUrl) => {
    // a report's data is in the page; the dashboard's, its summary API
    const data = dataUrl ? await (await fetch(dataUrl)).json()
                         : JSON.parse(document.getElementById("bifocal-data").textContent);
    const texts = Array.from(document.querySelectorAll(
      "h1, figcaption, .u-legend th, .bf-key, .bf-table th, .bf-table td, option"))
      .map((e) => e.textContent);
    const colours = {}, bands = [];
    const few = new Set((data.compare || []).filter((r) => r.n <= 2).map((r) => r.group));
    (data.train_loss || []).filter((c) => c.seeds).forEach((c) => few.add(data.groups[c.group].label));
    for (const f of window.bifocalFigures()) {
      (f.spec.series || []).forEach((s) => {
        if (!s.color || !data.groups.some((g) => g.label === s.label)) return;
        (colours[s.label] = colours[s.label] || []).push(f.id + ":" + s.color);
        if (few.has(s.label) && [s.low, s.high].some((b) => (b || []).some((v) => v !== null)))
          bands.push(f.id + ": " + s.label);
      });
    }
    const wide = Array.from(document.querySelectorAll(".bf-scroll, .bf-table"))
      .filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.className);
    if (document.documentElement.scrollWidth > window.innerWidth) wide.push("the page");
    // a slice's data: x, the chosen ring, the pruned ring, then a series
    // of points per cell
    const points = (ys) => ys.filter((y) => y !== null).length;
    const sliceFigs = window.bifocalFigures().filter((f) => /^fig-slice-/.test(f.id));
    const slices = sliceFigs.map((f) => f.plot.data.slice(3).reduce((n, ys) => n + points(ys), 0));
    const prunedRings = sliceFigs.map((f) => points(f.plot.data[2]));
    const pruned = (data.selections || []).reduce((n, c) => n + (c.pruned || []).length, 0);
    const trials = (data.selections || []).reduce(
      (n, c) => n + c.chosen.length + c.runners_up.length + (c.pruned || []).length, 0);
    const rows = Array.from(document.querySelectorAll(".bf-search tbody tr"));
    return { texts, colours, bands, wide, slices, trials, pruned, prunedRings,
             searchRows: rows.length,
             prunedRows: rows.filter((r) => /pruned at step \d+/.test(r.textContent)).length };
  }, dataUrl || null);
  for (const t of seen.texts) {
    const m = longNumber(t);
    if (m) fail(`"${t.slice(0, 80)}" shows ${m}: more than 4 significant digits`);
  }
  for (const t of await tickProblems(page)) fail(t);
  for (const [label, uses] of Object.entries(seen.colours))
    if (new Set(uses.map((u) => u.split(":")[1])).size > 1)
      fail(`group ${label} changes colour between figures: ${uses.join(", ")}`);
  for (const b of seen.bands) fail(`a band for a group of n <= 2 seeds: ${b}`);
  for (const w of seen.wide) fail(`${w} is wider than the page at 1400 px`);
  if (seen.trials && (seen.slices.length === 0 || seen.slices[0] !== seen.trials ||
                      seen.searchRows !== seen.trials))
    fail(`${seen.trials} trials, but the slice plots drew ${JSON.stringify(seen.slices)} ` +
         `points and the search table has ${seen.searchRows} rows`);
  if (seen.trials && (seen.prunedRings[0] !== seen.pruned || seen.prunedRows !== seen.pruned))
    fail(`${seen.pruned} pruned trials, but the slice plots ringed ` +
         `${JSON.stringify(seen.prunedRings)} and the search table says ` +
         `"pruned at step" in ${seen.prunedRows} rows`);
  console.log(`glance: ${seen.texts.length} texts, ` +
              `${Object.keys(seen.colours).length} groups coloured, ${seen.trials} trials`);
}

/* Every group's heatmap (the group picker) draws on one colour scale: the
 * largest |log ratio| over all of them. */
async function checkHeatmapScale(page, fail) {
  const options = await page.$$eval("#bf-freq-group option", (o) => o.map((x) => x.value));
  if (!options.length) return;
  const want = await page.evaluate(() => {
    const data = JSON.parse(document.getElementById("bifocal-data").textContent);
    let max = 0;
    for (const f of data.frequencies)
      for (const s of f.series)
        for (const v of s.ratio) if (v > 0) max = Math.max(max, Math.abs(Math.log(v)));
    return max;
  });
  const scales = [];
  for (const o of options) {
    await page.selectOption("#bf-freq-group", o);
    scales.push(await page.evaluate(() => window.bifocalFigures()
      .find((f) => f.id === "fig-freq-heatmap").spec.scale));
  }
  if (scales.some((x) => Math.abs(x - want) > 1e-12 * want))
    fail(`heatmap scales ${scales.join(", ")}, expected ${want} for every group`);
}

/* The dashboard's sweep page (URL .../sweeps/N) once its comparison is
 * drawn: the same checks at a glance as a report's, on the summary the
 * page drew from (/api/sweeps/N). */
async function checkDashboard(browser, problems, url, shot) {
  const page = await browser.newPage();
  await page.setViewportSize({ width: 1400, height: 900 });
  watchErrors(page, problems);
  const fail = (msg) => problems.push("dashboard " + url + ": " + msg);
  const api = url.replace(/\/sweeps\/(\d+)$/, "/api/sweeps/$1");
  await page.goto(url);
  await page.waitForFunction(async (api) => {
    const s = await (await fetch(api)).json();
    return s.compare && typeof window.bifocalFigures === "function" &&
           window.bifocalFigures().length > 0;
  }, api, { timeout: 30000, polling: 250 });
  await page.waitForTimeout(500);    /* the page's next poll draws the rest */
  const figures = await figureStats(page);
  if (!figures.length) fail("no figure drawn");
  for (const f of figures)
    if (f.points === 0) fail(`${f.id} (${f.title}) has no data`);
  await checkGlance(page, fail, api);
  await page.screenshot({ path: shot, fullPage: true });
  await page.close();
}

async function main() {
  const args = process.argv.slice(2);
  // --dashboard URL SCREENSHOT last: the dashboard's sweep page too
  const at = args.indexOf("--dashboard");
  const dashboard = at >= 0 ? args.splice(at, 3).slice(1) : null;
  if (args.length < 2 || args.length % 5 === 1)
    throw new Error("usage: check_report.js REPORT.html SCREENSHOT.png MIN_FIGURES MAX_HEIGHT PAIRS ...");
  while (args.length % 5) args.push("");   /* the last report's defaults */
  const browser = await launch();
  const problems = [];
  try {
    const page = await browser.newPage();
    await page.setViewportSize({ width: 1400, height: 900 });
    watchErrors(page, problems);
    // The report must open with no network: refuse every non-file request.
    await page.route("**/*", (route) => {
      if (route.request().url().startsWith("file:")) return route.continue();
      problems.push("network request: " + route.request().url());
      return route.abort();
    });
    for (let i = 0; i < args.length; i += 5)
      await checkOne(page, problems, args.slice(i, i + 5));
    if (dashboard)
      await checkDashboard(browser, problems, dashboard[0], dashboard[1]);
  } finally {
    await browser.close();
  }
  if (problems.length) {
    for (const p of problems) console.error("FAIL: " + p);
    process.exit(1);
  }
  console.log("report OK");
}

main().catch((e) => { console.error("FAIL: " + (e.stack || e)); process.exit(1); });
