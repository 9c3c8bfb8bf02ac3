// Saves the figures of a `bifocal report` HTML file as PNG files, through
// Debian's headless chromium (the figures are drawn by the report's own
// front-end, so the PNG is exactly what a reader of the report sees).
//
//   node scripts/report_png.js REPORT.html OUT_PREFIX [GROUP...]
//
// Writes OUT_PREFIX-accuracy-depth.png, -loss-depth.png, -train-loss.png,
// -forest.png (the loss ratio to the baseline against depth, when the
// report compares groups), and for each GROUP (a label of the report's
// "Spectral evolution" group list, e.g. "rope=spectral")
// -freq-heatmap-N.png (log(omega / omega(0)) over training) and
// -spectrum-N.png, N counting the GROUP arguments from 1.  Fails naming
// what it cannot find.
//
//   node scripts/report_png.js --page URL OUT.png HEIGHT
//
// saves the top HEIGHT pixels of a page (a report's file:// or a dashboard's
// http:// URL) at 1400 px wide once its figures are drawn
// (scripts/screenshots.sh: docs/screenshots/).
// scripts/browser-deps.sh installs chromium and playwright-core; the browser
// starts as the browser tests start it (tests/results/browser/chromium.js).
"use strict";
const path = require("path");
const { launch } = require(path.join(__dirname, "..", "tests", "results",
                                     "browser", "chromium"));

async function shoot(page, id, file) {
  const fig = page.locator("figure#" + id);
  if (await fig.count() !== 1) throw new Error("the report has no figure " + id);
  await fig.screenshot({ path: file });
  console.log("wrote " + file);
}

/* The top of a page once a figure is drawn. */
async function page(url, file, height) {
  const browser = await launch();
  try {
    const p = await browser.newPage();
    await p.setViewportSize({ width: 1400, height: 900 });
    await p.goto(url);
    await p.waitForFunction(() => typeof window.bifocalFigures === "function" &&
                            window.bifocalFigures().length > 0, null, { timeout: 30000 });
    await p.screenshot({ path: file, fullPage: true, clip: { x: 0, y: 0, width: 1400, height: Number(height) } });
    console.log("wrote " + file);
  } finally {
    await browser.close();
  }
}

async function main() {
  if (process.argv[2] === "--page") {
    const [url, file, height] = process.argv.slice(3);
    if (!url || !file || !(Number(height) > 0))
      throw new Error("usage: report_png.js --page URL OUT.png HEIGHT");
    return page(url, file, height);
  }
  const [report, prefix, ...groups] = process.argv.slice(2);
  if (!report || !prefix)
    throw new Error("usage: report_png.js REPORT.html OUT_PREFIX [GROUP...]");
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await page.goto("file://" + path.resolve(report));
    await page.waitForFunction(() => typeof window.bifocalFigures === "function");
    await shoot(page, "fig-accuracy-depth", prefix + "-accuracy-depth.png");
    await shoot(page, "fig-loss-depth", prefix + "-loss-depth.png");
    await shoot(page, "fig-train-loss", prefix + "-train-loss.png");
    if (await page.locator("figure#fig-forest").count() === 1)
      await shoot(page, "fig-forest", prefix + "-forest.png");
    for (let i = 0; i < groups.length; i++) {
      const pick = page.locator("select#bf-freq-group");
      const labels = await pick.locator("option").allTextContents();
      if (!labels.includes(groups[i]))
        throw new Error(`no learnable group '${groups[i]}' in the report (it has: ${labels.join("; ")})`);
      await pick.selectOption({ label: groups[i] });
      await shoot(page, "fig-freq-heatmap", `${prefix}-freq-heatmap-${i + 1}.png`);
      await shoot(page, "fig-spectrum", `${prefix}-spectrum-${i + 1}.png`);
    }
  } finally {
    await browser.close();
  }
}

main().catch((e) => { console.error("report_png: " + e.message); process.exit(1); });
