/* Synthetic tasks: every example has exactly the requested depth, a correct
 * answer (recomputed here independently from the documented vocabulary in
 * docs/tasks.md), the row layout of tasks.h, an exact maximum length, and is
 * a pure function of (seed, stream, depth, index). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tasks.h"

/* Documented token ids (docs/tasks.md). */
enum { END = 1, SEP = 2 };
enum { DYCK_OPEN0 = 3 };                       /* open i = 3+2i, close 4+2i */
enum { CNT_ITER = 3, CNT_ITEM = 4, CNT_MARK = 5, CNT_DIGIT0 = 6 };
enum { MA_LP = 3, MA_RP = 4, MA_PLUS = 5, MA_TIMES = 6, MA_DIGIT0 = 7 };

#define ROW 160 /* longer than any example at depth <= 16, leaves PAD tail */
#define MAX_TEST_DEPTH 16
#define INDICES 300

typedef struct row {
    int in[ROW], tg[ROW];
    int len; /* tokens before the PAD tail */
    int sep; /* position of the separator */
} row;

static bf_job_config config_for(bf_task_kind task, int dyck_k, int modulus)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    cfg.task = task;
    cfg.dyck_k = dyck_k;
    cfg.modulus = modulus;
    cfg.seed = 12345;
    return cfg;
}

/* Checks the layout shared by every task and fills len/sep. */
static void check_layout(const bf_job_config *cfg, row *r)
{
    r->len = 0;
    while (r->len < ROW && r->in[r->len] != BF_TOK_PAD)
        r->len++;
    for (int t = r->len; t < ROW; t++) {
        assert_int_equal(r->in[t], BF_TOK_PAD);
        assert_int_equal(r->tg[t], -1);
    }
    assert_true(r->len >= 4);
    assert_int_equal(r->in[r->len - 1], END);
    r->sep = -1;
    for (int t = 0; t < r->len; t++) {
        assert_true(r->in[t] > 0 && r->in[t] < bf_vocab_size(cfg));
        if (r->in[t] == SEP) {
            assert_int_equal(r->sep, -1); /* exactly one separator */
            r->sep = t;
        }
    }
    assert_true(r->sep > 0);
    /* Targets: the next token exactly over the answer, -1 elsewhere. */
    for (int t = 0; t < r->len; t++) {
        if (t >= r->sep && t < r->len - 1)
            assert_int_equal(r->tg[t], r->in[t + 1]);
        else
            assert_int_equal(r->tg[t], -1);
    }
}

/* ---- independent answer checks ---------------------------------------- */

static void check_dyck_answer(const bf_job_config *cfg, const row *r, int depth)
{
    int stack[ROW], top = 0;
    for (int t = 0; t < r->sep; t++) {
        int tok = r->in[t];
        int type = (tok - DYCK_OPEN0) / 2;
        assert_true(tok >= DYCK_OPEN0 && type < cfg->dyck_k);
        if ((tok - DYCK_OPEN0) % 2 == 0) {
            stack[top++] = type;
        } else {
            assert_true(top > 0);
            assert_int_equal(stack[--top], type);
        }
    }
    assert_int_equal(top, depth);
    /* Answer: the closes of the stack, innermost first, then END. */
    int t = r->sep + 1;
    while (top > 0)
        assert_int_equal(r->in[t++], DYCK_OPEN0 + 2 * stack[--top] + 1);
    assert_int_equal(r->in[t], END);
    assert_int_equal(t, r->len - 1);
}

static void check_counter_answer(const bf_job_config *cfg, const row *r,
                                 int depth)
{
    int iters = 0, marks = 0;
    for (int t = 0; t < r->sep; t++) {
        int tok = r->in[t];
        assert_true(tok == CNT_ITER || tok == CNT_ITEM || tok == CNT_MARK);
        iters += tok == CNT_ITER;
        marks += tok == CNT_MARK;
        if (tok == CNT_ITER) /* every iteration has at least one item */
            assert_true(t + 1 < r->sep && r->in[t + 1] != CNT_ITER);
    }
    assert_int_equal(r->in[0], CNT_ITER);
    assert_int_equal(iters, depth);
    assert_int_equal(r->len, r->sep + 3);
    assert_int_equal(r->in[r->sep + 1], CNT_DIGIT0 + marks % cfg->modulus);
}

/* Recursive-descent evaluator for expr := digit | "(" expr op expr ")". */
static int eval_expr(const bf_job_config *cfg, const int *tok, int *pos,
                     int nesting, int *deepest)
{
    int m = cfg->modulus;
    int t = tok[(*pos)++];
    if (t >= MA_DIGIT0) {
        assert_true(t < MA_DIGIT0 + m);
        return t - MA_DIGIT0;
    }
    assert_int_equal(t, MA_LP);
    if (nesting + 1 > *deepest)
        *deepest = nesting + 1;
    int a = eval_expr(cfg, tok, pos, nesting + 1, deepest);
    int op = tok[(*pos)++];
    int b = eval_expr(cfg, tok, pos, nesting + 1, deepest);
    assert_int_equal(tok[(*pos)++], MA_RP);
    assert_true(op == MA_PLUS || op == MA_TIMES);
    return op == MA_PLUS ? (a + b) % m : (a * b) % m;
}

static void check_modarith_answer(const bf_job_config *cfg, const row *r,
                                  int depth)
{
    int pos = 0, deepest = 0;
    int value = eval_expr(cfg, r->in, &pos, 0, &deepest);
    assert_int_equal(pos, r->sep); /* the expression is the whole prompt */
    assert_int_equal(deepest, depth);
    assert_int_equal(r->len, r->sep + 3);
    assert_int_equal(r->in[r->sep + 1], MA_DIGIT0 + value);
}

static void check_answer(const bf_job_config *cfg, const row *r, int depth)
{
    switch (cfg->task) {
    case BF_TASK_DYCK:
        check_dyck_answer(cfg, r, depth);
        break;
    case BF_TASK_COUNTER:
        check_counter_answer(cfg, r, depth);
        break;
    case BF_TASK_MODARITH:
        check_modarith_answer(cfg, r, depth);
        break;
    case BF_TASK_CODE:
        fail_msg("the code task is tested by test_code_task");
    }
}

static void eval_row(const bf_job_config *cfg, int depth, uint64_t index,
                     row *r)
{
    bf_task_eval_example(cfg, depth, index, r->in, r->tg, ROW);
    check_layout(cfg, r);
}

/* ---- tests ------------------------------------------------------------ */

/* Depth, answer, layout and length bound for many examples of each depth. */
static void check_task_examples(bf_job_config cfg)
{
    row r;
    for (int depth = 1; depth <= MAX_TEST_DEPTH; depth++) {
        int max_len = bf_task_max_len(cfg.task, depth);
        assert_true(max_len <= ROW);
        for (uint64_t i = 0; i < INDICES; i++) {
            eval_row(&cfg, depth, i, &r);
            assert_int_equal(bf_task_measure_depth(&cfg, r.in, ROW), depth);
            assert_true(r.len <= max_len);
            check_answer(&cfg, &r, depth);
        }
    }
}

static void test_dyck_examples(void **state)
{
    (void)state;
    check_task_examples(config_for(BF_TASK_DYCK, 2, 10));
    check_task_examples(config_for(BF_TASK_DYCK, 1, 10));
    check_task_examples(config_for(BF_TASK_DYCK, 5, 10));
}

static void test_counter_examples(void **state)
{
    (void)state;
    check_task_examples(config_for(BF_TASK_COUNTER, 2, 10));
    check_task_examples(config_for(BF_TASK_COUNTER, 2, 3));
}

static void test_modarith_examples(void **state)
{
    (void)state;
    check_task_examples(config_for(BF_TASK_MODARITH, 2, 10));
    check_task_examples(config_for(BF_TASK_MODARITH, 2, 7));
}

/* bf_task_max_len is exact: attained at small depths (where the longest
 * shape is likely enough to be drawn), and a row of exactly max_len holds a
 * whole example. */
static void test_max_len_is_attained(void **state)
{
    (void)state;
    for (int task = 0; task < 3; task++) {
        bf_job_config cfg = config_for(task, 2, 10);
        for (int depth = 1; depth <= 4; depth++) {
            int max_len = bf_task_max_len(cfg.task, depth), longest = 0;
            row r;
            for (uint64_t i = 0; i < 2000; i++) {
                eval_row(&cfg, depth, i, &r);
                if (r.len > longest)
                    longest = r.len;
            }
            assert_int_equal(longest, max_len);
        }
    }
}

/* With the default seq_len the default eval depths fit, and depth 16 fits
 * a row of 128 for every task. */
static void test_lengths_are_modest(void **state)
{
    (void)state;
    for (int task = 0; task < 3; task++) {
        bf_job_config cfg = config_for(task, 2, 10);
        assert_true(bf_task_max_len(cfg.task, 8) <= cfg.seq_len);
        assert_true(bf_task_max_len(cfg.task, 16) <= 128);
        assert_true(bf_task_max_len(cfg.task, 5) > bf_task_max_len(cfg.task, 4));
    }
}

static int rows_equal(const row *a, const row *b)
{
    return memcmp(a->in, b->in, sizeof a->in) == 0 &&
           memcmp(a->tg, b->tg, sizeof a->tg) == 0;
}

static void test_examples_are_pure_functions(void **state)
{
    (void)state;
    for (int task = 0; task < 3; task++) {
        bf_job_config cfg = config_for(task, 2, 10);
        bf_job_config other_seed = cfg;
        other_seed.seed = cfg.seed + 1;
        row a, b, rows[50];
        for (uint64_t i = 0; i < 50; i++) {
            eval_row(&cfg, 8, i, &a);
            eval_row(&cfg, 8, i, &b);
            assert_true(rows_equal(&a, &b)); /* same inputs, same example */
            eval_row(&other_seed, 8, i, &b);
            assert_false(rows_equal(&a, &b)); /* the seed matters */
            rows[i] = a;
            for (uint64_t j = 0; j < i; j++)
                assert_false(rows_equal(&rows[i], &rows[j])); /* index too */
        }
    }
}

/* Training draws depths 1..depth (each about equally often), reports the
 * depth it used, and never reproduces the held-out example of that index. */
static void test_train_stream(void **state)
{
    (void)state;
    for (int task = 0; task < 3; task++) {
        bf_job_config cfg = config_for(task, 2, 10);
        cfg.depth = 4;
        int seen[5] = {0};
        row r, again, held_out;
        for (uint64_t i = 0; i < 4000; i++) {
            int d = bf_task_train_example(&cfg, i, r.in, r.tg, ROW);
            assert_true(d >= 1 && d <= cfg.depth);
            check_layout(&cfg, &r);
            assert_int_equal(bf_task_measure_depth(&cfg, r.in, ROW), d);
            check_answer(&cfg, &r, d);
            seen[d]++;
            if (i < 20) {
                assert_int_equal(bf_task_train_example(&cfg, i, again.in,
                                                       again.tg, ROW), d);
                assert_true(rows_equal(&r, &again));
            }
        }
        for (int d = 1; d <= 4; d++)
            assert_true(seen[d] > 800 && seen[d] < 1200);

        cfg.depth = 16;
        int compared = 0;
        for (uint64_t i = 0; i < 400; i++) {
            int d = bf_task_train_example(&cfg, i, r.in, r.tg, ROW);
            if (d < 12)
                continue; /* deep examples: a chance collision is negligible */
            eval_row(&cfg, d, i, &held_out);
            assert_false(rows_equal(&r, &held_out));
            compared++;
        }
        assert_true(compared > 50);
    }
}

/* Random positions: T distinct sorted positions of [0, N), each position
 * about equally often (T/N of the examples), a pure function of (seed,
 * index); they leave the example's tokens alone; N = 0 gives 0..T-1. */
static void test_train_positions(void **state)
{
    (void)state;
    enum { T = 16, N = 40, EXAMPLES = 4000 };
    bf_job_config cfg = config_for(BF_TASK_DYCK, 2, 10);
    int pos[T], again[T], seen[N] = {0};
    bf_task_train_positions(&cfg, 7, pos, T);
    for (int t = 0; t < T; t++)
        assert_int_equal(pos[t], t);

    bf_job_config other_seed = cfg;
    cfg.random_positions = N;
    other_seed.random_positions = N;
    other_seed.seed = cfg.seed + 1;
    int identity = 0;
    for (uint64_t i = 0; i < EXAMPLES; i++) {
        bf_task_train_positions(&cfg, i, pos, T);
        assert_true(pos[0] >= 0 && pos[T - 1] < N);
        for (int t = 0; t < T; t++) {
            if (t > 0)
                assert_true(pos[t] > pos[t - 1]);
            seen[pos[t]]++;
        }
        identity += pos[T - 1] == T - 1;
        bf_task_train_positions(&cfg, i, again, T);
        assert_memory_equal(pos, again, sizeof pos);
        if (i == 0 || i == 1) {
            bf_task_train_positions(&other_seed, i, again, T);
            assert_true(memcmp(pos, again, sizeof pos) != 0);
        }
    }
    /* each position in T/N = 40% of the examples (sd ~31 of 1600) */
    for (int p = 0; p < N; p++)
        if (seen[p] < 1450 || seen[p] > 1750)
            fail_msg("position %d drawn %d times of %d", p, seen[p],
                     EXAMPLES);
    assert_true(identity < 5); /* 0..T-1 itself: 1 in C(40,16) */

    row plain, shifted;
    bf_job_config off = cfg;
    off.random_positions = 0;
    for (uint64_t i = 0; i < 20; i++) {
        bf_task_train_example(&off, i, plain.in, plain.tg, ROW);
        bf_task_train_example(&cfg, i, shifted.in, shifted.tg, ROW);
        assert_true(rows_equal(&plain, &shifted));
    }
}

/* measure_depth rejects sequences that are not task sequences. */
static void test_measure_depth_rejects_garbage(void **state)
{
    (void)state;
    bf_job_config dyck = config_for(BF_TASK_DYCK, 2, 10);
    int no_sep[4] = {DYCK_OPEN0, DYCK_OPEN0, END, 0};
    assert_int_equal(bf_task_measure_depth(&dyck, no_sep, 4), -1);
    int mismatched[4] = {DYCK_OPEN0, DYCK_OPEN0 + 3, SEP, END}; /* ( ] */
    assert_int_equal(bf_task_measure_depth(&dyck, mismatched, 4), -1);
    int nested[5] = {DYCK_OPEN0, DYCK_OPEN0 + 2, DYCK_OPEN0 + 3, SEP, END};
    assert_int_equal(bf_task_measure_depth(&dyck, nested, 5), 1); /* ([] */

    bf_job_config ma = config_for(BF_TASK_MODARITH, 2, 10);
    int unbalanced[5] = {MA_LP, MA_DIGIT0, MA_PLUS, MA_DIGIT0, SEP};
    assert_int_equal(bf_task_measure_depth(&ma, unbalanced, 5), -1);
}

static void test_vocab_and_token_names(void **state)
{
    (void)state;
    bf_job_config dyck = config_for(BF_TASK_DYCK, 3, 10);
    bf_job_config cnt = config_for(BF_TASK_COUNTER, 2, 7);
    bf_job_config ma = config_for(BF_TASK_MODARITH, 2, 13);
    assert_int_equal(bf_vocab_size(&dyck), 3 + 2 * 3);
    assert_int_equal(bf_vocab_size(&cnt), 6 + 7);
    assert_int_equal(bf_vocab_size(&ma), 7 + 13);
    const bf_job_config *all[] = {&dyck, &cnt, &ma};
    char buf[32];
    for (int c = 0; c < 3; c++) {
        int v = bf_vocab_size(all[c]);
        for (int tok = 0; tok < v; tok++)
            assert_null(strstr(bf_vocab_token_name(all[c], tok, buf, 32),
                               "<bad"));
        assert_non_null(strstr(bf_vocab_token_name(all[c], v, buf, 32), "<bad"));
    }
    assert_string_equal(bf_vocab_token_name(&dyck, BF_TOK_PAD, buf, 32), "PAD");
    assert_string_equal(bf_vocab_token_name(&dyck, DYCK_OPEN0 + 3, buf, 32), "]");
    assert_string_equal(bf_vocab_token_name(&cnt, CNT_MARK, buf, 32), "MARK");
    assert_string_equal(bf_vocab_token_name(&ma, MA_DIGIT0 + 12, buf, 32), "12");
    assert_string_equal(bf_vocab_token_name(&ma, SEP, buf, 32), "=");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dyck_examples),
        cmocka_unit_test(test_counter_examples),
        cmocka_unit_test(test_modarith_examples),
        cmocka_unit_test(test_max_len_is_attained),
        cmocka_unit_test(test_lengths_are_modest),
        cmocka_unit_test(test_examples_are_pure_functions),
        cmocka_unit_test(test_train_stream),
        cmocka_unit_test(test_train_positions),
        cmocka_unit_test(test_measure_depth_rejects_garbage),
        cmocka_unit_test(test_vocab_and_token_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
