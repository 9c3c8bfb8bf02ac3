/* Sweep files: `from: "stage:NAME"`, a stage whose jobs take the values
 * that stage NAME's selection chose (its search's fields, from the chosen
 * trial), per cell: a job takes the values chosen in the cell of NAME
 * whose grid/zip fields have the job's values.  Parsed after every stage
 * (sweep.c), matched job by job during expansion (sweep_expand.c); the
 * coordinator fills the values in when the cell's selection is stored
 * (store_prune.c, docs/sweeps.md).  A stage may start from an earlier
 * stage's checkpoints too (init_from "stage:"): its jobs are queued once
 * both are in, whichever comes last. */
#include "sweep_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "model_size.h"

/* ---- parsing -------------------------------------------------------------- */

/* The stage named by `from:`'s value, an earlier one with a selection of
 * one trial per cell: its index in *out. */
static int source_stage(const bf_sweep *sw, size_t t, const char *value,
                        int line, size_t *out, bf_error *err)
{
    const bf_sweep_stage *st = &sw->stages[t];
    if (!value || strncmp(value, STAGE_REF, strlen(STAGE_REF)) != 0)
        return bf_error_set(err, sw->file, line, "from", "from must be "
                            "\"stage:NAME\": the earlier stage whose selected "
                            "values this stage takes");
    const char *name = value + strlen(STAGE_REF);
    size_t s = 0;
    while (s < t && strcmp(sw->stages[s].name, name) != 0)
        s++;
    if (s == t)
        return bf_error_set(err, sw->file, line, "from", "'%s' in stage %s: "
                            "no earlier stage has that name", value, st->name);
    const bf_sweep_stage *src = &sw->stages[s];
    if (!src->select)
        return bf_error_set(err, sw->file, line, "from", "'%s' in stage %s: "
                            "stage %s has no select:, so it chooses no values "
                            "to take", value, st->name, name);
    if (src->select->best != 1)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/best",
                            src->select_ptr), "best", "select.best is %d in "
                            "stage %s, but stage %s takes its values with "
                            "from: a cell's values come from one chosen "
                            "trial (best: 1)", src->select->best, name,
                            st->name);
    *out = s;
    return 0;
}

/* The line where st itself (its own base or an axis) sets field, or 0. */
static int own_line(const bf_sweep *sw, const bf_sweep_stage *st,
                    const char *field)
{
    for (size_t a = 0; a < st->n_axes; a++)
        for (size_t f = 0; f < st->axes[a].n_fields; f++)
            if (strcmp(st->axes[a].fields[f], field) == 0)
                return st->axes[a].lines[f];
    for (size_t i = 0; i < st->n_layers; i++)
        if (strcmp(st->layers[i].ptr, st->base_ptr) == 0 &&
            json_object_get(st->layers[i].obj, field))
            return sweep__line(sw, "%s/%s", st->base_ptr, field);
    return 0;
}

/* Every field taken is st's to take: set neither by its own base nor by
 * its axes (the top-level base is every stage's default). */
static int check_taken(const bf_sweep *sw, const bf_sweep_stage *st,
                       const bf_sweep_stage *src, bf_error *err)
{
    for (size_t f = 0; f < src->search->n_fields; f++) {
        const char *field = src->search->fields[f];
        int line = own_line(sw, st, field);
        if (line)
            return bf_error_set(err, sw->file, line, field, "stage %s sets "
                                "%s, which it takes from stage %s's selection "
                                "(from: at line %d): set it in one place",
                                st->name, field, src->name, st->from->line);
    }
    return 0;
}

/* The cells' keys: every field src sweeps by grid or zip. */
static void cell_keys(const bf_sweep_stage *src, sweep_ref *ref)
{
    size_t cap = 1;
    for (size_t a = 0; a < src->n_axes; a++)
        cap += src->axes[a].n_fields;
    ref->keys = bf_xcalloc(cap, sizeof *ref->keys);
    for (size_t a = 0; a < src->n_axes; a++)
        for (size_t f = 0; &src->axes[a] != src->search &&
                           f < src->axes[a].n_fields; f++)
            ref->keys[ref->n_keys++] = src->axes[a].fields[f];
}

/* Adds trial t to from->checked unless it is there (the list is short). */
static void check_trial(sweep_from *from, size_t t)
{
    for (size_t i = 0; i < from->n_checked; i++)
        if (from->checked[i] == t)
            return;
    from->checked[from->n_checked++] = t;
}

/* Field f's corners: the trials of its lowest and highest number, and the
 * first trial of each other value, up to FROM_CORNER_VALUES of them. */
#define FROM_CORNER_VALUES 8
static void field_corners(sweep_from *from, const sweep_axis *search,
                          size_t f)
{
    size_t lo = SIZE_MAX, hi = SIZE_MAX, n_other = 0;
    double v_lo = 0, v_hi = 0;
    const json_t *other[FROM_CORNER_VALUES];
    for (size_t t = 0; t < search->n; t++) {
        const json_t *v = json_object_get(search->assign[t],
                                          search->fields[f]);
        if (json_is_number(v)) {
            double x = json_number_value(v);
            if (lo == SIZE_MAX || x < v_lo)
                lo = t, v_lo = x;
            if (hi == SIZE_MAX || x > v_hi)
                hi = t, v_hi = x;
            continue;
        }
        size_t k = 0;
        while (k < n_other && !json_equal(other[k], v))
            k++;
        if (k == n_other && n_other < FROM_CORNER_VALUES) {
            other[n_other++] = v;
            check_trial(from, t);
        }
    }
    if (lo != SIZE_MAX) {
        check_trial(from, lo);
        check_trial(from, hi);
    }
}

/* The trials each cell of a stage of n_cells is validated with: all of
 * them while cells x trials stays within SWEEP_FROM_CHECKS; beyond, each
 * field's corners (a 100,000-trial search taken by 899,000 cells would
 * otherwise be 9e10 validations).  A trial left out is still validated,
 * with the job's own config, by the worker that is handed the job:
 * a failure there is permanent and names the field (docs/sweeps.md). */
static void choose_checked(sweep_from *from, size_t n_cells,
                           const sweep_axis *search)
{
    if (search->n <= SWEEP_FROM_CHECKS / (n_cells ? n_cells : 1)) {
        from->n_checked = search->n;   /* checked NULL: every trial */
        return;
    }
    from->checked = bf_xcalloc(search->n_fields * (2 + FROM_CORNER_VALUES),
                               sizeof *from->checked);
    for (size_t f = 0; f < search->n_fields; f++)
        field_corners(from, search, f);
}

int sweep__from_parse(bf_sweep *sw, size_t t, bf_error *err)
{
    bf_sweep_stage *st = &sw->stages[t];
    json_t *value = json_object_get(st->node, "from");
    if (!value)
        return 0;
    int line = sweep__line(sw, "%s/from", st->ptr);
    size_t s = 0;
    if (source_stage(sw, t, json_string_value(value), line, &s, err) < 0)
        return -1;
    bf_sweep_stage *src = &sw->stages[s];
    st->from = bf_xcalloc(1, sizeof *st->from);
    st->from->line = line;
    st->from->ref.from = s;
    if (check_taken(sw, st, src, err) < 0)
        return -1;
    cell_keys(src, &st->from->ref);
    choose_checked(st->from, st->n_combos, src->search);
    src->selected_from = 1;
    return 0;
}

/* ---- seeds apart from the source's -------------------------------------- */

/* The seed axis of st (a grid or zip over seed), or NULL; *f its field. */
static const sweep_axis *seed_axis(const bf_sweep_stage *st, size_t *f)
{
    for (size_t a = 0; a < st->n_axes; a++)
        for (*f = 0; *f < st->axes[a].n_fields; (*f)++)
            if (strcmp(st->axes[a].fields[*f], "seed") == 0)
                return &st->axes[a];
    return NULL;
}

static int by_seed(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The seeds st's jobs take, sorted (caller frees; *n of them). */
static uint64_t *stage_seeds(const bf_sweep_stage *st, size_t *n)
{
    size_t f;
    const sweep_axis *axis = seed_axis(st, &f);
    uint64_t *out;
    if (st->seeds) {
        *n = st->n_seeds;
        out = bf_xmalloc(*n * sizeof *out);
        memcpy(out, st->seeds, *n * sizeof *out);
    } else if (axis) {
        *n = axis->n;
        out = bf_xmalloc(*n * sizeof *out);
        for (size_t v = 0; v < axis->n; v++)
            out[v] = (uint64_t)json_integer_value(
                json_object_get(axis->assign[v], "seed"));
    } else {
        *n = 1;
        out = bf_xmalloc(sizeof *out);
        out[0] = st->base.seed;
    }
    qsort(out, *n, sizeof *out, by_seed);
    return out;
}

/* The first seed both sorted lists hold, or -1. */
static long long first_shared(const uint64_t *a, size_t na, const uint64_t *b,
                              size_t nb)
{
    for (size_t i = 0, j = 0; i < na && j < nb;)
        if (a[i] == b[j])
            return (long long)a[i];
        else if (a[i] < b[j])
            i++;
        else
            j++;
    return -1;
}

/* The line where the sweep file gives st's seeds (seeds:, a seed axis, or
 * a seed in one of its base layers, the last one winning), 0 where it
 * gives none and its jobs take the default. */
static int given_seeds_line(const bf_sweep *sw, const bf_sweep_stage *st)
{
    size_t f;
    const sweep_axis *axis = seed_axis(st, &f);
    if (st->seeds && !st->seed_assigned)
        return st->seeds_line;
    if (axis)
        return sweep__line(sw, "%s/seed", axis->ptr);
    for (size_t i = st->n_layers; i-- > 0;)
        if (json_object_get(st->layers[i].obj, "seed"))
            return sweep__line(sw, "%s/seed", st->layers[i].ptr);
    return 0;
}

int sweep__from_seeds(bf_sweep *sw, size_t t, bf_error *err)
{
    bf_sweep_stage *st = &sw->stages[t];
    if (!st->from)
        return 0;
    bf_sweep_stage *src = &sw->stages[st->from->ref.from];
    size_t n, n_src;
    uint64_t *taker = stage_seeds(st, &n);
    int rc = 0, line = given_seeds_line(sw, src);
    if (!line) {
        if (!src->seeds) {
            src->seeds = bf_xmalloc(sizeof *src->seeds);
            src->seeds[0] = 0;
            src->seed_assigned = 1;
        }
        if (src->seeds[0] <= taker[n - 1])
            src->seeds[0] = taker[n - 1] + 1;
    } else {
        uint64_t *given = stage_seeds(src, &n_src);
        long long shared = first_shared(given, n_src, taker, n);
        if (shared >= 0)
            rc = bf_error_set(err, sw->file, line, "seeds",
                              "stage %s's seed %lld is also a seed of stage "
                              "%s, which takes its selected trials (from: at "
                              "line %d): a trial chosen for its luck on a "
                              "seed would be confirmed on that seed; give %s "
                              "seeds past %llu, or none (it then takes "
                              "%llu)", src->name, shared, st->name,
                              st->from->line, src->name,
                              (unsigned long long)taker[n - 1],
                              (unsigned long long)taker[n - 1] + 1);
        free(given);
    }
    free(taker);
    return rc;
}

void sweep__from_free(sweep_from *from)
{
    if (!from)
        return;
    free(from->ref.keys);
    free(from->ref.values);
    sweep__map_free(&from->ref.map);
    free(from->groups);
    free(from->checked);
    free(from);
}

/* ---- expansion ------------------------------------------------------------ */

void sweep__from_record(bf_sweep *sw, const bf_sweep_stage *src,
                        const sweep_combo *c, size_t group, const json_t *job)
{
    size_t s = (size_t)(src - sw->stages);
    if (c->seed != 0 || c->pick[src->n_axes - 1] != 0)
        return;   /* the search is the last axis: one entry per cell */
    for (size_t t = s + 1; t < sw->n_stages; t++) {
        sweep_from *from = sw->stages[t].from;
        if (!from || from->ref.from != s)
            continue;
        sweep_ref *ref = &from->ref;
        if (!ref->map.hash)
            sweep__map_init(&ref->map, src->n_combos);
        if (ref->n_src == ref->cap) {
            ref->cap = ref->cap ? 2 * ref->cap : 16;
            ref->values = bf_xrealloc(ref->values, ref->cap * (ref->n_keys + 1)
                                      * sizeof *ref->values);
            from->groups = bf_xrealloc(from->groups,
                                       ref->cap * sizeof *from->groups);
        }
        uint64_t *vals = ref->values + ref->n_src * ref->n_keys;
        sweep__key_values(ref, job, vals);
        from->groups[ref->n_src] = group;
        sweep__map_add(&ref->map, sweep__key_hash(vals, ref->n_keys),
                       ref->n_src++);
    }
}

/* "rope=bifocal, d_model=64": the job's values of the cells' keys. */
static void cell_text(const sweep_ref *ref, const json_t *job, char *buf,
                      size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < ref->n_keys; k++) {
        char text[128];
        sweep__value_text(bf_job_config_json_get(job, ref->keys[k]), text,
                          sizeof text);
        n = sweep__append(buf, n, cap, "%s%s=%s", n ? ", " : "", ref->keys[k],
                          text);
    }
}

/* cfg with the values of each checked trial of src's search passes
 * validation. */
static int check_trials(bf_sweep *sw, const sweep_from *from,
                        const bf_job_config *cfg, const char *head,
                        bf_error *err)
{
    const bf_sweep_stage *src = &sw->stages[from->ref.from];
    int line = from->line;
    for (size_t i = 0; i < from->n_checked; i++) {
        size_t t = from->checked ? from->checked[i] : i;
        sw->from_checks++;
        bf_job_config with = *cfg;
        bf_error verr;
        if (bf_job_config_apply_json(&with, src->search->assign[t], sw->file,
                                     NULL, &verr) == 0 &&
            bf_job_config_validate(&with, &verr) == 0 &&
            bf_job_memory_check(&with, 1, (size_t)sw->memory_budget_gib << 30,
                                "the sweep's memory_budget_gib", &verr) == 0)
            continue;
        char *values = json_dumps(src->search->assign[t], JSON_COMPACT |
                                  JSON_REAL_PRECISION(17));
        bf_error_set(err, sw->file, line, verr.field, "%s with the values of "
                     "trial %zu of stage %s (%s), which its selection may "
                     "choose: %s", head, t, src->name, values,
                     bf_error_body(&verr));
        free(values);
        return -1;
    }
    return 0;
}

int sweep__from_match(bf_sweep *sw, const bf_sweep_stage *st,
                      const sweep_combo *c, size_t index,
                      const bf_job_config *cfg, const json_t *job,
                      size_t *group, bf_error *err)
{
    const sweep_from *from = st->from;
    const sweep_ref *ref = &from->ref;
    const bf_sweep_stage *src = &sw->stages[ref->from];
    uint64_t vals[ref->n_keys + 1];
    sweep__key_values(ref, job, vals);
    size_t count = 0, pos1 = ref->map.hash
        ? sweep__map_find(&ref->map, sweep__key_hash(vals, ref->n_keys), &count)
        : 0;
    char desc[512], head[600];
    sweep__describe(sw, st, c, desc, sizeof desc);
    snprintf(head, sizeof head, "job %zu (%s)", sweep__job_number(index), desc);
    if (!pos1) {
        char cell[512];
        cell_text(ref, job, cell, sizeof cell);
        return bf_error_set(err, sw->file, from->line, "from", "%s finds no "
                            "cell of stage %s to take values from: no cell "
                            "there has %s (a job takes the values chosen in "
                            "the cell whose grid/zip fields have its values)",
                            head, src->name, cell);
    }
    *group = from->groups[pos1 - 1];
    return c->seed == 0 ? check_trials(sw, from, cfg, head, err) : 0;
}
