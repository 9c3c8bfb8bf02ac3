/* A hostile or unlucky day, on the real daemon over real sockets (issue
 * 11): peers that never say hello, floods of idle connections, token
 * guessing, log injection and amplification, an exhausted descriptor
 * table.  Source addresses other than 127.0.0.1 (127.0.0.2, ...) are other
 * peers to the daemon's per-address limits, so a test can be the attacker
 * and the honest client at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "clock.h"
#include "harness.h"

static void stop_and_clean(bft_daemon *d)
{
    assert_int_equal(bft_daemon_stop(d, SIGTERM), 0);
    bft_daemon_cleanup(d);
}

/* Lines of the daemon's log holding needle. */
static int log_lines_with(bft_daemon *d, const char *needle)
{
    FILE *f = fopen(d->log, "r");
    assert_non_null(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

static void send_hello(bf_wire_conn *c, const char *token)
{
    json_t *m = json_pack("{s:s, s:i, s:s, s:s}", "type", "hello", "version",
                          BF_WIRE_VERSION, "token", token, "role", "client");
    bf_error err;
    assert_int_equal(bf_wire_send(c, m, &err), 0);
    json_decref(m);
}

/* A hello with this token from src_ip is answered with an ack: 1, or with
 * an error: 0 (its code in code, 32 bytes). */
static int hello_from(bft_daemon *d, const char *src_ip, const char *token,
                      char *code)
{
    bf_wire_conn c;
    assert_int_equal(bft_connect_from(d, &c, src_ip), 0);
    send_hello(&c, token);
    bf_error err;
    json_t *r = bf_wire_recv(&c, 5000, &err);
    assert_non_null(r);
    int ok = strcmp(bf_wire_type(r), "ack") == 0;
    const char *got = json_string_value(json_object_get(r, "code"));
    snprintf(code, 32, "%s", got ? got : "");
    json_decref(r);
    bf_wire_close(&c);
    return ok;
}

/* ---- hello within the timeout ------------------------------------------- */

static void test_hello_timeout(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start_with(&d, 30, "--hello-timeout-ms",
                                           "300", NULL), 0);
    /* Silent: closed with `timeout` (it used to stay open for good). */
    bf_wire_conn c;
    int64_t t0 = bf_monotonic_ms();
    assert_int_equal(bft_connect(&d, &c, NULL, NULL), 0);
    assert_true(bft_refused_with(&c, "timeout"));
    int64_t took = bf_monotonic_ms() - t0;
    print_message("silent stranger closed after %lld ms\n", (long long)took);
    assert_true(took >= 250);   /* not before its time; how late is a figure */
    bf_wire_close(&c);

    /* A hello after the timeout comes too late. */
    assert_int_equal(bft_connect(&d, &c, NULL, NULL), 0);
    bf_sleep_ms(700);
    send_hello(&c, d.token);
    assert_true(bft_refused_with(&c, "timeout"));
    bf_wire_close(&c);

    /* An admitted connection may stay idle. */
    assert_int_equal(bft_connect(&d, &c, "client", NULL), 0);
    bf_sleep_ms(700);
    json_t *r = bft_request(&c, json_pack("{s:s}", "type", "workers"));
    assert_true(bft_reply_is(r, "workers"));
    bf_wire_close(&c);
    stop_and_clean(&d);
}

/* ---- caps on strangers ------------------------------------------------------ */

#define N_IDLE 8

static void open_idle(bft_daemon *d, bf_wire_conn *c, int n, const char *ip)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(bft_connect_from(d, &c[i], ip), 0);
}

static void close_all(bf_wire_conn *c, int n)
{
    for (int i = 0; i < n; i++)
        bf_wire_close(&c[i]);
}

static void test_strangers_capped(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start_with(&d, 30, "--max-strangers", "12",
                     "--max-strangers-per-addr", "5", NULL), 0);
    bf_wire_conn a[N_IDLE], b[N_IDLE], extra;
    char code[32];
    /* One address holds at most 5 strangers; others still get in. */
    open_idle(&d, a, 5, "127.0.0.2");
    assert_int_equal(bft_connect_from(&d, &extra, "127.0.0.2"), 0);
    assert_true(bft_refused_with(&extra, "overloaded"));
    bf_wire_close(&extra);
    assert_true(bft_serves_status(&d));
    /* At most 12 in all: the 13th stranger is refused, from anywhere. */
    open_idle(&d, b, 5, "127.0.0.3");
    open_idle(&d, b + 5, 2, "127.0.0.4");
    assert_int_equal(bft_connect_from(&d, &extra, "127.0.0.5"), 0);
    assert_true(bft_refused_with(&extra, "overloaded"));
    bf_wire_close(&extra);
    assert_int_equal(hello_from(&d, "127.0.0.1", d.token, code), 0);
    assert_string_equal(code, "overloaded");
    /* A client hears why (the refusal comes before its hello is read). */
    bf_error err;
    assert_int_equal(bf_wire_connect(&extra, d.addr, &err), 0);
    assert_int_equal(bf_wire_hello(&extra, d.token, "client", NULL, NULL, 1,
                                   &err), -1);
    assert_non_null(strstr(err.msg, "too many connections without a hello"));
    bf_wire_close(&extra);
    /* Admitted connections do not count: once the idle ones go, honest
     * peers get in again. */
    close_all(a, 5);
    bf_sleep_ms(200);
    assert_int_equal(hello_from(&d, "127.0.0.5", d.token, code), 1);
    assert_true(bft_serves_status(&d));
    close_all(b, 7);
    /* Refusals are logged at most once a second, not once each. */
    assert_true(log_lines_with(&d, "connections without a hello") <= 3);
    stop_and_clean(&d);
}

/* 1,100 idle connections from one address used to shut every client and
 * worker out (the descriptor table ran full).  With the default limits
 * they cost 64 descriptors; everyone else is served. */
#define N_FLOOD 1100
#define PER_ADDR 64    /* --max-strangers-per-addr's default */

static void test_idle_flood(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start(&d, 30), 0);
    bf_wire_conn *flood = calloc(N_FLOOD, sizeof *flood);
    int held = 0, refused = 0;
    for (int i = 0; i < N_FLOOD; i++) {
        assert_int_equal(bft_connect_from(&d, &flood[i], "127.0.0.9"), 0);
        if (i < PER_ADDR)
            continue;
        /* Beyond the per-address cap: one error line, then closed. */
        bf_error err;
        json_t *m = bf_wire_recv(&flood[i], 5000, &err);
        refused += m && strcmp(json_string_value(json_object_get(m, "code")),
                               "overloaded") == 0;
        json_decref(m);
        bf_wire_close(&flood[i]);
    }
    for (int i = 0; i < PER_ADDR; i++)
        held += flood[i].fd >= 0;
    print_message("flood: %d held, %d refused\n", held, refused);
    assert_int_equal(refused, N_FLOOD - PER_ADDR);
    assert_true(bft_serves_status(&d));
    bf_wire_conn w;
    assert_int_equal(bft_connect(&d, &w, "worker", "honest"), 0);
    bf_wire_close(&w);
    close_all(flood, N_FLOOD);
    free(flood);
    stop_and_clean(&d);
}

/* ---- failed hellos back off ------------------------------------------------- */

static void test_hello_backoff(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start_with(&d, 30, "--hello-failures", "3",
                                           NULL), 0);
    const char *wrong = "0123456789abcdef0123456789abcdef";
    char code[32];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(hello_from(&d, "127.0.0.6", wrong, code), 0);
        assert_string_equal(code, "auth");
    }
    /* The 4th failure started a 1 s back-off: even the right token is
     * refused from that address, without being looked at... */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(hello_from(&d, "127.0.0.6", d.token, code), 0);
        assert_string_equal(code, "backoff");
    }
    /* ...while other addresses are served. */
    assert_int_equal(hello_from(&d, "127.0.0.1", d.token, code), 1);
    /* Logged once for the whole back-off. */
    assert_int_equal(log_lines_with(&d, "127.0.0.6: 4 failed hellos"), 1);
    assert_int_equal(log_lines_with(&d, "refusing its connections"), 1);
    bf_sleep_ms(1100);
    assert_int_equal(hello_from(&d, "127.0.0.6", d.token, code), 1);
    /* The next failure doubles the back-off. */
    assert_int_equal(hello_from(&d, "127.0.0.6", wrong, code), 0);
    assert_int_equal(hello_from(&d, "127.0.0.6", d.token, code), 0);
    assert_string_equal(code, "backoff");
    assert_int_equal(log_lines_with(&d, "for 2 s (3 refused"), 1);
    stop_and_clean(&d);
}

/* ---- logs ----------------------------------------------------------------- */

static void test_log_lines_escaped(void **state)
{
    bft_daemon *d = *state;
    static const char forged[] = "\n2099-01-01T00:00:00.000Z ERROR forged";
    char name[96];
    snprintf(name, sizeof name, "evil%s", forged);
    bf_wire_conn c;
    assert_int_equal(bft_connect(d, &c, "worker", name), 0);
    char type[96];
    snprintf(type, sizeof type, "x%s\r\x1b[2J", forged);
    json_t *r = bft_request(&c, json_pack("{s:s}", "type", type));
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "code")),
                        "unknown_type");
    json_decref(r);
    bf_wire_close(&c);
    bf_sleep_ms(100);
    /* No line starts with the forged timestamp; both strings are there,
     * escaped. */
    FILE *f = fopen(d->log, "r");
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        assert_true(strncmp(line, "2099-", 5) != 0);
        assert_null(strchr(line, '\x1b'));
    }
    fclose(f);
    assert_true(log_lines_with(d, "evil\\n2099-01-01") >= 1);
    assert_true(log_lines_with(d, "x\\n2099-01-01T00:00:00.000Z ERROR "
                                  "forged\\r\\x1b[2J") >= 1);
}

static int64_t conn_serial_of_last(bft_daemon *d)
{
    FILE *f = fopen(d->log, "r");
    char line[4096];
    long long serial = -1;
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "conn ");
        if (p && strstr(line, "connected"))
            sscanf(p, "conn %lld", &serial);
    }
    fclose(f);
    return serial;
}

/* 3 MB of "{}\n" after a hello used to cost a million error replies and a
 * million log lines. */
static void test_protocol_errors_close(void **state)
{
    bft_daemon *d = *state;
    bf_wire_conn c;
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    int64_t serial = conn_serial_of_last(d);
    enum { N = 100000 };
    char *junk = malloc(3 * N);
    for (int i = 0; i < N; i++)
        memcpy(junk + 3 * i, "{}\n", 3);
    /* The daemon closes while we send: a failed send is expected. */
    bft_send_raw(&c, junk, 3 * N);
    free(junk);
    int bad_json = 0, closing = 0;
    bf_error err;
    json_t *m;
    while ((m = bf_wire_recv(&c, 5000, &err))) {
        const char *code = json_string_value(json_object_get(m, "code"));
        bad_json += code && strcmp(code, "bad_json") == 0;
        closing += code && strcmp(code, "too_many_errors") == 0;
        json_decref(m);
    }
    print_message("%d bad_json replies, then closed (%s)\n", bad_json,
                  err.msg);
    assert_int_equal(bad_json, 100);
    assert_int_equal(closing, 1);
    bf_wire_close(&c);
    bf_sleep_ms(100);
    /* Its log lines stayed within the connection's budget, and the rest
     * were counted. */
    char needle[64];
    snprintf(needle, sizeof needle, "conn %lld ", (long long)serial);
    int lines = log_lines_with(d, needle);
    print_message("%d log lines about the connection\n", lines);
    assert_true(lines <= 70);
    assert_true(log_lines_with(d, "log lines dropped") >= 1);

    /* Errors between good messages do not add up. */
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    for (int i = 0; i < 150; i++) {
        bft_send_raw(&c, "{}\n", 3);
        json_t *r = bft_request(&c, json_pack("{s:s}", "type", "workers"));
        assert_true(bft_reply_is(r, "workers"));
    }
    bf_wire_close(&c);
}

/* ---- buffers and descriptors ---------------------------------------------- */

static void test_small_frames_before_hello(void **state)
{
    bft_daemon *d = *state;
    bf_wire_conn c;
    assert_int_equal(bft_connect(d, &c, NULL, NULL), 0);
    char big[5000];
    memset(big, 'a', sizeof big);
    bft_send_raw(&c, big, sizeof big);
    assert_true(bft_refused_with(&c, "too_large"));
    bf_wire_close(&c);
    /* After the hello, big frames are fine. */
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    char *id = malloc(200001);
    memset(id, 'i', 200000);
    id[200000] = '\0';
    json_t *req = json_pack("{s:s, s:s}", "type", "workers", "id", id);
    bf_error err;
    assert_int_equal(bf_wire_send(&c, req, &err), 0);
    json_decref(req);
    json_t *r = bf_wire_recv(&c, 5000, &err);
    assert_string_equal(json_string_value(json_object_get(r, "id")), id);
    json_decref(r);
    free(id);
    bf_wire_close(&c);
}

/* "Max open files" of process pid: soft limit, or -1. */
static long long nofile_soft(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
    FILE *f = fopen(path, "r");
    long long soft = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Max open files", 14) == 0)
            sscanf(line + 14, "%lld", &soft);
    if (f)
        fclose(f);
    return soft;
}

static void test_descriptor_limit_raised(void **state)
{
    (void)state;
    struct rlimit mine;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &mine), 0);
    if (mine.rlim_max <= 256)
        fail_msg("the hard descriptor limit (%llu) leaves nothing to raise",
                 (unsigned long long)mine.rlim_max);
    /* The daemon inherits a soft limit of 256 and raises it. */
    struct rlimit low = { .rlim_cur = 256, .rlim_max = mine.rlim_max };
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    bft_daemon d;
    int rc = bft_daemon_start(&d, 30);
    setrlimit(RLIMIT_NOFILE, &mine);
    assert_int_equal(rc, 0);
    assert_int_equal(nofile_soft(d.pid), (long long)mine.rlim_max);
    stop_and_clean(&d);
}

static int open_descriptors(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *dir = opendir(path);
    int n = 0;
    while (dir && readdir(dir))
        n++;
    if (dir)
        closedir(dir);
    return n - 2;   /* . and .. */
}

/* Out of descriptors, accept sheds the new connections (libuv's reserve
 * descriptor: close it, accept, close, reopen) instead of spinning on a
 * listener it cannot drain; once connections go, service resumes. */
static void test_accept_survives_emfile(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start_with(&d, 30, "--max-strangers", "1000",
                     "--max-strangers-per-addr", "1000", NULL), 0);
    int used = open_descriptors(d.pid);
    struct rlimit tight = { .rlim_cur = (rlim_t)used + 6,
                            .rlim_max = (rlim_t)used + 6 };
    assert_int_equal(prlimit(d.pid, RLIMIT_NOFILE, &tight, NULL), 0);
    enum { N = 30 };
    bf_wire_conn c[N];
    int shed = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(bft_connect_from(&d, &c[i], "127.0.0.7"), 0);
        bf_error err;
        json_t *m = bf_wire_recv(&c[i], 300, &err);
        shed += !m && !strstr(err.msg, "timed out");
        json_decref(m);
    }
    print_message("%d descriptors in use, %d of %d connections shed\n",
                  used, shed, N);
    assert_true(shed >= N - 8);
    int status;
    assert_int_equal(waitpid(d.pid, &status, WNOHANG), 0);
    close_all(c, N);
    bf_sleep_ms(300);
    assert_true(bft_serves_status(&d));
    stop_and_clean(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello_timeout),
        cmocka_unit_test(test_strangers_capped),
        cmocka_unit_test(test_idle_flood),
        cmocka_unit_test(test_hello_backoff),
        BFT_DAEMON_TEST(test_log_lines_escaped),
        BFT_DAEMON_TEST(test_protocol_errors_close),
        BFT_DAEMON_TEST(test_small_frames_before_hello),
        cmocka_unit_test(test_descriptor_limit_raised),
        cmocka_unit_test(test_accept_survives_emfile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
