/* bench_group: one worker group training config A, under mpirun.
 *
 *   mpirun -np N bench_group [--steps S]
 *       throughput of the data-parallel group: tokens/s over S steps
 *       (no coordinator, no records), best of 2 runs
 *   mpirun -np N bench_group --server HOST:PORT --token-file F [--steps S]
 *       the cost of streaming: the same job with log_every 1 and
 *       freq_every 1, once with records dropped and once streamed through
 *       the coordinator link to a real bifocald (leased like any job),
 *       alternated 3 times (best of each); prints both step times and the
 *       overhead.
 *   mpirun -np 1 bench_group --server HOST:PORT --token-file F
 *                            --study SWEEP.yaml --checkpoint-dir DIR
 *       a whole study job from lease to done: submits the sweep, leases
 *       its first job and trains it on its own schedule (evaluations,
 *       frequency records, checkpoints, every record streamed); prints the
 *       time from lease to the acknowledged job_done broken down into
 *       train, eval, frequency records, checkpoints and streaming.
 *
 * Config A: d_model 128, 4 layers, 4 heads, seq_len 64, batch 32, bifocal,
 * dyck.  Run one BLAS thread per rank (OPENBLAS_NUM_THREADS=1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "args.h"
#include "clock.h"
#include "group.h"
#include "log.h"
#include "rpc.h"
#include "file.h"

static void config_a(bf_job_config *cfg, int steps, int stream)
{
    bf_job_config_defaults(cfg);
    cfg->task = BF_TASK_DYCK;
    cfg->rope = BF_ROPE_BIFOCAL;
    cfg->d_model = 128;
    cfg->n_layers = 4;
    cfg->n_heads = 4;
    cfg->seq_len = 64;
    cfg->batch_size = 32;
    cfg->steps = steps;
    cfg->warmup_steps = steps / 10;
    cfg->eval_every = 0;          /* only the final evaluation */
    cfg->eval_examples = 32;
    cfg->log_every = stream ? 1 : steps;
    cfg->freq_every = stream ? 1 : 0;
}

/* Seconds for one collective training run of cfg. */
static double timed_run(const bf_job_config *cfg, bf_link *link)
{
    bf_error err;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bf_now_seconds();
    bf_group_job job = {0};
    if (bf_group_train(MPI_COMM_WORLD, cfg, &job, link, NULL, &err) != 0) {
        fprintf(stderr, "bench_group: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return bf_now_seconds() - t0;
}

static void bench_throughput(int steps, int rank, int nranks)
{
    bf_job_config cfg;
    config_a(&cfg, steps, 0);
    double best = 1e30;
    for (int i = 0; i < 2; i++) {
        double s = timed_run(&cfg, NULL);
        best = s < best ? s : best;
    }
    if (rank == 0)
        printf("np=%d  %d steps in %.3f s  %.0f tokens/s  (%.1f ms/step)\n",
               nranks, steps, best,
               (double)steps * cfg.batch_size * cfg.seq_len / best,
               1e3 * best / steps);
}

/* Rank 0: submits a sweep file's text to bifocald as a client. */
static void submit_sweep(const char *server, const char *token,
                         const char *filename, const char *text)
{
    bf_rpc c;
    bf_error err;
    json_t *sweep = json_pack("{s:s, s:s, s:s}", "type", "submit",
                              "filename", filename, "text", text);
    if (bf_rpc_connect(&c, server, &err) ||
        bf_rpc_hello(&c, token, "client", NULL, NULL, 0, &err)) {
        fprintf(stderr, "bench_group: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    json_decref(bf_rpc_request(&c, sweep, 5000, NULL, NULL, &err));
    bf_rpc_close(&c);
    json_decref(sweep);
}

/* Rank 0: leases the next job through the link and starts its attempt;
 * returns the lease (the caller owns it). */
static json_t *lease_job(bf_link *link)
{
    json_t *job = NULL;
    bf_link_no_job none;
    bf_error err;
    if (bf_link_request_job(link, &job, &none, &err) != 1) {
        fprintf(stderr, "bench_group: no job leased\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    bf_link_begin_attempt(link, json_integer_value(json_object_get(job,
                          "attempt_id")), 30);
    return job;
}

/* Rank 0: submits cfg as a one-job sweep and leases it through the link,
 * so the streamed records are really ingested. */
static void lease_bench_job(bf_link *link, const char *server,
                            const char *token, const bf_job_config *cfg)
{
    char *config = bf_job_config_to_canonical_json(cfg);
    /* JSON is YAML: the canonical config is the sweep's base. */
    size_t cap = strlen(config) + 64;
    char *text = bf_xmalloc(cap);
    snprintf(text, cap, "name: bench-group-%ld\nbase: %s\n", (long)getpid(),
             config);
    submit_sweep(server, token, "bench_group.yaml", text);
    free(text);
    free(config);
    json_decref(lease_job(link));
}

/* Rank 0: the link to bifocald at server, as a one-rank group. */
static bf_link *start_link(const char *server, const char *token_file,
                           char *token)
{
    bf_link *link = NULL;
    bf_error err;
    bf_link_opts o = { .server = server, .token = token,
                       .name = "bench-group", .host = "bench", .ranks = 1 };
    if (bf_wire_read_token(token_file, token, BF_TOKEN_HEX_LEN + 1, &err) ||
        bf_link_start(&link, &o, &err)) {
        fprintf(stderr, "bench_group: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return link;
}

static void bench_streaming(int steps, int rank, const char *server,
                            const char *token_file)
{
    bf_job_config cfg;
    config_a(&cfg, steps, 1);
    bf_link *link = NULL;
    if (rank == 0) {
        char token[BF_TOKEN_HEX_LEN + 1];
        link = start_link(server, token_file, token);
        lease_bench_job(link, server, token, &cfg);
    }
    double quiet = 1e30, streamed = 1e30;
    for (int i = 0; i < 3; i++) {
        double q = timed_run(&cfg, NULL), s = timed_run(&cfg, link);
        quiet = q < quiet ? q : quiet;
        streamed = s < streamed ? s : streamed;
    }
    if (rank == 0) {
        bf_link_stats st;
        bf_error err;
        int rc = bf_link_finish_attempt(link, NULL, 0, 30000, &err);
        bf_link_get_stats(link, &st);
        bf_link_stop(link);
        printf("log_every 1, freq_every 1, %d steps: records dropped %.2f "
               "ms/step, streamed to bifocald %.2f ms/step: overhead %.2f%% "
               "(%lld records acknowledged, job_done %s)\n", steps,
               1e3 * quiet / steps, 1e3 * streamed / steps,
               100.0 * (streamed - quiet) / quiet,
               (long long)st.records_acked, rc == BF_LINK_OK ? "acked"
                                                             : "not acked");
    }
}

static const char *const PART_NAMES[BF_PART_COUNT] = {
    [BF_PART_TRAIN] = "train", [BF_PART_EVAL] = "eval",
    [BF_PART_FREQ] = "frequency records", [BF_PART_CHECKPOINT] = "checkpoints",
    [BF_PART_STREAM] = "streaming (emit)",
};

/* The first job of the sweep file `sweep_path` (the study), leased from
 * bifocald and trained by this one-rank group with its own schedule:
 * evaluations, frequency records, checkpoints (into checkpoint_dir) and
 * every record streamed.  Prints the time from the lease request to the
 * acknowledged job_done and where it went. */
static void bench_study(const char *server, const char *token_file,
                        const char *sweep_path, const char *checkpoint_dir)
{
    char token[BF_TOKEN_HEX_LEN + 1];
    bf_error err;
    bf_link *link = start_link(server, token_file, token);
    char *text = bf_read_file(sweep_path, NULL, &err);
    if (!text) {
        fprintf(stderr, "bench_group: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    submit_sweep(server, token, sweep_path, text);
    free(text);

    double t0 = bf_now_seconds();
    json_t *job = lease_job(link);
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    if (bf_job_config_apply_json(&cfg, json_object_get(job, "config"),
                                 sweep_path, NULL, &err) != 0) {
        fprintf(stderr, "bench_group: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    json_decref(job);
    bf_group_job gj = { .checkpoint_dir = checkpoint_dir };
    bf_train_summary sum;
    if (bf_group_train(MPI_COMM_WORLD, &cfg, &gj, link, &sum, &err) != 0 ||
        bf_link_finish_attempt(link, NULL, 0, 30000, &err) != BF_LINK_OK) {
        fprintf(stderr, "bench_group: %s\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double wall = bf_now_seconds() - t0, parts = 0;
    bf_link_stats st;
    bf_link_get_stats(link, &st);
    bf_link_stop(link);
    printf("study job (%s, %s, d_model %d, %d layers, seq %d, batch %d): "
           "%d steps, lease to done %.2f s (%.0f tokens/s overall, %lld "
           "records acknowledged)\n", bf_task_name(cfg.task),
           bf_rope_name(cfg.rope), cfg.d_model, cfg.n_layers, cfg.seq_len,
           cfg.batch_size, sum.step, wall,
           (double)sum.step * cfg.batch_size * cfg.seq_len / wall,
           (long long)st.records_acked);
    for (int p = 0; p < BF_PART_COUNT; p++) {
        parts += sum.seconds[p];
        printf("  %-30s %8.2f s  %5.1f%%\n", PART_NAMES[p], sum.seconds[p],
               100.0 * sum.seconds[p] / wall);
    }
    printf("  %-30s %8.2f s  %5.1f%%\n",
           "other (setup, lease, done ack)", wall - parts,
           100.0 * (wall - parts) / wall);
    double io = wall - sum.seconds[BF_PART_TRAIN];
    printf("evaluation and I/O (all but train): %.1f%% of the job "
           "(target < 10%%)\n", 100.0 * io / wall);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    bf_log_set_level(BF_LOG_WARN);
    int steps = 30;
    const char *server = NULL, *token_file = NULL, *study = NULL;
    const char *checkpoint_dir = NULL;
    const bf_option options[] = {
        BF_OPT_INT("steps", "S", &steps, 2, 1000000),
        BF_OPT_STR("server", "HOST:PORT", &server),
        BF_OPT_STR("token-file", "F", &token_file),
        BF_OPT_STR("study", "SWEEP.yaml", &study),
        BF_OPT_STR("checkpoint-dir", "DIR", &checkpoint_dir),
        BF_OPT_END,
    };
    bf_args a = { .prog = "bench_group", .options = options,
                  .quiet = rank != 0 };
    if (bf_args_parse(&a, argc, argv) != BF_ARGS_OK
        || (server && !token_file) || (study && (!server || nranks != 1))) {
        if (rank == 0)
            fprintf(stderr, "usage: bench_group [--steps S] [--server "
                    "HOST:PORT --token-file F [--study SWEEP.yaml "
                    "--checkpoint-dir DIR (np 1)]]\n");
        MPI_Finalize();
        return 2;
    }
    if (study)
        bench_study(server, token_file, study, checkpoint_dir);
    else if (server)
        bench_streaming(steps, rank, server, token_file);
    else
        bench_throughput(steps, rank, nranks);
    MPI_Finalize();
    return 0;
}
