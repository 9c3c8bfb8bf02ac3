// What the browser tests share: Debian's chromium started headless through
// playwright-core with a fresh profile, and what each figure of a page
// drew (window.bifocalFigures, results/web/report.js).
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { chromium } = require("playwright-core");

const CHROMIUM = "/usr/bin/chromium";

/* Starts chromium; close(inspect) ends it, calls inspect(profile) (when
 * given) on the profile folder chromium has written out, then removes it. */
async function launch() {
  if (!fs.existsSync(CHROMIUM)) throw new Error(CHROMIUM + " is missing: install Debian's chromium (scripts/deps.sh)");
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "bifocal-chromium-"));
  // A fresh profile (--user-data-dir) each run: playwright passes it.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--no-first-run"],
    viewport: { width: 1200, height: 900 },
  });
  context.close = (close => async (inspect) => {
    await close.call(context);
    try {
      if (inspect) inspect(profile);
    } finally {
      fs.rmSync(profile, { recursive: true, force: true });
    }
  })(context.close);
  return context;
}

/* Per figure on the page: id, title, series, finite points, and inked
 * pixels (neither empty nor white) of its canvas. */
function figureStats(page) {
  return page.evaluate(() => window.bifocalFigures()
    .filter((f) => f.plot.root.isConnected).map((f) => {
      const u = f.plot;
      let points = 0;
      for (let i = 1; i < u.data.length; i++)
        for (const y of u.data[i]) if (y !== null && y !== undefined && isFinite(y)) points++;
      const c = u.ctx.canvas;
      const px = u.ctx.getImageData(0, 0, c.width, c.height).data;
      let inked = 0;
      for (let i = 0; i < px.length; i += 4)
        if (px[i + 3] > 0 && (px[i] < 250 || px[i + 1] < 250 || px[i + 2] < 250)) inked++;
      return { id: f.id, title: f.title, series: u.series.length - 1, points, inked };
    }));
}

/* A decimal number with more than 4 significant digits in text, or null. */
function longNumber(text) {
  for (const m of String(text).match(/\d*\.\d+(e[-+]?\d+)?/gi) || []) {
    const digits = m.replace(/e.*/i, "").replace(".", "").replace(/^0+/, "");
    if (digits.length > 4) return m;
  }
  return null;
}

/* What is wrong with the tick labels of the page's figures, as messages:
 * two ticks of an axis alike (uPlot's own read "0, 0, 0" on a learning
 * rate's axis) or a label of more than 4 significant digits. */
async function tickProblems(page) {
  const axes = await page.evaluate(() => window.bifocalFigures()
    .filter((f) => f.plot.root.isConnected && f.plot.axes)
    .flatMap((f) => f.plot.axes.map((a, i) => ({
      id: f.id, axis: i, vals: (a._values || []).filter((v) => v !== "" && v !== null) }))));
  const problems = [];
  for (const t of axes) {
    const m = t.vals.map(longNumber).find((x) => x);
    if (m) problems.push(`${t.id} axis ${t.axis} labels a tick ${m}`);
    if (new Set(t.vals).size < t.vals.length)
      problems.push(`${t.id} axis ${t.axis} labels two ticks alike: ${t.vals.join(", ")}`);
  }
  return problems;
}

/* Collects console errors and page errors of page into problems. */
function watchErrors(page, problems) {
  page.on("console", (m) => { if (m.type() === "error") problems.push("console error: " + m.text()); });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
}

module.exports = { launch, figureStats, watchErrors, longNumber, tickProblems };
