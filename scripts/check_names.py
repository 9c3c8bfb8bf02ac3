#!/usr/bin/env python3
"""Checks the naming rules of docs/architecture.md on the objects the
compiler made, as check_calls.py reads them (nm, compile_commands.json).

usage: check_names.py BUILD_DIR     (its sources under BUILD_DIR/..)

A module is a source file of the program folders (tests/, bench/ and
generated files aside), its stem its name ("server/sweep/sweep_from.c":
sweep_from).  For every global name a module defines:

1. It is `main`, starts with `bf_` (the public prefix), or with `L__`
   where L is the module's own library folder (`store__` in server/store/,
   `sweep__` in server/sweep/): a name shared inside one library.
2. A `bf_` name is at home when it starts with `bf_STEM_` (or is
   `bf_STEM`) for its own module's stem; otherwise its first word
   (`bf_WORD_...`) must not be the stem of a module in another folder:
   `bf_sweep_node_zips` may not live in results/, since bf_sweep_* is
   server/sweep/'s.
3. An `L__` name is used by no module outside folder L.
4. A function is called by some other module of the programs or by a
   benchmark, or is a test seam (TEST_SEAMS below: exported so that a test
   drives it directly) that some test calls.  Otherwise it is dead or
   should be static.

Prints one line per violation; exits 1 if any.
"""
import os
import re
import sys

# The program folders and the build's objects, as check_calls reads them.
from check_calls import FOLDERS, objects, symbols

FUNCTION = set("T")

# Exported so that a test drives them directly; each must be called by a
# test (rule 4 checks), so the list cannot hide dead code.
TEST_SEAMS = {
    "bf_alloc_inject_fails": "SQLite's allocator in the fault-injection "
                             "build counts through it",
    "bf_analysis_to_json": "test_sweep reads a parsed analysis block back",
    "bf_code_corpus_cached": "test_code_task counts the cached corpora",
    "bf_code_file_at": "test_code_task reads the corpus's files",
    "bf_code_file_count": "test_code_task reads the corpus's files",
    "bf_code_split_of": "test_code_task checks the split of a path",
    "bf_confseq_interval": "confseq_probe compares it with SciPy",
    "bf_confseq_sign_interval": "confseq_probe compares it with SciPy",
    "bf_job_config_max_depth": "test_job_config checks it alone",
    "bf_progress_sweep_eta_seen": "test_progress drives the observed "
                                  "throughput alone, without the fallback",
    "bf_link_wake": "test_group_link plays a signal handler: the flag, then "
                    "the wake (the workers' handler is link.c's own)",
    "bf_rope_from_name": "test_job_config checks each name both ways",
    "bf_task_from_name": "test_job_config checks each name both ways",
    "bf_mem_cgroup_limit": "test_mem_limit reads a planted cgroup file",
    "bf_job_memory_of": "test_checkpoint checks the estimate against "
                        "what the model allocates",
    "bf_task_measure_depth": "test_tasks checks each example's depth",
    "bf_vocab_token_name": "test_tasks prints examples",
    "bf_checkpoint_load_moments": "test_checkpoint and fuzz_checkpoint "
                                  "load a file's moments alone",
    "bf_checkpoint_save": "test_checkpoint writes files of its own",
    "bf_isa_from_name": "test_isa checks each level's name",
    "bf_isa_use": "test_train forces each level",
    "bf_st_num_tensors": "test_checkpoint and fuzz_checkpoint count tensors",
    "bf_lr_at": "test_train checks the schedule",
    "bf_trainer_current_step": "test_checkpoint checks a resume's step",
    "bf_trainer_evaluate": "test_train evaluates without a worker",
    "bf_trainer_model": "test_train and test_checkpoint read the weights",
    "bf_trainer_outcomes": "test_train reads the per-example outcomes",
    "bf_store_schema_version": "test_store checks the migrations ran",
    "bf_dashboard_init": "fuzz_http drives the dashboard's handler",
    "bf_dashboard_handle": "fuzz_http drives the dashboard's handler",
    "bf_dashboard_free": "fuzz_http frees what it made",
    "bf_http_session_init": "fuzz_http feeds the request parser",
    "bf_http_session_feed": "fuzz_http feeds the request parser",
    "bf_stats_clopper_pearson": "stats_probe checks it against SciPy",
    "bf_stats_mcnemar_exact": "stats_probe checks it against SciPy",
    "bf_stats_newcombe": "stats_probe checks it against SciPy",
    "bf_stats_newcombe_paired": "stats_probe checks it against SciPy",
    "bf_stats_t_quantile": "stats_probe checks it against SciPy",
    "bf_stats_wilson": "stats_probe checks it against SciPy",
}


def classify(src, root):
    """('product' or 'test', path relative to root), or (None, None)."""
    rel = os.path.relpath(src, root).replace(os.sep, "/")
    top = rel.split("/")[0]
    if top in ("tests", "bench"):
        return "test", rel
    return ("product", rel) if top in FOLDERS else (None, None)


def textual_uses(root, folder):
    """{folder/x.c: bf_ names it mentions}, read from the sources: for the
    code this build has no objects of (tests/fuzz: scripts/fuzz.sh builds
    the harnesses with clang; bench/ in a build set up with -Dbench=false,
    as the ASan build is)."""
    out, top = {}, os.path.join(root, *folder.split("/"))
    for name in sorted(os.listdir(top)) if os.path.isdir(top) else ():
        if name.endswith(".c"):
            with open(os.path.join(top, name), encoding="utf-8") as f:
                out[folder + "/" + name] = set(re.findall(r"\bbf_\w+",
                                                          f.read()))
    return out


def folder(rel):
    return os.path.dirname(rel)


def stem(rel):
    return os.path.splitext(os.path.basename(rel))[0]


def check(build, root):
    modules, tests = {}, {}
    for src, obj in objects(build):
        kind, rel = classify(src, root)
        if kind and os.path.exists(obj):
            (modules if kind == "product" else tests)[obj] = rel
    syms = symbols(sorted(modules) + sorted(tests))
    stems = {}                       # stem -> folders of modules so named
    for rel in modules.values():
        stems.setdefault(stem(rel), set()).add(folder(rel))
    users = {}                       # name -> files using it
    for obj, (_, used) in syms.items():
        rel = modules.get(obj) or tests[obj]
        for name in used:
            users.setdefault(name, set()).add(rel)
    unbuilt = ["tests/fuzz"]
    if not any(rel.startswith("bench/") for rel in tests.values()):
        unbuilt.append("bench")
    for folder_ in unbuilt:
        for rel, names in textual_uses(root, folder_).items():
            for name in names:
                users.setdefault(name, set()).add(rel)
    problems = []
    for obj, rel in sorted(modules.items(), key=lambda x: x[1]):
        lib = os.path.basename(folder(rel))
        for name, kind in sorted(syms[obj][0].items()):
            problems += name_problems(rel, lib, name, kind, stems, users)
    return problems


def name_problems(rel, lib, name, kind, stems, users):
    if name == "main":
        return []
    s = stem(rel)
    if name.startswith(lib + "__"):
        outside = sorted(u for u in users.get(name, ())
                         if not u.startswith("tests") and
                         os.path.basename(folder(u)) != lib)
        return [f"{rel}: {name} is {lib}/'s own, used by {', '.join(outside)}"
                ] if outside else []
    if not name.startswith("bf_"):
        return [f"{rel}: {name} is exported without the bf_ prefix (or "
                f"{lib}__ for a name shared inside {lib}/)"]
    out = []
    at_home = name == "bf_" + s or name.startswith("bf_" + s + "_")
    word = name[3:].split("_")[0]
    owners = stems.get(word, set()) - {folder(rel)}
    if not at_home and owners:
        out.append(f"{rel}: {name} takes the prefix bf_{word}_ of "
                   f"{', '.join(sorted(o + '/' + word for o in owners))}")
    if kind in FUNCTION:
        callers = users.get(name, set()) - {rel}
        product = [u for u in callers if not u.startswith("tests")]
        by_tests = [u for u in callers if u.startswith("tests")]
        if not product and not (name in TEST_SEAMS and by_tests):
            out.append(f"{rel}: {name} is exported but no other module "
                       f"calls it (make it static, or delete it)")
    return out


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: check_names.py BUILD_DIR")
    root = os.path.dirname(os.path.abspath(argv[1]))
    problems = check(argv[1], root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_names: {len(problems)} violation(s)")
        return 1
    print("check_names: every exported name is at home and called")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
