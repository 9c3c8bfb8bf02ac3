#include "records.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const bf_metric_info bf_metrics[BF_N_METRICS] = {
    [BF_METRIC_LOSS]         = { "loss", "Training loss", 1, 1 },
    [BF_METRIC_LR]           = { "lr", "Learning rate", 0, 0 },
    [BF_METRIC_GRAD_NORM]    = { "grad_norm", "Gradient norm (before clipping)",
                                 1, 0 },
    [BF_METRIC_TOKENS_PER_S] = { "tokens_per_s", "Throughput (tokens/s)",
                                 0, 0 },
};

json_t *bf_metrics_json(void)
{
    json_t *out = json_array();
    for (int i = 0; out && i < BF_N_METRICS; i++)
        json_array_append_new(out, json_pack("{s:s, s:s, s:b, s:b}",
            "key", bf_metrics[i].key, "title", bf_metrics[i].title,
            "log", bf_metrics[i].log_scale, "band", bf_metrics[i].band));
    return out;
}

int bf_record_kind_of(const char *type)
{
    for (int k = 0; type && k < BF_N_RECORD_KINDS; k++)
        if (strcmp(type, bf_record_kinds[k].type) == 0)
            return k;
    return -1;
}

void bf_record_stored_types(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < BF_N_RECORD_KINDS && len < cap; k++)
        if (bf_record_kinds[k].route == BF_ROUTE_METRICS)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s",
                                    len ? ", " : "", bf_record_kinds[k].type);
}

json_t *bf_record_real(double x)
{
    if (isfinite(x))
        return json_real(x);
    return json_string(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

int bf_record_number(const json_t *v, double *out)
{
    const char *text = json_string_value(v);
    if (json_is_number(v))
        *out = json_number_value(v);
    else if (json_is_null(v) || (text && strcmp(text, "nan") == 0))
        *out = NAN;
    else if (text && strcmp(text, "inf") == 0)
        *out = INFINITY;
    else if (text && strcmp(text, "-inf") == 0)
        *out = -INFINITY;
    else
        return -1;
    return 0;
}

/* ---- each kind's JSON ------------------------------------------------------ */

static json_t *train_json(const bf_record *r)
{
    json_t *o = json_object();
    for (int i = 0; o && i < BF_N_METRICS; i++)
        json_object_set_new(o, bf_metrics[i].key,
                            bf_record_real(r->u.train.value[i]));
    return o;
}

static json_t *eval_json(const bf_eval_result *e)
{
    return json_pack("{s:i, s:o, s:o}", "depth", e->depth,
                     "loss", bf_record_real(e->loss),
                     "accuracy", bf_record_real(e->accuracy));
}

static json_t *freq_json(const bf_record *r)
{
    json_t *omega = json_array();
    for (int i = 0; omega && i < r->u.freq.n; i++)
        json_array_append_new(omega, bf_record_real(r->u.freq.omega[i]));
    return json_pack("{s:i, s:i, s:o}", "layer", r->u.freq.layer,
                     "head", r->u.freq.head, "omega", omega);
}

static json_t *done_json(const bf_record *r)
{
    json_t *evals = json_array();
    for (int k = 0; evals && k < r->u.done.n_evals; k++)
        json_array_append_new(evals, eval_json(&r->u.done.evals[k]));
    json_t *o = json_pack("{s:o, s:b, s:o}",
                          "train_loss", bf_record_real(r->u.done.train_loss),
                          "stopped", r->u.done.stopped, "eval", evals);
    if (o && r->u.done.diverged)
        json_object_set_new(o, "diverged", json_integer(r->u.done.diverged));
    return o;
}

static json_t *eval_fields(const bf_record *r)
{
    return eval_json(&r->u.eval);
}

static json_t *outcomes_json(const bf_record *r)
{
    size_t nbytes = BF_OUTCOMES_BYTES(r->u.outcomes.n);
    char *hex = malloc(2 * nbytes + 1);
    if (!hex)
        return NULL;
    for (size_t b = 0; b < nbytes; b++)
        snprintf(hex + 2 * b, 3, "%02x", r->u.outcomes.bits[b]);
    hex[2 * nbytes] = '\0';
    json_t *o = json_pack("{s:i, s:i, s:s}", "depth", r->u.outcomes.depth,
                          "n", r->u.outcomes.n, "bits", hex);
    free(hex);
    return o;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int bf_outcomes_from_hex(const char *hex, int n, unsigned char *bits)
{
    size_t nbytes = BF_OUTCOMES_BYTES(n);
    if (n < 1 || strlen(hex) != 2 * nbytes)
        return -1;
    for (size_t b = 0; b < nbytes; b++) {
        int hi = hex_digit(hex[2 * b]), lo = hex_digit(hex[2 * b + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        bits[b] = (unsigned char)(hi << 4 | lo);
    }
    unsigned spare = (unsigned)(8 * nbytes - (size_t)n);  /* bits past n */
    return spare && bits[nbytes - 1] >> (8 - spare) ? -1 : 0;
}

static json_t *checkpoint_json(const bf_record *r)
{
    return json_pack("{s:s}", "path", r->u.checkpoint.path);
}

static json_t *fail_json(const bf_record *r)
{
    return json_pack("{s:s}", "error", r->u.fail.error);
}

const bf_record_kind_info bf_record_kinds[BF_N_RECORD_KINDS] = {
    [BF_RECORD_TRAIN]      = { "train", BF_ROUTE_METRICS, train_json },
    [BF_RECORD_EVAL]       = { "eval", BF_ROUTE_METRICS, eval_fields },
    [BF_RECORD_FREQ]       = { "freq", BF_ROUTE_METRICS, freq_json },
    [BF_RECORD_OUTCOMES]   = { "outcomes", BF_ROUTE_METRICS, outcomes_json },
    [BF_RECORD_CHECKPOINT] = { "checkpoint", BF_ROUTE_CHECKPOINT,
                               checkpoint_json },
    [BF_RECORD_DONE]       = { "done", BF_ROUTE_NONE, done_json },
    [BF_RECORD_FAIL]       = { "fail", BF_ROUTE_NONE, fail_json },
};

json_t *bf_record_to_json(const bf_record *r)
{
    json_t *fields = bf_record_kinds[r->kind].fields(r);
    json_t *o = fields ? json_pack("{s:s, s:i}", "type",
                                   bf_record_kinds[r->kind].type,
                                   "step", r->step) : NULL;
    if (o)
        json_object_update(o, fields);
    json_decref(fields);
    return o;
}

int bf_record_print(FILE *fp, const json_t *record)
{
    char *line = json_dumps(record, BF_RECORD_DUMP_FLAGS);
    if (!line)
        return -1;
    int rc = (fputs(line, fp) < 0 || fputc('\n', fp) == EOF ||
              fflush(fp) != 0) ? -1 : 0;
    free(line);
    return rc;
}

/* ---- JSON in: a record from a trainer ------------------------------------- */

/* A JSON integer member within [min, max] into *out: 0, or -1. */
static int int_in(const json_t *o, const char *key, long long min,
                  long long max, int *out, bf_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < min ||
        json_integer_value(v) > max)
        return bf_error_set(err, NULL, 0, key, "must be an integer in "
                            "%lld .. %lld", min, max);
    *out = (int)json_integer_value(v);
    return 0;
}

static int real_of(const json_t *o, const char *key, double *out,
                   bf_error *err)
{
    if (bf_record_number(json_object_get(o, key), out) == 0)
        return 0;
    return bf_error_set(err, NULL, 0, key, "must be " BF_RECORD_NUMBER_RULE);
}

static int text_of(const json_t *o, const char *key, bf_record_read *rr,
                   bf_error *err)
{
    json_t *v = json_object_get(o, key);
    const char *s = json_string_value(v);
    if (!s || !s[0] || strlen(s) != json_string_length(v))
        return bf_error_set(err, NULL, 0, key, "must be a non-empty string "
                            "without NUL");
    rr->text = strdup(s);
    return rr->text ? 0 : bf_error_set(err, NULL, 0, key, "out of memory");
}

static int eval_of(const json_t *o, bf_eval_result *e, bf_error *err)
{
    return int_in(o, "depth", 1, 1 << 20, &e->depth, err) ||
           real_of(o, "loss", &e->loss, err) ||
           real_of(o, "accuracy", &e->accuracy, err) ? -1 : 0;
}

static int read_train(const json_t *o, bf_record_read *rr, bf_error *err)
{
    for (int i = 0; i < BF_N_METRICS; i++)
        if (real_of(o, bf_metrics[i].key, &rr->r.u.train.value[i], err))
            return -1;
    return 0;
}

static int read_freq(const json_t *o, bf_record_read *rr, bf_error *err)
{
    json_t *omega = json_object_get(o, "omega"), *v;
    size_t i, n = json_array_size(omega);
    if (int_in(o, "layer", 0, 1 << 20, &rr->r.u.freq.layer, err) ||
        int_in(o, "head", 0, 1 << 20, &rr->r.u.freq.head, err))
        return -1;
    if (!json_is_array(omega) || n < 1 || n > BF_RECORD_MAX_OMEGA)
        return bf_error_set(err, NULL, 0, "omega", "must be an array of 1 .. "
                            "%d numbers", BF_RECORD_MAX_OMEGA);
    json_array_foreach(omega, i, v) {
        double x;
        if (bf_record_number(v, &x) != 0)
            return bf_error_set(err, NULL, 0, "omega", "element %zu must be "
                                BF_RECORD_NUMBER_RULE, i);
        rr->omega[i] = (float)x;
    }
    rr->r.u.freq.n = (int)n;
    rr->r.u.freq.omega = rr->omega;
    return 0;
}

static int read_outcomes(const json_t *o, bf_record_read *rr, bf_error *err)
{
    const char *hex = json_string_value(json_object_get(o, "bits"));
    if (int_in(o, "depth", 1, 1 << 20, &rr->r.u.outcomes.depth, err) ||
        int_in(o, "n", 1, BF_OUTCOMES_MAX_EXAMPLES, &rr->r.u.outcomes.n, err))
        return -1;
    if (!hex || bf_outcomes_from_hex(hex, rr->r.u.outcomes.n, rr->bits) != 0)
        return bf_error_set(err, NULL, 0, "bits", "must be 2 lowercase hex "
                            "digits per 8 examples of n, no bit past n");
    rr->r.u.outcomes.bits = rr->bits;
    return 0;
}

static int read_done(const json_t *o, bf_record_read *rr, bf_error *err)
{
    json_t *evals = json_object_get(o, "eval"), *e;
    size_t i;
    if (real_of(o, "train_loss", &rr->r.u.done.train_loss, err))
        return -1;
    rr->r.u.done.stopped = json_is_true(json_object_get(o, "stopped"));
    if (evals && (!json_is_array(evals) ||
                  json_array_size(evals) > BF_RECORD_MAX_EVALS))
        return bf_error_set(err, NULL, 0, "eval", "must be an array of at "
                            "most %d evals", BF_RECORD_MAX_EVALS);
    json_array_foreach(evals, i, e)
        if (eval_of(e, &rr->evals[i], err))
            return -1;
    rr->r.u.done.n_evals = (int)json_array_size(evals);
    rr->r.u.done.evals = rr->evals;
    return 0;
}

static int read_fields(const json_t *o, bf_record_read *rr, bf_error *err)
{
    switch (rr->r.kind) {
    case BF_RECORD_TRAIN:
        return read_train(o, rr, err);
    case BF_RECORD_EVAL:
        return eval_of(o, &rr->r.u.eval, err);
    case BF_RECORD_FREQ:
        return read_freq(o, rr, err);
    case BF_RECORD_OUTCOMES:
        return read_outcomes(o, rr, err);
    case BF_RECORD_CHECKPOINT:
        if (text_of(o, "path", rr, err))
            return -1;
        rr->r.u.checkpoint.path = rr->text;
        return 0;
    case BF_RECORD_DONE:
        return read_done(o, rr, err);
    case BF_RECORD_FAIL:
        if (text_of(o, "error", rr, err))
            return -1;
        rr->r.u.fail.error = rr->text;
        return 0;
    case BF_N_RECORD_KINDS:
        break;
    }
    return bf_error_set(err, NULL, 0, "type", "unhandled kind");
}

/* bf_record_from_line of a parsed line. */
static int from_json(const json_t *o, bf_record_read *out, bf_error *err)
{
    memset(&out->r, 0, sizeof out->r);
    out->text = NULL;
    if (!json_is_object(o))
        return bf_error_set(err, NULL, 0, NULL, "a record must be a JSON "
                            "object");
    const char *type = json_string_value(json_object_get(o, "type"));
    int kind = bf_record_kind_of(type);
    if (kind < 0) {
        char all[160];
        size_t len = 0;
        all[0] = '\0';
        for (int k = 0; k < BF_N_RECORD_KINDS; k++)
            len += (size_t)snprintf(all + len, sizeof all - len, "%s%s",
                                    k ? ", " : "", bf_record_kinds[k].type);
        return bf_error_set(err, NULL, 0, "type", "unknown record type "
                            "'%.40s' (known: %s)", type ? type : "", all);
    }
    out->r.kind = (bf_record_kind)kind;
    return int_in(o, "step", 0, INT_MAX, &out->r.step, err) ||
           read_fields(o, out, err) ? -1 : 0;
}

int bf_record_from_line(const char *line, size_t len, bf_record_read *out,
                        bf_error *err)
{
    memset(&out->r, 0, sizeof out->r);
    out->text = NULL;
    const char *nul = memchr(line, '\0', len);
    if (nul)
        return bf_error_set(err, NULL, 0, NULL, "a NUL byte at column %zu",
                            (size_t)(nul - line) + 1);
    size_t blank = 0;
    while (blank < len && strchr(" \t\r", line[blank]))
        blank++;
    if (blank == len)
        return 1;
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    int rc = o ? from_json(o, out, err)
               : bf_error_set(err, NULL, 0, NULL, "not JSON: %s", je.text);
    json_decref(o);
    return rc;
}

void bf_record_read_clear(bf_record_read *rr)
{
    free(rr->text);
    rr->text = NULL;
}
