// Opens a bifocal HTML report in Debian's headless chromium and checks that
// every figure drew data and that the console shows no errors; saves a
// screenshot.  Exit status 0 only if all holds.
//
//   node check_report.js REPORT.html SCREENSHOT.png [MIN_FIGURES] [MAX_HEIGHT]
//
// MAX_HEIGHT (pixels) crops the full-page screenshot to the top of the page.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { chromium } = require("playwright-core");

const CHROMIUM = "/usr/bin/chromium";

async function main() {
  const [report, shot, minFiguresArg] = process.argv.slice(2);
  if (!report || !shot) throw new Error("usage: check_report.js REPORT.html SCREENSHOT.png [MIN_FIGURES]");
  if (!fs.existsSync(CHROMIUM)) throw new Error(CHROMIUM + " is missing: install Debian's chromium (scripts/deps.sh)");
  const minFigures = Number(minFiguresArg || 1);
  const maxHeight = Number(process.argv[5] || 0);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "bifocal-chromium-"));
  // A fresh profile (--user-data-dir) each run: playwright passes it.
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--no-first-run"],
    viewport: { width: 1200, height: 900 },
  });
  const problems = [];
  try {
    const page = await browser.newPage();
    page.on("console", (m) => { if (m.type() === "error") problems.push("console error: " + m.text()); });
    page.on("pageerror", (e) => problems.push("page error: " + e.message));
    // The report must open with no network: refuse every non-file request.
    await page.route("**/*", (route) => {
      if (route.request().url().startsWith("file:")) return route.continue();
      problems.push("network request: " + route.request().url());
      return route.abort();
    });
    await page.goto("file://" + path.resolve(report));
    await page.waitForFunction(() => typeof window.bifocalFigures === "function");
    const figures = await page.evaluate(() => window.bifocalFigures().map((f) => {
      const u = f.plot;
      let points = 0;
      for (let i = 1; i < u.data.length; i++)
        for (const y of u.data[i]) if (y !== null && y !== undefined && isFinite(y)) points++;
      // Non-blank: some pixel of the plot area is neither empty nor white.
      const c = u.ctx.canvas;
      const px = u.ctx.getImageData(0, 0, c.width, c.height).data;
      let inked = 0;
      for (let i = 0; i < px.length; i += 4)
        if (px[i + 3] > 0 && (px[i] < 250 || px[i + 1] < 250 || px[i + 2] < 250)) inked++;
      return { id: f.id, title: f.title, series: u.series.length - 1, points, inked };
    }));
    for (const f of figures) {
      console.log(`${f.id}: ${f.series} series, ${f.points} points, ${f.inked} inked pixels`);
      if (f.points === 0) problems.push(`${f.id} (${f.title}) has no data`);
      if (f.inked < 200) problems.push(`${f.id} (${f.title}) drew almost nothing`);
    }
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
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  if (problems.length) {
    for (const p of problems) console.error("FAIL: " + p);
    process.exit(1);
  }
  console.log("report OK");
}

main().catch((e) => { console.error("FAIL: " + (e.stack || e)); process.exit(1); });
