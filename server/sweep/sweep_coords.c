/* Sweep files: what parsing, expansion and warnings all use, below the
 * three of them (sweep.c -> sweep_expand.c -> sweep_warn.c call it, it
 * calls none of them): a stage's value helpers (lines, value text, error
 * bodies, the hash map) and a job's coordinates (its axis picks, whether
 * an exclude rule leaves it out, its config, where a field came from). */
#include "sweep_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hash.h"
#include "yaml_json.h"

/* ---- values ------------------------------------------------------------- */
int sweep__line(const bf_sweep *sw, const char *fmt, ...)
{
    char pointer[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pointer, sizeof pointer, fmt, ap);
    va_end(ap);
    return bf_yaml_line(sw->lines, pointer);
}

void sweep__value_text(const json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v)) {
        snprintf(buf, cap, "%s", json_string_value(v));
        return;
    }
    if (json_is_real(v)) {   /* the shortest spelling that reads back: 0.1 */
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(buf, cap, "%.*g", digits, json_real_value(v));
            if (strtod(buf, NULL) == json_real_value(v))
                return;
        }
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, cap, "%s", s ? s : "?");
    free(s);
}

const char *sweep__error_body(const bf_error *e)
{
    bf_error prefix;
    bf_error_set(&prefix, e->file, e->line, e->field, "%s", "");
    size_t n = strlen(prefix.msg);
    return strncmp(e->msg, prefix.msg, n) == 0 ? e->msg + n : e->msg;
}

void sweep__map_init(sweep_map *m, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    m->mask = cap - 1;
    m->hash = bf_xmalloc(cap * sizeof *m->hash);
    m->pos1 = bf_xcalloc(cap, sizeof *m->pos1);
    m->count = bf_xcalloc(cap, sizeof *m->count);
}

void sweep__map_free(sweep_map *m)
{
    free(m->hash);
    free(m->pos1);
    free(m->count);
    memset(m, 0, sizeof *m);
}

static size_t slot_of(const sweep_map *m, uint64_t h)
{
    size_t i = (size_t)h & m->mask;
    while (m->pos1[i] && m->hash[i] != h)
        i = (i + 1) & m->mask;
    return i;
}

size_t sweep__map_add(sweep_map *m, uint64_t h, size_t pos)
{
    size_t i = slot_of(m, h);
    m->count[i]++;
    if (m->pos1[i])
        return m->pos1[i];
    m->hash[i] = h;
    m->pos1[i] = pos + 1;
    return 0;
}

size_t sweep__map_find(const sweep_map *m, uint64_t h, size_t *count)
{
    size_t i = slot_of(m, h);
    *count = m->count[i];
    return m->pos1[i];
}

/* ---- coordinates ---------------------------------------------------------- */

void sweep__decode(const bf_sweep_stage *st, size_t combo, sweep_combo *c)
{
    c->seed = 0;
    for (size_t a = st->n_axes; a-- > 0;) {
        c->pick[a] = combo % st->axes[a].n;
        combo /= st->axes[a].n;
    }
}

int sweep__excluded(const bf_sweep_stage *st, size_t combo)
{
    if (st->n_rules == 0)
        return 0;
    sweep_combo c;
    sweep__decode(st, combo, &c);
    for (size_t r = 0; r < st->n_rules; r++) {
        int all = 1;
        for (size_t a = 0; a < st->n_axes && all; a++)
            all = !st->rules[r].match[a] || st->rules[r].match[a][c.pick[a]];
        if (all)
            return 1;
    }
    return 0;
}

void sweep__locate(const bf_sweep *sw, size_t index, const bf_sweep_stage **st,
                  sweep_combo *c)
{
    size_t s = 0;
    while (s + 1 < sw->n_stages && index >= sw->stages[s + 1].first_job)
        s++;
    *st = &sw->stages[s];
    size_t pos = index - (*st)->first_job;
    size_t kept = pos / (*st)->n_seeds;
    for (size_t combo = 0; combo < (*st)->n_combos; combo++)
        if (!sweep__excluded(*st, combo) && kept-- == 0) {
            sweep__decode(*st, combo, c);
            break;
        }
    c->seed = pos % (*st)->n_seeds;
}

size_t sweep__append(char *buf, size_t n, size_t cap, const char *fmt, ...)
{
    if (n >= cap)
        return n;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
    return k < 0 ? n : n + (size_t)k;
}

void sweep__describe(const bf_sweep *sw, const bf_sweep_stage *st,
                    const sweep_combo *c, char *buf, size_t cap)
{
    (void)sw;
    size_t n = 0, start;
    buf[0] = '\0';
    if (st->name)
        n = sweep__append(buf, n, cap, "stage %s: ", st->name);
    start = n;
    for (size_t a = 0; a < st->n_axes; a++) {
        const sweep_axis *ax = &st->axes[a];
        for (size_t f = 0; f < ax->n_fields; f++) {
            char text[128];
            sweep__value_text(json_object_get(ax->assign[c->pick[a]],
                                             ax->fields[f]), text, sizeof text);
            n = sweep__append(buf, n, cap, "%s%s=%s", n > start ? ", " : "",
                             ax->fields[f], text);
        }
    }
    if (st->seeds)
        n = sweep__append(buf, n, cap, "%sseed=%llu", n > start ? ", " : "",
                         (unsigned long long)st->seeds[c->seed]);
    if (n == start)
        sweep__append(buf, n, cap, "the base config");
}

/* ---- building a job ------------------------------------------------------- */

int sweep__build(const bf_sweep *sw, const bf_sweep_stage *st,
                const sweep_combo *c, size_t skip_axis, size_t skip_layer,
                const char *skip_key, bf_job_config *cfg, bf_error *err)
{
    if (!skip_key) {
        *cfg = st->base;
    } else {
        bf_job_config_defaults(cfg);
        for (size_t i = 0; i < st->n_layers; i++) {
            json_t *layer = json_deep_copy(st->layers[i].obj);
            if (i == skip_layer)
                json_object_del(layer, skip_key);
            int rc = bf_job_config_apply_json(cfg, layer, sw->file, NULL, err);
            json_decref(layer);
            if (rc < 0)
                return -1;
        }
    }
    for (size_t a = 0; a < st->n_axes; a++)
        if (a != skip_axis &&
            bf_job_config_apply_json(cfg, st->axes[a].assign[c->pick[a]],
                                     sw->file, NULL, err) < 0)
            return -1;
    if (st->seeds)
        cfg->seed = st->seeds[c->seed];
    return 0;
}

int sweep__field_line(const bf_sweep *sw, const bf_sweep_stage *st,
                     const sweep_combo *c, const char *field)
{
    for (size_t a = 0; a < st->n_axes; a++)
        for (size_t f = 0; f < st->axes[a].n_fields; f++)
            if (strcmp(st->axes[a].fields[f], field) == 0)
                return st->axes[a].lines[c->pick[a] * st->axes[a].n_fields + f];
    for (size_t i = st->n_layers; i-- > 0;)
        if (json_object_get(st->layers[i].obj, field))
            return sweep__line(sw, "%s/%s", st->layers[i].ptr, field);
    return 0;
}

/* ---- matching a job with an earlier stage's ------------------------------ */

void sweep__key_values(const sweep_ref *ref, const json_t *job, uint64_t *vals)
{
    for (size_t k = 0; k < ref->n_keys; k++) {
        /* A parameter the job lacks hashes as "", which no value dumps to. */
        char *s = json_dumps(bf_job_config_json_get(job, ref->keys[k]),
                             JSON_ENCODE_ANY | JSON_COMPACT |
                             JSON_REAL_PRECISION(17));
        vals[k] = bf_fnv1a64(s ? s : "", s ? strlen(s) : 0);
        free(s);
    }
}

uint64_t sweep__key_hash(const uint64_t *vals, size_t n)
{
    return bf_fnv1a64(vals, n * sizeof *vals);
}
