/* libFuzzer: the daemon's message handlers (server/protocol.c, through
 * bf_protocol_callbacks as net.c drives them) over a real store (a SQLite
 * file in a scratch directory), in-process: one store and one protocol
 * for the whole run.  Only the socket layer of net.c is replaced, by the
 * functions below: every reply must encode as a frame, and nothing may
 * crash, leak or corrupt the database (PRAGMA integrity_check, after every
 * CHECK_EVERY-th input that changed it).
 *
 * Queries and submissions are answered off the loop (queries.h,
 * submit.h): the input's frames wait while one is made, as net.c holds a
 * paused connection's frames back, and the uv loop runs it to the end.
 *
 * Input: byte 0 picks the connection (a stranger that must say hello, one
 * of eight worker names, or a client: say_hello); the rest is frames, one
 * per line.  Every input starts from the same database (first_sweeps: a
 * plain sweep, a search with pruning and selection, adaptive seeds, a
 * stage that starts from another's checkpoint, each with jobs leased);
 * what an input changed is put back after it (reset_database).  Sweeps
 * of more than MAX_FUZZ_JOBS jobs are not submitted (too_big_to_fuzz). */
#include <stdarg.h>
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

#define CHECK_EVERY 16

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

/* The input's peer stays until the input ends. */
int bf_conn_peer_gone(bf_conn *c)
{
    (void)c;
    return 0;
}

/* The one connection of the input, while open (fn may close it). */
int bf_net_each(bf_net *n, bf_net_visit_fn fn, void *ctx)
{
    (void)n;
    return open_conn ? fn(open_conn, ctx) : 0;
}

/* ---- the database ------------------------------------------------------------ */

/* Every input finds the same rows, so that a crash reproduces from its
 * input alone and no input slows the next down with rows it left.  They
 * are put back by a connection of the harness's own, as any other writer
 * of the file would: the store's connection, its statements and schema
 * are left alone (SQLite's backup into the store's connection changes the
 * schema cookie, and every connection then parsed the schema again: 4-5 ms
 * of CPU per connection and input under ASan). */
static sqlite3 *resetter;            /* fuzz.db; the first rows attached */
static sqlite3_stmt *reset_st[64];   /* empties every table and refills it */
static int n_reset_st;
static sqlite3_stmt *data_version;   /* moves when the store commits */
static int64_t version_seen;

/* The harness itself cannot go on (its rows, its checks). */
__attribute__((format(printf, 1, 2))) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz_protocol: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* Prepares every statement of sql into reset_st. */
static void reset_prepare(const char *sql)
{
    while (*sql) {
        const char *tail;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v3(resetter, sql, -1, SQLITE_PREPARE_PERSISTENT,
                               &st, &tail) != SQLITE_OK)
            die("%s: %s", sql, sqlite3_errmsg(resetter));
        if (st && n_reset_st == (int)(sizeof reset_st / sizeof reset_st[0]))
            die("more tables than reset_st holds");
        if (st)
            reset_st[n_reset_st++] = st;
        sql = tail;
    }
}

static int64_t read_version(void)
{
    if (sqlite3_step(data_version) != SQLITE_ROW)
        die("reading data_version: %s", sqlite3_errmsg(resetter));
    int64_t v = sqlite3_column_int64(data_version, 0);
    sqlite3_reset(data_version);
    return v;
}

/* Keeps the store's rows as they are now as "pristine", an in-memory
 * database attached to resetter, and prepares what puts them back. */
static void keep_pristine(void)
{
    /* The statement journals of INSERT ... SELECT stay in memory (they
     * were files in /tmp, written on every reset). */
    if (sqlite3_open_v2(db, &resetter, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK
        || sqlite3_exec(resetter, "ATTACH ':memory:' AS pristine;"
                        " PRAGMA temp_store = MEMORY", NULL, NULL, NULL)
           != SQLITE_OK)
        die("opening the resetting connection: %s", sqlite3_errmsg(resetter));
    /* Rows are copied as they were: no trigger may add to them (foreign
     * keys are not enforced on a connection that did not ask). */
    sqlite3_db_config(resetter, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, NULL);
    sqlite3_backup *b = sqlite3_backup_init(resetter, "pristine", store->db,
                                            "main");
    int rc = b ? sqlite3_backup_step(b, -1) : SQLITE_ERROR;
    if (sqlite3_backup_finish(b) != SQLITE_OK || rc != SQLITE_DONE)
        die("copying the first rows: %s", sqlite3_errmsg(resetter));
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(resetter, "SELECT group_concat(format('DELETE FROM"
            " main.\"%w\"; INSERT INTO main.\"%w\" SELECT * FROM"
            " pristine.\"%w\";', name, name, name), ' ')"
            " FROM pristine.sqlite_schema WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite_%'", -1, &st, NULL) != SQLITE_OK
        || sqlite3_step(st) != SQLITE_ROW)
        die("listing the tables: %s", sqlite3_errmsg(resetter));
    reset_prepare("BEGIN IMMEDIATE");
    reset_prepare((const char *)sqlite3_column_text(st, 0));
    reset_prepare("COMMIT");
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(resetter, "PRAGMA data_version", -1, &data_version,
                           NULL) != SQLITE_OK)
        die("preparing data_version: %s", sqlite3_errmsg(resetter));
    version_seen = read_version();
}

static void check_integrity(void)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(store->db, "PRAGMA integrity_check", -1, &st,
                           NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
        die("integrity_check: %s", sqlite3_errmsg(store->db));
    const char *verdict = (const char *)sqlite3_column_text(st, 0);
    if (strcmp(verdict, "ok") != 0)
        die("integrity_check: %s", verdict);
    sqlite3_finalize(st);
}

/* Puts the first rows back if the input changed any.  The integrity check
 * costs 3-5 ms of CPU under ASan, half of a typical input's: every
 * CHECK_EVERY-th input that changed the database has it, the first one
 * included, so that an input that failed it fails again run alone. */
static void reset_database(void)
{
    static unsigned changed;
    int64_t version = read_version();
    if (version == version_seen)
        return;
    version_seen = version;   /* resetter's own commit does not move it */
    if (changed++ % CHECK_EVERY == 0)
        check_integrity();
    for (int i = 0; i < n_reset_st; i++) {
        if (sqlite3_step(reset_st[i]) != SQLITE_DONE)
            die("%s: %s", sqlite3_sql(reset_st[i]), sqlite3_errmsg(resetter));
        sqlite3_reset(reset_st[i]);
    }
}

/* The sweeps every input finds, in this order (sweep ids 1, 2, ...), and
 * the workers that hold a job of each (attempts 1, 2, ... in this order):
 * a worker's messages about its job reach what each kind of sweep does as
 * its jobs report and end.  w3 and w7 hold nothing: they may lease. */
static const struct first_sweep {
    const char *yaml;
    const char *workers[4];
} first_sweeps[] = {
    { "name: fuzz\nbase: {steps: 20, warmup_steps: 0}\nseeds: 64\n",
      { "w0", "w1", "w2" } },
    /* Trials pruned at step 10 and selected; a stage takes their values. */
    { "name: tune\nbase: {steps: 20, warmup_steps: 0, eval_every: 10}\n"
      "stages:\n"
      "  - name: tune\n"
      "    search: {method: sobol, trials: 3,\n"
      "             space: {lr: {loguniform: [1.0e-4, 3.0e-2]}}}\n"
      "    prune: {method: asha, metric: eval_loss, eval_depth: 4,\n"
      "            rungs: [10], eta: 2}\n"
      "    select: {by: eval_loss, eval_depth: 4}\n"
      "  - {name: confirm, from: \"stage:tune\", seeds: 2}\n",
      { "w4" } },
    /* Seeds added a pair at a time until the comparison is decided. */
    { "name: adaptive\nbase: {steps: 20, warmup_steps: 0}\n"
      "grid: {rope: [rope, bifocal]}\n"
      "seeds: {min: 2, max: 6, until: decided}\n"
      "analysis:\n"
      "  primary: {metric: loss, eval_depth: 8}\n"
      "  baseline: {rope: rope}\n",
      { "w5" } },
    /* A stage that starts from its source's final checkpoint. */
    { "name: chain\nbase: {steps: 20, warmup_steps: 0}\n"
      "stages:\n"
      "  - {name: a, seeds: 2}\n"
      "  - {name: b, base: {init_from: \"stage:a\"}, seeds: 2}\n",
      { "w6" } },
};

/* Submits sweep number id and leases one of its jobs to each of its
 * workers. */
static void add_first_sweep(const struct first_sweep *f, int64_t id)
{
    bf_error err;
    int64_t got;
    if (bf_store_submit_sweep(store, "fuzz.yaml", f->yaml, strlen(f->yaml),
                              NULL, 1, &got, NULL, NULL, &err) != 0)
        die("%s: %s", f->yaml, err.msg);
    for (int i = 0; i < 4 && f->workers[i]; i++) {
        bf_lease l;
        if (bf_store_lease_next(store, f->workers[i], NULL, bf_wall_ms(),
                                3600000, &l, &err) != 1)
            die("leasing a first job: %s", err.msg);
        if (l.sweep_id != id || got != id)
            die("%s leased a job of sweep %lld, not of sweep %lld",
                f->workers[i], (long long)l.sweep_id, (long long)id);
        bf_lease_clear(&l);
    }
}

static void make_store(void)
{
    bf_error err;
    if (bf_store_open(&store, db, &err) != 0)
        die("opening the store: %s", err.msg);
    /* Durability is not under test here; speed is. */
    sqlite3_exec(store->db, "PRAGMA synchronous = OFF", NULL, NULL, NULL);
    for (size_t i = 0; i < sizeof first_sweeps / sizeof first_sweeps[0]; i++)
        add_first_sweep(&first_sweeps[i], (int64_t)i + 1);
}

/* The scratch directory goes with the process (a crash leaves it). */
static void remove_scratch(void)
{
    static const char *const tails[] = {"", "-wal", "-shm"};
    char path[160];
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        snprintf(path, sizeof path, "%s%s", db, tails[i]);
        unlink(path);
    }
    rmdir(dir);
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
    atexit(remove_scratch);
    bf_log_set_level(BF_LOG_ERROR);
    make_store();
    keep_pristine();
    bf_protocol_init(&proto, uv_default_loop(), &net, store, db, token,
                     3600000);
    net.cb = bf_protocol_callbacks;
    net.data = &proto;
    return 0;
}

/* A submit of a sweep bigger than MAX_FUZZ_JOBS jobs: valid, and slow on
 * purpose (seeds: 1000000 is allowed).  A job costs about 0.5 ms under
 * ASan (expanded twice, stored, listed): 2,500 of them made an input of
 * 2 s.  fuzz.sh builds with chunks of 8 jobs, so these span several. */
#define MAX_FUZZ_JOBS 32
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

/* A hello as a worker or a client, or none (pick % 6 == 0): the input
 * then has to say hello itself.  Workers w0..w3 for pick % 6 in 1..4,
 * w4..w7 when pick / 6 is odd too (first_sweeps says what each holds). */
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
                 BF_WIRE_VERSION, token, pick % 6 - 1 + 4 * (pick / 6 % 2));
    net.cb.on_frame(c, hello, strlen(hello));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
    /* And the chore the flush may have queued, before the rows go. */
    uv_run(uv_default_loop(), UV_RUN_DEFAULT);
    reset_database();
    return 0;
}
