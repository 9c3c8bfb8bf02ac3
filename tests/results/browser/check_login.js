// Signing in to the dashboard from another host, in Debian's headless
// chromium (tests/dashboard/test_dashboard_login.sh runs it on a host of
// its own, so that the dashboard sees a peer beyond loopback):
//   - a page asked for without a session is the sign-in form (401);
//   - a wrong token typed in is refused (401, the form again, no cookie);
//   - the right token: a 303 to the page asked for, with the session
//     cookie bifocal_session_PORT, HttpOnly, not the token nor holding it;
//   - the page then loads its data (the sweep's job table) with that
//     session alone;
//   - the token is in no URL the browser went to or requested, nor
//     anywhere in the profile chromium leaves behind (its history, form
//     data, caches): it went once, in the form's body.
// Exit status 0 only if all holds; a screenshot goes to OUT_DIR.
//
//   node check_login.js BASE_URL PORT TOKEN OUT_DIR
"use strict";
const fs = require("fs");
const path = require("path");
const { launch } = require("./chromium");

function log(msg) { console.log(new Date().toISOString().slice(11, 19) + " " + msg); }

/* Every file under dir whose bytes hold text. */
function filesHolding(dir, text) {
  const found = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) found.push(...filesHolding(p, text));
    else if (e.isFile() && fs.readFileSync(p).includes(text)) found.push(p);
  }
  return found;
}

/* Types token into the form and submits it; the answer to the POST. */
async function signIn(page, token) {
  await page.fill('input[name="token"]', token);
  const [answer] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith("/login") && r.request().method() === "POST"),
    page.click("form button"),
  ]);
  await page.waitForLoadState("load");
  return answer;
}

async function main() {
  const [base, port, token, out] = process.argv.slice(2);
  const cookieName = "bifocal_session_" + port;
  const problems = [];
  const check = (ok, what) => { log((ok ? "ok: " : "FAIL: ") + what); if (!ok) problems.push(what); };
  const context = await launch();
  const page = await context.newPage();
  const urls = [];
  page.on("request", (r) => urls.push(r.url()));
  const ourCookie = () => context.cookies().then((cs) => cs.find((c) => c.name === cookieName));

  const first = await page.goto(base + "/sweeps/1");
  check(first.status() === 401 && await page.locator('form[action="/login"]').count() === 1,
        `the page without a session is the sign-in form (${first.status()})`);

  const wrong = await signIn(page, "f".repeat(64));
  check(wrong.status() === 401 && !(await ourCookie())
        && await page.locator('input[name="token"]').count() === 1,
        `a wrong token: refused (${wrong.status()}), the form again, no cookie`);

  const right = await signIn(page, token);
  const setCookie = (await right.allHeaders())["set-cookie"] || "";
  check(right.status() === 303 && (await right.headerValue("location")) === "/sweeps/1",
        `the right token: 303 to /sweeps/1 (${right.status()})`);
  check(new URL(page.url()).pathname === "/sweeps/1",
        `the browser is on the page it asked for (${page.url()})`);
  const c = await ourCookie();
  check(c && c.httpOnly && /^[0-9a-f]{64}$/.test(c.value) && c.value !== token
        && !setCookie.includes(token),
        `the session cookie ${cookieName}: HttpOnly, a secret of its own, not the token`);
  check(await page.evaluate(() => document.cookie) === "",
        "scripts of the page cannot read the session");

  // The page's data: the job table of sweep 1, read through the API with
  // the session alone.
  await page.waitForSelector(".bf-jobs tbody tr", { timeout: 30000 });
  const rows = await page.locator(".bf-jobs tbody tr").count();
  check(rows > 0, `the sweep page loaded its data (${rows} job rows)`);
  await page.screenshot({ path: path.join(out, "dashboard-login.png") });

  const leaked = urls.filter((u) => u.includes(token));
  check(leaked.length === 0 && !page.url().includes(token),
        `the token is in no URL requested (${urls.length} requests)`);
  let inProfile = ["(not inspected)"], withPage = [];
  await context.close((profile) => {
    inProfile = filesHolding(profile, token);
    withPage = filesHolding(profile, base + "/sweeps/1");
  });
  // The control: the history chromium wrote holds the page's URL, so a
  // token in it would be found.
  check(withPage.length > 0, "the profile's history holds the page's URL: "
        + (withPage.join(", ") || "none"));
  check(inProfile.length === 0,
        "the token is nowhere in the browser's profile (history, form data): "
        + (inProfile.join(", ") || "none"));
  if (problems.length) {
    console.error("FAIL:\n  " + problems.join("\n  "));
    process.exit(1);
  }
  log("all checks passed");
}

main().catch((e) => { console.error("FAIL: " + (e.stack || e)); process.exit(1); });
