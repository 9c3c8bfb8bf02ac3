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

/* Collects console errors and page errors of page into problems. */
function watchErrors(page, problems) {
  page.on("console", (m) => { if (m.type() === "error") problems.push("console error: " + m.text()); });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
}

module.exports = { launch, figureStats, watchErrors };
