/* Strangers cannot lock a token holder out (issue 15), on the real daemon
 * over real sockets.  The attacker and the token holder share one source
 * address here, 127.0.0.1, as users of one login node (or one NAT) do:
 * whatever the daemon holds against an address must never refuse a
 * connection that presents the right token.  Other addresses of
 * 127.0.0.0/8 are other peers to the per-address limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <cmocka.h>

#include "clock.h"
#include "fake_worker.h"
#include "harness.h"

#define HOLDER "127.0.0.1"     /* the token holder's address, and the attacker's */
#define PER_ADDR 64            /* --max-strangers-per-addr's default */
#define WRONG_TOKEN "0123456789abcdef0123456789abcdef"
/* Longer than any delay the daemon puts before answering a failed hello:
 * a safety net against a hang, not a bound on anything. */
#define ANSWER_WAIT_MS 30000

static void open_idle(bft_daemon *d, bf_rpc *c, int n, const char *ip)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(bft_connect_from(d, &c[i], ip), 0);
}

/* The hello of a token holder from HOLDER is acked (not refused). */
static void holder_admitted(bft_daemon *d)
{
    char code[32];
    int ok = bft_hello_from(d, HOLDER, d->token, 5000, code);
    if (!ok)
        fprintf(stderr, "the token holder's hello was refused: '%s'\n", code);
    assert_true(ok);
}

/* ---- a full cap makes room --------------------------------------------------- */

/* 1,100 idle connections from the token holder's own address used to lock
 * it out: past 64 each newcomer was refused, the holder too.  Now each
 * newcomer closes the address's oldest stranger (which hears `overloaded`),
 * so the daemon still holds 64 of them and the holder gets in. */
#define N_FLOOD 1100

static void test_idle_strangers_make_room(void **state)
{
    bft_daemon *d = *state;
    bf_rpc *flood = calloc(N_FLOOD, sizeof *flood);
    for (int i = 0; i < N_FLOOD; i++) {
        assert_int_equal(bft_connect_from(d, &flood[i], HOLDER), 0);
        if (i < PER_ADDR)
            continue;
        assert_true(bft_refused_with(&flood[i - PER_ADDR], "overloaded"));
        bf_rpc_close(&flood[i - PER_ADDR]);
    }
    holder_admitted(d);
    assert_true(bft_serves_status(d));
    bf_rpc w;
    assert_int_equal(bft_connect(d, &w, "worker", "honest"), 0);
    bf_rpc_close(&w);
    /* Evictions are logged, at most once a second rather than once each. */
    int lines = bft_log_lines_with(d, "to make room");
    print_message("%d evictions, %d log lines about them\n",
                  N_FLOOD - PER_ADDR + 3, lines);
    assert_true(lines >= 1);
    assert_true(lines < (N_FLOOD - PER_ADDR) / 10);
    bft_close_all(flood, N_FLOOD);
    free(flood);
}

/* The overall cap makes room the same way: the oldest stranger of all
 * goes, whichever address it came from. */
static void test_overall_cap_makes_room(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start_with(&d, 30, "--max-strangers", "12",
                     "--max-strangers-per-addr", "5", NULL), 0);
    bf_rpc a[5], b[7], extra, late;
    open_idle(&d, a, 5, "127.0.0.2");
    /* A 6th from .2 closes .2's oldest. */
    assert_int_equal(bft_connect_from(&d, &extra, "127.0.0.2"), 0);
    assert_true(bft_refused_with(&a[0], "overloaded"));
    /* 12 in all; the 13th, from elsewhere, closes the oldest of all. */
    open_idle(&d, b, 5, "127.0.0.3");
    open_idle(&d, b + 5, 2, "127.0.0.4");
    assert_int_equal(bft_connect_from(&d, &late, "127.0.0.5"), 0);
    assert_true(bft_refused_with(&a[1], "overloaded"));
    /* The token holder gets in at a full cap (closing a[2]). */
    holder_admitted(&d);
    assert_true(bft_refused_with(&a[2], "overloaded"));
    assert_true(bft_serves_status(&d));
    bft_close_all(a, 5);
    bft_close_all(b, 7);
    bf_rpc_close(&extra);
    bf_rpc_close(&late);
    assert_int_equal(bft_stop_and_clean(&d), 0);
}

/* ---- failed hellos delay only their own answers ----------------------------- */

/* Failed hellos of an address (wrong tokens, silence past the hello
 * timeout) used to refuse all its connections, the right token too, for
 * up to 5 min.  Now they only delay the answers of further failed hellos:
 * a token holder of that address is admitted, and each wrong hello still
 * hears `auth` in the end. */
#define N_WRONG 20
#define N_SILENT 6

static void test_failed_hellos_only_delay(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start_with(&d, 30, "--hello-failures", "3",
                     "--hello-timeout-ms", "300", NULL), 0);
    bf_rpc wrong[N_WRONG], silent[N_SILENT];
    for (int i = 0; i < N_WRONG; i++) {
        assert_int_equal(bft_connect_from(&d, &wrong[i], HOLDER), 0);
        bft_send_hello(&wrong[i], WRONG_TOKEN);
    }
    open_idle(&d, silent, N_SILENT, HOLDER);
    holder_admitted(&d);
    for (int i = 0; i < N_WRONG; i++) {
        bf_error err;
        json_t *m = bf_rpc_recv(&wrong[i], ANSWER_WAIT_MS, &err);
        assert_non_null(m);
        assert_string_equal(json_string_value(json_object_get(m, "code")),
                            "auth");
        json_decref(m);
    }
    for (int i = 0; i < N_SILENT; i++) {
        bf_error err;
        json_t *m = bf_rpc_recv(&silent[i], ANSWER_WAIT_MS, &err);
        assert_non_null(m);
        assert_string_equal(json_string_value(json_object_get(m, "code")),
                            "timeout");
        json_decref(m);
    }
    /* After all 26 failures, still admitted at once. */
    holder_admitted(&d);
    assert_true(bft_serves_status(&d));
    /* The delay is logged when it grows, not once per failure. */
    int lines = bft_log_lines_with(&d, "failed hellos; answering");
    print_message("%d log lines about the delay\n", lines);
    assert_true(lines >= 1 && lines <= 5);
    bft_close_all(wrong, N_WRONG);
    bft_close_all(silent, N_SILENT);
    assert_int_equal(bft_stop_and_clean(&d), 0);
}

/* A worker group whose connection dropped while strangers of its address
 * failed hellos and filled the cap used to be refused for 60 s, and its
 * lease expired.  It reconnects at once and its attempt lives on. */
static void test_worker_reconnects_at_once(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "s.yaml", "name: s\nseeds: 2\n", NULL,
                           NULL) > 0);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "group-1"), 0);
    int64_t attempt = bft_worker_lease(&w, NULL);
    assert_true(attempt > 0);
    bft_worker_close(&w);       /* the connection drops */

    bf_rpc idle[PER_ADDR + 6], wrong[N_WRONG];
    open_idle(d, idle, PER_ADDR + 6, HOLDER);
    for (int i = 0; i < N_WRONG; i++) {
        assert_int_equal(bft_connect_from(d, &wrong[i], HOLDER), 0);
        bft_send_hello(&wrong[i], WRONG_TOKEN);
    }
    assert_int_equal(bft_worker_connect(&w, d, "group-1"), 0);
    assert_true(bft_reply_is(bft_worker_heartbeat(&w, attempt), "ack"));
    assert_true(bft_reply_is(bft_worker_done(&w, attempt), "ack"));
    bft_worker_close(&w);
    bft_close_all(idle, PER_ADDR + 6);
    bft_close_all(wrong, N_WRONG);
}

/* ---- a hello that waited while the daemon was busy -------------------------- */

/* While the daemon is stopped (a busy loop, to it), connections queue in
 * the kernel: 200 idle ones, the token holder's with its hello sent, then
 * 200 more idle ones.  The daemon accepts them in one burst, and the 200
 * after the holder's would close it as the oldest stranger before its
 * hello was read; what a stranger sent is read before it can be closed,
 * so the holder is admitted.  Its daemon is its own, not the fixture's:
 * a failed assertion while the daemon is stopped must not leave a
 * teardown waiting for it to exit on SIGTERM. */
#define N_AROUND 200

static void test_hello_waiting_in_backlog(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start(&d, 30), 0);
    bf_rpc *before = calloc(N_AROUND, sizeof *before);
    bf_rpc *after = calloc(N_AROUND, sizeof *after);
    bf_rpc holder;
    assert_int_equal(kill(d.pid, SIGSTOP), 0);
    open_idle(&d, before, N_AROUND, HOLDER);
    assert_int_equal(bft_connect_from(&d, &holder, HOLDER), 0);
    bft_send_hello(&holder, d.token);
    open_idle(&d, after, N_AROUND, HOLDER);
    assert_int_equal(kill(d.pid, SIGCONT), 0);
    bf_error err;
    json_t *r = bf_rpc_recv(&holder, 5000, &err);
    if (!r)
        fprintf(stderr, "no answer to the holder's hello: %s\n", err.msg);
    assert_true(bft_reply_is(r, "ack"));
    bf_rpc_close(&holder);
    bft_close_all(before, N_AROUND);
    bft_close_all(after, N_AROUND);
    free(before);
    free(after);
    assert_int_equal(bft_stop_and_clean(&d), 0);
}

/* ---- strangers cannot flood the log ----------------------------------------- */

/* No stranger is turned away unheard any more, and each connection's log
 * lines (connected, refused, closed) used to have a budget of their own,
 * so a flood of connections logged without bound.  A stranger's lines are
 * charged to its address: 500 wrong hellos log no more than one
 * connection's budget allows over the time they took (its burst, then a
 * rate; each line let through may follow one saying how many were
 * dropped). */
#define N_LOGGED 500
#define LOG_BURST 50      /* BF_CONN_LOG_BURST */
#define LOG_PER_S 10      /* BF_CONN_LOG_PER_S */

static void test_strangers_cannot_flood_the_log(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start_with(&d, 30, "--hello-failures", "0",
                                           NULL), 0);
    int64_t t0 = bf_monotonic_ms();
    char code[32];
    for (int i = 0; i < N_LOGGED; i++) {
        assert_int_equal(bft_hello_from(&d, "127.0.0.7", WRONG_TOKEN, 5000,
                                        code), 0);
        assert_string_equal(code, "auth");
    }
    /* The next line the budget lets through (it refills 1 line per
     * 1000 / LOG_PER_S ms) says how many were dropped. */
    bf_sleep_ms(3 * 1000 / LOG_PER_S);
    assert_int_equal(bft_hello_from(&d, "127.0.0.7", WRONG_TOKEN, 5000, code),
                     0);
    double seconds = (double)(bf_monotonic_ms() - t0) / 1000.0 + 1;
    assert_true(bft_serves_status(&d));
    int lines = bft_log_lines_with(&d, "127.0.0.7");
    double allowed = 2 * (LOG_BURST + LOG_PER_S * seconds);
    print_message("%d wrong hellos in %.1f s: %d log lines (budget %.0f)\n",
                  N_LOGGED, seconds - 1, lines, allowed);
    assert_true(lines <= allowed);
    assert_true(bft_log_lines_with(&d, "strangers of 127.0.0.7: ") >= 1);
    assert_int_equal(bft_stop_and_clean(&d), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        BFT_DAEMON_TEST(test_idle_strangers_make_room),
        cmocka_unit_test(test_overall_cap_makes_room),
        cmocka_unit_test(test_failed_hellos_only_delay),
        BFT_DAEMON_TEST(test_worker_reconnects_at_once),
        cmocka_unit_test(test_hello_waiting_in_backlog),
        cmocka_unit_test(test_strangers_cannot_flood_the_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
