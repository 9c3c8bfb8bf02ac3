#!/usr/bin/env python3
"""scripts/check_names.py: the real build passes, and each kind of
violation planted in a scratch build is caught and named.

usage: test_check_names.py SCRIPT BUILD_DIR"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scratch_build  # noqa: E402

script, build = sys.argv[1], sys.argv[2]
failures = []


def run(tree):
    return scratch_build.run(script, tree)


def plant(files):
    return scratch_build.plant(files, "bf_names_")


def expect(name, files, rc, needles):
    got_rc, out = run(plant(files))
    if got_rc != rc or any(n not in out for n in needles):
        failures.append(f"{name}: rc {got_rc} (want {rc}), output:\n{out}"
                        f"(want it to contain {needles!r})")


rc, out = run(build)
if rc != 0:
    failures.append("the build breaks the naming rules:\n" + out)

SWEEP = {"server/sweep/sweep.c": "int bf_sweep_parse(void) { return 1; }\n",
         "server/submit.c": "int bf_sweep_parse(void);\n"
                            "int main(void) { return bf_sweep_parse(); }\n"}
expect("names at home, each called", SWEEP, 0, ["every exported name"])
expect("another folder's prefix",
       dict(SWEEP, **{"results/zip_labels.c":
                      "int bf_sweep_node_zips(void) { return 2; }\n",
                      "results/use.c": "int bf_sweep_node_zips(void);\n"
                      "int bf_use_it(void) { return bf_sweep_node_zips(); }\n",
                      "results/main.c": "int bf_use_it(void);\n"
                      "int main(void) { return bf_use_it(); }\n"}),
       1, ["results/zip_labels.c: bf_sweep_node_zips takes the prefix "
           "bf_sweep_ of server/sweep/sweep"])
expect("an exported function nobody calls",
       dict(SWEEP, **{"common/hash.c": "int bf_hash_unused(void) "
                                       "{ return 3; }\n"}),
       1, ["common/hash.c: bf_hash_unused is exported but no other module "
           "calls it"])
expect("a name without the prefix",
       dict(SWEEP, **{"common/hash.c": "int fnv(void) { return 4; }\n",
                      "common/use.c": "int fnv(void);\n"
                      "int bf_use_fnv(void) { return fnv(); }\n"}),
       1, ["common/hash.c: fnv is exported without the bf_ prefix"])
expect("a library's own name used outside it",
       dict(SWEEP, **{"server/store/store.c": "int store__ids(void) "
                                              "{ return 5; }\n",
                      "server/queries.c": "int store__ids(void);\n"
                      "int bf_queries_ids(void) { return store__ids(); }\n"}),
       1, ["server/store/store.c: store__ids is store/'s own, used by "
           "server/queries.c"])

for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
