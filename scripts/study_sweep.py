#!/usr/bin/env python3
"""The sweep files scripts/study.sh submits for Study 2, written from the
ones in configs/ (never a second copy of them):

  study_sweep.py FILE OUT [--smoke] [--choice CHOICE.json]

--choice replaces each named stage's zip by the encodings in CHOICE.json
({"STAGE": [{"rope": ..., "rope_base": ..., "random_positions": ...,
"lr": ..., "freq_lr_mult": ...}, ...]}: the scale check's choice).
--smoke shrinks the study to a smoke run (SMOKE below, the one place its
sizes are set): the same stages, cells, search, pruning, selection,
from: and adaptive seeds, with few steps, trials and seeds.  OUT is JSON,
which bifocal reads as YAML."""
import json
import re
import sys

import yaml


class Loader(yaml.SafeLoader):
    """YAML 1.2's floats: PyYAML (YAML 1.1) reads 1.0e4 as a string."""


Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))

# Smoke sizes: steps are divided by SMOKE_STEPS_DIV (so stages keep their
# proportions and their jobs stay distinct), every other job field named
# here takes this value wherever the file sets it; search trials, prune
# rungs and seeds are set below.
SMOKE_STEPS_DIV = 40
SMOKE_FIELDS = {"eval_every": 5, "log_every": 5, "freq_every": 5,
                "checkpoint_every": 5, "warmup_steps": 2, "eval_examples": 32}
SMOKE_TRIALS = 3
SMOKE_RUNGS = [5, 15]
SMOKE_SEEDS = 2                       # fixed seeds
SMOKE_ADAPTIVE = {"min": 2, "max": 3}  # seeds until decided


def smoke_base(base):
    if "steps" in base:
        base["steps"] = max(base["steps"] // SMOKE_STEPS_DIV, 5)
    for key in SMOKE_FIELDS:
        if key in base:
            base[key] = SMOKE_FIELDS[key]


def smoke(doc):
    smoke_base(doc.get("base", {}))
    for stage in doc.get("stages", [doc]):
        smoke_base(stage.get("base", {}))
        if "search" in stage:
            stage["search"]["trials"] = SMOKE_TRIALS
        if "prune" in stage:
            stage["prune"]["rungs"] = SMOKE_RUNGS
        seeds = stage.get("seeds")
        if isinstance(seeds, dict):
            seeds.update(SMOKE_ADAPTIVE)
        elif seeds is not None:
            stage["seeds"] = SMOKE_SEEDS


def apply_choice(doc, choice):
    stages = {s["name"]: s for s in doc["stages"]}
    for name, encodings in choice.items():
        if name not in stages:
            sys.exit(f"study_sweep.py: the choice names stage '{name}', "
                     f"which {doc['name']} does not have")
        keys = list(stages[name]["zip"].keys())
        stages[name]["zip"] = {k: [e[k] for e in encodings] for k in keys}


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    path, out = argv[1], argv[2]
    with open(path) as f:
        doc = yaml.load(f, Loader=Loader)
    rest = argv[3:]
    if "--choice" in rest:
        with open(rest[rest.index("--choice") + 1]) as f:
            apply_choice(doc, json.load(f))
    if "--smoke" in rest:
        smoke(doc)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
