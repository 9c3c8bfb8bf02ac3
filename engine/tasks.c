/* Tasks: dyck, counter, modarith, code (vocabularies in docs/tasks.md).
 *
 * Each task is a generator writing one whole sequence (prompt, separator,
 * answer, END) into a scratch buffer; the shared code below turns that into
 * the fixed-length (inputs, targets) row described in tasks.h.  Every random
 * choice comes from a bf_rng keyed by (seed, stream, depth, index); the
 * depth and the random positions of a training example by (seed, stream,
 * index). */
#include "tasks.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "code_corpus.h"
#include "rng.h"
#include "vocab.h"

/* Streams of task_example used by the train/eval helpers.  The depth
 * draw of a training example has a stream of its own. */
enum { STREAM_TRAIN = 1, STREAM_EVAL = 2, STREAM_TRAIN_DEPTH = 3,
       STREAM_TRAIN_POSITIONS = 4 };

/* Longest sequence any task produces: the formal tasks at BF_MAX_DEPTH (4
 * tokens per level plus a few), with room to spare; code snippets stop at
 * BF_CODE_MAX_DEPTH, whose bf_task_max_len is far below it. */
#define SEQ_CAP (4 * BF_MAX_DEPTH + 8)

/* ---- dyck: open and close ids per bracket type (vocab.h) --------------- */

/* A random balanced word of `pairs` bracket pairs (random nesting, random
 * types), appended at seq[n]; returns the new length. */
static int dyck_balanced(const bf_job_config *cfg, bf_rng *rng, int pairs,
                         int *seq, int n)
{
    int stack[BF_MAX_DEPTH + 1];
    int top = 0;
    while (pairs > 0 || top > 0) {
        if (pairs > 0 && (top == 0 || bf_rng_below(rng, 2))) {
            stack[top] = (int)bf_rng_below(rng, (uint32_t)cfg->dyck_k);
            seq[n++] = bf_tok_dyck_open(stack[top++]);
            pairs--;
        } else {
            seq[n++] = bf_tok_dyck_close(stack[--top]);
        }
    }
    return n;
}

/* `depth` unclosed brackets with 0..depth extra balanced pairs scattered in
 * the depth+1 gaps around them; the answer closes the open ones. */
static int dyck_generate(const bf_job_config *cfg, int depth, bf_rng *rng,
                         int *seq, int *answer_start)
{
    int gap_pairs[BF_MAX_DEPTH + 1] = {0};
    int extra = (int)bf_rng_below(rng, (uint32_t)depth + 1);
    for (int i = 0; i < extra; i++)
        gap_pairs[bf_rng_below(rng, (uint32_t)depth + 1)]++;
    int open[BF_MAX_DEPTH];
    int n = 0;
    for (int g = 0; g <= depth; g++) {
        n = dyck_balanced(cfg, rng, gap_pairs[g], seq, n);
        if (g < depth) {
            open[g] = (int)bf_rng_below(rng, (uint32_t)cfg->dyck_k);
            seq[n++] = bf_tok_dyck_open(open[g]);
        }
    }
    seq[n++] = BF_TOK_SEP;
    *answer_start = n;
    for (int g = depth - 1; g >= 0; g--)
        seq[n++] = bf_tok_dyck_close(open[g]);
    seq[n++] = BF_TOK_END;
    return n;
}

/* Unclosed brackets at the separator; -1 if the prefix is not a Dyck
 * prefix (a close that does not match, or a token that is not one of the
 * `types` bracket types unless `others` allows other tokens between). */
static int brackets_measure(int types, int others, const int *tokens, int n)
{
    int stack[SEQ_CAP];
    int top = 0;
    for (int t = 0; t < n; t++) {
        if (tokens[t] < BF_TOK_FIRST)
            return -1;
        if (bf_tok_dyck_type(tokens[t]) >= types) {
            if (others)
                continue;
            return -1;
        }
        if (bf_tok_dyck_is_open(tokens[t]))
            stack[top++] = bf_tok_dyck_type(tokens[t]);
        else if (top == 0 || stack[--top] != bf_tok_dyck_type(tokens[t]))
            return -1;
    }
    return top;
}

/* ---- code: code symbols (code_corpus.h) from BF_TOK_FIRST -------------- */

/* Brackets come first among the code symbols, laid out as dyck's: ( ) [ ]
 * { } are dyck-3's tokens, so the answers of both tasks read alike. */
_Static_assert(BF_CODE_PAREN_OPEN == 0 && BF_CODE_SQUARE_OPEN == 2 &&
               BF_CODE_CURLY_OPEN == 4, "code brackets are dyck-3's");

/* Held by the caller until bf_code_corpus_put. */
static const bf_code_corpus *code_corpus(const bf_job_config *cfg)
{
    const bf_code_corpus *corpus = bf_code_corpus_get(cfg->code_dir, NULL);
    if (!corpus) { /* the validator loads it first, or refuses the job */
        fprintf(stderr, "bifocal: code_dir '%s' was not validated\n",
                cfg->code_dir);
        abort();
    }
    return corpus;
}

/* A snippet of `depth` from the split's files, its number drawn from rng. */
static int code_generate(const bf_job_config *cfg, int split, int depth,
                         bf_rng *rng, int *seq, int *answer_start)
{
    const bf_code_corpus *corpus = code_corpus(cfg);
    uint32_t count = bf_code_snippet_count(corpus, split, depth);
    assert(count > 0); /* validated: every depth of the job has snippets */
    bf_code_snippet sn;
    bf_code_snippet_get(corpus, split, depth, bf_rng_below(rng, count), &sn);
    int n = 0;
    for (int t = 0; t < sn.prompt_len; t++)
        seq[n++] = BF_TOK_FIRST + sn.prompt[t];
    seq[n++] = BF_TOK_SEP;
    *answer_start = n;
    for (int i = 0; i < depth; i++)
        seq[n++] = BF_TOK_FIRST + sn.closes[i];
    seq[n++] = BF_TOK_END;
    bf_code_corpus_put(corpus);
    return n;
}

/* ---- counter: ITER, item, MARK, then digits 0..modulus-1 -------------- */

static int counter_generate(const bf_job_config *cfg, int depth, bf_rng *rng,
                            int *seq, int *answer_start)
{
    int n = 0, marked = 0;
    for (int it = 0; it < depth; it++) {
        seq[n++] = BF_TOK_CNT_ITER;
        int items = 1 + (int)bf_rng_below(rng, BF_COUNTER_MAX_ITEMS);
        for (int j = 0; j < items; j++) {
            int mark = (int)bf_rng_below(rng, 2);
            marked += mark;
            seq[n++] = mark ? BF_TOK_CNT_MARK : BF_TOK_CNT_ITEM;
        }
    }
    seq[n++] = BF_TOK_SEP;
    *answer_start = n;
    seq[n++] = BF_TOK_CNT_DIGIT0 + marked % cfg->modulus;
    seq[n++] = BF_TOK_END;
    return n;
}

static int counter_measure(const int *tokens, int n)
{
    int iterations = 0;
    for (int t = 0; t < n; t++)
        iterations += tokens[t] == BF_TOK_CNT_ITER;
    return iterations;
}

/* ---- modarith: ( ) + * then digits 0..modulus-1 ----------------------- */

/* Writes a fully parenthesised expression of nesting exactly `depth` at
 * seq[*n]: "(" A op B ")" where one operand (left or right at random) has
 * depth-1 and the other is a digit.  Returns its value mod modulus. */
static int modarith_expr(const bf_job_config *cfg, int depth, bf_rng *rng,
                         int *seq, int *n)
{
    int m = cfg->modulus;
    if (depth == 0) {
        int digit = (int)bf_rng_below(rng, (uint32_t)m);
        seq[(*n)++] = BF_TOK_MA_DIGIT0 + digit;
        return digit;
    }
    int deep_left = (int)bf_rng_below(rng, 2);
    int times = (int)bf_rng_below(rng, 2);
    seq[(*n)++] = BF_TOK_MA_LPAREN;
    int a = modarith_expr(cfg, deep_left ? depth - 1 : 0, rng, seq, n);
    seq[(*n)++] = times ? BF_TOK_MA_TIMES : BF_TOK_MA_PLUS;
    int b = modarith_expr(cfg, deep_left ? 0 : depth - 1, rng, seq, n);
    seq[(*n)++] = BF_TOK_MA_RPAREN;
    return times ? a * b % m : (a + b) % m;
}

static int modarith_generate(const bf_job_config *cfg, int depth, bf_rng *rng,
                             int *seq, int *answer_start)
{
    int n = 0;
    int value = modarith_expr(cfg, depth, rng, seq, &n);
    seq[n++] = BF_TOK_SEP;
    *answer_start = n;
    seq[n++] = BF_TOK_MA_DIGIT0 + value;
    seq[n++] = BF_TOK_END;
    return n;
}

/* Deepest parenthesis nesting; -1 if the parentheses do not balance. */
static int modarith_measure(const int *tokens, int n)
{
    int open = 0, deepest = 0;
    for (int t = 0; t < n; t++) {
        if (tokens[t] == BF_TOK_MA_LPAREN && ++open > deepest)
            deepest = open;
        if (tokens[t] == BF_TOK_MA_RPAREN && --open < 0)
            return -1;
    }
    return open == 0 ? deepest : -1;
}

/* ---- public API ------------------------------------------------------- */

/* Exact-depth generator underneath the train and eval examples; `stream`
 * separates them. */
static void task_example(const bf_job_config *cfg, uint64_t stream,
                         int depth, uint64_t index, int *inputs,
                         int *targets, int T)
{
    assert(depth >= 1 && depth <= BF_MAX_DEPTH);
    uint64_t key = bf_rng_key(bf_rng_key(bf_rng_key(cfg->seed, stream),
                                         (uint64_t)depth), index);
    bf_rng rng;
    bf_rng_seed(&rng, key);

    int seq[SEQ_CAP];
    int answer_start = 0, len = 0;
    switch (cfg->task) {
    case BF_TASK_DYCK:
        len = dyck_generate(cfg, depth, &rng, seq, &answer_start);
        break;
    case BF_TASK_COUNTER:
        len = counter_generate(cfg, depth, &rng, seq, &answer_start);
        break;
    case BF_TASK_MODARITH:
        len = modarith_generate(cfg, depth, &rng, seq, &answer_start);
        break;
    case BF_TASK_CODE:
        len = code_generate(cfg, stream == STREAM_EVAL ? BF_CODE_EVAL
                                                       : BF_CODE_TRAIN,
                            depth, &rng, seq, &answer_start);
        break;
    }
    /* A row shorter than the sequence is truncated (the validator makes
     * seq_len >= bf_task_max_len, so this only happens on misuse). */
    for (int t = 0; t < T; t++) {
        inputs[t] = t < len ? seq[t] : BF_TOK_PAD;
        int next = t + 1;
        targets[t] = next >= answer_start && next < len ? seq[next] : -1;
    }
}

uint64_t bf_task_step_first(const bf_job_config *cfg, int64_t step)
{
    return (uint64_t)step * (uint64_t)cfg->batch_size;
}

int bf_task_train_example(const bf_job_config *cfg, uint64_t index,
                          int *inputs, int *targets, int T)
{
    bf_rng rng;
    bf_rng_seed(&rng, bf_rng_key(bf_rng_key(cfg->seed, STREAM_TRAIN_DEPTH),
                                 index));
    int depth = 1 + (int)bf_rng_below(&rng, (uint32_t)cfg->depth);
    task_example(cfg, STREAM_TRAIN, depth, index, inputs, targets, T);
    return depth;
}

void bf_task_train_positions(const bf_job_config *cfg, uint64_t index,
                             int *positions, int T)
{
    int N = cfg->random_positions;
    if (N <= 0) {
        for (int t = 0; t < T; t++)
            positions[t] = t;
        return;
    }
    assert(N >= T);
    bf_rng rng;
    bf_rng_seed(&rng, bf_rng_key(bf_rng_key(cfg->seed,
                                            STREAM_TRAIN_POSITIONS), index));
    /* Selection sampling (Knuth's Algorithm S): position p is taken with
     * probability (still needed) / (still available), which makes every
     * T-subset equally likely and emits it already sorted. */
    int taken = 0;
    for (int p = 0; p < N && taken < T; p++)
        if ((int)bf_rng_below(&rng, (uint32_t)(N - p)) < T - taken)
            positions[taken++] = p;
}

void bf_task_eval_example(const bf_job_config *cfg, int depth, uint64_t index,
                          int *inputs, int *targets, int T)
{
    task_example(cfg, STREAM_EVAL, depth, index, inputs, targets, T);
}

int bf_task_measure_depth(const bf_job_config *cfg, const int *inputs, int T)
{
    int prompt = 0;
    while (prompt < T && inputs[prompt] != BF_TOK_SEP)
        prompt++;
    if (prompt == T || prompt > SEQ_CAP)
        return -1; /* no separator: not a task sequence */
    switch (cfg->task) {
    case BF_TASK_DYCK:
        return brackets_measure(cfg->dyck_k, 0, inputs, prompt);
    case BF_TASK_CODE:
        return brackets_measure(BF_CODE_N_BRACKET_TYPES, 1, inputs, prompt);
    case BF_TASK_COUNTER:
        return counter_measure(inputs, prompt);
    case BF_TASK_MODARITH:
        return modarith_measure(inputs, prompt);
    }
    return -1;
}
