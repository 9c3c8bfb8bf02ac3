// Opens a bifocal HTML report in Debian's headless chromium and checks that
// every figure drew data, that no band leaves its possible range, and that
// the console shows no errors; saves a screenshot.  Exit status 0 only if all holds.
//
//   node check_report.js REPORT.html SCREENSHOT.png [MIN_FIGURES] [MAX_HEIGHT] [PAIRS]
//
// MAX_HEIGHT (pixels, 0: none) crops the full-page screenshot to the top of
// the page.  PAIRS: the spectral heatmap must have that many rows, and
// the raw lines (switched on) must draw them all, one figure per layer.
"use strict";
const path = require("path");
const { launch, figureStats, watchErrors } = require("./chromium");

async function main() {
  const [report, shot, minFiguresArg] = process.argv.slice(2);
  if (!report || !shot) throw new Error("usage: check_report.js REPORT.html SCREENSHOT.png [MIN_FIGURES]");
  const minFigures = Number(minFiguresArg || 1);
  const maxHeight = Number(process.argv[5] || 0);
  const browser = await launch();
  const problems = [];
  try {
    const page = await browser.newPage();
    watchErrors(page, problems);
    // The report must open with no network: refuse every non-file request.
    await page.route("**/*", (route) => {
      if (route.request().url().startsWith("file:")) return route.continue();
      problems.push("network request: " + route.request().url());
      return route.abort();
    });
    await page.goto("file://" + path.resolve(report));
    await page.waitForFunction(() => typeof window.bifocalFigures === "function");
    const figures = await figureStats(page);
    for (const f of figures) {
      console.log(`${f.id}: ${f.series} series, ${f.points} points, ${f.inked} inked pixels`);
      if (f.points === 0) problems.push(`${f.id} (${f.title}) has no data`);
      if (f.inked < 200) problems.push(`${f.id} (${f.title}) drew almost nothing`);
    }
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
      if (o.bad.length) problems.push(`${o.id} draws outside its range: ${o.bad.join(", ")}`);
    // A log axis labels its ticks as numbers a reader can tell apart:
    // uPlot's own labels read "0" at 0.0001 and below.
    const zeroTicks = await page.evaluate(() => window.bifocalFigures()
      .filter((f) => f.spec.logY && f.plot && f.plot.axes && f.plot.axes[1] &&
                     f.plot.axes[1]._values)
      .filter((f) => f.plot.axes[1]._values.some((v) => Number(v) === 0 && v !== ""))
      .map((f) => f.id));
    for (const id of zeroTicks) problems.push(`${id}: its log axis labels a tick "0"`);
    if (figures.length < minFigures)
      problems.push(`${figures.length} figures drawn, expected at least ${minFigures}`);
    const height = await page.evaluate(() => document.documentElement.scrollHeight);
    await page.screenshot({ path: shot, fullPage: true,
                            clip: { x: 0, y: 0, width: 1200,
                                    height: maxHeight ? Math.min(height, maxHeight) : height } });
    console.log("screenshot: " + shot);
    // A click on a legend entry hides that group (uPlot's toggle).
    const toggled = await page.evaluate(() => {
      const f = window.bifocalFigures()[0].plot;
      f.root.querySelector(".u-legend .u-series:nth-child(2) th").click();
      return f.series[1].show === false;
    });
    if (!toggled) problems.push("clicking a legend entry did not hide its series");
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
      for (const l of long) problems.push(`${when}: ${l.id} has a legend of ${l.n} entries`);
    };
    await checkLegends("report");
    const pairs = Number(process.argv[6] || 0);
    if (pairs) {
      const heat = (await figureStats(page)).find((f) => f.id === "fig-freq-heatmap");
      if (!heat || heat.series !== pairs || heat.inked < 1000)
        problems.push(`the spectral heatmap: ${JSON.stringify(heat)}, expected ${pairs} rows drawn`);
      await page.check("#bf-freq-lines");
      const lines = (await figureStats(page)).filter((f) => f.id.startsWith("fig-freq-lines-"));
      const drawn = lines.reduce((n, f) => n + f.series, 0);
      console.log(`raw lines: ${lines.length} figures, ${drawn} series`);
      if (drawn !== pairs || lines.some((f) => f.inked < 200))
        problems.push(`raw lines drew ${drawn} series in ${lines.length} figures, expected ${pairs}`);
      await checkLegends("raw lines");
    }
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
