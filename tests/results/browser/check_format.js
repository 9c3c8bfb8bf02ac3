// report.js's number formatting, which the report's and the dashboard's
// tables use: integers (steps, seeds) print exactly, other numbers to 4
// significant digits.  Loads report.js as the pages do (one script) into a
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
let failed = 0;
for (const [x, digits, want] of cases) {
  const got = fmt(x, digits);
  if (got !== want) {
    console.error(`FAIL: fmt(${x}${digits ? ", " + digits : ""}) = "${got}", expected "${want}"`);
    failed++;
  }
}
if (failed) process.exit(1);
console.log(`fmt: ${cases.length} cases OK`);
