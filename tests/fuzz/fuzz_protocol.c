/* libFuzzer: the daemon's message handlers (server/protocol.c, through
 * bf_protocol_callbacks as net.c drives them) over a real store (a SQLite
 * file in a scratch directory).  Only the socket layer of net.c is
 * replaced, by the two functions below: every reply must encode
 * as a frame, and nothing may crash, leak or corrupt the database (an
 * integrity check runs whenever the database is replaced).
 *
 * Queries and submissions are answered off the loop (queries.h,
 * submit.h): the input's frames wait while one is made, as net.c holds a
 * paused connection's frames back, and the uv loop runs it to the end.
 *
 * Input: byte 0 picks the connection (a stranger that must say hello, one
 * of four worker names, or a client); the rest is frames, one per line.
 * The database starts with a sweep of 64 jobs, some of them leased, and is
 * replaced every REFRESH inputs so leases and rows do not pile up.  Sweeps
 * of more than MAX_FUZZ_JOBS jobs are not submitted (see too_big_to_fuzz). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "protocol.h"
#include "store_internal.h"
#include "sweep.h"

#define REFRESH 2000

static bf_net net;
static bf_conn *open_conn;   /* the input's connection while it is open */
static bf_protocol proto;
static bf_store *store;
static char dir[64], db[128];
static const char token[] = "00112233445566778899aabbccddeeff";

/* ---- the socket layer, replaced --------------------------------------------- */

static void check_frame(json_t *msg)
{
    if (!msg)
        return;
    char *frame = bf_wire_encode(msg, NULL);
    if (!frame)
        abort();   /* a reply the peer could never receive */
    free(frame);
    json_decref(msg);
}

void bf_conn_send(bf_conn *c, json_t *msg)
{
    (void)c;
    check_frame(msg);
}

void bf_conn_send_frame(bf_conn *c, char *frame, size_t len)
{
    (void)c;
    /* Encoded by the protocol from a reply: it must parse back. */
    bf_error err;
    json_t *msg = bf_wire_parse(frame, len - 1, &err);
    if (!msg || frame[len - 1] != '\n')
        abort();
    json_decref(msg);
    free(frame);
}

void bf_conn_fail(bf_conn *c, json_t *msg)
{
    check_frame(msg);
    c->closing = 1;
}

void bf_conn_admit(bf_conn *c, size_t max_frame)
{
    c->stranger = 0;
    c->rd.max_frame = max_frame;
}

int bf_conn_log_ok(bf_conn *c)
{
    (void)c;
    return 1;
}

/* A reply made off the loop holds the connection's next frames back: the
 * input's loop runs the uv loop until it is resumed. */
void bf_conn_pause(bf_conn *c)
{
    c->paused = 1;
}

void bf_conn_resume(bf_conn *c)
{
    c->paused = 0;
}

/* The one connection of the input, while open (fn may close it). */
int bf_net_each(bf_net *n, bf_net_visit_fn fn, void *ctx)
{
    (void)n;
    return open_conn ? fn(open_conn, ctx) : 0;
}

/* ---- the database ------------------------------------------------------------ */

static void fresh_store(void)
{
    if (store) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(store->db, "PRAGMA integrity_check", -1, &st,
                               NULL) != SQLITE_OK
            || sqlite3_step(st) != SQLITE_ROW
            || strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0)
            abort();
        sqlite3_finalize(st);
        /* Its chores' handle closes before proto is made again over it. */
        bf_protocol_stop(&proto);
        uv_run(uv_default_loop(), UV_RUN_DEFAULT);
        bf_protocol_free(&proto);
        bf_store_close(store);
        store = NULL;
    }
    unlink(db);
    char side[160];
    snprintf(side, sizeof side, "%s-wal", db);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", db);
    unlink(side);
    bf_error err;
    if (bf_store_open(&store, db, &err) != 0)
        abort();
    /* Durability is not under test here; speed is. */
    sqlite3_exec(store->db, "PRAGMA synchronous = OFF", NULL, NULL, NULL);
    static const char sweep[] = "name: fuzz\nbase: {steps: 20, "
                                "warmup_steps: 0}\nseeds: 64\n";
    if (bf_store_submit_sweep(store, "fuzz.yaml", sweep, sizeof sweep - 1,
                              NULL, 1, NULL, NULL, NULL, &err) != 0)
        abort();
    static const char *const names[] = {"w0", "w1", "w2"};
    bf_lease l;
    for (int i = 0; i < 3; i++)   /* attempts 1..3 live, of w0..w2 */
        if (bf_store_lease_next(store, names[i], NULL, bf_wall_ms(), 3600000, &l,
                                &err) == 1)
            bf_lease_clear(&l);
    bf_protocol_init(&proto, uv_default_loop(), &net, store, db, token,
                     3600000);
    net.cb = bf_protocol_callbacks;
    net.data = &proto;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "%s/bf-fuzz-protocol-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir))
        abort();
    snprintf(db, sizeof db, "%s/fuzz.db", dir);
    bf_log_set_level(BF_LOG_ERROR);
    fresh_store();
    return 0;
}

/* A submit of a sweep bigger than MAX_FUZZ_JOBS jobs: valid, and slow on
 * purpose (seeds: 1000000 is allowed); it would read as a timeout. */
#define MAX_FUZZ_JOBS 5000
static int too_big_to_fuzz(const char *line, size_t len)
{
    bf_error err;
    json_t *msg = bf_wire_parse(line, len, &err);
    json_t *text = json_object_get(msg, "text");
    int big = 0;
    if (msg && strcmp(bf_wire_type(msg), "submit") == 0 && json_is_string(text)) {
        bf_sweep *sw = bf_sweep_parse("fuzz.yaml", NULL, json_string_value(text),
                                      json_string_length(text), &err);
        big = sw && sw->n_jobs > MAX_FUZZ_JOBS;
        bf_sweep_free(sw);
    }
    json_decref(msg);
    return big;
}

/* ---- one input: one connection ----------------------------------------------- */

/* A hello as a worker (of one of four names) or a client, or none: the
 * input then has to say hello itself. */
static void say_hello(bf_conn *c, uint8_t pick)
{
    char hello[256];
    if (pick % 6 == 0)
        return;
    if (pick % 6 == 5)
        snprintf(hello, sizeof hello, "{\"type\":\"hello\",\"version\":%d,"
                 "\"token\":\"%s\",\"role\":\"client\"}", BF_WIRE_VERSION,
                 token);
    else
        snprintf(hello, sizeof hello, "{\"type\":\"hello\",\"version\":%d,"
                 "\"token\":\"%s\",\"role\":\"worker\",\"name\":\"w%d\"}",
                 BF_WIRE_VERSION, token, pick % 6 - 1);
    net.cb.on_frame(c, hello, strlen(hello));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int runs;
    if (++runs % REFRESH == 0)
        fresh_store();
    if (size < 1)
        return 0;
    bf_conn c;
    memset(&c, 0, sizeof c);
    c.net = &net;
    snprintf(c.peer, sizeof c.peer, "127.0.0.1:9");
    bf_frame_reader_init(&c.rd, BF_WIRE_HELLO_MAX_FRAME);
    open_conn = &c;
    net.cb.on_connect(&c);
    say_hello(&c, data[0]);
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    while (p < end && !c.closing) {
        while (c.paused)
            uv_run(uv_default_loop(), UV_RUN_ONCE);
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = (size_t)((nl ? nl : end) - p);
        if (!too_big_to_fuzz(p, len))
            net.cb.on_frame(&c, p, len);
        p += len + 1;
    }
    /* Replies still being made off the loop finish first. */
    uv_run(uv_default_loop(), UV_RUN_DEFAULT);
    bf_protocol_flush(&proto);
    open_conn = NULL;
    net.cb.on_close(&c);
    bf_frame_reader_free(&c.rd);
    return 0;
}
