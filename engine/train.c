#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "checkpoint.h"
#include "clock.h"
#include "model_size.h"
#include "records.h"
#include "tasks.h"

struct bf_trainer {
    bf_job_config cfg;
    bf_trainer_opts opts;
    bf_model model;
    int local_batch;        /* rows of each global batch on this rank */
    int first_row;          /* this rank's first row in a global batch */
    int micro;              /* rows per forward/backward */
    int step;               /* optimizer steps completed */
    int *inputs, *targets;  /* [micro, T] */
    int *positions;         /* [micro, T] rotary positions (training) */
    int *predicted;         /* [micro, T] argmax of the last forward */
    float *omega;           /* [d_head / 2] for freq records */
    /* An evaluation's one allreduce: per eval depth 3 sums (loss, targets,
     * exact rows), then per depth the per-example outcomes, 16 examples a
     * float (example i is bit i % 16 of word i / 16, set by the one rank
     * that evaluates it, so the sum over ranks is their union, exact in a
     * float).  No outcome words past BF_OUTCOMES_MAX_EXAMPLES. */
    float *eval_buf;
    size_t outcome_words;   /* per depth */
    unsigned char *outcome_bits; /* [nbytes] of one depth, for its record */
    float *eval_words;      /* the depth being evaluated: its words */
    int eval_row;           /* the example its next scored row is */
    int stop_agreed;        /* some rank asked to stop after this step */
    bf_train_summary summary;
    /* throughput since the last train record */
    double window_seconds;
    int window_steps;
    double last_grad_norm, last_lr;
};

double bf_lr_at(const bf_job_config *cfg, int n)
{
    if (n <= cfg->warmup_steps)
        return cfg->lr * n / (cfg->warmup_steps > 0 ? cfg->warmup_steps : 1);
    double p = (double)(n - cfg->warmup_steps) /
               (double)(cfg->steps - cfg->warmup_steps);
    double min_lr = BF_MIN_LR_FRACTION * cfg->lr;
    return min_lr + 0.5 * (cfg->lr - min_lr) * (1.0 + cos(M_PI * p));
}

/* ---- setup ---------------------------------------------------------------- */

static int check_ranks(const bf_trainer_opts *o, bf_error *err)
{
    if (o->nranks < 1 || o->rank < 0 || o->rank >= o->nranks)
        return bf_error_set(err, NULL, 0, NULL,
                            "rank %d of %d ranks is impossible", o->rank,
                            o->nranks);
    if (o->nranks > 1 && !o->hooks.allreduce_sum)
        return bf_error_set(err, NULL, 0, NULL,
                            "%d ranks need an allreduce hook", o->nranks);
    return 0;
}

static void alloc_buffers(bf_trainer *t)
{
    size_t cells = (size_t)t->micro * (size_t)t->cfg.seq_len;
    t->inputs = bf_xmalloc(cells * sizeof *t->inputs);
    t->targets = bf_xmalloc(cells * sizeof *t->targets);
    t->predicted = bf_xmalloc(cells * sizeof *t->predicted);
    t->positions = bf_xmalloc(cells * sizeof *t->positions);
    t->omega = bf_xmalloc((size_t)t->cfg.d_model / (size_t)t->cfg.n_heads *
                          sizeof *t->omega);
    size_t E = (size_t)t->cfg.eval_examples;
    t->outcome_words = E <= BF_OUTCOMES_MAX_EXAMPLES ? (E + 15) / 16 : 0;
    t->eval_buf = bf_xmalloc((size_t)t->cfg.n_eval_depths *
                             (3 + t->outcome_words) * sizeof *t->eval_buf);
    t->outcome_bits = bf_xmalloc(BF_OUTCOMES_BYTES(E) + 1);
}

static int load_initial_state(bf_trainer *t, bf_error *err)
{
    bf_model_init_weights(&t->model, t->cfg.seed);
    if (t->opts.resume_path) {
        int rc = bf_checkpoint_resume(t->opts.resume_path, &t->model, &t->cfg,
                                      t->opts.owner, &t->step, err);
        /* Another job's file at this job's path: every attempt finds it. */
        return rc == BF_CHECKPOINT_FOREIGN ? BF_TRAIN_PERMANENT : rc;
    }
    if (t->cfg.init_from[0] &&
        bf_checkpoint_init_from(t->cfg.init_from, t->opts.init_source,
                                &t->model, err) != 0)
        return BF_TRAIN_PERMANENT;   /* the job's own input is at fault */
    return 0;
}

int bf_trainer_create(bf_trainer **out, const bf_job_config *cfg,
                      const bf_trainer_opts *opts, bf_error *err)
{
    *out = NULL;
    if (check_ranks(opts, err) != 0)
        return -1;
    if (opts->memory_budget &&
        bf_job_memory_check(cfg, opts->nranks, opts->memory_budget,
                            "the worker's memory budget per rank "
                            "(--memory-budget)", err) != 0)
        return BF_TRAIN_PERMANENT;
    bf_trainer *t = bf_xcalloc(1, sizeof *t);
    t->cfg = *cfg;
    t->opts = *opts;
    /* Rows split as evenly as possible: the first batch_size % nranks
     * ranks take one more.  A rank may get none (batch_size < nranks): it
     * still joins every allreduce with zero gradients and zero targets. */
    int base = cfg->batch_size / opts->nranks;
    int extra = cfg->batch_size % opts->nranks;
    t->local_batch = base + (opts->rank < extra);
    t->first_row = opts->rank * base +
                   (opts->rank < extra ? opts->rank : extra);
    t->summary.train_loss = NAN;

    bf_model_shape shape;
    bf_model_size_from_config(&shape, cfg, bf_vocab_size(cfg));
    t->micro = bf_model_size_micro_batch(&shape, t->local_batch, cfg->seq_len);
    if (bf_model_create(&t->model, &shape, t->micro, cfg->seq_len, err) != 0) {
        free(t);
        return BF_TRAIN_PERMANENT;
    }
    alloc_buffers(t);
    int rc = load_initial_state(t, err);
    if (rc != 0) {
        bf_trainer_free(t);
        return rc < 0 ? rc : -1;
    }
    t->summary.step = t->step;
    *out = t;
    return 0;
}

void bf_trainer_free(bf_trainer *t)
{
    if (!t)
        return;
    bf_model_free(&t->model);
    free(t->inputs);
    free(t->targets);
    free(t->predicted);
    free(t->positions);
    free(t->omega);
    free(t->eval_buf);
    free(t->outcome_bits);
    free(t);
}

/* ---- one step ------------------------------------------------------------- */

/* The stream forward_micro_batches draws from: the training examples, or
 * (any other value) the eval examples of that depth, which is >= 1. */
#define TRAIN_STREAM 0

/* What follows the forward pass of each micro-batch: backward in training,
 * scoring in evaluation.  Returns the exactly-right rows it counted. */
typedef int (*after_forward_fn)(bf_trainer *t, int rows);

/* Runs examples [first, first + count) of one stream through the model,
 * t->micro rows at a time (the activations are sized for one micro-batch),
 * calling after() on each.  sums[3] += loss sum, target count, exact rows. */
static void forward_micro_batches(bf_trainer *t, int stream, uint64_t first,
                                  int count, after_forward_fn after,
                                  double *sums)
{
    int T = t->cfg.seq_len;
    for (int r0 = 0; r0 < count; r0 += t->micro) {
        int rows = count - r0 < t->micro ? count - r0 : t->micro;
        for (int i = 0; i < rows; i++) {
            uint64_t index = first + (uint64_t)(r0 + i);
            int *inputs = t->inputs + (size_t)i * T;
            int *targets = t->targets + (size_t)i * T;
            if (stream == TRAIN_STREAM) {
                bf_task_train_example(&t->cfg, index, inputs, targets, T);
                bf_task_train_positions(&t->cfg, index,
                                        t->positions + (size_t)i * T, T);
            } else {
                bf_task_eval_example(&t->cfg, stream, index, inputs, targets,
                                     T);
            }
        }
        /* evaluation always sees positions 0..T-1 */
        const int *positions = stream == TRAIN_STREAM ? t->positions : NULL;
        int n = 0;
        sums[0] += bf_model_forward(&t->model, t->inputs, t->targets,
                                    positions, rows, T, &n);
        sums[1] += n;
        sums[2] += after(t, rows);
    }
}

static int backward_micro_batch(bf_trainer *t, int rows)
{
    (void)rows;
    bf_model_backward(&t->model, 1.0f);
    return 0;
}

/* Scores one micro-batch just forwarded (examples eval_row, ...): marks
 * each exactly-right one in the outcome words, returns how many. */
static int count_exact(bf_trainer *t, int rows)
{
    int T = t->cfg.seq_len, exact = 0;
    bf_model_argmax(&t->model, t->predicted);
    for (int i = 0; i < rows; i++, t->eval_row++) {
        const int *tg = t->targets + (size_t)i * T;
        const int *pr = t->predicted + (size_t)i * T;
        int ok = 1;
        for (int p = 0; p < T && ok; p++)
            ok = tg[p] < 0 || tg[p] == pr[p];
        exact += ok;
        if (ok && t->outcome_words)
            t->eval_words[t->eval_row / 16] += (float)(1 << t->eval_row % 16);
    }
    return exact;
}

static int stop_requested(bf_trainer *t)
{
    return t->opts.hooks.should_stop &&
           t->opts.hooks.should_stop(t->opts.hooks.ctx);
}

/* Sums the gradients, the loss sum, the target count and the stop votes
 * over ranks in one collective: the scalars ride in the gradient buffer's
 * trailing slots (BF_GRAD_SLOTS in model.h). */
static void allreduce_step(bf_trainer *t, double *loss_sum, double *n_targets,
                           int *stop)
{
    if (!t->opts.hooks.allreduce_sum)
        return;
    size_t n = t->model.num_params;
    float *slot = t->model.grads_memory + n;
    slot[0] = (float)*loss_sum;
    slot[1] = (float)*n_targets;
    slot[2] = *stop ? 1.0f : 0.0f;
    t->opts.hooks.allreduce_sum(t->opts.hooks.ctx, t->model.grads_memory,
                                n + 3);
    *loss_sum = slot[0];
    *n_targets = slot[1];
    *stop = slot[2] > 0.0f;
}

void bf_trainer_step(bf_trainer *t, double *loss, double *grad_norm,
                     double *lr)
{
    const bf_job_config *cfg = &t->cfg;
    uint64_t first = bf_task_step_first(cfg, t->step) +
                     (uint64_t)t->first_row;
    double sums[3] = { 0, 0, 0 };

    bf_model_zero_grad(&t->model);
    forward_micro_batches(t, TRAIN_STREAM, first, t->local_batch,
                          backward_micro_batch, sums);
    double loss_sum = sums[0], n_targets = sums[1];
    int stop = stop_requested(t);
    allreduce_step(t, &loss_sum, &n_targets, &stop);
    t->stop_agreed = stop;

    /* Gradients hold sums; the mean over target tokens is 1/n of them. */
    double mean = n_targets > 0 ? 1.0 / n_targets : 0.0;
    double norm = bf_model_grad_norm(&t->model) * mean;
    double clip = (cfg->grad_clip > 0 && norm > cfg->grad_clip)
                  ? cfg->grad_clip / norm : 1.0;
    double step_lr = bf_lr_at(cfg, t->step + 1);
    bf_adamw_hparams hp = {
        .lr = (float)step_lr, .beta1 = BF_ADAM_BETA1, .beta2 = BF_ADAM_BETA2,
        .eps = BF_ADAM_EPS, .weight_decay = (float)cfg->weight_decay,
        .freq_lr_mult = (float)cfg->freq_lr_mult,
    };
    bf_adamw_step(&t->model, &hp, t->step + 1, (float)(mean * clip));
    t->step++;

    if (loss)
        *loss = n_targets > 0 ? loss_sum / n_targets : NAN;
    if (grad_norm)
        *grad_norm = norm;
    if (lr)
        *lr = step_lr;
}

/* ---- evaluation ----------------------------------------------------------- */

/* sums[3] = loss sum, target count, exact rows of this rank's share;
 * words (outcome_words) get the outcomes of its examples, zero elsewhere. */
static void evaluate_depth(bf_trainer *t, int depth, float *sums,
                           float *words)
{
    int E = t->cfg.eval_examples;
    int N = t->opts.nranks, r = t->opts.rank;
    int lo = (int)((long)r * E / N), hi = (int)((long)(r + 1) * E / N);
    double d[3] = { 0, 0, 0 };
    memset(words, 0, t->outcome_words * sizeof *words);
    t->eval_words = words;
    t->eval_row = lo;
    forward_micro_batches(t, depth, (uint64_t)lo, hi - lo, count_exact, d);
    sums[0] = (float)d[0];
    sums[1] = (float)d[1];
    sums[2] = (float)d[2];
}

void bf_trainer_evaluate(bf_trainer *t, bf_eval_result *out)
{
    int nd = t->cfg.n_eval_depths;
    float *sums = t->eval_buf, *words = t->eval_buf + 3 * nd;
    for (int k = 0; k < nd; k++)
        evaluate_depth(t, t->cfg.eval_depths[k], sums + 3 * k,
                       words + (size_t)k * t->outcome_words);
    if (t->opts.hooks.allreduce_sum)
        t->opts.hooks.allreduce_sum(t->opts.hooks.ctx, t->eval_buf,
                                    (size_t)nd * (3 + t->outcome_words));
    for (int k = 0; k < nd; k++) {
        out[k].depth = t->cfg.eval_depths[k];
        out[k].loss = sums[3 * k + 1] > 0 ? sums[3 * k] / sums[3 * k + 1]
                                          : NAN;
        out[k].accuracy = t->cfg.eval_examples > 0
                          ? sums[3 * k + 2] / t->cfg.eval_examples : NAN;
    }
}

const unsigned char *bf_trainer_outcomes(bf_trainer *t, int k)
{
    if (!t->outcome_words)
        return NULL;
    int nd = t->cfg.n_eval_depths;
    const float *words = t->eval_buf + 3 * nd + (size_t)k * t->outcome_words;
    size_t nbytes = BF_OUTCOMES_BYTES(t->cfg.eval_examples);
    for (size_t b = 0; b < nbytes; b++) {
        unsigned w = (unsigned)words[b / 2];
        t->outcome_bits[b] = (unsigned char)(b % 2 ? w >> 8 : w & 0xff);
    }
    return t->outcome_bits;
}

/* ---- the loop --------------------------------------------------------------- */

static int is_rank0(const bf_trainer *t) { return t->opts.rank == 0; }

/* Hands a record to the emit hook (rank 0 only), timed as streaming. */
static void emit(bf_trainer *t, const bf_record *record)
{
    if (!is_rank0(t) || !t->opts.hooks.emit)
        return;
    double t0 = bf_now_seconds();
    t->opts.hooks.emit(t->opts.hooks.ctx, record);
    t->summary.seconds[BF_PART_STREAM] += bf_now_seconds() - t0;
}

/* A mark where a part begins; part_end charges the time since to `part`,
 * less what went to streaming meanwhile (counted there by emit). */
typedef struct part_mark {
    double at, streamed;
} part_mark;

static part_mark part_begin(const bf_trainer *t)
{
    return (part_mark){bf_now_seconds(), t->summary.seconds[BF_PART_STREAM]};
}

static void part_end(bf_trainer *t, bf_train_part part, part_mark m)
{
    double *sec = t->summary.seconds;
    sec[part] += bf_now_seconds() - m.at - (sec[BF_PART_STREAM] - m.streamed);
}

static int due(int step, int every, int last)
{
    return step == last || (every > 0 && step % every == 0);
}

static void emit_train(bf_trainer *t)
{
    double tokens = (double)t->window_steps * t->cfg.batch_size *
                    t->cfg.seq_len;
    double tps = t->window_seconds > 0 ? tokens / t->window_seconds : NAN;
    bf_record r = {.kind = BF_RECORD_TRAIN, .step = t->step};
    r.u.train.value[BF_METRIC_LOSS] = t->summary.train_loss;
    r.u.train.value[BF_METRIC_LR] = t->last_lr;
    r.u.train.value[BF_METRIC_GRAD_NORM] = t->last_grad_norm;
    r.u.train.value[BF_METRIC_TOKENS_PER_S] = tps;
    emit(t, &r);
    t->window_seconds = 0;
    t->window_steps = 0;
}

static void emit_eval(bf_trainer *t)
{
    part_mark m = part_begin(t);
    bf_trainer_evaluate(t, t->summary.evals);
    t->summary.n_evals = t->cfg.n_eval_depths;
    for (int k = 0; k < t->summary.n_evals; k++) {
        bf_record r = {.kind = BF_RECORD_EVAL, .step = t->step,
                       .u.eval = t->summary.evals[k]};
        emit(t, &r);
        const unsigned char *bits = bf_trainer_outcomes(t, k);
        if (!bits)
            continue;
        r = (bf_record){.kind = BF_RECORD_OUTCOMES, .step = t->step,
                        .u.outcomes = {.depth = t->summary.evals[k].depth,
                                       .n = t->cfg.eval_examples,
                                       .bits = bits}};
        emit(t, &r);
    }
    part_end(t, BF_PART_EVAL, m);
}

/* Learnable heads on the freq_every schedule; every head, fixed ones too,
 * at the first and the last step, so that the frequency_evolution view sets
 * the geometric eyes standing still beside the spectral ones moving.  NoPE
 * has no frequencies to report, PoPE no rotary ones (log_freq unused). */
static void emit_freqs(bf_trainer *t)
{
    const bf_model_shape *s = &t->model.shape;
    int P = s->d_model / s->n_heads / 2;
    int every_head = t->step == 0 || t->step == t->cfg.steps;
    if (s->rope == BF_ROPE_NONE || s->rope == BF_ROPE_POPE)
        return;
    part_mark m = part_begin(t);
    for (int l = 0; l < s->n_layers; l++)
        for (int h = 0; h < s->n_heads; h++) {
            if (!every_head && !t->model.freq_learnable[l * s->n_heads + h])
                continue;
            bf_model_omega(&t->model, l, h, t->omega);
            bf_record r = {.kind = BF_RECORD_FREQ, .step = t->step,
                           .u.freq = {.layer = l, .head = h, .n = P,
                                      .omega = t->omega}};
            emit(t, &r);
        }
    part_end(t, BF_PART_FREQ, m);
}

/* Rank 0 writes (all replicas are identical). */
static int write_checkpoint(bf_trainer *t, bf_error *err)
{
    if (!is_rank0(t))
        return 0;
    char *path = t->summary.checkpoint;
    part_mark m = part_begin(t);
    if (bf_checkpoint_save_in_dir(t->opts.checkpoint_dir, &t->model,
                                  &t->cfg, t->opts.owner, t->step, path,
                                  sizeof t->summary.checkpoint, err) != 0)
        return -1;
    part_end(t, BF_PART_CHECKPOINT, m);
    bf_record r = {.kind = BF_RECORD_CHECKPOINT, .step = t->step,
                   .u.checkpoint.path = path};
    emit(t, &r);
    return 0;
}

static void emit_done(bf_trainer *t)
{
    bf_record r = {.kind = BF_RECORD_DONE, .step = t->step,
                   .u.done = {.train_loss = t->summary.train_loss,
                              .stopped = t->summary.stopped,
                              .diverged = t->summary.diverged,
                              .n_evals = t->summary.n_evals,
                              .evals = t->summary.evals}};
    emit(t, &r);
}

/* A non-finite loss (stop_on_nonfinite): the step's train record says so,
 * and nothing after it is worth computing, evaluating or checkpointing.
 * The loss is the same on every rank (it is summed over them), so every
 * rank stops at this step. */
static int diverged_here(bf_trainer *t, double loss)
{
    if (isfinite(loss) || !t->cfg.stop_on_nonfinite)
        return 0;
    t->summary.diverged = t->step;
    emit_train(t);
    return 1;
}

/* What the schedule asks for after step t->step. */
static int after_step(bf_trainer *t, bf_error *err)
{
    const bf_job_config *c = &t->cfg;
    if (due(t->step, c->log_every, c->steps))
        emit_train(t);
    if (due(t->step, c->eval_every, c->steps))
        emit_eval(t);
    if (due(t->step, c->freq_every, c->steps))
        emit_freqs(t);
    if (t->opts.checkpoint_dir && due(t->step, c->checkpoint_every, c->steps))
        return write_checkpoint(t, err);
    return 0;
}

/* A stopped run still reports its last step and leaves a checkpoint to
 * resume from (unless the schedule just did both); it skips evaluation
 * to stop promptly. */
static int stop_here(bf_trainer *t, bf_error *err)
{
    const bf_job_config *c = &t->cfg;
    t->summary.stopped = 1;
    if (!due(t->step, c->log_every, c->steps))
        emit_train(t);
    if (t->opts.checkpoint_dir && !due(t->step, c->checkpoint_every, c->steps))
        return write_checkpoint(t, err);
    return 0;
}

int bf_trainer_run(bf_trainer *t, bf_error *err)
{
    if (t->step == 0)
        emit_freqs(t);
    while (t->step < t->cfg.steps) {
        double t0 = bf_now_seconds(), loss;
        bf_trainer_step(t, &loss, &t->last_grad_norm, &t->last_lr);
        double dt = bf_now_seconds() - t0;
        t->window_seconds += dt;
        t->summary.seconds[BF_PART_TRAIN] += dt;
        t->window_steps++;
        t->summary.train_loss = loss;
        t->summary.step = t->step;
        if (diverged_here(t, loss))
            break;
        if (after_step(t, err) != 0)
            return -1;
        if (t->step < t->cfg.steps && t->stop_agreed) {
            if (stop_here(t, err) != 0)
                return -1;
            break;
        }
    }
    emit_done(t);
    return 0;
}

int bf_trainer_current_step(const bf_trainer *t) { return t->step; }
const bf_train_summary *bf_trainer_summary(const bf_trainer *t)
{
    return &t->summary;
}
bf_model *bf_trainer_model(bf_trainer *t) { return &t->model; }
