/* Records: what a trainer reports, in one place.
 *
 * The trainer hands typed records (bf_record) to its emit hook; JSON is made
 * only at the edges, by bf_record_to_json: a standalone worker prints it on
 * stdout, the worker's link sends it to the coordinator, whose store reads
 * it back.  This header is the one home of
 *   - the record kinds (bf_record_kinds: each kind's "type" and where the
 *     link sends it),
 *   - the train record's metric keys (bf_metrics: key, title, scale; the
 *     dashboard serves them to its page),
 *   - the spelling of non-finite values (bf_record_real, bf_record_number),
 *   - the rule for storing them (below).
 *
 * Non-finite values are data (a diverging job's last loss).  JSON has no
 * such numbers, so they travel as the strings "nan", "inf" and "-inf" (a
 * reader also takes null for NaN).  In the database an infinity is a REAL
 * (SQLite keeps IEEE infinities) and NaN, which SQLite cannot hold, is
 * NULL: aggregates skip it and no comparison matches it (docs/schema.md,
 * 010_nonfinite.sql).
 *
 * Adding a kind: a value of bf_record_kind, its member of bf_record's
 * union, its row in bf_record_kinds (type, route, encoder), and, for a
 * kind routed to metrics batches, its table and writer in the store
 * (server/store/store_metrics.c), which stores it exactly once. */
#ifndef BF_RECORDS_H
#define BF_RECORDS_H

#include <stdio.h>
#include <jansson.h>

#include "bf_error.h"

/* Reals keep 9 significant digits: a float32 survives the round trip. */
#define BF_RECORD_DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

/* The train record's metrics, in the order of bf_metrics. */
typedef enum bf_metric {
    BF_METRIC_LOSS,
    BF_METRIC_LR,
    BF_METRIC_GRAD_NORM,
    BF_METRIC_TOKENS_PER_S,
    BF_N_METRICS
} bf_metric;

typedef struct bf_metric_info {
    const char *key;     /* the train record's field and metrics.key */
    const char *title;   /* what a plot of it is called */
    int log_scale;       /* 1: plotted on a log scale */
    int band;            /* 1: plotted with its min..max band */
} bf_metric_info;

extern const bf_metric_info bf_metrics[BF_N_METRICS];

/* The metrics table as JSON, [{"key","title","log","band"}, ...] (new
 * reference; NULL only when out of memory): what the dashboard's page
 * draws. */
json_t *bf_metrics_json(void);

typedef enum bf_record_kind {
    BF_RECORD_TRAIN,
    BF_RECORD_EVAL,
    BF_RECORD_FREQ,
    BF_RECORD_OUTCOMES,
    BF_RECORD_CHECKPOINT,
    BF_RECORD_DONE,
    BF_RECORD_FAIL,        /* a trainer of --exec gives up for good */
    BF_N_RECORD_KINDS
} bf_record_kind;

/* Where the worker's link sends a kind. */
typedef enum bf_record_route {
    BF_ROUTE_METRICS,     /* in a `metrics` batch; the store keeps it once */
    BF_ROUTE_CHECKPOINT,  /* its own `checkpoint` message, after the batch */
    BF_ROUTE_NONE         /* not sent: job_done / job_failed report it */
} bf_record_route;

/* The kind whose type is `type`, or -1 (also for NULL). */
int bf_record_kind_of(const char *type);

/* "train, eval, freq" into buf: the types routed to metrics batches. */
void bf_record_stored_types(char *buf, size_t cap);

/* One evaluation depth's result. */
typedef struct bf_eval_result {
    int depth;
    double loss;       /* mean cross-entropy over target tokens */
    double accuracy;   /* fraction of examples with every target right */
} bf_eval_result;

/* An eval record's per-example outcomes: example i (0-based, in the
 * order of the eval stream) is bit i % 8 (least significant first) of byte
 * i / 8, 1 when every target of the example was predicted right (what
 * the eval record's accuracy counts); the bits past n in the last byte
 * are 0.  On the wire the bytes are lowercase hex ("bits", 2 digits a
 * byte, so 256 examples are 32 bytes, 64 digits); in the database a BLOB
 * (eval_outcomes).  Jobs with more eval examples than this send none. */
#define BF_OUTCOMES_MAX_EXAMPLES 65536

/* The bytes of n outcomes. */
#define BF_OUTCOMES_BYTES(n) (((size_t)(n) + 7) / 8)

/* Reads the hex of n outcomes into bits[BF_OUTCOMES_BYTES(n)]: 0, or -1
 * when hex is not 2 * BF_OUTCOMES_BYTES(n) hex digits or sets a bit past
 * n. */
int bf_outcomes_from_hex(const char *hex, int n, unsigned char *bits);

/* A record as the trainer emits it.  Pointers are borrowed: they are valid
 * only during the emit call that hands the record over. */
typedef struct bf_record {
    bf_record_kind kind;
    int step;
    union {
        struct { double value[BF_N_METRICS]; } train;
        bf_eval_result eval;
        struct { int layer, head, n; const float *omega; } freq;
        /* depth's outcomes, n examples, bits[BF_OUTCOMES_BYTES(n)] */
        struct { int depth, n; const unsigned char *bits; } outcomes;
        struct { const char *path; } checkpoint;
        struct {
            double train_loss;
            int stopped;
            int diverged;              /* 0: did not diverge */
            int n_evals;
            const bf_eval_result *evals;
        } done;
        struct { const char *error; } fail;
    } u;
} bf_record;

typedef struct bf_record_kind_info {
    const char *type;       /* the JSON "type" */
    bf_record_route route;
    /* The kind's own fields as JSON, without type and step (new
     * reference). */
    json_t *(*fields)(const bf_record *r);
} bf_record_kind_info;

extern const bf_record_kind_info bf_record_kinds[BF_N_RECORD_KINDS];

/* The record as the wire and stdout carry it (new reference; NULL only when
 * out of memory), e.g. {"type":"eval","step":N,"depth":D,"loss":x,
 * "accuracy":x}, {"type":"outcomes","step":N,"depth":D,"n":E,
 * "bits":"0fe1..."}; docs/training.md lists every kind. */
json_t *bf_record_to_json(const bf_record *r);

/* A real, or "nan" / "inf" / "-inf" when x is not finite (new reference). */
json_t *bf_record_real(double x);

/* Reads a value as bf_record_real writes it (a null is NaN too): 0, or -1
 * when v is none of those. */
int bf_record_number(const json_t *v, double *out);

/* What bf_record_number accepts, for error messages. */
#define BF_RECORD_NUMBER_RULE "a number (or \"nan\", \"inf\", \"-inf\", null)"

/* The most evals a done record carries, and the most omegas of a freq
 * record (d_head / 2 of the largest model). */
#define BF_RECORD_MAX_EVALS 16
#define BF_RECORD_MAX_OMEGA 4096

/* A record read from JSON: the record and the storage it points into. */
typedef struct bf_record_read {
    bf_record r;
    bf_eval_result evals[BF_RECORD_MAX_EVALS];
    float omega[BF_RECORD_MAX_OMEGA];
    unsigned char bits[BF_OUTCOMES_BYTES(BF_OUTCOMES_MAX_EXAMPLES)];
    char *text;          /* checkpoint path, fail error (owned) */
} bf_record_read;

/* Reads one line of a records file, len bytes without its newline, as
 * bf_record_to_json writes a record (the JSON lines a trainer of
 * `bifocal-worker --exec` appends, docs/trainers.md) into *out: its type,
 * a step >= 0 and every field of its kind, of the right type and range;
 * fields of no kind's are ignored.  1 for a blank line (nothing to take),
 * 0 with *out read, -1 with err naming the field, or saying the line is
 * not JSON (a NUL byte in it included: what follows would go unread).
 * Free with bf_record_read_clear, after a failure too. */
int bf_record_from_line(const char *line, size_t len, bf_record_read *out,
                        bf_error *err);
void bf_record_read_clear(bf_record_read *rr);

/* Writes the record as one line of JSON and flushes, so a reader on a pipe
 * sees every record as it happens.  Returns 0, or -1 on a write error. */
int bf_record_print(FILE *fp, const json_t *record);

#endif
