/* The code task over real source files: the lexer's symbols, a file list
 * read in byte order whatever order the directory lists it in, examples as
 * pure functions of the seed, training and evaluation from disjoint files,
 * snippets of exactly the depth asked with the right answer, and bad
 * code_dir values refused with the field and the line.  The corpus is this
 * repository's common/ (real C), copied where a test needs its own tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "code_corpus.h"
#include "file.h"
#include "scratch.h"
#include "tasks.h"

enum { END = 1, SEP = 2, FIRST = 3 };   /* docs/tasks.md */
#define ROW 96
#define EXAMPLES 400

static char repo_code[1024];    /* BF_SOURCE_ROOT/common */

static bf_job_config code_config(const char *dir, uint64_t seed)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    cfg.task = BF_TASK_CODE;
    snprintf(cfg.code_dir, sizeof cfg.code_dir, "%s", dir);
    cfg.depth = 3;
    cfg.eval_depths[0] = 3;
    cfg.n_eval_depths = 1;
    cfg.seq_len = ROW;
    cfg.seed = seed;
    bf_error err;
    if (bf_job_config_validate(&cfg, &err) != 0)
        fail_msg("%s", err.msg);
    return cfg;
}

static const bf_code_corpus *corpus_of(const char *dir)
{
    bf_error err;
    const bf_code_corpus *c = bf_code_corpus_get(dir, &err);
    if (!c)
        fail_msg("%s", err.msg);
    return c;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ---- the lexer ----------------------------------------------------------- */

/* Symbols spelled with bf_code_symbol_name, space-separated. */
static void spell(const bf_code_file *f, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < f->n_symbols && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? " " : "",
                              bf_code_symbol_name(f->symbols[i]));
}

static void test_lexer_symbols(void **state)
{
    scratch *s = *state;
    write_file(s->dir, "a.py",
               "# (a comment with a bracket\n"
               "x = f(\"(\", [1, 2.5e3]) # )\n"
               "\n"
               "s = r'''[\n"
               "'''\n"
               "d = {'a': (b.c)}\n");
    write_file(s->dir, "b.c", "int f(void) { return a[i] /* ) */ + '}'; }\n"
                              "// ]\n");
    write_file(s->dir, "broken.py", "f(]\n");
    write_file(s->dir, "notes.txt", "( not code\n");
    const bf_code_corpus *c = corpus_of(s->dir);
    bf_code_stats st;
    bf_code_corpus_stats(c, &st);
    assert_int_equal(st.files_seen, 3);      /* .txt is not source */
    assert_int_equal(st.files_left_out, 1);  /* broken.py */
    assert_int_equal(bf_code_file_count(c), 2);

    char got[512];
    bf_code_file f;
    bf_code_file_at(c, 0, &f);
    assert_string_equal(f.path, "a.py");
    spell(&f, got, sizeof got);
    assert_string_equal(got, "name op name ( str , [ num , num ] ) nl "
                             "name op str nl "
                             "name op { str : ( name . name ) } nl");
    bf_code_file_at(c, 1, &f);
    assert_string_equal(f.path, "b.c");
    spell(&f, got, sizeof got);
    assert_string_equal(got, "name name ( name ) { name name [ name ] op str "
                             "op } nl");
}

/* ---- determinism --------------------------------------------------------- */

static void test_files_in_byte_order(void **state)
{
    (void)state;
    const bf_code_corpus *c = corpus_of(repo_code);
    assert_ptr_equal(corpus_of(repo_code), c);   /* read once */
    bf_code_file prev, f;
    assert_true(bf_code_file_count(c) > 10);
    bf_code_file_at(c, 0, &prev);
    for (int i = 1; i < bf_code_file_count(c); i++, prev = f) {
        bf_code_file_at(c, i, &f);
        assert_true(strcmp(prev.path, f.path) < 0);
    }
}

/* dst/NAME for every file of the corpus of src, in the order given:
 * tmpfs lists a directory newest first, so two copies made in opposite
 * orders list their files in opposite orders. */
static void copy_corpus(const bf_code_corpus *c, const char *dst,
                        int reverse)
{
    int n = bf_code_file_count(c);
    for (int k = 0; k < n; k++) {
        bf_code_file f;
        bf_code_file_at(c, reverse ? n - 1 - k : k, &f);
        char src[2048];
        snprintf(src, sizeof src, "%s/%s", repo_code, f.path);
        char *text = bf_read_file(src, NULL, NULL);
        assert_non_null(text);
        write_file(dst, f.path, text);
        free(text);
    }
}

static void rows_of(const bf_job_config *cfg, int *train, int *eval)
{
    int tg[ROW];
    for (int i = 0; i < EXAMPLES; i++) {
        bf_task_train_example(cfg, (uint64_t)i, train + i * ROW, tg, ROW);
        bf_task_eval_example(cfg, 3, (uint64_t)i, eval + i * ROW, tg, ROW);
    }
}

static void test_examples_pure_functions_of_seed(void **state)
{
    (void)state;
    char a[64] = "/dev/shm/bf-code-a.XXXXXX";
    char b[64] = "/dev/shm/bf-code-b.XXXXXX";
    assert_non_null(mkdtemp(a));
    assert_non_null(mkdtemp(b));
    const bf_code_corpus *repo = corpus_of(repo_code);
    copy_corpus(repo, a, 0);
    copy_corpus(repo, b, 1);

    size_t cells = (size_t)EXAMPLES * ROW;
    int *rows[6];
    for (int i = 0; i < 6; i++)
        rows[i] = calloc(cells, sizeof(int));
    bf_job_config in_a = code_config(a, 7), in_b = code_config(b, 7);
    bf_job_config again = code_config(a, 7), other = code_config(a, 8);
    rows_of(&in_a, rows[0], rows[1]);
    rows_of(&in_b, rows[2], rows[3]);
    assert_memory_equal(rows[0], rows[2], cells * sizeof(int));
    assert_memory_equal(rows[1], rows[3], cells * sizeof(int));
    rows_of(&again, rows[2], rows[3]);
    assert_memory_equal(rows[0], rows[2], cells * sizeof(int));
    assert_memory_equal(rows[1], rows[3], cells * sizeof(int));
    rows_of(&other, rows[4], rows[5]);
    assert_memory_not_equal(rows[0], rows[4], cells * sizeof(int));
    assert_memory_not_equal(rows[1], rows[5], cells * sizeof(int));
    for (int i = 0; i < 6; i++)
        free(rows[i]);

    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", a, b);
    assert_int_equal(system(cmd), 0);
}

/* ---- the split ----------------------------------------------------------- */

/* Whether symbols `want` (task tokens) occur in a file of `split`. */
static int occurs_in_split(const bf_code_corpus *c, int split,
                           const int *want, int n)
{
    for (int i = 0; i < bf_code_file_count(c); i++) {
        bf_code_file f;
        bf_code_file_at(c, i, &f);
        for (uint32_t p = 0; f.split == split && p + (uint32_t)n <= f.n_symbols;
             p++) {
            int k = 0;
            while (k < n && f.symbols[p + k] + FIRST == want[k])
                k++;
            if (k == n)
                return 1;
        }
    }
    return 0;
}

static void test_train_and_eval_files_disjoint(void **state)
{
    (void)state;
    const bf_code_corpus *c = corpus_of(repo_code);
    int files[BF_CODE_N_SPLITS] = {0};
    for (int i = 0; i < bf_code_file_count(c); i++) {
        bf_code_file f;
        bf_code_file_at(c, i, &f);
        assert_int_equal(f.split, bf_code_split_of(f.path));
        files[f.split]++;
    }
    assert_true(files[BF_CODE_TRAIN] > 0 && files[BF_CODE_EVAL] > 0);

    /* Every snippet of a split lies inside one file of that split. */
    for (int split = 0; split < BF_CODE_N_SPLITS; split++)
        for (int d = 1; d <= 3; d++) {
            uint32_t n = bf_code_snippet_count(c, split, d);
            assert_true(n > 0);
            for (uint32_t k = 0; k < 200; k++) {
                bf_code_snippet sn;
                bf_code_snippet_get(c, split, d, (uint32_t)((uint64_t)k * n /
                                                            200), &sn);
                bf_code_file f;
                bf_code_file_at(c, sn.file, &f);
                assert_int_equal(f.split, split);
                assert_true(sn.prompt >= f.symbols &&
                            sn.prompt + sn.prompt_len <=
                                f.symbols + f.n_symbols);
            }
        }

    /* The task's evaluation rows come from held-out files. */
    bf_job_config cfg = code_config(repo_code, 3);
    int in[ROW], tg[ROW];
    for (uint64_t i = 0; i < 100; i++) {
        bf_task_eval_example(&cfg, 3, i, in, tg, ROW);
        int sep = 0;
        while (in[sep] != SEP)
            sep++;
        assert_true(occurs_in_split(c, BF_CODE_EVAL, in, sep));
    }
}

/* ---- depths -------------------------------------------------------------- */

/* The row's layout, and its answer: the prompt's open brackets closed,
 * innermost first, recomputed here with a stack.  Returns the depth. */
static int check_row(const bf_job_config *cfg, const int *in, const int *tg)
{
    int stack[ROW], top = 0, t = 0;
    for (; in[t] != SEP; t++) {
        assert_true(in[t] >= FIRST && in[t] < bf_vocab_size(cfg));
        int sym = in[t] - FIRST;
        if (sym <= BF_CODE_CURLY_CLOSE && sym % 2 == 0)
            stack[top++] = sym;
        else if (sym <= BF_CODE_CURLY_CLOSE)
            assert_int_equal(stack[--top], sym - 1);
    }
    int depth = top;
    assert_true(t <= bf_code_prompt_max(depth));
    for (int k = 0; k < depth; k++) {
        assert_int_equal(in[t + 1 + k], FIRST + stack[top - 1 - k] + 1);
        assert_int_equal(tg[t + k], in[t + 1 + k]);
    }
    assert_int_equal(in[t + 1 + depth], END);
    assert_true(t + 2 + depth <= bf_task_max_len(BF_TASK_CODE, depth));
    for (int u = t + 2 + depth; u < ROW; u++)
        assert_int_equal(in[u], BF_TOK_PAD);
    assert_int_equal(bf_task_measure_depth(cfg, in, ROW), depth);
    return depth;
}

static void test_snippet_depths(void **state)
{
    (void)state;
    bf_job_config cfg = code_config(repo_code, 11);
    int in[ROW], tg[ROW], seen[4] = {0};
    for (uint64_t i = 0; i < EXAMPLES; i++) {
        int depth = bf_task_train_example(&cfg, i, in, tg, ROW);
        assert_true(depth >= 1 && depth <= cfg.depth);
        assert_int_equal(check_row(&cfg, in, tg), depth);
        seen[depth]++;
    }
    for (int d = 1; d <= cfg.depth; d++)
        assert_true(seen[d] > EXAMPLES / 6);   /* each about a third */
    for (int d = 1; d <= 3; d++)
        for (uint64_t i = 0; i < EXAMPLES; i++) {
            bf_task_eval_example(&cfg, d, i, in, tg, ROW);
            assert_int_equal(check_row(&cfg, in, tg), d);
        }
}

/* ---- bad code_dir -------------------------------------------------------- */

/* Loads a job of task code at depth 3 (eval_depths [3] unless
 * `more` says otherwise) with `more` from line 4 on, and expects a refusal
 * of `field` at `line` whose message names the file and holds `words`. */
static void expect_refusal(const scratch *s, const char *more,
                           const char *field, int line, const char *words)
{
    char text[1300];
    snprintf(text, sizeof text, "task: code\ndepth: 3\n%s\n%s\n",
             strstr(more, "eval_depths") ? "seq_len: 64" : "eval_depths: [3]",
             more);
    write_file(s->dir, "job.yaml", text);
    char path[256];
    snprintf(path, sizeof path, "%s/job.yaml", s->dir);
    bf_job_config cfg;
    bf_error err;
    assert_int_equal(bf_job_config_load_file(&cfg, path, &err), -1);
    assert_string_equal(err.field, field);
    assert_int_equal(err.line, line);
    if (!strstr(err.msg, words) || !strstr(err.msg, path))
        fail_msg("'%s' does not name %s and '%s'", err.msg, path, words);
}

static void test_bad_code_dir(void **state)
{
    scratch *s = *state;
    expect_refusal(s, "code_dir: /nonexistent/bifocal-code", "code_dir", 4,
                   "cannot read directory '/nonexistent/bifocal-code'");
    expect_refusal(s, "code_dir: some/relative/dir", "code_dir", 4,
                   "'some/relative/dir' is not an absolute path");
    char empty[128], line[1200];
    snprintf(empty, sizeof empty, "%s/empty", s->dir);
    assert_int_equal(mkdir(empty, 0700), 0);
    write_file(empty, "README", "(\n");
    snprintf(line, sizeof line, "code_dir: %s", empty);
    expect_refusal(s, line, "code_dir", 4, "holds no usable source file");
    snprintf(line, sizeof line, "code_dir: %s\neval_depths: [2, 7]",
             repo_code);
    expect_refusal(s, line, "eval_depths", 5, "element 1 (7): the held-out "
                   "files of code_dir");
}

/* ---- the process's corpora ------------------------------------------------ */

/* A tree of one usable file, dir/name/a.py. */
static void small_tree(const char *dir, const char *name, char *path,
                       size_t cap)
{
    int n = snprintf(path, cap, "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < cap);
    assert_int_equal(mkdir(path, 0700), 0);
    write_file(path, "a.py", "f(x[1], {2: (3)})\n");
}

/* Every spelling of one directory is one corpus; once nobody holds them,
 * at most BF_CODE_CACHE_IDLE stay, and drop_idle frees those. */
static void test_cache_bounded(void **state)
{
    scratch *s = *state;
    bf_code_corpus_drop_idle();
    int held = bf_code_corpus_cached(NULL);   /* by the tests above */
    char path[512], other[512];
    small_tree(s->dir, "t", path, sizeof path);
    const bf_code_corpus *c = corpus_of(path);
    static const char *const spellings[] = {"%s/", "%s/.", "%s//./", "%s/../t"};
    for (size_t i = 0; i < sizeof spellings / sizeof *spellings; i++) {
        snprintf(other, sizeof other, spellings[i], path);
        const bf_code_corpus *same = corpus_of(other);
        assert_ptr_equal(same, c);
        bf_code_corpus_put(same);
    }
    assert_int_equal(bf_code_corpus_cached(NULL), held + 1);
    bf_code_corpus_put(c);
    for (int i = 0; i < 2 * BF_CODE_CACHE_IDLE + 1; i++) {
        snprintf(other, sizeof other, "t%d", i);
        small_tree(s->dir, other, path, sizeof path);
        bf_code_corpus_put(corpus_of(path));
        assert_true(bf_code_corpus_cached(NULL) <= held + BF_CODE_CACHE_IDLE);
    }
    assert_int_equal(bf_code_corpus_cached(NULL), held + BF_CODE_CACHE_IDLE);
    bf_code_corpus_drop_idle();
    assert_int_equal(bf_code_corpus_cached(NULL), held);
}

/* A tree over a limit is refused, named, and nothing of it is kept: one
 * source file too many, and /usr (over 100,000 entries on Debian). */
static void test_tree_limits(void **state)
{
    scratch *s = *state;
    int cached = bf_code_corpus_cached(NULL);
    char name[32];
    for (int i = 0; i <= BF_CODE_MAX_FILES; i++) {
        snprintf(name, sizeof name, "f%05d.py", i);
        write_file(s->dir, name, "x\n");
    }
    bf_error err;
    assert_null(bf_code_corpus_get(s->dir, &err));
    if (!strstr(err.msg, "more than 20000 source files (the limit"))
        fail_msg("names no file limit: %s", err.msg);
    assert_null(bf_code_corpus_get("/usr", &err));
    if (!strstr(err.msg, "'/usr' holds more than"))
        fail_msg("names no limit of /usr: %s", err.msg);
    assert_int_equal(bf_code_corpus_cached(NULL), cached);
}

int main(void)
{
    const char *root = getenv("BF_SOURCE_ROOT");
    if (!root) {
        fprintf(stderr, "BF_SOURCE_ROOT is not set\n");
        return 1;
    }
    snprintf(repo_code, sizeof repo_code, "%s/common", root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lexer_symbols, scratch_setup,
                                        scratch_teardown),
        cmocka_unit_test(test_files_in_byte_order),
        cmocka_unit_test(test_examples_pure_functions_of_seed),
        cmocka_unit_test(test_train_and_eval_files_disjoint),
        cmocka_unit_test(test_snippet_depths),
        cmocka_unit_test_setup_teardown(test_bad_code_dir, scratch_setup,
                                        scratch_teardown),
        cmocka_unit_test_setup_teardown(test_cache_bounded, scratch_setup,
                                        scratch_teardown),
        cmocka_unit_test_setup_teardown(test_tree_limits, scratch_setup,
                                        scratch_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
