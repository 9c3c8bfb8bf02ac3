/* Sweep files: a stage's `search:`, the trials of a hyperparameter search,
 * sampled at submission into the values of one more axis of the stage
 * (sweep.c parses them as it parses a zip group, so every sampled value is
 * checked like a grid value).  Trial t of every cell of the grid/zip has
 * the same values, a pure function of (seed, t): a resubmitted file gives
 * the same trials, and the cells are compared on common points.
 *
 *   search:
 *     method: sobol            # random | sobol
 *     scramble: true           # sobol: scrambled (point 0 not the corner);
 *                              # optional, default false (as stored sweeps)
 *     trials: 16
 *     seed: 0                  # optional, default 0: random's draws, the
 *                              # scramble's bits
 *     space:
 *       lr: {loguniform: [1e-4, 1e-2]}
 *       warmup_steps: {choice: [50, 100, 200]}
 *       spectral_fraction: {uniform: [0.25, 0.75]}
 */
#include "sweep_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "rng.h"

/* A random search's stream of the counter-based generator (rng.h). */
#define SEARCH_STREAM 0x5ea5c4ULL

typedef enum { DIST_UNIFORM, DIST_LOGUNIFORM, DIST_CHOICE } search_dist;

static const char *const dist_names[] = {"uniform", "loguniform", "choice"};

/* One dimension of the space: a field and how its values are drawn. */
typedef struct search_dim {
    const char *field;       /* borrowed from sw->doc */
    search_dist dist;
    double lo, hi;           /* uniform, loguniform */
    const json_t *choices;   /* choice: borrowed */
    int integer;             /* an integer field (a parameter: both bounds
                                integers): draws are rounded */
    int line;
} search_dim;

/* Whether job field `field` holds integers (its default is one). */
static int integer_field(const char *field)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    json_t *all = bf_job_config_to_json(&cfg);
    int integer = json_is_integer(json_object_get(all, field));
    json_decref(all);
    return integer;
}

/* Checks one value the space can give `field` as a grid value is checked. */
static int check_value(const bf_sweep *sw, const search_dim *d,
                       const char *what, const json_t *value, bf_error *err)
{
    json_t *canon = bf_job_config_canonical_value(d->field, value, err);
    if (canon) {
        json_decref(canon);
        return 0;
    }
    bf_error inner = *err;
    return bf_error_set(err, sw->file, d->line, d->field, "search.space.%s: "
                        "%s: %s", d->field, what, sweep__error_body(&inner));
}

/* {uniform: [lo, hi]} or {loguniform: [lo, hi]}: both bounds numbers,
 * lo < hi (lo > 0 for loguniform), each a valid value of the field. */
static int parse_range(const bf_sweep *sw, search_dim *d, const json_t *range,
                       bf_error *err)
{
    const char *name = dist_names[d->dist];
    if (!json_is_array(range) || json_array_size(range) != 2 ||
        !json_is_number(json_array_get(range, 0)) ||
        !json_is_number(json_array_get(range, 1)))
        return bf_error_set(err, sw->file, d->line, d->field, "search.space."
                            "%s: %s takes [low, high], two numbers", d->field,
                            name);
    d->lo = json_number_value(json_array_get(range, 0));
    d->hi = json_number_value(json_array_get(range, 1));
    /* A free-form parameter has no type of its own: its bounds give it. */
    if (bf_job_config_param_of(d->field))
        d->integer = json_is_integer(json_array_get(range, 0)) &&
                     json_is_integer(json_array_get(range, 1));
    if (!(d->lo < d->hi) || (d->dist == DIST_LOGUNIFORM && !(d->lo > 0)))
        return bf_error_set(err, sw->file, d->line, d->field, "search.space."
                            "%s: %s [%g, %g] is empty: low must be below "
                            "high%s", d->field, name, d->lo, d->hi,
                            d->dist == DIST_LOGUNIFORM ? " and above 0" : "");
    for (size_t i = 0; i < 2; i++)
        if (check_value(sw, d, i ? "the high bound" : "the low bound",
                        json_array_get(range, i), err) < 0)
            return -1;
    return 0;
}

static int parse_choice(const bf_sweep *sw, search_dim *d,
                        const json_t *choices, bf_error *err)
{
    if (!json_is_array(choices) || json_array_size(choices) == 0)
        return bf_error_set(err, sw->file, d->line, d->field, "search.space."
                            "%s: choice takes a non-empty list of values",
                            d->field);
    for (size_t i = 0; i < json_array_size(choices); i++) {
        char what[32];
        snprintf(what, sizeof what, "choice[%zu]", i);
        if (check_value(sw, d, what, json_array_get(choices, i), err) < 0)
            return -1;
    }
    d->choices = choices;
    return 0;
}

/* One entry of space: {DIST: ARGS}, exactly one distribution. */
static int parse_dim(const bf_sweep *sw, const char *space_ptr,
                     const char *field, const json_t *spec, search_dim *d,
                     bf_error *err)
{
    *d = (search_dim){.field = field, .integer = integer_field(field),
                      .line = sweep__line(sw, "%s/%s", space_ptr, field)};
    const char *dist = NULL;
    if (json_is_object(spec) && json_object_size(spec) == 1)
        dist = json_object_iter_key(json_object_iter((json_t *)spec));
    size_t k = 0;
    while (dist && k < 3 && strcmp(dist, dist_names[k]) != 0)
        k++;
    if (!dist || k == 3)
        return bf_error_set(err, sw->file, d->line, field, "search.space.%s "
                            "must be one of {uniform: [low, high]}, "
                            "{loguniform: [low, high]}, {choice: [values]}",
                            field);
    d->dist = (search_dist)k;
    const json_t *args = json_object_get(spec, dist);
    return d->dist == DIST_CHOICE ? parse_choice(sw, d, args, err)
                                  : parse_range(sw, d, args, err);
}

/* The value of d at u in [0, 1) (new reference). */
static json_t *draw(const search_dim *d, double u)
{
    double x;
    switch (d->dist) {
    case DIST_CHOICE:
        return json_incref(json_array_get(
            d->choices, (size_t)(u * (double)json_array_size(d->choices))));
    case DIST_LOGUNIFORM:
        x = exp(log(d->lo) + u * (log(d->hi) - log(d->lo)));
        break;
    default:
        x = d->lo + u * (d->hi - d->lo);
        break;
    }
    x = fmin(fmax(x, d->lo), d->hi);  /* exp/log may round past a bound */
    return d->integer ? json_integer((json_int_t)llround(x)) : json_real(x);
}

/* How trials are placed: search.method, with scramble for sobol. */
typedef enum { PLACE_RANDOM, PLACE_SOBOL, PLACE_SCRAMBLED } placement;

/* The point of trial t in [0, 1)^n. */
static void trial_point(placement how, uint64_t seed, uint32_t t, size_t n,
                        double *u)
{
    if (how == PLACE_SOBOL) {
        sweep__sobol_point(t, n, u);
        return;
    }
    if (how == PLACE_SCRAMBLED) {
        sweep__sobol_scrambled(t, n, seed, u);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        bf_rng r;
        bf_rng_seed(&r, bf_rng_key(bf_rng_key(bf_rng_key(seed, SEARCH_STREAM),
                                              t), i));
        u[i] = bf_rng_uniform(&r);
    }
}

/* scramble: for sobol only (random points have no corner). */
static int parse_scramble(const bf_sweep *sw, const json_t *search,
                          const char *ptr, placement *how, bf_error *err)
{
    int scramble = 0;
    if (sweep__boolean(sw, search, ptr, "search", "scramble", &scramble,
                       err) < 0)
        return -1;
    if (scramble && *how != PLACE_SOBOL)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/scramble",
                            ptr), "scramble", "search.scramble applies to "
                            "method sobol");
    if (scramble)
        *how = PLACE_SCRAMBLED;
    return 0;
}

static int parse_header(const bf_sweep *sw, const json_t *search,
                        const char *ptr, placement *how, size_t *trials,
                        uint64_t *seed, bf_error *err)
{
    const char *method = json_string_value(json_object_get(search, "method"));
    if (!method || (strcmp(method, "random") != 0 &&
                    strcmp(method, "sobol") != 0))
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/method", ptr),
                            "method", "search.method must be random or sobol");
    *how = strcmp(method, "sobol") == 0 ? PLACE_SOBOL : PLACE_RANDOM;
    if (parse_scramble(sw, search, ptr, how, err) < 0)
        return -1;
    json_t *n = json_object_get(search, "trials");
    if (!json_is_integer(n) || json_integer_value(n) < 1 ||
        json_integer_value(n) > SWEEP_SEARCH_MAX_TRIALS)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/trials", ptr),
                            "trials", "search.trials must be an integer in "
                            "[1, %d]", SWEEP_SEARCH_MAX_TRIALS);
    *trials = (size_t)json_integer_value(n);
    json_t *s = json_object_get(search, "seed");
    if (s && (!json_is_integer(s) || json_integer_value(s) < 0))
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/seed", ptr),
                            "seed", "search.seed must be a non-negative "
                            "integer");
    *seed = s ? (uint64_t)json_integer_value(s) : 0;
    return 0;
}

/* Fills values {field: [the trials' values]} from the parsed space. */
static void sample(const search_dim *dims, size_t n, placement how,
                   uint64_t seed, size_t trials, json_t *values)
{
    for (size_t i = 0; i < n; i++)
        json_object_set_new(values, dims[i].field, json_array());
    double u[SWEEP_SEARCH_MAX_DIMS];
    for (size_t t = 0; t < trials; t++) {
        trial_point(how, seed, (uint32_t)t, n, u);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(json_object_get(values, dims[i].field),
                                  draw(&dims[i], u[i]));
    }
}

int sweep__search_sample(const bf_sweep *sw, const json_t *search,
                        const char *ptr, json_t **values, bf_error *err)
{
    *values = NULL;
    placement how = PLACE_RANDOM;
    size_t trials = 0;
    uint64_t seed = 0;
    if (parse_header(sw, search, ptr, &how, &trials, &seed, err) < 0)
        return -1;
    char space_ptr[96];
    snprintf(space_ptr, sizeof space_ptr, "%s/space", ptr);
    const json_t *space = json_object_get(search, "space");
    size_t n = json_object_size(space);
    if (!json_is_object(space) || n == 0 || n > SWEEP_SEARCH_MAX_DIMS)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s", space
                            ? space_ptr : ptr), "space", "search.space must map 1 to %d "
                            "job-config fields to their distributions",
                            SWEEP_SEARCH_MAX_DIMS);
    search_dim dims[SWEEP_SEARCH_MAX_DIMS];
    size_t i = 0;
    const char *field;
    json_t *spec;
    json_object_foreach((json_t *)space, field, spec)
        if (parse_dim(sw, space_ptr, field, spec, &dims[i++], err) < 0)
            return -1;
    *values = json_object();
    sample(dims, n, how, seed, trials, *values);
    return 0;
}
