/* Sweep files: parsing, expansion into job configs, and error messages that
 * point at the line responsible.  See sweep.h for the format and order. */
#include "sweep.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "yaml_json.h"

/* One grid axis: a job field and its values.  assign[v] is the one-member
 * object {field: value v} handed to bf_job_config_apply_json. */
struct bf_sweep_axis {
    const char *field;   /* borrowed from sw->doc */
    size_t n;
    json_t **assign;
    int *lines;          /* line of each value */
};

static const char *const top_level_keys[] = {
    "name", "description", "base", "grid", "seeds", "max_attempts", "priority"};

/* ---- small helpers ------------------------------------------------------ */

static int line_of(const bf_sweep *sw, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int line_of(const bf_sweep *sw, const char *fmt, ...)
{
    char pointer[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pointer, sizeof pointer, fmt, ap);
    va_end(ap);
    return bf_yaml_line(sw->lines, pointer);
}

/* A JSON value as the user wrote it: strings bare, the rest compact JSON. */
static void value_text(const json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v)) {
        snprintf(buf, cap, "%s", json_string_value(v));
        return;
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, cap, "%s", s ? s : "?");
    free(s);
}

/* The message of `e` without the "file:line: field 'x': " prefix that
 * bf_error_set put in front, so it can be re-located. */
static const char *error_body(const bf_error *e)
{
    bf_error prefix;
    bf_error_set(&prefix, e->file, e->line, e->field, "%s", "");
    size_t n = strlen(prefix.msg);
    return strncmp(e->msg, prefix.msg, n) == 0 ? e->msg + n : e->msg;
}

uint64_t bf_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* ---- parsing ------------------------------------------------------------ */

static int check_top_level(const bf_sweep *sw, bf_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(sw->doc, key, v) {
        size_t i, n = sizeof top_level_keys / sizeof *top_level_keys;
        for (i = 0; i < n && strcmp(key, top_level_keys[i]) != 0; i++)
            ;
        if (i == n)
            return bf_error_set(err, sw->file, line_of(sw, "/%s", key), key,
                                "unknown sweep key '%s' (allowed: name, "
                                "description, base, grid, seeds, max_attempts, "
                                "priority)", key);
    }
    return 0;
}

static int parse_int(const bf_sweep *sw, const char *key, long long lo,
                     long long hi, int dflt, int *out, bf_error *err)
{
    json_t *v = json_object_get(sw->doc, key);
    *out = dflt;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char text[128];
        value_text(v, text, sizeof text);
        return bf_error_set(err, sw->file, line_of(sw, "/%s", key), key,
                            "'%s' must be an integer in [%lld, %lld]", text, lo, hi);
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static int parse_header(bf_sweep *sw, bf_error *err)
{
    json_t *name = json_object_get(sw->doc, "name");
    if (!json_is_string(name) || json_string_length(name) == 0)
        return bf_error_set(err, sw->file, line_of(sw, "/name"), "name",
                            "a sweep needs a name (a non-empty string)");
    json_t *desc = json_object_get(sw->doc, "description");
    if (desc && !json_is_string(desc))
        return bf_error_set(err, sw->file, line_of(sw, "/description"),
                            "description", "must be a string");
    sw->name = bf_xstrdup(json_string_value(name));
    if (parse_int(sw, "max_attempts", 1, 1000, 3, &sw->max_attempts, err) < 0)
        return -1;
    return parse_int(sw, "priority", INT_MIN, INT_MAX, 0, &sw->priority, err);
}

static int parse_base(bf_sweep *sw, bf_error *err)
{
    bf_job_config_defaults(&sw->base);
    json_t *base = json_object_get(sw->doc, "base");
    if (!base)
        return 0;
    if (!json_is_object(base))
        return bf_error_set(err, sw->file, line_of(sw, "/base"), "base",
                            "must be a mapping of job-config fields");
    json_t *lines = bf_yaml_lines_subtree(sw->lines, "/base");
    int rc = bf_job_config_apply_json(&sw->base, base, sw->file, lines, err);
    json_decref(lines);
    return rc;
}

/* Fills axis from grid member `field`, checking every value on its own so
 * type and name errors point at the value's line before any expansion. */
static int parse_axis(bf_sweep *sw, bf_sweep_axis *axis, const char *field,
                      json_t *values, const json_t *job_fields, bf_error *err)
{
    int line = line_of(sw, "/grid/%s", field);
    axis->field = field;
    if (!json_object_get(job_fields, field))
        return bf_error_set(err, sw->file, line, field,
                            "grid axis '%s' is not a job-config field", field);
    if (!json_is_array(values))
        return bf_error_set(err, sw->file, line, field,
                            "grid axis '%s' must be a list of values", field);
    if (json_array_size(values) == 0)
        return bf_error_set(err, sw->file, line, field,
                            "grid axis '%s' is empty", field);
    axis->n = json_array_size(values);
    axis->assign = bf_xcalloc(axis->n, sizeof *axis->assign);
    axis->lines = bf_xcalloc(axis->n, sizeof *axis->lines);
    for (size_t v = 0; v < axis->n; v++) {
        axis->assign[v] = json_pack("{sO}", field, json_array_get(values, v));
        axis->lines[v] = line_of(sw, "/grid/%s/%zu", field, v);
        bf_job_config probe;
        bf_job_config_defaults(&probe);
        if (bf_job_config_apply_json(&probe, axis->assign[v], sw->file, NULL, err) < 0) {
            bf_error inner = *err;
            return bf_error_set(err, sw->file, axis->lines[v], field,
                                "grid.%s[%zu]: %s", field, v, error_body(&inner));
        }
    }
    return 0;
}

static int parse_grid(bf_sweep *sw, bf_error *err)
{
    json_t *grid = json_object_get(sw->doc, "grid");
    if (!grid)
        return 0;
    if (!json_is_object(grid))
        return bf_error_set(err, sw->file, line_of(sw, "/grid"), "grid",
                            "must be a mapping from job-config field to a list "
                            "of values");
    sw->axes = bf_xcalloc(json_object_size(grid) + 1, sizeof *sw->axes);
    bf_job_config defaults;
    bf_job_config_defaults(&defaults);
    json_t *job_fields = bf_job_config_to_json(&defaults);
    const char *field;
    json_t *values;
    int rc = 0;
    json_object_foreach(grid, field, values) {
        rc = parse_axis(sw, &sw->axes[sw->n_axes++], field, values, job_fields, err);
        if (rc < 0)
            break;
    }
    json_decref(job_fields);
    return rc;
}

static int parse_seeds(bf_sweep *sw, bf_error *err)
{
    sw->n_seeds = 1;
    json_t *seeds = json_object_get(sw->doc, "seeds");
    if (!seeds)
        return 0;
    sw->seeds_line = line_of(sw, "/seeds");
    if (json_object_get(json_object_get(sw->doc, "base"), "seed"))
        return bf_error_set(err, sw->file, line_of(sw, "/base/seed"), "seed",
                            "base.seed conflicts with seeds; give one of them");
    if (json_object_get(json_object_get(sw->doc, "grid"), "seed"))
        return bf_error_set(err, sw->file, line_of(sw, "/grid/seed"), "seed",
                            "grid.seed conflicts with seeds; give one of them");
    if (json_is_integer(seeds)) {
        json_int_t n = json_integer_value(seeds);
        if (n < 1 || n > BF_SWEEP_MAX_JOBS)
            return bf_error_set(err, sw->file, sw->seeds_line, "seeds",
                                "seeds: %lld must be in [1, %d] (seeds N means "
                                "seeds 1..N)", (long long)n, BF_SWEEP_MAX_JOBS);
        sw->n_seeds = (size_t)n;
        sw->seeds = bf_xmalloc(sw->n_seeds * sizeof *sw->seeds);
        for (size_t i = 0; i < sw->n_seeds; i++)
            sw->seeds[i] = i + 1;
    } else if (json_is_array(seeds) && json_array_size(seeds) > 0) {
        sw->n_seeds = json_array_size(seeds);
        sw->seeds = bf_xmalloc(sw->n_seeds * sizeof *sw->seeds);
        for (size_t i = 0; i < sw->n_seeds; i++) {
            json_t *v = json_array_get(seeds, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                char text[128];
                value_text(v, text, sizeof text);
                return bf_error_set(err, sw->file, line_of(sw, "/seeds/%zu", i),
                                    "seeds", "seeds[%zu]: '%s' is not a "
                                    "non-negative integer", i, text);
            }
            sw->seeds[i] = (uint64_t)json_integer_value(v);
        }
    } else {
        return bf_error_set(err, sw->file, sw->seeds_line, "seeds",
                            "seeds must be a positive integer N or a non-empty "
                            "list of seeds");
    }
    return 0;
}

static int count_jobs(bf_sweep *sw, bf_error *err)
{
    size_t n = sw->n_seeds;
    for (size_t a = 0; a < sw->n_axes; a++) {
        if (n > BF_SWEEP_MAX_JOBS / sw->axes[a].n)
            return bf_error_set(err, sw->file, line_of(sw, "/grid"), "grid",
                                "the sweep expands to more than %d jobs",
                                BF_SWEEP_MAX_JOBS);
        n *= sw->axes[a].n;
    }
    sw->n_jobs = n;
    return 0;
}

bf_sweep *bf_sweep_parse(const char *file, const char *text, size_t len,
                         bf_error *err)
{
    bf_sweep *sw = bf_xcalloc(1, sizeof *sw);
    sw->file = bf_xstrdup(file ? file : "<sweep>");
    sw->doc = bf_yaml_parse(text, len, sw->file, &sw->lines, err);
    if (!sw->doc)
        goto fail;
    if (!json_is_object(sw->doc)) {
        bf_error_set(err, sw->file, 1, NULL, "a sweep file must be a mapping "
                     "(name, base, grid, seeds, max_attempts, priority)");
        goto fail;
    }
    if (check_top_level(sw, err) < 0 || parse_header(sw, err) < 0 ||
        parse_base(sw, err) < 0 || parse_grid(sw, err) < 0 ||
        parse_seeds(sw, err) < 0 || count_jobs(sw, err) < 0)
        goto fail;
    return sw;
fail:
    bf_sweep_free(sw);
    return NULL;
}

void bf_sweep_free(bf_sweep *sw)
{
    if (!sw)
        return;
    for (size_t a = 0; a < sw->n_axes; a++) {
        for (size_t v = 0; sw->axes[a].assign && v < sw->axes[a].n; v++)
            json_decref(sw->axes[a].assign[v]);
        free(sw->axes[a].assign);
        free(sw->axes[a].lines);
    }
    free(sw->axes);
    free(sw->seeds);
    json_decref(sw->doc);
    json_decref(sw->lines);
    free(sw->name);
    free(sw->file);
    free(sw);
}

/* ---- expansion ---------------------------------------------------------- */

/* A job's coordinates: the value index on every axis, and its seed index. */
typedef struct combo {
    size_t pick[64];
    size_t seed;
} combo;

#define MAX_AXES (sizeof ((combo *)0)->pick / sizeof (size_t))

static void decode(const bf_sweep *sw, size_t index, combo *c)
{
    c->seed = index % sw->n_seeds;
    index /= sw->n_seeds;
    for (size_t a = sw->n_axes; a-- > 0;) {
        c->pick[a] = index % sw->axes[a].n;
        index /= sw->axes[a].n;
    }
}

/* "rope=spectral, task=dyck, seed=2" */
static void describe(const bf_sweep *sw, const combo *c, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t a = 0; a < sw->n_axes && n < cap; a++) {
        char text[128];
        const bf_sweep_axis *ax = &sw->axes[a];
        value_text(json_object_get(ax->assign[c->pick[a]], ax->field), text, sizeof text);
        n += (size_t)snprintf(buf + n, cap - n, "%s%s=%s", n ? ", " : "", ax->field, text);
    }
    if (sw->seeds && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%sseed=%llu", n ? ", " : "",
                              (unsigned long long)sw->seeds[c->seed]);
    if (n == 0)
        snprintf(buf, cap, "the base config");
}

/* cfg = defaults + base (without base field `skip_base`, if given) + every
 * axis value of c but axis `skip_axis` + the seed.  The skips let the error
 * path find which assignment made a job invalid. */
static int build(const bf_sweep *sw, const combo *c, size_t skip_axis,
                 const char *skip_base, bf_job_config *cfg, bf_error *err)
{
    if (skip_base) {
        json_t *base = json_deep_copy(json_object_get(sw->doc, "base"));
        json_object_del(base, skip_base);
        bf_job_config_defaults(cfg);
        int rc = bf_job_config_apply_json(cfg, base, sw->file, NULL, err);
        json_decref(base);
        if (rc < 0)
            return -1;
    } else {
        *cfg = sw->base;
    }
    for (size_t a = 0; a < sw->n_axes; a++)
        if (a != skip_axis &&
            bf_job_config_apply_json(cfg, sw->axes[a].assign[c->pick[a]],
                                     sw->file, NULL, err) < 0)
            return -1;
    if (sw->seeds)
        cfg->seed = sw->seeds[c->seed];
    return 0;
}

/* Does leaving out one assignment cure the error on `field`? */
static int cures(const bf_sweep *sw, const combo *c, size_t skip_axis,
                 const char *skip_base, const char *field)
{
    bf_job_config cfg;
    bf_error e;
    if (build(sw, c, skip_axis, skip_base, &cfg, &e) < 0)
        return 0;
    return bf_job_config_validate(&cfg, &e) == 0 || strcmp(e.field, field) != 0;
}

/* Rewrites a validation error of job `index` to name the file, the line of
 * the grid value or base field responsible, the field and the combination. */
static int blame(const bf_sweep *sw, size_t index, const combo *c,
                 const bf_error *verr, bf_error *err)
{
    const char *field = verr->field;
    char where[256] = "", jobdesc[512];
    int line = 0;
    describe(sw, c, jobdesc, sizeof jobdesc);
    for (size_t a = 0; a < sw->n_axes && !line; a++)
        if (strcmp(sw->axes[a].field, field) == 0)
            line = sw->axes[a].lines[c->pick[a]];
    for (size_t a = 0; a < sw->n_axes && !line; a++)
        if (cures(sw, c, a, NULL, field)) {
            char text[128];
            const bf_sweep_axis *ax = &sw->axes[a];
            value_text(json_object_get(ax->assign[c->pick[a]], ax->field), text, sizeof text);
            line = ax->lines[c->pick[a]];
            snprintf(where, sizeof where, "; caused by grid.%s = %s", ax->field, text);
        }
    json_t *base = json_object_get(sw->doc, "base");
    if (!line && json_object_get(base, field))
        line = line_of(sw, "/base/%s", field);
    const char *key;
    json_t *v;
    json_object_foreach(base, key, v) {
        if (line)
            break;
        if (cures(sw, c, (size_t)-1, key, field)) {
            char text[128];
            value_text(v, text, sizeof text);
            line = line_of(sw, "/base/%s", key);
            snprintf(where, sizeof where, "; caused by base.%s = %s", key, text);
        }
    }
    if (!line)
        line = line_of(sw, sw->n_axes ? "/grid" : "/base");
    return bf_error_set(err, sw->file, line, field, "%s (job %zu: %s%s)",
                        error_body(verr), index, jobdesc, where);
}

/* Open-addressing set of config hashes -> first job index, to refuse
 * duplicates.  Equal hashes are taken as equal configs: FNV-1a 64 collides
 * by chance with probability ~n^2/2^65, about 3e-10 for 100,000 jobs. */
typedef struct hash_set {
    uint64_t *hash;
    size_t *index1;   /* job index + 1; 0 = empty slot */
    size_t mask;
} hash_set;

static void set_init(hash_set *hs, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    hs->mask = cap - 1;
    hs->hash = bf_xmalloc(cap * sizeof *hs->hash);
    hs->index1 = bf_xcalloc(cap, sizeof *hs->index1);
}

/* Inserts (h, index); returns the earlier index + 1 if h was there, else 0. */
static size_t set_insert(hash_set *hs, uint64_t h, size_t index)
{
    size_t i = (size_t)h & hs->mask;
    while (hs->index1[i]) {
        if (hs->hash[i] == h)
            return hs->index1[i];
        i = (i + 1) & hs->mask;
    }
    hs->hash[i] = h;
    hs->index1[i] = index + 1;
    return 0;
}

static int duplicate_error(const bf_sweep *sw, size_t first, size_t index,
                           const combo *c, bf_error *err)
{
    combo prev;
    decode(sw, first, &prev);
    char a_desc[512], b_desc[512];
    describe(sw, &prev, a_desc, sizeof a_desc);
    describe(sw, c, b_desc, sizeof b_desc);
    int line = sw->seeds_line ? line_of(sw, "/seeds/%zu", c->seed) : 0;
    const char *field = "seeds";
    for (size_t a = 0; a < sw->n_axes; a++)
        if (prev.pick[a] != c->pick[a]) {
            line = sw->axes[a].lines[c->pick[a]];
            field = sw->axes[a].field;
            break;
        }
    return bf_error_set(err, sw->file, line, field,
                        "duplicate job: job %zu (%s) has the same configuration "
                        "as job %zu (%s)", index, b_desc, first, a_desc);
}

int bf_sweep_expand(const bf_sweep *sw, bf_sweep_visit_fn visit, void *ctx,
                    bf_error *err)
{
    if (sw->n_axes > MAX_AXES)
        return bf_error_set(err, sw->file, line_of(sw, "/grid"), "grid",
                            "more than %zu grid axes", MAX_AXES);
    hash_set seen;
    set_init(&seen, sw->n_jobs);
    int rc = 0;
    for (size_t i = 0; i < sw->n_jobs && rc == 0; i++) {
        combo c;
        bf_job_config cfg;
        bf_error verr;
        decode(sw, i, &c);
        if (build(sw, &c, (size_t)-1, NULL, &cfg, err) < 0) {
            rc = -1;
            break;
        }
        if (bf_job_config_validate(&cfg, &verr) < 0) {
            rc = blame(sw, i, &c, &verr, err);
            break;
        }
        bf_sweep_job job = {.index = i, .cfg = &cfg};
        char *json = bf_job_config_to_canonical_json(&cfg);
        if (!json) {
            rc = bf_error_set(err, sw->file, 0, NULL, "out of memory");
            break;
        }
        uint64_t h = bf_fnv1a64(json, strlen(json));
        size_t first = set_insert(&seen, h, i);
        snprintf(job.hash_hex, sizeof job.hash_hex, "%016llx", (unsigned long long)h);
        job.config_json = json;
        rc = first ? duplicate_error(sw, first - 1, i, &c, err) : visit(ctx, &job, err);
        free(json);
    }
    free(seen.hash);
    free(seen.index1);
    return rc;
}
