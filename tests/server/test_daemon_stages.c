/* The wire side of stages, warnings and permanent errors, against the real
 * bifocald: submit's dir / strict fields and warnings in its reply,
 * job_failed's permanent flag, the waiting jobs of a staged sweep, and the
 * `bifocal submit` client printing warnings and refusing with --strict. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_worker.h"
#include "harness.h"

static const char useless_fraction[] =
    "name: w\ngrid:\n  rope: [rope, spectral]\n  spectral_fraction: [0.25]\n";

/* Sends a submit request with extra fields (stolen); returns the reply. */
static json_t *submit_with(bft_daemon *d, const char *text, json_t *extra)
{
    bf_rpc c;
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    json_t *req = json_pack("{s:s, s:s, s:s}", "type", "submit", "filename",
                            "w.yaml", "text", text);
    json_object_update(req, extra);
    json_decref(extra);
    json_t *reply = bft_request(&c, req);
    bf_rpc_close(&c);
    assert_non_null(reply);
    return reply;
}

static const char *code_of(const json_t *m)
{
    const char *code = json_string_value(json_object_get(m, "code"));
    return code ? code : "";
}

static void test_submit_warnings_and_strict(void **state)
{
    bft_daemon *d = *state;
    /* strict: refused with every warning, nothing stored */
    json_t *r = submit_with(d, useless_fraction, json_pack("{s:b}", "strict", 1));
    assert_string_equal(code_of(r), "invalid");
    assert_int_equal(json_array_size(json_object_get(r, "warnings")), 2);
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")),
                           "strict submission makes them errors"));
    json_decref(r);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM sweeps"), 0);
    /* not strict: taken, the warnings in the reply and the sweeps row */
    r = submit_with(d, useless_fraction, json_object());
    assert_string_equal(bf_wire_type(r), "ack");
    json_t *w = json_object_get(r, "warnings");
    assert_int_equal(json_array_size(w), 2);
    assert_non_null(strstr(json_string_value(json_array_get(w, 0)),
                           "w.yaml:4: field 'spectral_fraction': has no effect "
                           "with rope: rope"));
    json_decref(r);
    assert_int_equal(bft_sql_int(d, "SELECT json_array_length(warnings) FROM "
                                    "sweeps"), 2);
    /* a clean sweep gets an empty list */
    r = submit_with(d, "name: clean\n", json_object());
    assert_int_equal(json_array_size(json_object_get(r, "warnings")), 0);
    assert_true(json_is_array(json_object_get(r, "warnings")));
    json_decref(r);
    /* bad fields */
    r = submit_with(d, "name: x\n", json_pack("{s:s}", "strict", "yes"));
    assert_string_equal(code_of(r), "bad_message");
    json_decref(r);
    r = submit_with(d, "name: x\n", json_pack("{s:s}", "dir", "relative/dir"));
    assert_string_equal(code_of(r), "bad_message");
    json_decref(r);
}

/* A relative init_from is joined to dir; without dir it is refused. */
static void test_submit_dir(void **state)
{
    bft_daemon *d = *state;
    const char *text = "name: rel\nbase: {init_from: ck/a.safetensors}\n";
    json_t *r = submit_with(d, text, json_object());
    assert_string_equal(code_of(r), "invalid");
    assert_int_equal(json_integer_value(json_object_get(r, "line")), 2);
    json_decref(r);
    r = submit_with(d, text, json_pack("{s:s}", "dir", "/data/sweeps"));
    assert_true(bft_reply_is(r, "ack"));
    assert_int_equal(bft_sql_int(d, "SELECT json_extract(config, "
                                    "'$.init_from') = '/data/sweeps/ck/"
                                    "a.safetensors' FROM jobs"), 1);
}

/* job_failed with permanent: true fails the job on its first attempt; a
 * plain one re-queues it; a non-boolean permanent is refused. */
static void test_permanent_failure(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "p.yaml", "name: p\nmax_attempts: 3\nseeds: 2\n",
                           NULL, NULL) > 0);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "perm"), 0);
    int64_t job = 0, attempt = bft_worker_lease(&w, &job);
    assert_true(attempt > 0);
    json_t *r = bft_request(&w.conn, json_pack("{s:s, s:I, s:s, s:s}", "type",
                            "job_failed", "attempt_id", (json_int_t)attempt,
                            "error", "x", "permanent", "yes"));
    assert_string_equal(code_of(r), "bad_message");
    json_decref(r);
    r = bft_request(&w.conn, json_pack("{s:s, s:I, s:s, s:b}", "type",
                    "job_failed", "attempt_id", (json_int_t)attempt, "error",
                    "init_from /nope: cannot open", "permanent", 1));
    assert_true(bft_reply_is(r, "ack"));
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE job_id = %lld "
             "AND status = 'failed' AND attempts = 1", (long long)job);
    assert_int_equal(bft_sql_int(d, sql), 1);
    attempt = bft_worker_lease(&w, &job);
    assert_true(bft_reply_is(bft_worker_failed(&w, attempt, "crash"), "ack"));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE job_id = %lld "
             "AND status = 'queued'", (long long)job);
    assert_int_equal(bft_sql_int(d, sql), 1);
    bft_worker_close(&w);
}

/* A staged sweep: only sources are leased; the dependent gets the
 * source's final checkpoint as its config's init_from. */
static void test_waiting_jobs_over_the_wire(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "s.yaml", "name: s\nbase: {steps: 20, "
                           "warmup_steps: 0}\nstages:\n  - {name: a}\n"
                           "  - {name: b, base: {init_from: \"stage:a\"}}\n",
                           NULL, NULL) > 0);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "stager"), 0);
    int64_t job = 0, attempt = bft_worker_lease(&w, &job);
    assert_int_equal(job, 1);
    bft_worker other;
    assert_int_equal(bft_worker_connect(&other, d, "other"), 0);
    json_t *r = bft_worker_request_job(&other);   /* job 2 waits */
    assert_true(bft_reply_is(r, "no_job"));
    bft_worker_close(&other);
    assert_true(bft_reply_is(bft_worker_checkpoint(&w, attempt,
                             "/ck/job-1/step-000020.safetensors", 20), "ack"));
    assert_true(bft_reply_is(bft_worker_done(&w, attempt), "ack"));
    r = bft_worker_request_job(&w);
    assert_string_equal(bf_wire_type(r), "job");
    assert_int_equal(json_integer_value(json_object_get(r, "job_id")), 2);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r,
                        "config"), "init_from")),
                        "/ck/job-1/step-000020.safetensors");
    json_decref(r);
    bft_worker_close(&w);
}

/* `bifocal submit` prints the warnings; --strict refuses, listing them. */
static void test_client_warnings(void **state)
{
    bft_daemon *d = *state;
    const char *path = bft_write_file(d, "w.yaml", useless_fraction);
    char *out = NULL, *err = NULL;
    assert_int_equal(bft_run_client(d, &out, &err, "submit", path, "--strict",
                                    NULL), 1);
    assert_non_null(strstr(err, "strict submission makes them errors"));
    assert_non_null(strstr(err, "bifocal: warning: "));
    free(out);
    free(err);
    assert_int_equal(bft_run_client(d, &out, &err, "submit", path, NULL), 0);
    assert_non_null(strstr(out, "sweep 1: 2 jobs"));
    assert_non_null(strstr(err, "bifocal: warning: "));
    assert_non_null(strstr(err, "field 'spectral_fraction': has no effect with "
                                "rope: rope"));
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        BFT_DAEMON_TEST(test_submit_warnings_and_strict),
        BFT_DAEMON_TEST(test_submit_dir),
        BFT_DAEMON_TEST(test_permanent_failure),
        BFT_DAEMON_TEST(test_waiting_jobs_over_the_wire),
        BFT_DAEMON_TEST(test_client_warnings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
