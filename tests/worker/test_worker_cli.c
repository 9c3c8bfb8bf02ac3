/* The bifocal-worker command, run as a real process: records on stdout,
 * exit codes and messages for bad jobs and bad eval input, resume, and
 * `eval` agreeing with an in-process forward pass over the checkpoint.
 * argv[1] is the path of the bifocal-worker binary. */
#include "alloc.h"
#include "clock.h"
#include "file.h"
#include "test_train_util.h"

#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "checkpoint.h"
#include "model.h"
#include "tasks.h"
#include "train.h"
#include "vocab.h"

static const char *worker;

/* Runs `bifocal-worker ARGS >dir/out 2>dir/err`; returns the exit status. */
static int run_worker(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s >%s/out 2>%s/err", worker, args, dir,
             dir);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Contents of dir/NAME (caller frees). */
static char *slurp(const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    bf_error err;
    char *text = bf_read_file(path, NULL, &err);
    if (!text)
        fail_msg("%s", err.msg);
    return text;
}

/* Every stdout line as a JSON array (each line must parse). */
static json_t *stdout_records(void)
{
    char *text = slurp("out");
    json_t *arr = json_array();
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        json_error_t e;
        json_t *r = json_loads(line, 0, &e);
        if (!r)
            fail_msg("stdout line is not JSON: %s (%s)", line, e.text);
        json_array_append_new(arr, r);
    }
    free(text);
    return arr;
}

static const char tiny_job[] =
    "task: dyck\ndepth: 3\neval_depths: [3]\nrope: bifocal\n"
    "d_model: 16\nn_layers: 1\nn_heads: 2\nseq_len: 16\nbatch_size: 4\n"
    "steps: 6\nwarmup_steps: 1\nlog_every: 2\neval_every: 3\n"
    "freq_every: 3\ncheckpoint_every: 3\neval_examples: 8\n";

static void write_job(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_text(path, text);
}

static void test_train_prints_records(void **state)
{
    (void)state;
    write_job("job.yaml", tiny_job);
    char args[512];
    snprintf(args, sizeof args, "--job %s/job.yaml --checkpoint-dir %s/ck",
             dir, dir);
    assert_int_equal(run_worker(args), 0);
    json_t *recs = stdout_records();
    /* freq of both heads at 0; train at 2, 4, 6; eval and its outcomes,
     * freq (the learnable head), checkpoint at 3; eval, outcomes, freq of
     * both heads, checkpoint at 6 */
    const char *want[] = {"freq", "freq", "train", "eval", "outcomes",
                          "freq", "checkpoint", "train", "train", "eval",
                          "outcomes", "freq", "freq", "checkpoint", "done"};
    size_t n = sizeof want / sizeof want[0];
    assert_int_equal(json_array_size(recs), n);
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(recs, i);
        assert_string_equal(json_string_value(json_object_get(r, "type")),
                            want[i]);
        assert_true(json_is_integer(json_object_get(r, "step")));
    }
    json_t *ck = json_array_get(recs, 13);
    char expect[256];
    snprintf(expect, sizeof expect, "%s/ck/step-000006.safetensors", dir);
    assert_string_equal(json_string_value(json_object_get(ck, "path")),
                        expect);
    json_decref(recs);

    /* --resume on a finished run continues from step 6: nothing to do. */
    snprintf(args, sizeof args,
             "--job %s/job.yaml --checkpoint-dir %s/ck --resume", dir, dir);
    assert_int_equal(run_worker(args), 0);
    recs = stdout_records();
    assert_int_equal(json_array_size(recs), 1);
    json_t *done = json_array_get(recs, 0);
    assert_int_equal(json_integer_value(json_object_get(done, "step")), 6);
    json_decref(recs);

    /* ...but not under a different config. */
    char changed[sizeof tiny_job + 32];
    snprintf(changed, sizeof changed, "%slr: 0.05\n", tiny_job);
    write_job("changed.yaml", changed);
    snprintf(args, sizeof args,
             "--job %s/changed.yaml --checkpoint-dir %s/ck --resume", dir,
             dir);
    assert_int_equal(run_worker(args), 1);
    char *err = slurp("err");
    assert_non_null(strstr(err, "field 'lr'"));
    free(err);
}

/* The code task on its default corpus (the Python standard library):
 * a real job learns, its training loss falling well below where it
 * started, and a code_dir that is not there is refused before training. */
static void test_code_job_learns(void **state)
{
    (void)state;
    write_job("code.yaml",
              "task: code\ndepth: 3\neval_depths: [3]\nseq_len: 32\n"
              "d_model: 32\nn_layers: 1\nn_heads: 2\nbatch_size: 16\n"
              "steps: 80\nwarmup_steps: 5\nlr: 0.003\nlog_every: 10\n"
              "eval_every: 0\nfreq_every: 0\neval_examples: 32\n");
    char args[256];
    snprintf(args, sizeof args, "--job %s/code.yaml", dir);
    assert_int_equal(run_worker(args), 0);
    json_t *recs = stdout_records();
    double first = NAN, last = NAN;
    size_t i;
    json_t *r;
    json_array_foreach(recs, i, r) {
        if (strcmp(json_string_value(json_object_get(r, "type")), "train"))
            continue;
        last = json_real_value(json_object_get(r, "loss"));
        if (isnan(first))
            first = last;
    }
    json_decref(recs);
    if (!(last < 0.6 * first))
        fail_msg("training loss went from %g to %g", first, last);

    write_job("nodir.yaml", "task: code\ndepth: 3\neval_depths: [3]\n"
                            "code_dir: /nonexistent/bifocal-code\n");
    snprintf(args, sizeof args, "--job %s/nodir.yaml", dir);
    assert_int_equal(run_worker(args), 2);
    char *err = slurp("err");
    char where[128];
    snprintf(where, sizeof where, "%s/nodir.yaml:4: field 'code_dir'", dir);
    if (!strstr(err, where) || !strstr(err, "cannot read directory"))
        fail_msg("stderr '%s' does not name %s", err, where);
    free(err);
}

/* The ints of row[key], checked against want[0..n). */
static void assert_ints(const json_t *row, const char *key, const int *want,
                        int n)
{
    const json_t *a = json_object_get(row, key);
    assert_int_equal(json_array_size(a), n);
    for (int i = 0; i < n; i++)
        if (json_integer_value(json_array_get(a, (size_t)i)) != want[i])
            fail_msg("%s[%d]: %lld, the engine's is %d", key, i,
                     (long long)json_integer_value(json_array_get(a, i)),
                     want[i]);
}

/* `data` prints the rows the engine trains on at each step and the eval
 * examples it scores, exactly: each line checked against the engine's
 * own generators, in the engine's order (random positions on, so they
 * are not 0..T-1). */
static void test_data_prints_the_engines_examples(void **state)
{
    (void)state;
    static const char job[] =
        "task: modarith\ndepth: 3\neval_depths: [2, 4]\nd_model: 16\n"
        "n_layers: 1\nn_heads: 2\nseq_len: 20\nbatch_size: 3\nsteps: 5\n"
        "warmup_steps: 0\neval_examples: 4\nrandom_positions: 64\nseed: 7\n";
    write_job("data.yaml", job);
    char args[512], path[128];
    snprintf(args, sizeof args, "data --job %s/data.yaml --steps 2:4", dir);
    assert_int_equal(run_worker(args), 0);
    snprintf(path, sizeof path, "%s/data.yaml", dir);
    bf_job_config cfg;
    bf_error err;
    assert_int_equal(bf_job_config_load_file(&cfg, path, &err), 0);
    json_t *rows = stdout_records();
    int T = cfg.seq_len, in[64], tg[64], pos[64];
    assert_int_equal(json_array_size(rows), 2 * 3 + 2 * 4);
    size_t at = 0;
    for (int s = 2; s < 4; s++)
        for (int r = 0; r < 3; r++, at++) {
            json_t *row = json_array_get(rows, at);
            uint64_t index = bf_task_step_first(&cfg, s) + (uint64_t)r;
            assert_string_equal(json_string_value(json_object_get(row,
                                "split")), "train");
            assert_int_equal(json_integer_value(json_object_get(row,
                             "index")), 3 * s + r);
            bf_task_train_example(&cfg, index, in, tg, T);
            bf_task_train_positions(&cfg, index, pos, T);
            assert_ints(row, "input", in, T);
            assert_ints(row, "target", tg, T);
            assert_ints(row, "positions", pos, T);
            assert_true(pos[T - 1] != T - 1 || pos[0] != 0);
        }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++, at++) {
            json_t *row = json_array_get(rows, at);
            assert_int_equal(json_integer_value(json_object_get(row,
                             "depth")), cfg.eval_depths[k]);
            bf_task_eval_example(&cfg, cfg.eval_depths[k], (uint64_t)i, in,
                                 tg, T);
            assert_ints(row, "input", in, T);
            assert_ints(row, "target", tg, T);
        }
    json_decref(rows);
    /* --split model: the model's facts from the C code's own homes */
    snprintf(args, sizeof args, "data --job %s/data.yaml --split model",
             dir);
    assert_int_equal(run_worker(args), 0);
    rows = stdout_records();
    assert_int_equal(json_array_size(rows), 1);
    json_t *model = json_array_get(rows, 0), *want = bf_job_config_to_json(&cfg);
    assert_true(json_equal(json_object_get(model, "config"), want));
    assert_int_equal(json_integer_value(json_object_get(model, "vocab_size")),
                     bf_vocab_size(&cfg));
    assert_int_equal(json_integer_value(json_object_get(model,
                     "spectral_heads")), bf_job_config_spectral_heads(&cfg));
    json_t *opt = json_object_get(model, "optimizer");
    assert_true(json_real_value(json_object_get(opt, "beta2"))
                == (double)BF_ADAM_BETA2);
    assert_true(json_real_value(json_object_get(opt, "min_lr_fraction"))
                == BF_MIN_LR_FRACTION);
    json_decref(want);
    json_decref(rows);
    snprintf(args, sizeof args, "data --job %s/data.yaml --split nope", dir);
    assert_int_equal(run_worker(args), 2);
    snprintf(args, sizeof args, "data --job %s/data.yaml --steps 4:6", dir);
    assert_int_equal(run_worker(args), 2);   /* past the job's 5 steps */
    char *why = slurp("err");
    assert_non_null(strstr(why, "--steps: '4:6'"));
    free(why);
}

static void test_bad_job_file(void **state)
{
    (void)state;
    write_job("bad.yaml", "task: dyck\nsteps: 10\nd_model: lots\n");
    char args[256];
    snprintf(args, sizeof args, "--job %s/bad.yaml", dir);
    assert_int_equal(run_worker(args), 2);
    char *err = slurp("err");
    char where[128];
    snprintf(where, sizeof where, "%s/bad.yaml:3", dir);
    if (!strstr(err, where) || !strstr(err, "d_model"))
        fail_msg("stderr '%s' does not name %s and d_model", err, where);
    free(err);
    char *out = slurp("out");
    assert_string_equal(out, "");
    free(out);

    assert_int_equal(run_worker("--no-such-option"), 2);
    /* No prefix matching (getopt_long took "--jo" for "--job", "--nam" for
     * "--name"): the program names the option and lists the valid ones. */
    snprintf(args, sizeof args, "--jo %s/bad.yaml", dir);
    assert_int_equal(run_worker(args), 2);
    err = slurp("err");
    assert_non_null(strstr(err, "unknown option '--jo'"));
    assert_non_null(strstr(err, "--job FILE"));
    free(err);
    /* --server mode parses after MPI_Init, and Open MPI leaks at exit
     * (tests/e2e/meson.build says why): no leak check for this one run. */
    char *asan = getenv("ASAN_OPTIONS") ? bf_xstrdup(getenv("ASAN_OPTIONS"))
                                        : NULL;
    setenv("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1", 1);
    int status = run_worker("--server 127.0.0.1:9 --token-file t --nam w");
    if (asan)
        setenv("ASAN_OPTIONS", asan, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(asan);
    assert_int_equal(status, 2);
    err = slurp("err");
    assert_non_null(strstr(err, "unknown option '--nam'"));
    assert_non_null(strstr(err, "--name NAME"));
    free(err);
    assert_int_equal(run_worker("frobnicate"), 2);
    assert_int_equal(run_worker(""), 2);   /* --job is required */
    assert_int_equal(run_worker("--help"), 0);
    out = slurp("out");
    assert_non_null(strstr(out, "--checkpoint-dir"));
    assert_non_null(strstr(out, "--exec"));
    free(out);
}

/* --exec's usage: it needs a trainer that is not builtin and a command
 * whose quotes close; --help lists its options. */
static void test_exec_usage(void **state)
{
    (void)state;
    const struct { const char *args, *says; } bad[] = {
        {"--server h:1 --token-file t --exec prog", "--trainer NAME is "
         "required"},
        {"--server h:1 --token-file t --exec prog --trainer builtin",
         "not builtin"},
        {"--server h:1 --token-file t --exec prog --trainer Torch",
         "lowercase"},
        {"--server h:1 --token-file t --exec \"prog 'x\" --trainer t",
         "unclosed quote"},
        {"--token-file t --exec prog --trainer t", "--server HOST:PORT"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(run_worker(bad[i].args), 2);
        char *err = slurp("err");
        if (!strstr(err, bad[i].says))
            fail_msg("%s: '%s' does not say %s", bad[i].args, err,
                     bad[i].says);
        free(err);
    }
    assert_int_equal(run_worker("--exec x --help"), 0);
    char *out = slurp("out");
    assert_non_null(strstr(out, "--gpus LIST"));
    free(out);
}

/* A job that does not fit is refused before anything is allocated, as a
 * worker group refuses it: under --memory-budget, and by default under
 * the machine's memory (3.3 TB of parameters fit nowhere). */
static void test_memory_budget_refuses(void **state)
{
    (void)state;
    write_job("mid.yaml", "task: dyck\ndepth: 3\nd_model: 256\n"
                          "n_layers: 4\nn_heads: 4\nsteps: 1\n"
                          "warmup_steps: 0\n");
    char args[256];
    snprintf(args, sizeof args, "--job %s/mid.yaml --memory-budget 1", dir);
    assert_int_equal(run_worker(args), 1);
    char *err = slurp("err");
    if (!strstr(err, "--memory-budget") || !strstr(err, "1048576"))
        fail_msg("stderr '%s' does not name the budget", err);
    free(err);
    char *out = slurp("out");
    assert_string_equal(out, "");   /* no record: nothing ran */
    free(out);

    write_job("huge.yaml", "task: dyck\ndepth: 3\nd_model: 8192\n"
                           "n_layers: 256\nn_heads: 64\nsteps: 1\n"
                           "warmup_steps: 0\n");
    snprintf(args, sizeof args, "--job %s/huge.yaml", dir);
    assert_int_equal(run_worker(args), 1);
    err = slurp("err");
    if (!strstr(err, "memory budget") || !strstr(err, "d_model"))
        fail_msg("stderr '%s' does not refuse the job by memory", err);
    free(err);
}

/* In-process loss sum of one row with the checkpoint's weights. */
static double direct_loss(bf_model *m, const int *in, const int *tg, int T,
                          int *n)
{
    return bf_model_forward(m, in, tg, NULL, 1, T, n);
}

/* Trains tiny_job into dir/SUB; ck_path gets its last checkpoint. */
static void train_tiny(const char *sub, char *ck_path, size_t cap)
{
    write_job("job.yaml", tiny_job);
    char args[512];
    snprintf(args, sizeof args, "--job %s/job.yaml --checkpoint-dir %s/%s",
             dir, dir, sub);
    assert_int_equal(run_worker(args), 0);
    snprintf(ck_path, cap, "%s/%s/step-000006.safetensors", dir, sub);
}

static void test_eval_matches_forward(void **state)
{
    (void)state;
    char args[512], ck_path[256], input[160];
    train_tiny("ev", ck_path, sizeof ck_path);

    bf_checkpoint ck;
    bf_error e;
    assert_int_equal(bf_checkpoint_open(&ck, ck_path, &e), 0);
    bf_model m;
    bf_model_shape s;
    bf_model_size_from_config(&s, &ck.cfg, bf_vocab_size(&ck.cfg));
    assert_int_equal(bf_model_create(&m, &s, 1, ck.cfg.seq_len, &e), 0);
    assert_int_equal(bf_checkpoint_load_params(&ck, &m, &e), 0);

    /* Three held-out examples at depth 2 and 3, cut to their used length. */
    snprintf(input, sizeof input, "%s/in.jsonl", dir);
    FILE *fp = fopen(input, "w");
    int T = ck.cfg.seq_len;
    double want[3], total = 0;
    int counts[3], total_n = 0;
    for (int k = 0; k < 3; k++) {
        int in[64], tg[64], len = T;
        bf_task_eval_example(&ck.cfg, 2 + (k % 2), (uint64_t)k, in, tg, T);
        while (len > 1 && in[len - 1] == BF_TOK_PAD)
            len--;
        fprintf(fp, "{\"input\": [");
        for (int t = 0; t < len; t++)
            fprintf(fp, "%s%d", t ? "," : "", in[t]);
        fprintf(fp, "], \"target\": [");
        for (int t = 0; t < len; t++)
            fprintf(fp, "%s%d", t ? "," : "", tg[t]);
        fprintf(fp, "]}\n%s", k == 0 ? "\n" : "");  /* a blank line too */
        double sum = direct_loss(&m, in, tg, len, &counts[k]);
        want[k] = sum / counts[k];
        total += sum;
        total_n += counts[k];
    }
    fclose(fp);
    bf_model_free(&m);
    bf_checkpoint_close(&ck);

    snprintf(args, sizeof args, "eval --checkpoint %s --input %s", ck_path,
             input);
    assert_int_equal(run_worker(args), 0);
    json_t *recs = stdout_records();
    assert_int_equal(json_array_size(recs), 4);
    double weighted = 0;
    for (int k = 0; k < 3; k++) {
        json_t *r = json_array_get(recs, (size_t)k);
        double loss = json_real_value(json_object_get(r, "loss"));
        int n = (int)json_integer_value(json_object_get(r, "targets"));
        assert_int_equal(n, counts[k]);
        assert_float_equal(loss, want[k], 1e-6 * want[k]);
        weighted += loss * n;
    }
    json_t *fin = json_array_get(recs, 3);
    double mean = json_real_value(json_object_get(fin, "mean_loss"));
    assert_int_equal(json_integer_value(json_object_get(fin, "targets")),
                     total_n);
    assert_int_equal(json_integer_value(json_object_get(fin, "lines")), 3);
    assert_float_equal(mean, weighted / total_n, 1e-6 * mean);
    assert_float_equal(mean, total / total_n, 1e-6 * mean);
    json_decref(recs);

    /* A bad line is named by file, line and field. */
    fp = fopen(input, "w");
    fprintf(fp, "{\"input\": [1, 2], \"target\": [2, -1]}\n");
    fprintf(fp, "{\"input\": [1, 2], \"target\": [2, 99]}\n");
    fclose(fp);
    assert_int_equal(run_worker(args), 2);
    char *err = slurp("err");
    char where[200];
    snprintf(where, sizeof where, "%s:2: field 'target[1]'", input);
    if (!strstr(err, where) || !strstr(err, "99"))
        fail_msg("stderr '%s' lacks '%s'", err, where);
    free(err);

    fp = fopen(input, "w");
    fprintf(fp, "{\"input\": [1, 2, 3], \"target\": [2, -1]}\n");
    fclose(fp);
    assert_int_equal(run_worker(args), 2);
    err = slurp("err");
    assert_non_null(strstr(err, ":1: field 'target'"));
    free(err);
}

/* Starts the worker with argv[1..] (argv[0] is set here), stdout to
 * dir/out and stderr to dir/err; returns its pid. */
static pid_t spawn_argv(const char **argv)
{
    char out[128], err[128];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    argv[0] = worker;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
        dup2(open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
        execv(worker, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* `bifocal-worker eval` of ck_path over input: its exit status, and in
 * *peak_kib its peak resident memory (wait4: this child's alone). */
static int run_eval(const char *ck_path, const char *input, long *peak_kib)
{
    const char *argv[] = {NULL, "eval", "--checkpoint", ck_path, "--input",
                          input, NULL};
    pid_t pid = spawn_argv(argv);
    int st;
    struct rusage ru;
    assert_int_equal(wait4(pid, &st, 0, &ru), pid);
    assert_true(WIFEXITED(st));
    *peak_kib = ru.ru_maxrss;
    return WEXITSTATUS(st);
}

/* Writes lines[0..n) to dir/in.jsonl, each followed by a newline (its
 * length given, so that a line may hold a NUL); returns the path. */
static const char *write_lines(const char *const *lines, const size_t *lens,
                               int n)
{
    static char path[160];
    snprintf(path, sizeof path, "%s/in.jsonl", dir);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    for (int i = 0; i < n; i++) {
        fwrite(lines[i], 1, lens[i], fp);
        fputc('\n', fp);
    }
    assert_int_equal(fclose(fp), 0);
    return path;
}

/* dir/err names path:line and holds `says`. */
static void assert_err_names(const char *path, int line, const char *says)
{
    char *err = slurp("err");
    char where[200];
    snprintf(where, sizeof where, "%s:%d: ", path, line);
    if (!strstr(err, where) || !strstr(err, says))
        fail_msg("stderr '%s' lacks '%s' or '%s'", err, where, says);
    free(err);
}

#define GOOD_LINE "{\"input\": [1, 2], \"target\": [2, -1]}"

/* A line past the length limit is refused as it is read: memory peaks no
 * higher than scoring one good line, however long the line (8 MiB here:
 * read whole, it and jansson's values of its ids took 114 MiB more). */
static void test_eval_long_line_refused_while_read(void **state)
{
    (void)state;
    char ck_path[256];
    train_tiny("long", ck_path, sizeof ck_path);
    const char *good[] = {GOOD_LINE};
    size_t good_len = strlen(GOOD_LINE);
    long good_kib, long_kib;
    assert_int_equal(run_eval(ck_path, write_lines(good, &good_len, 1),
                              &good_kib), 0);

    size_t ids = (8u << 20) / 3, n = 0;
    char *text = bf_xmalloc(ids * 3 + 64);
    n += (size_t)sprintf(text, "{\"input\": [1");
    for (size_t i = 1; i < ids; i++, n += 3)
        memcpy(text + n, ", 1", 3);
    n += (size_t)sprintf(text + n, "], \"target\": [2]}");
    const char *lines[] = {GOOD_LINE, text};
    size_t lens[] = {good_len, n};
    const char *path = write_lines(lines, lens, 2);
    free(text);
    assert_int_equal(run_eval(ck_path, path, &long_kib), 2);
    print_message("peak RSS: %ld KiB scoring a good line, %ld KiB refusing "
                  "an %zu-byte one\n", good_kib, long_kib, n);
    if (long_kib > good_kib + 2048)
        fail_msg("refusing an %zu-byte line peaked at %ld KiB, %ld KiB over "
                 "scoring a good line", n, long_kib, long_kib - good_kib);
    assert_err_names(path, 2, "line longer than 1536 bytes");
    json_t *recs = stdout_records();   /* line 1's record is kept */
    assert_int_equal(json_array_size(recs), 1);
    json_decref(recs);
}

/* What follows a line's object, after a NUL byte or not, is refused with
 * the file and line named; the lines before it are scored. */
static void test_eval_trailing_bytes_refused(void **state)
{
    (void)state;
    char ck_path[256];
    train_tiny("trail", ck_path, sizeof ck_path);
    static const char nul_line[] = GOOD_LINE "\0junk";
    static const char junk_line[] = GOOD_LINE " junk";
    static const char lead_nul[] = "  \0" GOOD_LINE;
    static const struct {
        const char *text;
        size_t len;
        const char *says;
    } cases[] = {
        {nul_line, sizeof nul_line - 1, "NUL byte at column 37"},
        {junk_line, sizeof junk_line - 1, "end of file expected near 'junk'"},
        {lead_nul, sizeof lead_nul - 1, "NUL byte at column 3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *lines[] = {GOOD_LINE, "", cases[i].text};
        size_t lens[] = {strlen(GOOD_LINE), 0, cases[i].len};
        const char *path = write_lines(lines, lens, 3);
        long peak_kib;
        assert_int_equal(run_eval(ck_path, path, &peak_kib), 2);
        assert_err_names(path, 3, cases[i].says);
        json_t *recs = stdout_records();
        assert_int_equal(json_array_size(recs), 1);
        json_decref(recs);
    }
}

/* Waits (up to ~20 s) until dir/out holds a train record. */
static void wait_for_training(void)
{
    for (int i = 0; i < 2000; i++) {
        char *text = slurp("out");
        int seen = strstr(text, "\"type\":\"train\"") != NULL;
        free(text);
        if (seen)
            return;
        bf_sleep_ms(10);
    }
    fail_msg("the worker printed no train record");
}

static void test_sigterm_stops_with_checkpoint(void **state)
{
    (void)state;
    char job[128], ck_dir[128];
    snprintf(job, sizeof job, "%s/long.yaml", dir);
    snprintf(ck_dir, sizeof ck_dir, "%s/stop", dir);
    write_text(job, "d_model: 16\nn_layers: 1\nn_heads: 2\nseq_len: 24\n"
               "batch_size: 2\nsteps: 1000000\nlog_every: 1\n"
               "eval_every: 0\nfreq_every: 0\neval_depths: [4]\n");
    const char *argv[] = {NULL, "--job", job, "--checkpoint-dir", ck_dir,
                          NULL};
    pid_t pid = spawn_argv(argv);
    wait_for_training();
    kill(pid, SIGTERM);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 128 + SIGTERM);

    json_t *recs = stdout_records();
    size_t n = json_array_size(recs);
    assert_true(n >= 3);
    json_t *done = json_array_get(recs, n - 1), *ck = json_array_get(recs,
                                                                     n - 2);
    assert_string_equal(json_string_value(json_object_get(done, "type")),
                        "done");
    assert_true(json_boolean_value(json_object_get(done, "stopped")));
    json_int_t step = json_integer_value(json_object_get(done, "step"));
    assert_true(step >= 1 && step < 1000000);
    assert_string_equal(json_string_value(json_object_get(ck, "type")),
                        "checkpoint");
    assert_int_equal(json_integer_value(json_object_get(ck, "step")), step);
    char latest[512];
    bf_error e;
    assert_int_equal(bf_checkpoint_latest(ck_dir, latest, sizeof latest, &e),
                     1);
    assert_string_equal(latest,
                        json_string_value(json_object_get(ck, "path")));
    json_decref(recs);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-TO-bifocal-worker\n", argv[0]);
        return 2;
    }
    worker = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_prints_records),
        cmocka_unit_test(test_bad_job_file),
        cmocka_unit_test(test_data_prints_the_engines_examples),
        cmocka_unit_test(test_code_job_learns),
        cmocka_unit_test(test_exec_usage),
        cmocka_unit_test(test_memory_budget_refuses),
        cmocka_unit_test(test_eval_matches_forward),
        cmocka_unit_test(test_eval_long_line_refused_while_read),
        cmocka_unit_test(test_eval_trailing_bytes_refused),
        cmocka_unit_test(test_sigterm_stops_with_checkpoint),
    };
    return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
