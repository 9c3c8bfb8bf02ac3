#!/usr/bin/env python3
"""scripts/check_calls.py: the real build passes, and files planted in a
scratch build that call each other in a circle are caught and named, with
the names that tie them.

usage: test_check_calls.py SCRIPT BUILD_DIR"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scratch_build  # noqa: E402

script, build = sys.argv[1], sys.argv[2]
failures = []


def run(tree):
    return scratch_build.run(script, tree)


def plant(files):
    return scratch_build.plant(files, "bf_calls_")


def expect(name, files, rc, needles):
    got_rc, out = run(plant(files))
    if got_rc != rc or any(n not in out for n in needles):
        failures.append(f"{name}: rc {got_rc} (want {rc}), output:\n{out}"
                        f"(want it to contain {needles!r})")


rc, out = run(build)
if rc != 0:
    failures.append("the build's files call each other in a circle:\n" + out)

expect("calls one way",
       {"server/low.c": "int low(void) { return 1; }\n",
        "server/high.c": "int low(void);\nint high(void) { return low(); }\n"},
       0, ["no circle of calls"])
expect("two files call each other",
       {"server/x.c": "int y(void);\nint x(void) { return y(); }\n"
                      "int x2(void) { return 2; }\n",
        "server/y.c": "int x2(void);\nint y(void) { return x2(); }\n"},
       1, ["call circle between files: server/x.c -> server/y.c",
           "server/x.c -> server/y.c: y", "server/y.c -> server/x.c: x2"])
expect("a circle of three, through data too",
       {"results/p.c": "extern int q_count;\nint p(void) { return q_count; }\n",
        "results/q.c": "int r(void);\nint q_count;\n"
                      "int q(void) { return r(); }\n",
        "results/r.c": "int p(void);\nint r(void) { return p(); }\n"},
       1, ["call circle between files: results/p.c -> results/q.c -> results/r.c",
           "results/p.c -> results/q.c: q_count"])
expect("a name defined twice draws no arrow",
       {"worker/main.c": "int helper(void);\n"
                         "int main(void) { return helper(); }\n",
        "worker/helper.c": "int main(void);\n"
                           "int helper(void) { return main(); }\n",
        "results/main.c": "int main(void) { return 0; }\n"},
       0, ["no circle of calls"])

expect("SQL in server/sweep",
       {"server/sweep/sweep_x.c": "int sqlite3_exec(void);\n"
                                  "int x(void) { return sqlite3_exec(); }\n"},
       1, ["server/sweep/sweep_x.c: server/sweep/ may not call sqlite3_exec"])
expect("SQL in server/store",
       {"server/store/store_x.c": "int sqlite3_exec(void);\n"
                                  "int x(void) { return sqlite3_exec(); }\n"},
       0, ["no circle of calls"])

for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
