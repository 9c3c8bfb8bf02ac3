#include "records.h"

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

const bf_record_kind_info bf_record_kinds[BF_N_RECORD_KINDS] = {
    [BF_RECORD_TRAIN]      = { "train", BF_ROUTE_METRICS, train_json },
    [BF_RECORD_EVAL]       = { "eval", BF_ROUTE_METRICS, eval_fields },
    [BF_RECORD_FREQ]       = { "freq", BF_ROUTE_METRICS, freq_json },
    [BF_RECORD_OUTCOMES]   = { "outcomes", BF_ROUTE_METRICS, outcomes_json },
    [BF_RECORD_CHECKPOINT] = { "checkpoint", BF_ROUTE_CHECKPOINT,
                               checkpoint_json },
    [BF_RECORD_DONE]       = { "done", BF_ROUTE_NONE, done_json },
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
