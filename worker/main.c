/* bifocal-worker: the training engine's command line.
 *
 *   bifocal-worker [train] --job FILE [--checkpoint-dir DIR] [--resume]
 *                          [--memory-budget MIB]
 *   bifocal-worker eval --checkpoint FILE --input FILE
 *   bifocal-worker data --job FILE [--steps A:B] [--split train|eval|model]
 *   bifocal-worker code-stats [--code-dir DIR]
 *
 * Subcommands live in one table; each parses its own options with
 * common/args.  --server anywhere selects the coordinator-driven MPI worker
 * group instead (group.c).  Exit status: 0 done, 1 runtime failure, 2 bad
 * usage or bad input, 128+signal when a signal stopped training early. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cblas.h>

#include "alloc.h"
#include "args.h"
#include "checkpoint.h"
#include "code_corpus.h"
#include "data.h"
#include "exec.h"
#include "group.h"
#include "isa.h"
#include "job_config.h"
#include "log.h"
#include "mem_limit.h"
#include "records.h"
#include "score.h"
#include "stop_signals.h"
#include "task_kind.h"
#include "train.h"

enum { EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

static const char usage_text[] =
    "usage: bifocal-worker [train] --job FILE [--checkpoint-dir DIR] "
    "[--resume]\n"
    "                      [--memory-budget MIB]\n"
    "       bifocal-worker eval --checkpoint FILE --input FILE\n"
    "       bifocal-worker data --job FILE [--steps A:B] "
    "[--split train|eval|model]\n"
    "       bifocal-worker code-stats [--code-dir DIR]\n"
    "       mpirun -np N bifocal-worker --server HOST:PORT --token-file F "
    "[...]\n"
    "       bifocal-worker --server HOST:PORT --token-file F --exec CMD "
    "--trainer NAME [...]\n"
    "\n"
    "train (default)   train one job standalone; prints one JSON record per\n"
    "                  line on stdout (train, eval, freq, checkpoint, done)\n"
    "  --job FILE            job config, YAML or JSON (docs/job-config.md)\n"
    "  --checkpoint-dir DIR  write DIR/step-NNNNNN.safetensors every\n"
    "                        checkpoint_every steps and at the end\n"
    "  --resume              continue from DIR/latest (same job config)\n"
    "  --memory-budget MIB   memory the job may allocate (default: this\n"
    "                        machine's memory or its cgroup's limit, the\n"
    "                        less); a job needing more is refused before\n"
    "                        allocating\n"
    "eval              score sequences: each input line is\n"
    "                  {\"input\": [ids], \"target\": [ids or -1]}\n"
    "  --checkpoint FILE     a checkpoint written by train\n"
    "  --input FILE          JSON lines to score\n"
    "data              print the job's training rows and eval examples,\n"
    "                  one JSON object per line (docs/trainers.md)\n"
    "  --job FILE            job config, YAML or JSON\n"
    "  --steps A:B           the rows of optimizer steps A..B-1 (default:\n"
    "                        all, 0:steps)\n"
    "  --split SPLIT         train or eval only (default: both), or model:\n"
    "                        the model and optimiser the job defines\n"
    "code-stats        what the code task reads from a source tree: files,\n"
    "                  symbols, memory, snippets per depth (docs/tasks.md)\n"
    "  --code-dir DIR        the tree (default " BF_CODE_DIR_DEFAULT ")\n"
    "  -h, --help            this text\n"
    "--server          a worker group driven by the coordinator (under\n"
    "                  mpirun): `bifocal-worker --server X --help` lists its\n"
    "                  options; docs/cluster.md explains them\n"
    "--exec            jobs of `trainer: NAME` trained by CMD, another\n"
    "                  program: `bifocal-worker --exec X --help` lists its\n"
    "                  options; docs/trainers.md is the contract\n";

__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bifocal-worker: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s", usage_text);
    return EXIT_USAGE;
}

static int fail(int code, const bf_error *err)
{
    fprintf(stderr, "bifocal-worker: %s\n", err->msg);
    return code;
}

/* ---- train ---------------------------------------------------------------- */

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static int should_stop(void *ctx)
{
    (void)ctx;
    return stop_signal != 0;
}

/* stdout is an edge: the record becomes its JSON line here. */
static void print_record(void *ctx, const bf_record *record)
{
    json_t *line = bf_record_to_json(record);
    if (line)
        bf_record_print(ctx, line);
    json_decref(line);
}

/* The checkpoint --resume continues from, or "" for a fresh start. */
static int find_resume(const char *dir, char *path, size_t cap,
                       bf_error *err)
{
    int found = bf_checkpoint_latest(dir, path, cap, err);
    if (found < 0)
        return -1;
    if (found == 0) {
        fprintf(stderr, "bifocal-worker: no checkpoint in %s yet; starting "
                "fresh\n", dir);
        path[0] = '\0';
    }
    return 0;
}

static int ensure_dir(const char *dir, bf_error *err)
{
    if (mkdir(dir, 0777) == 0 || errno == EEXIST)
        return 0;
    return bf_error_set(err, dir, 0, NULL, "cannot create directory: %s",
                        strerror(errno));
}

static int train_job(const bf_job_config *cfg, const char *ckpt_dir,
                     const char *resume_path, size_t memory_budget)
{
    bf_error err;
    bf_error_clear(&err);
    bf_trainer_opts opts = {
        .rank = 0, .nranks = 1, .checkpoint_dir = ckpt_dir,
        .resume_path = resume_path, .memory_budget = memory_budget,
        .hooks = {.ctx = stdout, .emit = print_record,
                  .should_stop = should_stop},
    };
    bf_trainer *t;
    if (bf_trainer_create(&t, cfg, &opts, &err) != 0)
        return fail(EXIT_RUNTIME, &err);
    /* SIGINT/SIGTERM end training after the current step, with a checkpoint
     * when a directory is given, so an interrupted run can be resumed. */
    bf_catch_stop_signals(on_stop_signal);
    int rc = bf_trainer_run(t, &err);
    int stopped = bf_trainer_summary(t)->stopped;
    int diverged = bf_trainer_summary(t)->diverged;
    bf_trainer_free(t);
    if (rc != 0)
        return fail(EXIT_RUNTIME, &err);
    if (diverged) {
        fprintf(stderr, "bifocal-worker: diverged at step %d (the loss is "
                "not finite; stop_on_nonfinite)\n", diverged);
        return EXIT_RUNTIME;
    }
    return stopped ? 128 + stop_signal : 0;
}

/* Parses a subcommand's options (no positional arguments); prints the
 * usage at --help.  Returns what bf_args_parse returns. */
static int parse_options(const bf_option *options, int argc, char **argv)
{
    bf_args a = { .prog = "bifocal-worker", .options = options };
    int rc = bf_args_parse(&a, argc, argv);
    if (rc == BF_ARGS_HELP)
        fputs(usage_text, stdout);
    return rc;
}

static int cmd_train(int argc, char **argv)
{
    const char *job = NULL, *dir = NULL;
    int resume = 0, budget_mib = 0;
    const bf_option options[] = {
        BF_OPT_STR("job", "FILE", &job),
        BF_OPT_STR("checkpoint-dir", "DIR", &dir),
        BF_OPT_FLAG("resume", &resume),
        BF_OPT_INT("memory-budget", "MIB", &budget_mib, 1, INT_MAX),
        BF_OPT_END,
    };
    int parsed = parse_options(options, argc, argv);
    if (parsed != BF_ARGS_OK)
        return parsed == BF_ARGS_HELP ? 0 : parsed;
    if (!job)
        return usage_error("%s", "--job FILE is required");
    if (resume && !dir)
        return usage_error("%s", "--resume needs --checkpoint-dir DIR");

    bf_error err;
    bf_error_clear(&err);
    bf_job_config cfg;
    if (bf_job_config_load_file(&cfg, job, &err) != 0)
        return fail(EXIT_USAGE, &err);
    char resume_path[BF_PATH_MAX + 64] = "";
    if (dir && ensure_dir(dir, &err) != 0)
        return fail(EXIT_RUNTIME, &err);
    if (resume && find_resume(dir, resume_path, sizeof resume_path, &err))
        return fail(EXIT_RUNTIME, &err);
    bf_log_info("engine kernels: %s, OpenBLAS %s", bf_isa_name(bf_isa_current()),
                bf_isa_blas_core_in_use());
    size_t budget = budget_mib > 0 ? (size_t)budget_mib << 20
                                   : bf_mem_limit();
    return train_job(&cfg, dir, resume_path[0] ? resume_path : NULL, budget);
}

/* ---- eval ----------------------------------------------------------------- */

static int cmd_eval(int argc, char **argv)
{
    const char *checkpoint = NULL, *input = NULL;
    const bf_option options[] = {
        BF_OPT_STR("checkpoint", "FILE", &checkpoint),
        BF_OPT_STR("input", "FILE", &input),
        BF_OPT_END,
    };
    int parsed = parse_options(options, argc, argv);
    if (parsed != BF_ARGS_OK)
        return parsed == BF_ARGS_HELP ? 0 : parsed;
    if (!checkpoint || !input)
        return usage_error("%s", "eval needs --checkpoint FILE and "
                           "--input FILE");
    bf_error err;
    bf_error_clear(&err);
    if (bf_score_file(checkpoint, input, stdout, &err) != 0)
        return fail(EXIT_USAGE, &err);
    return 0;
}

/* ---- data ----------------------------------------------------------------- */

/* "A:B" with 0 <= A <= B <= steps into *from, *to. */
static int parse_steps(const char *text, int steps, long *from, long *to)
{
    char *end;
    *from = strtol(text, &end, 10);
    if (*end != ':' || end == text)
        return -1;
    const char *b = end + 1;
    *to = strtol(b, &end, 10);
    return *end || end == b || *from < 0 || *from > *to || *to > steps
           ? -1 : 0;
}

static int cmd_data(int argc, char **argv)
{
    const char *job = NULL, *steps = NULL, *split = NULL;
    const bf_option options[] = {
        BF_OPT_STR("job", "FILE", &job),
        BF_OPT_STR("steps", "A:B", &steps),
        BF_OPT_STR("split", "SPLIT", &split),
        BF_OPT_END,
    };
    int parsed = parse_options(options, argc, argv);
    if (parsed != BF_ARGS_OK)
        return parsed == BF_ARGS_HELP ? 0 : parsed;
    if (!job)
        return usage_error("%s", "data needs --job FILE");
    static const struct { const char *name; int what; } splits[] = {
        { "train", BF_DATA_TRAIN }, { "eval", BF_DATA_EVAL },
        { "model", BF_DATA_MODEL } };
    int what = split ? 0 : BF_DATA_TRAIN | BF_DATA_EVAL;
    for (size_t i = 0; split && i < sizeof splits / sizeof *splits; i++)
        if (strcmp(split, splits[i].name) == 0)
            what = splits[i].what;
    if (!what)
        return usage_error("--split: '%s' is not train, eval or model",
                           split);
    bf_error err;
    bf_error_clear(&err);
    bf_job_config cfg;
    if (bf_job_config_load_file(&cfg, job, &err) != 0)
        return fail(EXIT_USAGE, &err);
    long from = 0, to = cfg.steps;
    if (steps && parse_steps(steps, cfg.steps, &from, &to) != 0)
        return usage_error("--steps: '%s' is not A:B with 0 <= A <= B <= "
                           "%d (the job's steps)", steps, cfg.steps);
    if (bf_data_print(stdout, &cfg, from, to, what) != 0) {
        bf_error_set(&err, NULL, 0, NULL, "writing stdout: %s",
                     strerror(errno));
        return fail(EXIT_RUNTIME, &err);
    }
    return 0;
}

/* ---- code-stats ----------------------------------------------------------- */

static void print_code_stats(const char *dir, const bf_code_stats *st)
{
    int files = st->files[BF_CODE_TRAIN] + st->files[BF_CODE_EVAL];
    printf("code_dir %s\n", dir);
    printf("files: %d .py/.c/.h found, %d usable (%d train, %d held out), "
           "%d left out (unreadable or unbalanced brackets)\n",
           st->files_seen, files, st->files[BF_CODE_TRAIN],
           st->files[BF_CODE_EVAL], st->files_left_out);
    printf("source: %llu bytes; symbols: %llu train, %llu held out\n",
           (unsigned long long)st->source_bytes,
           (unsigned long long)st->symbols[BF_CODE_TRAIN],
           (unsigned long long)st->symbols[BF_CODE_EVAL]);
    printf("memory: %zu bytes (%.1f MiB) per process\n", st->memory_bytes,
           st->memory_bytes / 1048576.0);
    printf("%5s %10s %8s %14s %14s\n", "depth", "prompt_max", "max_len",
           "train", "held_out");
    int deepest = 0;
    for (int d = 1; d <= BF_CODE_MAX_DEPTH; d++)
        if (st->snippets[BF_CODE_TRAIN][d] || st->snippets[BF_CODE_EVAL][d])
            deepest = d;
    for (int d = 1; d <= deepest; d++) {
        printf("%5d %10d %8d %14u %14u\n", d, bf_code_prompt_max(d),
               bf_task_max_len(BF_TASK_CODE, d), st->snippets[BF_CODE_TRAIN][d],
               st->snippets[BF_CODE_EVAL][d]);
    }
}

static int cmd_code_stats(int argc, char **argv)
{
    const char *dir = BF_CODE_DIR_DEFAULT;
    const bf_option options[] = {
        BF_OPT_STR("code-dir", "DIR", &dir),
        BF_OPT_END,
    };
    int parsed = parse_options(options, argc, argv);
    if (parsed != BF_ARGS_OK)
        return parsed == BF_ARGS_HELP ? 0 : parsed;
    bf_error err;
    bf_error_clear(&err);
    const bf_code_corpus *corpus = bf_code_corpus_get(dir, &err);
    if (!corpus)
        return fail(EXIT_USAGE, &err);
    bf_code_stats st;
    bf_code_corpus_stats(corpus, &st);
    bf_code_corpus_put(corpus);
    print_code_stats(dir, &st);
    return 0;
}

/* ---- dispatch --------------------------------------------------------------- */

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    {"train", cmd_train},
    {"eval", cmd_eval},
    {"data", cmd_data},
    {"code-stats", cmd_code_stats},
};

/* One BLAS thread per process unless the environment asks for more: the
 * ranks of a group (or the other jobs on the machine) are the parallelism,
 * and a BLAS thread pool in every rank would fight them for the cores. */
static void default_blas_threads(void)
{
    if (!getenv("OPENBLAS_NUM_THREADS") && !getenv("GOTO_NUM_THREADS")
        && !getenv("OMP_NUM_THREADS"))
        openblas_set_num_threads(1);
}

int main(int argc, char **argv)
{
    bf_alloc_init();
    default_blas_threads();
    /* the constructor already chose a level; this refuses a bad
     * BIFOCAL_ISA instead of running at another level than asked */
    bf_error isa_err;
    if (bf_isa_use_env(&isa_err) != 0)
        return fail(EXIT_USAGE, &isa_err);
    /* --exec CMD: jobs trained by another program (before --server, which
     * this mode has too). */
    if (bf_exec_requested(argc, argv))
        return bf_exec_main(argc, argv);
    /* --server HOST:PORT: an MPI worker group driven by the coordinator. */
    if (bf_group_requested(argc, argv))
        return bf_group_main(argc, argv);
    /* A leading word names the subcommand; options alone mean train. */
    if (argc > 1 && argv[1][0] != '-') {
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (strcmp(argv[1], commands[i].name) == 0)
                return commands[i].run(argc - 1, argv + 1);
        return usage_error("unknown command '%s'", argv[1]);
    }
    return cmd_train(argc, argv);
}
