// The live dashboard in Debian's headless chromium, while a real sweep runs
// (tests/e2e/test_e2e_dashboard.sh starts it with `bifocal run`):
//   - the sweeps page lists sweep 1;
//   - the sweep page shows a running job whose step advances on its own
//     (polling), the structure-gap figures draw once a job succeeded, the
//     comparison fills, the job table filters by status and a swept field;
//   - a running job's page draws its training curves, then more points of
//     them as training goes on, its evaluations and the frequency
//     trajectories of its learnable heads, every axis's ticks apart at 4
//     significant digits;
//   - no console error, no page error, no failed request.
// Screenshots of both pages go to OUT_DIR.  Exit status 0 only if all holds.
//
//   node check_dashboard.js BASE_URL OUT_DIR
"use strict";
const path = require("path");
const { launch, figureStats, watchErrors, tickProblems } = require("./chromium");

function log(msg) { console.log(new Date().toISOString().slice(11, 19) + " " + msg); }

async function waitFigure(page, id, minPoints, timeout) {
  await page.waitForFunction(([id, n]) => {
    const f = (window.bifocalFigures ? window.bifocalFigures() : []).find((x) => x.id === id);
    if (!f || !f.plot.root.isConnected) return false;
    let points = 0;
    for (let i = 1; i < f.plot.data.length; i++)
      for (const y of f.plot.data[i]) if (y !== null && isFinite(y)) points++;
    return points >= n;
  }, [id, minPoints], { timeout, polling: 250 });
}

function checkDrawn(figs, ids, problems) {
  for (const id of ids) {
    const f = figs.find((x) => x.id === id);
    if (!f) { problems.push(`${id} is not drawn`); continue; }
    log(`${id}: ${f.points} points, ${f.inked} inked pixels`);
    if (f.points === 0) problems.push(`${id} has no data`);
    if (f.inked < 200) problems.push(`${id} drew almost nothing`);
  }
}

/* The running jobs' rows: [{job, step}]. */
function runningSteps(page) {
  return page.$$eval(".bf-running tbody tr", (rows) => rows.map((r) => {
    const cells = [...r.querySelectorAll("td")].map((td) => td.textContent);
    const step = cells.find((c) => /^\d+\/\d+$/.test(c));
    return { job: Number(cells[0]), step: step ? Number(step.split("/")[0]) : -1 };
  }));
}

/* Every failed request is a problem but those a navigation or the
 * browser's close cut: the browser aborts (net::ERR_ABORTED) the requests
 * of the document it leaves, and the pages poll every second, so under
 * load one is often on its way (the test failed so on /api/sweeps as it
 * left the sweeps page, on /api/sweeps/1/live as the browser closed, and
 * on /api/sweeps/1/live as it left the sweep page: a poll the old page sent
 * after the test had asked for the next page, which a list taken at goto
 * missed).  So an abort is left behind while the page is being left (from
 * goto or close until the new document commits) or when its request was
 * on its way at the commit; the new document's requests count in full. */
let leaving = false;
const onTheirWay = new Set(), leftBehind = new WeakSet();

function watchRequests(page, problems) {
  page.on("request", (r) => onTheirWay.add(r));
  page.on("requestfinished", (r) => onTheirWay.delete(r));
  page.on("framenavigated", (frame) => {
    if (frame !== page.mainFrame()) return;
    for (const r of onTheirWay) leftBehind.add(r);
    onTheirWay.clear();
    leaving = false;
  });
  page.on("requestfailed", (r) => {
    onTheirWay.delete(r);
    const error = r.failure().errorText;
    if (!((leaving || leftBehind.has(r)) && error === "net::ERR_ABORTED"))
      problems.push(`request failed: ${r.url()} ${error}`);
  });
}

function navigate(page, url) {
  leaving = true;
  return page.goto(url);
}

async function sweepPage(page, base, out, problems) {
  await navigate(page, base + "/sweeps/1");
  log("sweep page: waiting for a running job with a step");
  await page.waitForFunction(() => [...document.querySelectorAll(".bf-running tbody tr td")]
    .some((td) => /^[1-9]\d*\/\d+$/.test(td.textContent)), null, { timeout: 60000, polling: 200 });
  const first = (await runningSteps(page)).find((r) => r.step > 0);
  log(`job ${first.job} at step ${first.step}`);
  await page.waitForFunction(([job, step]) => [...document.querySelectorAll(".bf-running tbody tr")]
    .some((r) => {
      const cells = [...r.querySelectorAll("td")].map((td) => td.textContent);
      const s = cells.find((c) => /^\d+\/\d+$/.test(c));
      return Number(cells[0]) !== job || (s && Number(s.split("/")[0]) > step);
    }), [first.job, first.step], { timeout: 20000, polling: 200 });
  const now = (await runningSteps(page)).find((r) => r.job === first.job);
  log(now ? `job ${first.job} advanced to step ${now.step}` : `job ${first.job} ended, another runs`);

  log("sweep page: waiting for a succeeded job's structure-gap figure");
  await waitFigure(page, "fig-accuracy-depth", 1, 120000);
  checkDrawn(await figureStats(page), ["fig-accuracy-depth", "fig-loss-depth"], problems);
  const compareRows = await page.$$eval(".bf-compare tbody tr", (r) => r.length);
  if (compareRows < 1) problems.push("the comparison table is empty");
  // The job table follows the statuses: a job that succeeded shows so
  // (a success used to reload the summary only, and the table kept
  // showing the job running).
  const succeededRow = await page.waitForFunction(() =>
    [...document.querySelectorAll(".bf-jobs tbody tr td:nth-child(3)")]
      .some((td) => td.textContent === "succeeded"), null, { timeout: 10000, polling: 200 })
    .catch(() => null);
  if (!succeededRow) problems.push("the job table shows no succeeded job after one succeeded");

  // Filters: by status, then by a swept field; the server answers with the
  // page, so each check waits for the table to show it.
  const all = await page.$$eval(".bf-jobs tbody tr", (r) => r.length);
  const column = (n) => page.$$eval(`.bf-jobs tbody tr td:nth-child(${n})`, (t) => t.map((x) => x.textContent));
  const shows = (n, want) => page.waitForFunction(([n, want]) => {
    const t = [...document.querySelectorAll(`.bf-jobs tbody tr td:nth-child(${n})`)].map((x) => x.textContent);
    return t.length > 0 && t.every((x) => x === want);
  }, [n, want], { timeout: 10000, polling: 100 }).catch(() => null);
  await page.selectOption('select[data-field="status"]', '"succeeded"');
  await shows(3, "succeeded");
  const statuses = await column(3);
  if (!statuses.length || statuses.some((s) => s !== "succeeded"))
    problems.push(`status filter shows ${JSON.stringify(statuses)}`);
  await page.selectOption('select[data-field="status"]', "");
  await page.selectOption('select[data-field="rope"]', '"spectral"');
  await shows(2, "spectral");
  const ropes = await column(2);
  if (JSON.stringify(ropes) !== JSON.stringify(["spectral"]))
    problems.push(`rope filter shows ${JSON.stringify(ropes)}`);
  await page.selectOption('select[data-field="rope"]', "");
  log(`job table: ${all} rows, filters work`);
  await page.screenshot({ path: path.join(out, "dashboard-sweep.png"), fullPage: true,
                          clip: { x: 0, y: 0, width: 1200, height: 1500 } });
}

async function jobPage(page, base, out, problems) {
  // The spectral job (2) or the bifocal one (3): whichever runs now.
  const running = await runningSteps(page);
  const job = (running.find((r) => r.job >= 2) || { job: 3 }).job;
  await navigate(page, base + "/jobs/" + job);
  log(`job ${job} page: waiting for its curves`);
  await waitFigure(page, "fig-loss", 2, 30000);
  const before = (await figureStats(page)).find((f) => f.id === "fig-loss").points;
  await waitFigure(page, "fig-loss", before + 1, 30000);
  log(`fig-loss grew from ${before} points while the page was open`);
  // The learnable pairs as one heatmap; the raw lines per head on demand.
  await page.waitForFunction(() => window.bifocalFigures().some((f) => f.id === "fig-freq-heatmap"),
                             null, { timeout: 30000, polling: 250 });
  await page.check("#bf-freq-lines");
  await page.waitForFunction(() => window.bifocalFigures().some((f) => /^fig-freq-l0-h/.test(f.id)),
                             null, { timeout: 30000, polling: 250 });
  await waitFigure(page, "fig-eval-accuracy", 1, 90000);
  const figs = await figureStats(page);
  checkDrawn(figs, ["fig-loss", "fig-lr", "fig-grad-norm", "fig-eval-accuracy",
                    "fig-eval-loss"].concat(figs.filter((f) => /^fig-freq/.test(f.id)).map((f) => f.id)),
             problems);
  // Every axis tells its ticks apart at 4 significant digits (the lr
  // axis read 0, 0, 0).
  for (const t of await tickProblems(page)) problems.push(t);
  const attempts = await page.$$eval(".bf-attempts tbody tr", (r) => r.map((x) => x.textContent));
  if (!attempts.length || !/local-1/.test(attempts[0])) problems.push(`attempts: ${JSON.stringify(attempts)}`);
  const config = await page.$eval(".bf-config", (p) => p.textContent);
  if (!/"rope": "(spectral|bifocal)"/.test(config)) problems.push("the config is not shown");
  await page.screenshot({ path: path.join(out, "dashboard-job.png"), fullPage: true,
                          clip: { x: 0, y: 0, width: 1200, height: 1500 } });
}

async function main() {
  const [base, out] = process.argv.slice(2);
  if (!base || !out) throw new Error("usage: check_dashboard.js BASE_URL OUT_DIR");
  const browser = await launch();
  const problems = [];
  try {
    const page = await browser.newPage();
    watchErrors(page, problems);
    page.on("response", (r) => { if (r.status() >= 400) problems.push(`${r.status()} for ${r.url()}`); });
    watchRequests(page, problems);
    await navigate(page, base + "/");
    await page.waitForSelector('.bf-sweeps a[href="/sweeps/1"]', { timeout: 10000 });
    log("sweeps page lists sweep 1");
    await sweepPage(page, base, out, problems);
    await jobPage(page, base, out, problems);
  } catch (e) {
    problems.push(String(e.stack || e));
  } finally {
    leaving = true;
    await browser.close();
  }
  if (problems.length) {
    for (const p of problems) console.error("FAIL: " + p);
    process.exit(1);
  }
  console.log("dashboard OK");
}

main().catch((e) => { console.error("FAIL: " + (e.stack || e)); process.exit(1); });
