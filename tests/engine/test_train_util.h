/* Fixtures shared by the trainer's tests: a tiny valid job, a scratch
 * directory with its group fixtures, and a record collector for the emit
 * hook.  Header-only so each test stays one executable. */
#ifndef TEST_TRAIN_UTIL_H
#define TEST_TRAIN_UTIL_H

#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "job_config.h"
#include "train.h"

/* A dyck job small enough to train in milliseconds. */
static inline void tiny_config(bf_job_config *c, bf_rope_kind rope)
{
    bf_job_config_defaults(c);
    c->task = BF_TASK_DYCK;
    c->depth = 3;
    c->eval_depths[0] = 3;
    c->n_eval_depths = 1;
    c->rope = rope;
    c->d_model = 16;
    c->n_layers = 2;
    c->n_heads = 2;
    c->seq_len = 16;
    c->batch_size = 4;
    c->steps = 10;
    c->warmup_steps = 2;
    c->lr = 3e-3;
    c->log_every = 1;
    c->eval_every = 0;
    c->freq_every = 0;
    c->checkpoint_every = 0;
    c->eval_examples = 8;
    bf_error err;
    if (bf_job_config_validate(c, &err) != 0)
        fail_msg("tiny config invalid: %s", err.msg);
}

/* ---- scratch directories ---------------------------------------------------- */

static inline int rm_entry(const char *path, const struct stat *sb, int flag,
                           struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

/* mkdtemp under /tmp; returns a static-lifetime copy in buf. */
static inline char *scratch_dir(char *buf, size_t cap)
{
    snprintf(buf, cap, "/tmp/bf-trainer-test-XXXXXX");
    if (!mkdtemp(buf))
        fail_msg("mkdtemp failed");
    return buf;
}

static inline void remove_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The scratch directory of the test file, made by the group fixtures below
 * before its first test and removed after its last. */
static char dir[64];

static inline int scratch_setup(void **state)
{
    (void)state;
    scratch_dir(dir, sizeof dir);
    return 0;
}

static inline int scratch_teardown(void **state)
{
    (void)state;
    remove_tree(dir);
    return 0;
}

static inline void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* ---- collecting records ------------------------------------------------------ */

typedef struct record_log {
    json_t *records;   /* every emitted record, as JSON */
} record_log;

static inline void collect_record(void *ctx, const bf_record *record)
{
    record_log *log = ctx;
    json_array_append_new(log->records, bf_record_to_json(record));
}

/* The losses of all "train" records, in order, into out (returns count). */
static inline int train_losses(const record_log *log, double *out, int cap)
{
    int n = 0;
    size_t i;
    json_t *r;
    json_array_foreach(log->records, i, r) {
        if (strcmp(json_string_value(json_object_get(r, "type")), "train"))
            continue;
        if (n < cap)
            out[n] = json_real_value(json_object_get(r, "loss"));
        n++;
    }
    return n;
}

/* Records of one type. */
static inline int count_type(const record_log *log, const char *type)
{
    int n = 0;
    size_t i;
    json_t *r;
    json_array_foreach(log->records, i, r)
        n += strcmp(json_string_value(json_object_get(r, "type")), type) == 0;
    return n;
}

/* Creates, runs and frees a single-process trainer; records go to log,
 * which is also the ctx should_stop (may be NULL) gets. */
static inline void run_job(const bf_job_config *cfg, const char *ckpt_dir,
                           const char *resume, record_log *log,
                           int (*should_stop)(void *))
{
    bf_trainer_opts o = {.rank = 0, .nranks = 1, .checkpoint_dir = ckpt_dir,
                         .resume_path = resume,
                         .hooks = {.ctx = log, .emit = collect_record,
                                   .should_stop = should_stop}};
    bf_trainer *t;
    bf_error err;
    if (bf_trainer_create(&t, cfg, &o, &err) != 0)
        fail_msg("trainer: %s", err.msg);
    if (bf_trainer_run(t, &err) != 0)
        fail_msg("run: %s", err.msg);
    bf_trainer_free(t);
}

#endif
