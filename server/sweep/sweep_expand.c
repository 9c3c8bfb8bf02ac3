/* Sweep files: expansion into job configs, each validated, checked against
 * duplicates and matched with its source job, with error messages that
 * point at the line responsible.  See sweep.h for the order. */
#include "hash.h"
#include "sweep_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "model_size.h"

/* Source jobs listed in an ambiguity message. */
#define MAX_LISTED 5

/* ---- blaming a validation error ------------------------------------------- */

/* Does leaving out one assignment cure the error on `field`? */
static int cures(const bf_sweep *sw, const bf_sweep_stage *st,
                 const sweep_combo *c, size_t skip_axis, size_t skip_layer,
                 const char *skip_key, const char *field)
{
    bf_job_config cfg;
    bf_error e;
    if (sweep__build(sw, st, c, skip_axis, skip_layer, skip_key, &cfg, &e) < 0)
        return 0;
    return bf_job_config_validate(&cfg, &e) == 0 || strcmp(e.field, field) != 0;
}

/* An axis whose value, left out, cures the error: its line, and "; caused by
 * grid.x = v" in where.  0 when none does. */
static int blame_axis(const bf_sweep *sw, const bf_sweep_stage *st,
                      const sweep_combo *c, const char *field, char *where,
                      size_t cap)
{
    for (size_t a = 0; a < st->n_axes; a++) {
        if (!cures(sw, st, c, a, (size_t)-1, NULL, field))
            continue;
        const sweep_axis *ax = &st->axes[a];
        char text[128];
        sweep__value_text(json_object_get(ax->assign[c->pick[a]], ax->fields[0]),
                         text, sizeof text);
        snprintf(where, cap, "; caused by %s.%s = %s", ax->where,
                 ax->fields[0], text);
        return ax->lines[c->pick[a] * ax->n_fields];
    }
    return 0;
}

/* The same for a base field. */
static int blame_base(const bf_sweep *sw, const bf_sweep_stage *st,
                      const sweep_combo *c, const char *field, char *where,
                      size_t cap)
{
    for (size_t i = st->n_layers; i-- > 0;) {
        const char *key;
        json_t *v;
        json_object_foreach(st->layers[i].obj, key, v) {
            if (!cures(sw, st, c, (size_t)-1, i, key, field))
                continue;
            char text[128];
            sweep__value_text(v, text, sizeof text);
            snprintf(where, cap, "; caused by base.%s = %s", key, text);
            return sweep__line(sw, "%s/%s", st->layers[i].ptr, key);
        }
    }
    return 0;
}

/* Rewrites a validation error of job `index` to name the file, the line of
 * the value or base field responsible, the field and the combination. */
static int blame(const bf_sweep *sw, const bf_sweep_stage *st, size_t index,
                 const sweep_combo *c, const bf_error *verr, bf_error *err)
{
    const char *field = verr->field;
    char where[256] = "", jobdesc[512];
    sweep__describe(sw, st, c, jobdesc, sizeof jobdesc);
    int line = 0;
    for (size_t a = 0; a < st->n_axes && !line; a++)
        for (size_t f = 0; f < st->axes[a].n_fields; f++)
            if (strcmp(st->axes[a].fields[f], field) == 0)
                line = st->axes[a].lines[c->pick[a] * st->axes[a].n_fields + f];
    if (!line)
        line = blame_axis(sw, st, c, field, where, sizeof where);
    for (size_t i = st->n_layers; i-- > 0 && !line;)
        if (json_object_get(st->layers[i].obj, field))
            line = sweep__line(sw, "%s/%s", st->layers[i].ptr, field);
    if (!line)
        line = blame_base(sw, st, c, field, where, sizeof where);
    if (!line)
        line = sweep__line(sw, "%s%s", st->ptr, st->n_axes ? "/grid" : "/base");
    return bf_error_set(err, sw->file, line, field, "%s (job %zu: %s%s)",
                        bf_error_body(verr), sweep__job_number(index), jobdesc,
                        where);
}

static int duplicate_error(const bf_sweep *sw, size_t first, size_t index,
                           const bf_sweep_stage *st, const sweep_combo *c,
                           bf_error *err)
{
    const bf_sweep_stage *prev_st;
    sweep_combo prev;
    sweep__locate(sw, first, &prev_st, &prev);
    char a_desc[512], b_desc[512];
    sweep__describe(sw, prev_st, &prev, a_desc, sizeof a_desc);
    sweep__describe(sw, st, c, b_desc, sizeof b_desc);
    int line = st->seeds_line ? sweep__line(sw, "%s/seeds/%zu", st->ptr,
                                           c->seed) : 0;
    const char *field = "seeds";
    for (size_t a = 0; a < st->n_axes && prev_st == st; a++)
        if (prev.pick[a] != c->pick[a]) {
            line = st->axes[a].lines[c->pick[a] * st->axes[a].n_fields];
            field = st->axes[a].fields[0];
            break;
        }
    if (prev_st != st) {
        line = sweep__line(sw, "%s", st->ptr);
        field = "stages";
    }
    return bf_error_set(err, sw->file, line, field,
                        "duplicate job: job %zu (%s) has the same configuration "
                        "as job %zu (%s)", sweep__job_number(index), b_desc,
                        sweep__job_number(first), a_desc);
}

/* ---- sources -------------------------------------------------------------- */

/* A job of stage `from`: recorded in every reference that starts from it. */
static void record_source(bf_sweep *sw, size_t from, const json_t *job)
{
    for (size_t t = from + 1; t < sw->n_stages; t++)
        for (size_t r = 0; r < sw->stages[t].n_refs; r++) {
            sweep_ref *ref = &sw->stages[t].refs[r];
            if (ref->from != from)
                continue;
            if (!ref->map.hash)
                sweep__map_init(&ref->map, sw->stages[from].n_jobs);
            if (ref->n_src == ref->cap) {
                ref->cap = ref->cap ? 2 * ref->cap : 64;
                ref->values = bf_xrealloc(ref->values, ref->cap * ref->n_keys *
                                          sizeof *ref->values);
            }
            uint64_t *vals = ref->values + ref->n_src * ref->n_keys;
            sweep__key_values(ref, job, vals);
            sweep__map_add(&ref->map, sweep__key_hash(vals, ref->n_keys),
                           ref->n_src++);
        }
}

/* "seed=4, task=counter": the key fields in keep[] with job's values. */
static void key_text(const sweep_ref *ref, const json_t *job, const char *keep,
                     char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < ref->n_keys; k++) {
        if (!keep[k])
            continue;
        char text[128];
        sweep__value_text(bf_job_config_json_get(job, ref->keys[k]), text,
                          sizeof text);
        n = sweep__append(buf, n, cap, "%s%s=%s", n ? ", " : "", ref->keys[k],
                         text);
    }
}

static int no_source(const bf_sweep *sw, const sweep_ref *ref,
                     const json_t *job,
                     const uint64_t *vals, const char *head, int line,
                     bf_error *err)
{
    char missing[ref->n_keys], all[ref->n_keys];
    int n_missing = 0;
    for (size_t k = 0; k < ref->n_keys; k++) {
        all[k] = 1;
        size_t j = 0;
        while (j < ref->n_src && ref->values[j * ref->n_keys + k] != vals[k])
            j++;
        missing[k] = j == ref->n_src;
        n_missing += missing[k];
    }
    char text[512];
    key_text(ref, job, n_missing ? missing : all, text, sizeof text);
    return bf_error_set(err, sw->file, line, "init_from", "%s finds no source "
                        "job in stage %s: no job there has %s%s (a source "
                        "has the job's seed and the values of the fields "
                        "both stages sweep)", head,
                        sw->stages[ref->from].name, text,
                        n_missing ? "" : " together");
}

static int many_sources(const bf_sweep *sw, const bf_sweep_stage *st,
                        const sweep_ref *ref, const uint64_t *vals,
                        size_t count, const char *head, int line,
                        bf_error *err)
{
    const bf_sweep_stage *src = &sw->stages[ref->from];
    char jobs[128] = "", differ[256] = "";
    size_t n = 0, listed = 0;
    for (size_t j = 0; j < ref->n_src && listed < MAX_LISTED; j++)
        if (memcmp(ref->values + j * ref->n_keys, vals,
                   ref->n_keys * sizeof *vals) == 0)
            n = sweep__append(jobs, n, sizeof jobs, "%s%zu",
                             listed++ ? ", " : "",
                             sweep__job_number(src->first_job + j));
    n = 0;
    for (size_t a = 0; a < src->n_axes; a++)
        for (size_t f = 0; f < src->axes[a].n_fields; f++) {
            const char *field = src->axes[a].fields[f];
            size_t k = 0;
            while (k < ref->n_keys && strcmp(ref->keys[k], field) != 0)
                k++;
            if (k == ref->n_keys && strcmp(field, "init_from") != 0)
                n = sweep__append(differ, n, sizeof differ, "%s%s",
                                 n ? ", " : "", field);
        }
    return bf_error_set(err, sw->file, line, "init_from", "%s matches %zu "
                        "jobs of stage %s (jobs %s%s), which differ in %s: "
                        "sweep %s in stage %s too, or give it one value in "
                        "stage %s", head, count, src->name, jobs,
                        count > listed ? ", ..." : "", differ, differ,
                        st->name, src->name);
}

/* The source of a job whose init_from is "stage:NAME": its index in *out. */
static int find_source(const bf_sweep *sw, const bf_sweep_stage *st,
                       const sweep_combo *c, size_t index,
                       const bf_job_config *cfg, const json_t *job,
                       size_t *out, bf_error *err)
{
    const char *name = cfg->init_from + strlen(STAGE_REF);
    const sweep_ref *ref = st->refs;
    while (strcmp(sw->stages[ref->from].name, name) != 0)
        ref++;   /* parse_refs made one for every name a job can have */
    uint64_t vals[ref->n_keys];
    sweep__key_values(ref, job, vals);
    size_t count, pos1 = ref->map.hash
        ? sweep__map_find(&ref->map, sweep__key_hash(vals, ref->n_keys), &count)
        : 0;
    if (!ref->map.hash)
        count = 0;
    if (count == 1) {
        *out = sw->stages[ref->from].first_job + pos1 - 1;
        return 0;
    }
    char desc[512], head[600];
    sweep__describe(sw, st, c, desc, sizeof desc);
    snprintf(head, sizeof head, "job %zu (%s)", sweep__job_number(index), desc);
    int line = sweep__field_line(sw, st, c, "init_from");
    return count == 0
        ? no_source(sw, ref, job, vals, head, line, err)
        : many_sources(sw, st, ref, vals, count, head, line, err);
}

/* ---- expansion ------------------------------------------------------------ */

typedef struct expansion {
    bf_sweep *sw;
    sweep_map seen;          /* config hash -> first job */
    sweep_map cells;         /* cell_hash -> cell */
    size_t n_cells;
    size_t combo_cell;       /* the cell of the combo being expanded */
    sweep_warner *warner;
    bf_sweep_visit_fn visit;
    void *ctx;
} expansion;

/* The hash of a job's cell: its stage and its config but seed.  A
 * collision of two cells' 64-bit hashes (about one in 10^7 for a million
 * cells) would merge them: only the grouping of their jobs would suffer. */
static int cell_hash(const bf_sweep *sw, const bf_sweep_stage *st,
                     const bf_job_config *cfg, uint64_t *h)
{
    bf_job_config unseeded = *cfg;
    unseeded.seed = 0;
    char *json = bf_job_config_to_canonical_json(&unseeded);
    if (!json)
        return -1;
    *h = bf_fnv1a64(json, strlen(json))
         + 0x9E3779B97F4A7C15ULL * (uint64_t)(st - sw->stages);
    free(json);
    return 0;
}

/* The cell of a job of combo c: found once per combo, at its first seed
 * (its other seeds differ from it only in seed). */
static int cell_of(expansion *x, const bf_sweep_stage *st,
                   const sweep_combo *c, const bf_job_config *cfg,
                   size_t *cell, bf_error *err)
{
    if (c->seed == 0) {
        uint64_t h;
        if (cell_hash(x->sw, st, cfg, &h) < 0)
            return bf_error_set(err, x->sw->file, 0, NULL, "out of memory");
        size_t known = sweep__map_add(&x->cells, h, x->n_cells);
        x->combo_cell = known ? known - 1 : x->n_cells++;
    }
    *cell = x->combo_cell;
    return 0;
}

/* The cell of the grid/zip of job c of a stage with a search: its picks on
 * every axis but the search's (the last), read as one number. */
static size_t trial_group(const bf_sweep_stage *st, const sweep_combo *c)
{
    size_t g = 0;
    for (size_t a = 0; a + 1 < st->n_axes; a++)
        g = g * st->axes[a].n + c->pick[a];
    return g;
}

/* A stage's prune rule and selection fit every job of it (sweep_prune.c). */
static int check_prune(const bf_sweep *sw, const bf_sweep_stage *st,
                       const sweep_combo *c, size_t index,
                       const bf_job_config *cfg, bf_error *err)
{
    char desc[512], job[600];
    sweep__describe(sw, st, c, desc, sizeof desc);
    snprintf(job, sizeof job, "job %zu (%s)", sweep__job_number(index), desc);
    return sweep__prune_check_job(sw, st, cfg, job, err);
}

static int expand_job(expansion *x, const bf_sweep_stage *st,
                      const sweep_combo *c, size_t index, bf_error *err)
{
    bf_sweep *sw = x->sw;
    bf_job_config cfg;
    bf_error verr;
    if (sweep__build(sw, st, c, (size_t)-1, (size_t)-1, NULL, &cfg, err) < 0)
        return -1;
    if (bf_job_config_validate(&cfg, &verr) < 0 ||
        bf_job_memory_check(&cfg, 1, (size_t)sw->memory_budget_gib << 30,
                            "the sweep's memory_budget_gib", &verr) < 0)
        return blame(sw, st, index, c, &verr, err);
    if ((st->prune || st->select) &&
        check_prune(sw, st, c, index, &cfg, err) < 0)
        return -1;
    size_t cell = 0;
    if (cell_of(x, st, c, &cfg, &cell, err) < 0)
        return -1;
    char *json = bf_job_config_to_canonical_json(&cfg);
    if (!json)
        return bf_error_set(err, sw->file, 0, NULL, "out of memory");
    uint64_t h = bf_fnv1a64(json, strlen(json));
    size_t first = sweep__map_add(&x->seen, h, index);
    if (first) {
        free(json);
        return duplicate_error(sw, first - 1, index, st, c, err);
    }
    bf_sweep_job job = {.index = index, .stage = st->name,
                        .source = BF_SWEEP_NO_SOURCE, .cell = cell,
                        .trial = st->search ? c->pick[st->n_axes - 1]
                                            : BF_SWEEP_NO_TRIAL,
                        .trial_group = st->search ? trial_group(st, c) : 0,
                        .prune = st->prune, .select = st->select,
                        .cfg = &cfg, .config_json = json,
                        .held = st->seeds_min && c->seed >= st->seeds_min};
    snprintf(job.hash_hex, sizeof job.hash_hex, "%016llx",
             (unsigned long long)h);
    json_t *obj = st->referenced || st->n_refs || st->selected_from ||
                  st->from ? bf_job_config_to_json(&cfg) : NULL;
    if (st->referenced)
        record_source(sw, (size_t)(st - sw->stages), obj);
    if (st->selected_from)
        sweep__from_record(sw, st, c, job.trial_group, obj);
    int rc = 0;
    if (strncmp(cfg.init_from, STAGE_REF, strlen(STAGE_REF)) == 0)
        rc = find_source(sw, st, c, index, &cfg, obj, &job.source, err);
    if (rc == 0 && st->from) {
        job.from_stage = sw->stages[st->from->ref.from].name;
        job.from_fields = sw->stages[st->from->ref.from].select->space;
        rc = sweep__from_match(sw, st, c, index, &cfg, obj, &job.from_group,
                               err);
    }
    if (rc == 0) {
        sweep__warner_job(x->warner, st, c, index, &cfg);
        rc = x->visit(x->ctx, &job, err);
    }
    json_decref(obj);
    free(json);
    return rc;
}

static int expand_stage(expansion *x, const bf_sweep_stage *st, bf_error *err)
{
    size_t index = st->first_job;
    for (size_t combo = 0; combo < st->n_combos; combo++) {
        if (sweep__excluded(st, combo))
            continue;
        sweep_combo c;
        sweep__decode(st, combo, &c);
        for (c.seed = 0; c.seed < st->n_seeds; c.seed++)
            if (expand_job(x, st, &c, index++, err) < 0)
                return -1;
    }
    return 0;
}

int bf_sweep_expand(bf_sweep *sw, bf_sweep_visit_fn visit, void *ctx,
                    bf_error *err)
{
    expansion x = {.sw = sw, .visit = visit, .ctx = ctx};
    sweep__map_init(&x.seen, sw->n_jobs);
    sweep__map_init(&x.cells, sw->n_jobs);
    x.warner = sweep__warner_new(sw);
    int rc = 0;
    for (size_t s = 0; s < sw->n_stages && rc == 0; s++)
        rc = expand_stage(&x, &sw->stages[s], err);
    sweep__map_free(&x.seen);
    sweep__map_free(&x.cells);
    json_t *warnings = sweep__warner_finish(x.warner);
    json_decref(sw->warnings);
    sw->warnings = rc == 0 ? warnings : NULL;
    if (rc != 0)
        json_decref(warnings);
    return rc;
}
