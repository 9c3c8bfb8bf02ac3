/* Sweep files: the warnings of a sweep that expands, but trains something
 * other than it seems to: a field set where the job's rope variant ignores
 * it, a bifocal or prope fraction that makes the variant another one, jobs
 * that train the same model, an init_from that looks like a stage
 * reference but is a path ("STAGE:a").  Messages name file, line and field like
 * errors; `--strict` makes them errors (store.c). */
#include "hash.h"
#include "sweep_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"

/* Same-model pairs described one by one; the rest are counted. */
#define MAX_SAME_LISTED 5

typedef enum {
    NO_EFFECT,        /* a set field the variant ignores */
    NO_LEARNABLE,     /* bifocal with no learnable head: rope */
    ALL_LEARNABLE,    /* bifocal with every head learnable: spectral */
    NO_ZEROED,        /* prope with no zeroed pair: rope */
    ALL_ZEROED,       /* prope with every pair zeroed: none */
    NEAR_STAGE_REF    /* init_from "STAGE:a", "stage :a": a relative path */
} warn_kind;

/* One warning of a stage, counted over its jobs. */
typedef struct tally {
    const bf_sweep_stage *st;
    warn_kind kind;
    const char *field;
    bf_rope_kind rope;
    size_t count, first;      /* jobs, the first of them */
    sweep_combo c;            /* the first one's coordinates */
    bf_job_config cfg;        /* and config */
} tally;

struct sweep_warner {
    const bf_sweep *sw;
    tally *tallies;
    size_t n, cap;
    sweep_map effective;      /* effective config hash -> first job */
    size_t n_same;            /* jobs training the same model as another */
    json_t *same;             /* the first MAX_SAME_LISTED messages */
};

sweep_warner *sweep__warner_new(const bf_sweep *sw)
{
    sweep_warner *w = bf_xcalloc(1, sizeof *w);
    w->sw = sw;
    sweep__map_init(&w->effective, sw->n_jobs);
    w->same = json_array();
    return w;
}

static void count(sweep_warner *w, const bf_sweep_stage *st, warn_kind kind,
                  const char *field, const sweep_combo *c, size_t index,
                  const bf_job_config *cfg)
{
    for (size_t i = 0; i < w->n; i++) {
        tally *t = &w->tallies[i];
        if (t->st == st && t->kind == kind && t->rope == cfg->rope &&
            strcmp(t->field, field) == 0) {
            t->count++;
            return;
        }
    }
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 8;
        w->tallies = bf_xrealloc(w->tallies, w->cap * sizeof *w->tallies);
    }
    w->tallies[w->n++] = (tally){.st = st, .kind = kind, .field = field,
                                 .rope = cfg->rope, .count = 1, .first = index,
                                 .c = *c, .cfg = *cfg};
}

/* The fields st sets (in a base layer or an axis) that cfg's variant
 * ignores, at a value other than the field's default: a zip that lists
 * several variants gives a field its default where it does not apply,
 * which asks for nothing that is not done. */
static void check_fields(sweep_warner *w, const bf_sweep_stage *st,
                         const sweep_combo *c, size_t index,
                         const bf_job_config *cfg)
{
    for (size_t i = 0; i < st->n_set_fields; i++)
        if (!bf_job_config_field_matters(cfg, st->set_fields[i])
            && !bf_job_config_field_is_default(cfg, st->set_fields[i]))
            count(w, st, NO_EFFECT, st->set_fields[i], c, index, cfg);
}

/* The fields whose values differ between two configs, "a, b", and the
 * first of them. */
static void differing(const bf_job_config *a, const bf_job_config *b,
                      char *buf, size_t cap, char *first, size_t first_cap)
{
    json_t *ja = bf_job_config_to_json(a), *jb = bf_job_config_to_json(b);
    const char *key;
    json_t *v;
    size_t n = 0;
    buf[0] = first[0] = '\0';
    json_object_foreach(ja, key, v) {
        if (json_equal(v, json_object_get(jb, key)) || n >= cap)
            continue;
        if (n == 0)
            snprintf(first, first_cap, "%s", key);
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", key);
    }
    json_decref(ja);
    json_decref(jb);
}

/* "job 5 (...) trains the same model as job 4 (...)". */
static void describe_same(sweep_warner *w, const bf_sweep_stage *st,
                          const sweep_combo *c, size_t index,
                          const bf_job_config *cfg, size_t earlier)
{
    const bf_sweep *sw = w->sw;
    const bf_sweep_stage *est;
    sweep_combo ec;
    bf_job_config ecfg;
    bf_error e;
    sweep__locate(sw, earlier, &est, &ec);
    if (sweep__build(sw, est, &ec, (size_t)-1, (size_t)-1, NULL, &ecfg, &e) < 0)
        return;   /* it expanded before, so it builds */
    char mine[512], theirs[512], fields[512], field[64];
    sweep__describe(sw, st, c, mine, sizeof mine);
    sweep__describe(sw, est, &ec, theirs, sizeof theirs);
    differing(cfg, &ecfg, fields, sizeof fields, field, sizeof field);
    bf_error_set(&e, sw->file, sweep__field_line(sw, st, c, field), field,
                 "job %zu (%s) trains the same model as job %zu (%s), "
                 "though they differ in %s", sweep__job_number(index), mine,
                 sweep__job_number(earlier), theirs,
                 fields);
    json_array_append_new(w->same, json_string(e.msg));
}

/* Whether init_from, as the sweep file wrote it, is a near miss of a
 * "stage:NAME" reference: "stage" in any case, perhaps "stages", spaces
 * around it, then ':'.  The exact prefix is the reference itself; a
 * relative path was joined to the file's folder, so the written value is
 * what follows "DIR/". */
static int near_stage_ref(const bf_sweep *sw, const char *init_from)
{
    size_t n = sw->dir ? strlen(sw->dir) : 0;
    const char *p = init_from;
    if (strncmp(p, STAGE_REF, strlen(STAGE_REF)) == 0)
        return 0;
    if (n && strncmp(p, sw->dir, n) == 0 && p[n] == '/')
        p += n + 1;
    p += strspn(p, " \t");
    if (strncasecmp(p, "stage", 5) != 0)
        return 0;
    p += 5;
    p += *p == 's' || *p == 'S';
    p += strspn(p, " \t");
    return *p == ':';
}

void sweep__warner_job(sweep_warner *w, const bf_sweep_stage *st,
                      const sweep_combo *c, size_t index,
                      const bf_job_config *cfg)
{
    check_fields(w, st, c, index, cfg);
    if (near_stage_ref(w->sw, cfg->init_from))
        count(w, st, NEAR_STAGE_REF, "init_from", c, index, cfg);
    int heads = bf_job_config_spectral_heads(cfg);
    int pairs = bf_job_config_prope_pairs(cfg);
    if (cfg->rope == BF_ROPE_BIFOCAL && (heads == 0 || heads == cfg->n_heads))
        count(w, st, heads ? ALL_LEARNABLE : NO_LEARNABLE,
              "spectral_fraction", c, index, cfg);
    if (cfg->rope == BF_ROPE_PROPE &&
        (pairs == 0 || pairs == cfg->d_model / cfg->n_heads / 2))
        count(w, st, pairs ? ALL_ZEROED : NO_ZEROED, "prope_fraction", c,
              index, cfg);
    bf_job_config eff;
    bf_job_config_effective(cfg, &eff);
    size_t first = sweep__map_add(&w->effective, bf_fnv1a64(&eff, sizeof eff),
                                 index);
    if (first && w->n_same++ < MAX_SAME_LISTED)
        describe_same(w, st, c, index, cfg, first - 1);
}

/* What tally t says, after "file:line: field 'x': ". */
static void tally_text(const tally *t, char *buf, size_t cap)
{
    const bf_job_config *cfg = &t->cfg;
    int d_head = cfg->d_model / cfg->n_heads;
    switch (t->kind) {
    case NO_EFFECT:
        snprintf(buf, cap, "has no effect with rope: %s", bf_rope_name(t->rope));
        break;
    case NO_LEARNABLE:
    case ALL_LEARNABLE:
        snprintf(buf, cap, "%g of %d heads rounds to %s learnable: these "
                 "bifocal jobs train as %s", cfg->spectral_fraction,
                 cfg->n_heads, t->kind == NO_LEARNABLE ? "no head" : "every "
                 "head", t->kind == NO_LEARNABLE ? "rope" : "spectral");
        break;
    case NO_ZEROED:
    case ALL_ZEROED:
        snprintf(buf, cap, "%g of the %d rotary pairs of a head rounds to %s "
                 "zeroed: these prope jobs train as %s", cfg->prope_fraction,
                 d_head / 2, t->kind == NO_ZEROED ? "no pair" : "every pair",
                 t->kind == NO_ZEROED ? "rope" : "none (no position at all)");
        break;
    case NEAR_STAGE_REF:
        snprintf(buf, cap, "'%.120s' is a file path, not a stage reference: a "
                 "job starts from an earlier stage with init_from: "
                 "\"stage:NAME\" (lowercase, no spaces)", cfg->init_from);
        break;
    }
}

json_t *sweep__warner_finish(sweep_warner *w)
{
    const bf_sweep *sw = w->sw;
    json_t *out = json_array();
    for (size_t i = 0; i < w->n; i++) {
        const tally *t = &w->tallies[i];
        char what[256], desc[512];
        tally_text(t, what, sizeof what);
        sweep__describe(sw, t->st, &t->c, desc, sizeof desc);
        bf_error e;
        bf_error_set(&e, sw->file, sweep__field_line(sw, t->st, &t->c, t->field),
                     t->field, "%s (%zu job%s, the first job %zu: %s)", what,
                     t->count, t->count == 1 ? "" : "s",
                     sweep__job_number(t->first), desc);
        json_array_append_new(out, json_string(e.msg));
    }
    json_array_extend(out, w->same);
    if (w->n_same > MAX_SAME_LISTED) {
        bf_error e;
        bf_error_set(&e, sw->file, 0, NULL, "%zu more jobs train the same "
                     "model as an earlier job", w->n_same - MAX_SAME_LISTED);
        json_array_append_new(out, json_string(e.msg));
    }
    json_decref(w->same);
    sweep__map_free(&w->effective);
    free(w->tallies);
    free(w);
    return out;
}
