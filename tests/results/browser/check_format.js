// report.js's number formatting, which the report's and the dashboard's
// tables, labels and axes use: integers (steps, seeds) print exactly, other
// numbers to 4 significant digits.  Loads report.js as the pages do (one script) into a
// plain context; exit status 0 only if all holds.
//
//   node check_format.js REPORT_JS
"use strict";
const fs = require("fs");
const vm = require("vm");

const context = { window: {} };   // report.js publishes its figures there
vm.createContext(context);
vm.runInContext(fs.readFileSync(process.argv[2], "utf8") + "\nthis.R = BifocalReport;", context);
const fmt = context.R.fmt;
const cases = [
  [20000, undefined, "20000"], [20004, undefined, "20004"],
  [12345, undefined, "12345"], [12346, undefined, "12346"],
  [9007199254740991, undefined, "9007199254740991"],
  [0, undefined, "0"], [-42, undefined, "-42"], [7, 3, "7"],
  [0.123456, undefined, "0.1235"], [2.5, undefined, "2.5"],
  [1234.5678, undefined, "1235"], [1.5e-7, undefined, "1.5e-7"],
  [12.3456, 3, "12.3"], [null, undefined, ""], [NaN, undefined, ""],
];
// Labels (a group's, from the config's full precision) and axis ticks
// (uPlot's splits, with their float noise) read at 4 significant digits.
const labels = [
  ["stage=tune rope=rope lr=0.00010000000000000009", "stage=tune rope=rope lr=0.0001"],
  ["lr=0.003162277660168382 seed=3", "lr=0.003162 seed=3"],
  ["rope=rope freq_lr_mult=10.0", "rope=rope freq_lr_mult=10"],
  ["steps=20000 lr=1.2345678e-7", "steps=20000 lr=1.235e-7"],
];
const ticks = [
  [0.0001, "1e-4"], [0.00025, "2.5e-4"], [0.30000000000000004, "0.3"],
  [20000, "20000"], [1234567, "1.235e6"], [0, "0"], [-0.5, "-0.5"], [null, ""],
];
let failed = 0;
function expect(what, got, want) {
  if (got === want) return;
  console.error(`FAIL: ${what} = "${got}", expected "${want}"`);
  failed++;
}
for (const [x, digits, want] of cases)
  expect(`fmt(${x}${digits ? ", " + digits : ""})`, fmt(x, digits), want);
for (const [text, want] of labels) expect(`short("${text}")`, context.R.short(text), want);
for (const [x, want] of ticks) expect(`tick(${x})`, context.R.tick(x), want);
if (failed) process.exit(1);
console.log(`fmt, short, tick: ${cases.length + labels.length + ticks.length} cases OK`);
