/* libFuzzer: the dashboard's request handling, from bytes to answers: the
 * HTTP session of dashboard/http.c (http-parser, the arena, every limit) in
 * front of the dashboard's handler (dashboard/dashboard.c: access rules, the
 * page, the JSON API with its cursors and curves) over a real database,
 * opened read-only as `bifocal dashboard` opens it.  Only the socket layer
 * is left out: answers go to check_answer, which requires every one to be
 * a well-formed HTTP/1.1 response whose JSON body parses.
 *
 * Input: byte 0 picks the peer (bit 0: loopback or another host, whose
 * requests need the token), whether the peer reads its answers (bit 1:
 * when not, every answer leaves it over its budget, so the session stops
 * after each request and is fed the rest again, as the server does once
 * the peer has read) and the size of the chunks the rest is fed in (bits
 * 2-7), as a socket splits a stream anywhere.  The database, made
 * once through the real store, holds a sweep of six jobs: succeeded ones
 * with curves, evaluations and frequencies, a failed one, a running one
 * and queued ones. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dashboard.h"
#include "db.h"
#include "store.h"

static const char token[] = "00112233445566778899aabbccddeeff";
static bf_dashboard dash;
static sqlite3 *ro;

static const char *const sweep =
    "name: fuzz-http\n"
    "base: {task: dyck, depth: 4, eval_depths: [4, 8], d_model: 32,\n"
    "       n_heads: 4, n_layers: 1, seq_len: 40, steps: 100}\n"
    "grid:\n"
    "  rope: [rope, spectral, bifocal]\n"
    "seeds: 2\n"
    "max_attempts: 1\n";

static void die(const char *what, const bf_error *err)
{
    fprintf(stderr, "fuzz_http: %s: %s\n", what, err ? err->msg : "");
    abort();
}

/* One job's records: losses, two evaluations, frequencies of its heads. */
static json_t *records(void)
{
    json_t *recs = json_array();
    for (int step = 5; step <= 100; step += 5)
        json_array_append_new(recs, json_pack(
            "{s:s, s:i, s:f, s:f, s:f, s:f}", "type", "train", "step", step,
            "loss", 2.0 / step, "lr", 0.001, "grad_norm", 1.0 / step,
            "tokens_per_s", 1000.0 * step));
    for (int step = 50; step <= 100; step += 50)
        for (int depth = 4; depth <= 8; depth *= 2)
            json_array_append_new(recs, json_pack(
                "{s:s, s:i, s:i, s:f, s:f}", "type", "eval", "step", step,
                "depth", depth, "loss", 1.0 / depth, "accuracy", 0.5));
    for (int step = 0; step <= 100; step += 25)
        for (int head = 0; head < 4; head++)
            json_array_append_new(recs, json_pack(
                "{s:s, s:i, s:i, s:i, s:[f, f, f, f]}", "type", "freq",
                "step", step, "layer", 0, "head", head, "omega",
                1.0, 0.1 + step / 1000.0, 0.01, 0.001));
    return recs;
}

static void make_database(const char *path)
{
    bf_store *s;
    bf_error err;
    if (bf_store_open(&s, path, &err))
        die("open", &err);
    int64_t id;
    int n_jobs;
    if (bf_store_submit_sweep(s, "fuzz.yaml", sweep, strlen(sweep), NULL, 0,
                              &id, &n_jobs, NULL, &err))
        die("submit", &err);
    bf_lease l;
    for (int job = 0; job < 4; job++) {
        if (bf_store_lease_next(s, "fuzz-worker", NULL, 1000 + job, 1000000000, &l,
                                &err) != 1)
            die("lease", &err);
        json_t *recs = records();
        int rows = 0;
        if (bf_store_ingest(s, l.attempt_id, recs, &rows, NULL, &err)
            || bf_store_flush(s, &err))
            die("ingest", &err);
        json_decref(recs);
        /* jobs 1 and 2 succeed, 3 fails, 4 stays running */
        if (job < 3 && bf_store_finish_attempt(s, l.attempt_id, job < 2,
                                               job < 2 ? NULL : "diverged",
                                               2000 + job, NULL))
            die("finish", NULL);
        bf_lease_clear(&l);
    }
    bf_store_close(s);
}

static void free_dashboard(void)
{
    bf_dashboard_free(&dash);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char dir[] = "/tmp/bf-fuzz-http-XXXXXX";
    if (!mkdtemp(dir))
        abort();
    char path[128];
    snprintf(path, sizeof path, "%s/dash.db", dir);
    make_database(path);
    ro = bf_db_open(path, BF_DB_DASHBOARD_VERSION);
    if (!ro || bf_dashboard_init(&dash, ro, path, token, 60))
        abort();
    atexit(free_dashboard);
    return 0;
}

/* ---- the socket layer, replaced ------------------------------------------- */

static int peer_reads;

/* io is the session: an answer to HEAD (sent while its parser holds that
 * method) has a length but no body; an error answer always has its body.
 * Returns whether the peer is over its budget (it reads nothing). */
static int check_answer(void *io, char *bytes, size_t len)
{
    const bf_http_session *s = io;
    int head_only = s->parser.method == HTTP_HEAD;
    char *end = memmem(bytes, len, "\r\n\r\n", 4);
    const char *cl = memmem(bytes, len, "\r\nContent-Length: ", 18);
    if (len < 16 || strncmp(bytes, "HTTP/1.1 ", 9) != 0 || !end || !cl)
        abort();
    int status = atoi(bytes + 9);
    size_t body_len = strtoul(cl + 18, NULL, 10);
    size_t got = len - (size_t)(end + 4 - bytes);
    if (status < 200 || status > 599 || (got != body_len && !(head_only
                                                              && got == 0)))
        abort();
    /* the Content-Type header itself: a Location header may echo a URL
     * holding "application/json" (found by this harness) */
    if (got && memmem(bytes, (size_t)(end - bytes),
                      "\r\nContent-Type: application/json", 32)) {
        json_error_t e;
        json_t *body = json_loadb(end + 4, got, 0, &e);
        if (!body)
            abort();
        json_decref(body);
    }
    free(bytes);
    return !peer_reads;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct sockaddr_in peer = { .sin_family = AF_INET };
    peer.sin_addr.s_addr = htonl(data[0] & 1 ? 0x7f000001 : 0x0a000002);
    peer_reads = !(data[0] & 2);
    size_t chunk = (size_t)(data[0] >> 2) + 1;
    static bf_http_session s;    /* 16 KiB arena: not on the stack */
    bf_http_session_init(&s, bf_dashboard_handle, &dash, check_answer, &s,
                         (struct sockaddr *)&peer);
    for (size_t at = 1; at < size;) {
        size_t n = size - at < chunk ? size - at : chunk, used;
        int done = bf_http_session_feed(&s, (const char *)data + at, n, &used);
        /* It stops early only at a request's end, so it takes a byte at
         * least: fed again, it goes on (no stall). */
        if (used > n || (used == 0 && !done))
            abort();
        if (done)
            break;
        at += used;
    }
    return 0;
}
