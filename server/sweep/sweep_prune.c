/* Sweep files: what a stage decides over the trials of its search (the
 * coordinator applies it: store_prune.c): `prune:`, the early-stopping
 * rule, and `select:`, the choice of each cell's best trials.  Parsing
 * checks each on its own; expansion checks them against every job's config
 * (rungs before its last step, on its evaluation steps, depths among the
 * evaluated ones, the selection's at most the training depth), since grid
 * or search may vary those.
 *
 *   prune: {method: asha, metric: eval_loss, eval_depth: 4,
 *           rungs: [250, 500, 1000], eta: 3}
 *   prune: {method: asha, ..., synchronous: true}   # same values, same
 *                                                    # survivors
 *   prune: {method: median, metric: eval_loss, eval_depth: 4,
 *           rungs: [250, 500], min_trials: 3}
 *   select: {by: eval_loss, eval_depth: 4, best: 1}
 *
 * The metric is eval_loss or eval_accuracy (bf_trial_metric). */
#include "sweep_internal.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"

/* The metrics trials are ranked by, in bf_trial_metric's order. */
static const struct {
    const char *name;
    int higher_better;
} metrics[] = {{"eval_loss", 0}, {"eval_accuracy", 1}};

const char *bf_trial_metric_name(bf_trial_metric m)
{
    return metrics[m].name;
}

int bf_trial_metric_higher_better(bf_trial_metric m)
{
    return metrics[m].higher_better;
}

int bf_trial_metric_parse(const char *name, bf_trial_metric *out)
{
    for (size_t k = 0; name && k < sizeof metrics / sizeof *metrics; k++)
        if (strcmp(name, metrics[k].name) == 0) {
            *out = (bf_trial_metric)k;
            return 0;
        }
    return -1;
}

/* "eval_loss (lower is better), eval_accuracy (higher is better)". */
static const char *trial_metric_list(void)
{
    return "eval_loss (lower is better), eval_accuracy (the share of "
           "examples with every target right, higher is better)";
}


/* The line of key in the mapping at ptr, or of the mapping without it. */
static int key_line(const bf_sweep *sw, const char *ptr, const char *key)
{
    int line = sweep__line(sw, "%s/%s", ptr, key);
    return line ? line : sweep__line(sw, "%s", ptr);
}

static int int_in(const json_t *v, long long lo, long long hi)
{
    return json_is_integer(v) && json_integer_value(v) >= lo &&
           json_integer_value(v) <= hi;
}

int sweep__boolean(const bf_sweep *sw, const json_t *block,
                   const char *ptr, const char *what, const char *key,
                   int *out, bf_error *err)
{
    json_t *v = json_object_get(block, key);
    if (v && !json_is_boolean(v))
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/%s", ptr, key),
                            key, "%s.%s must be true or false", what, key);
    *out = json_is_true(v);
    return 0;
}

/* synchronous: asha only (median compares with the values before, which
 * is its definition). */
static int parse_synchronous(const bf_sweep *sw, const json_t *prune,
                             const char *ptr, bf_sweep_prune *p,
                             bf_error *err)
{
    if (sweep__boolean(sw, prune, ptr, "prune", "synchronous",
                       &p->synchronous, err) < 0)
        return -1;
    if (p->synchronous && p->method != BF_PRUNE_ASHA)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/synchronous",
                            ptr), "synchronous", "prune.synchronous applies "
                            "to method asha (median compares each value with "
                            "those before it)");
    return 0;
}

static int parse_method(const bf_sweep *sw, const json_t *prune,
                        const char *ptr, bf_sweep_prune *p, bf_error *err)
{
    const char *method = json_string_value(json_object_get(prune, "method"));
    if (!method || (strcmp(method, "asha") != 0 &&
                    strcmp(method, "median") != 0))
        return bf_error_set(err, sw->file, key_line(sw, ptr, "method"),
                            "method", "prune.method must be asha or median");
    p->method = strcmp(method, "asha") == 0 ? BF_PRUNE_ASHA
                                            : BF_PRUNE_MEDIAN;
    /* each method's own parameter; the other's would have no effect */
    const char *own = p->method == BF_PRUNE_ASHA ? "eta" : "min_trials";
    const char *other = p->method == BF_PRUNE_ASHA ? "min_trials" : "eta";
    if (json_object_get(prune, other))
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/%s", ptr,
                            other), other, "prune.%s has no effect with "
                            "method %s (it takes %s)", other, method, own);
    json_t *v = json_object_get(prune, own);
    if (v && !int_in(v, p->method == BF_PRUNE_ASHA ? 2 : 1, 1000))
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/%s", ptr, own),
                            own, "prune.%s must be an integer in [%d, 1000]",
                            own, p->method == BF_PRUNE_ASHA ? 2 : 1);
    p->param = v ? (int)json_integer_value(v) : 3;
    return parse_synchronous(sw, prune, ptr, p, err);
}

/* The metric at key `key` of the mapping at ptr (what: "prune"), or an
 * error naming the metrics there are. */
static int parse_metric_key(const bf_sweep *sw, const json_t *block,
                            const char *ptr, const char *what,
                            const char *key, bf_trial_metric *out,
                            bf_error *err)
{
    const char *name = json_string_value(json_object_get(block, key));
    if (bf_trial_metric_parse(name, out) == 0)
        return 0;
    return bf_error_set(err, sw->file, key_line(sw, ptr, key), key, "%s.%s: "
                        "'%s' is not a metric the coordinator records "
                        "(allowed: %s)", what, key, name ? name : "",
                        trial_metric_list());
}

static int parse_metric(const bf_sweep *sw, const json_t *prune,
                        const char *ptr, bf_sweep_prune *p, bf_error *err)
{
    if (parse_metric_key(sw, prune, ptr, "prune", "metric", &p->metric,
                         err) < 0)
        return -1;
    json_t *depth = json_object_get(prune, "eval_depth");
    if (!int_in(depth, 1, 1 << 20))
        return bf_error_set(err, sw->file, key_line(sw, ptr, "eval_depth"),
                            "eval_depth", "prune.eval_depth must be a "
                            "positive integer: the evaluation depth whose "
                            "%s is compared", bf_trial_metric_name(p->metric));
    p->eval_depth = (int)json_integer_value(depth);
    return 0;
}

static int parse_rungs(const bf_sweep *sw, const json_t *prune,
                       const char *ptr, bf_sweep_prune *p, bf_error *err)
{
    json_t *rungs = json_object_get(prune, "rungs");
    size_t n = json_array_size(rungs);
    if (!json_is_array(rungs) || n == 0 || n > BF_PRUNE_MAX_RUNGS)
        return bf_error_set(err, sw->file, key_line(sw, ptr, "rungs"),
                            "rungs", "prune.rungs must be a list of 1 to %d "
                            "steps", BF_PRUNE_MAX_RUNGS);
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(rungs, i);
        if (!int_in(r, i ? p->rungs[i - 1] + 1 : 1, 1LL << 31))
            return bf_error_set(err, sw->file, sweep__line(sw, "%s/rungs/%zu",
                                ptr, i), "rungs", "prune.rungs[%zu] must be a "
                                "step above %lld (rungs rise)", i,
                                i ? (long long)p->rungs[i - 1] : 0LL);
        p->rungs[p->n_rungs++] = json_integer_value(r);
    }
    return 0;
}

int sweep__prune_parse(const bf_sweep *sw, bf_sweep_stage *st,
                      const json_t *prune, bf_error *err)
{
    const char *ptr = st->prune_ptr;
    if (!st->search)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s", ptr),
                            "prune", "prune stops the trials of a search: "
                            "this stage has no search");
    st->prune = bf_xcalloc(1, sizeof *st->prune);
    if (parse_method(sw, prune, ptr, st->prune, err) < 0 ||
        parse_metric(sw, prune, ptr, st->prune, err) < 0 ||
        parse_rungs(sw, prune, ptr, st->prune, err) < 0)
        return -1;
    return 0;
}

int sweep__select_parse(const bf_sweep *sw, bf_sweep_stage *st,
                       const json_t *select, bf_error *err)
{
    const char *ptr = st->select_ptr;
    if (!st->search)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s", ptr),
                            "select", "select picks among the trials of a "
                            "search: this stage has no search");
    bf_trial_metric by;
    if (parse_metric_key(sw, select, ptr, "select", "by", &by, err) < 0)
        return -1;
    json_t *depth = json_object_get(select, "eval_depth");
    if (!int_in(depth, 1, 1 << 20))
        return bf_error_set(err, sw->file, key_line(sw, ptr, "eval_depth"),
                            "eval_depth", "select.eval_depth must be a "
                            "positive integer: the training depth whose "
                            "%s ranks the trials", bf_trial_metric_name(by));
    json_t *best = json_object_get(select, "best");
    if (best && !int_in(best, 1, (long long)st->search->n))
        return bf_error_set(err, sw->file, key_line(sw, ptr, "best"), "best",
                            "select.best must be an integer in [1, %zu] (the "
                            "trials)", st->search->n);
    st->select = bf_xcalloc(1, sizeof *st->select);
    st->select->metric = by;
    json_t *space = json_array();
    for (size_t f = 0; f < st->search->n_fields; f++)
        json_array_append_new(space, json_string(st->search->fields[f]));
    st->select->space = json_dumps(space, JSON_COMPACT);
    json_decref(space);
    st->select->eval_depth = (int)json_integer_value(depth);
    st->select->best = best ? (int)json_integer_value(best) : 1;
    return 0;
}

/* Whether depth is among cfg's eval_depths. */
static int evaluated(const bf_job_config *cfg, int depth)
{
    for (int k = 0; k < cfg->n_eval_depths; k++)
        if (cfg->eval_depths[k] == depth)
            return 1;
    return 0;
}

static int check_select(const bf_sweep *sw, const bf_sweep_stage *st,
                        const bf_job_config *cfg, const char *job,
                        bf_error *err)
{
    int depth = st->select->eval_depth;
    int line = key_line(sw, st->select_ptr, "eval_depth");
    if (depth > cfg->depth)
        return bf_error_set(err, sw->file, line, "eval_depth", "select."
                            "eval_depth %d is deeper than the training depth "
                            "%d of %s: trials are chosen on the "
                            "in-distribution evaluation, never on a test "
                            "depth", depth, cfg->depth, job);
    if (!evaluated(cfg, depth))
        return bf_error_set(err, sw->file, line, "eval_depth", "select."
                            "eval_depth %d is not among the eval_depths of %s",
                            depth, job);
    return 0;
}

int sweep__prune_check_job(const bf_sweep *sw, const bf_sweep_stage *st,
                          const bf_job_config *cfg, const char *job,
                          bf_error *err)
{
    if (st->select && check_select(sw, st, cfg, job, err) < 0)
        return -1;
    const bf_sweep_prune *p = st->prune;
    if (!p)
        return 0;
    if (!evaluated(cfg, p->eval_depth))
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/eval_depth",
                            st->prune_ptr), "eval_depth", "prune.eval_depth "
                            "%d is not among the eval_depths of %s",
                            p->eval_depth, job);
    for (size_t i = 0; i < p->n_rungs; i++) {
        int line = sweep__line(sw, "%s/rungs/%zu", st->prune_ptr, i);
        if (p->rungs[i] >= cfg->steps)
            return bf_error_set(err, sw->file, line, "rungs", "prune.rungs[%zu]"
                                " = %lld is not before the last step of %s "
                                "(steps %d): a rung decides whether training "
                                "goes on", i, (long long)p->rungs[i], job,
                                cfg->steps);
        if (cfg->eval_every <= 0 || p->rungs[i] % cfg->eval_every != 0)
            return bf_error_set(err, sw->file, line, "rungs", "prune.rungs[%zu]"
                                " = %lld is not a step %s evaluates at "
                                "(eval_every %d)", i, (long long)p->rungs[i],
                                job, cfg->eval_every);
    }
    return 0;
}
