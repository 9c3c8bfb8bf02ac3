#!/usr/bin/env python3
"""scripts/check_includes.py: the real tree passes, and each kind of
violation planted in a scratch tree (or in a scratch copy of the real one)
is caught and named.

usage: test_check_includes.py SCRIPT SOURCE_ROOT"""
import os
import shutil
import subprocess
import sys
import tempfile

script, root = sys.argv[1], sys.argv[2]
failures = []


def run(tree):
    r = subprocess.run([sys.executable, script, tree], capture_output=True,
                       text=True)
    return r.returncode, r.stdout


def plant(files):
    """A scratch tree holding files {relative path: text}."""
    d = tempfile.mkdtemp(prefix="bf_layout_")
    for rel, text in files.items():
        os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(d, rel), "w") as f:
            f.write(text)
    return d


def expect(name, files, rc, needle):
    got_rc, out = run(plant(files))
    if got_rc != rc or needle not in out:
        failures.append(f"{name}: rc {got_rc} (want {rc}), output:\n{out}"
                        f"(want it to contain {needle!r})")


rc, out = run(root)
if rc != 0:
    failures.append("the source tree breaks the layout rules:\n" + out)

clean = {"common/a.h": "", "common/a.c": '#include "a.h"\n',
         "engine/e.c": '#include "a.h"\n#include <math.h>\n'}
expect("clean scratch tree", clean, 0, "rules hold")
expect("common includes uv.h", {"common/a.c": "#include <uv.h>\n"}, 1,
       "common/a.c:1: common/ must not include <uv.h>")
expect("common includes sqlite3.h", {"common/a.c": "\n#include <sqlite3.h>\n"},
       1, "common/a.c:2: common/ must not include <sqlite3.h>")
expect("common includes mpi.h", {"common/a.c": "#include <mpi.h>\n"}, 1,
       "must not include <mpi.h>")
expect("engine includes mpi.h", {"engine/e.c": "#include <mpi.h>\n"}, 1,
       "engine/ must not include <mpi.h>")
expect("engine includes uv.h", {"engine/e.c": "#include <uv.h>\n"}, 1,
       "engine/ must not include <uv.h>")
expect("engine reaches into worker",
       {"worker/w.h": "", "engine/e.c": '#include "w.h"\n'}, 1,
       'engine/e.c:1: engine/ must not include "w.h"')
expect("common reaches into engine",
       {"engine/m.h": "", "common/a.c": '#include "m.h"\n'}, 1,
       'common/ must not include "m.h"')
expect("server reaches into results",
       {"results/c.h": "", "server/s.c": '#include "c.h"\n'}, 1,
       'server/ must not include "c.h"')
expect("two modules in a circle",
       {"results/x.h": "", "results/y.h": "",
        "results/x.c": '#include "y.h"\n', "results/y.c": '#include "x.h"\n'},
       1, "include circle between modules: results/x -> results/y")
# The client's folders: dashboard -> results -> common, stream; cli ->
# dashboard, results; nothing includes cli.
CLIENT = {"results/r.h": "", "dashboard/d.h": '#include "r.h"\n',
          "cli/c.c": '#include "d.h"\n#include "r.h"\n#include "wire.h"\n',
          "stream/wire.h": "", "results/r.c": '#include "wire.h"\n'}
expect("the client's folders one way", CLIENT, 0, "rules hold")
expect("results reaches into dashboard",
       dict(CLIENT, **{"results/r.c": '#include "r.h"\n#include "d.h"\n'}),
       1, 'results/r.c:2: results/ must not include "d.h"')
expect("dashboard reaches into cli",
       dict(CLIENT, **{"cli/c.h": "", "dashboard/d.c": '#include "c.h"\n'}),
       1, 'dashboard/d.c:1: dashboard/ must not include "c.h"')
expect("results reaches into cli",
       dict(CLIENT, **{"cli/c.h": "", "results/r.c": '#include "c.h"\n'}),
       1, 'results/r.c:1: results/ must not include "c.h"')


def source_copy():
    """A scratch copy of the source tree's C files, in their folders."""
    d = tempfile.mkdtemp(prefix="bf_layout_copy_")
    keep = shutil.ignore_patterns("build*", ".git", "tests", "node_modules")
    for top in sorted(os.listdir(root)):
        src = os.path.join(root, top)
        if os.path.isdir(src) and not top.startswith((".", "build")) \
                and top != "tests":
            shutil.copytree(src, os.path.join(d, top), ignore=keep)
    return d


# The real results/ made to include a real dashboard/ header: caught at its
# line, though the header resolves and the build would compile it.
copy = source_copy()
report_c = os.path.join(copy, "results", "report.c")
with open(report_c, encoding="utf-8") as f:
    line = sum(1 for _ in f) + 1
with open(report_c, "a", encoding="utf-8") as f:
    f.write('#include "dashboard.h"\n')
got_rc, out = run(copy)
want = f'results/report.c:{line}: results/ must not include "dashboard.h"'
if got_rc != 1 or want not in out:
    failures.append(f"results/report.c including dashboard.h: rc {got_rc} "
                    f"(want 1), output:\n{out}(want it to contain {want!r})")
shutil.rmtree(copy)
expect("a circle of three",
       {"server/p.h": '#include "q.h"\n', "server/q.h": '#include "r.h"\n',
        "server/r.c": '#include "p.h"\n', "server/r.h": ""},
       1, "include circle between modules: server/p -> server/q -> server/r")
expect("a private header is its module's own",
       {"server/s.h": "", "server/s_internal.h": '#include "s.h"\n',
        "server/s.c": '#include "s_internal.h"\n'}, 0, "rules hold")

for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
