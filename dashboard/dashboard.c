/* dashboard: the server that `bifocal dashboard` (cli/cmd_dashboard.c)
 * runs, and the handler that routes each request to the page or the API
 * once access is granted. */
#include "dashboard.h"

#include "clock.h"
#include "db.h"
#include "file.h"
#include "log.h"
#include "stream.h"
#include "web_page.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* How often the page polls the API, in ms: new rows show within 2 s. */
#define BF_DASHBOARD_POLL_MS 1000

/* ---- answering ------------------------------------------------------------ */

/* "/", "/sweeps/N" and "/jobs/N" are the one page, which reads the path. */
static int is_page(const char *path)
{
    if (strcmp(path, "/") == 0)
        return 1;
    const char *id = strncmp(path, "/sweeps/", 8) == 0 ? path + 8
                     : strncmp(path, "/jobs/", 6) == 0 ? path + 6 : NULL;
    return id && *id && strspn(id, "0123456789") == strlen(id)
           && strlen(id) <= 18;
}

/* Whether path is printable ASCII, as every path served is (a byte
 * beyond is not percent-encoded, or not UTF-8 at all): else it names no
 * page, and it is not echoed into a JSON error, which must be UTF-8. */
static int is_ascii_path(const char *path)
{
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        if (*p <= ' ' || *p >= 0x7f)
            return 0;
    return 1;
}

static void answer_page(const bf_dashboard *d, bf_http_response *res)
{
    res->content_type = "text/html; charset=utf-8";
    res->static_body = d->page;
    res->body_len = d->page_len;
    /* Everything the page needs is inline; it talks to this server only. */
    bf_http_add_header(res, "Content-Security-Policy: default-src 'none'; "
                       "script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                       "img-src data: blob:; connect-src 'self'; "
                       "frame-ancestors 'none'; base-uri 'none'");
    bf_http_add_header(res, "Referrer-Policy: no-referrer");
}

static void answer_api(const bf_dashboard *d, const char *path,
                       const char *query, bf_http_response *res)
{
    res->status = bf_dash_api_get(d->api, path, query, &res->body);
    res->body_len = res->body ? strlen(res->body) : 0;
    if (!res->body)
        bf_http_error(res, 500, "the reply could not be encoded");
}

void bf_dashboard_handle(void *ctx, const bf_http_request *req,
                         bf_http_response *res)
{
    bf_dashboard *d = ctx;
    double t0 = bf_now_seconds();
    if (!bf_dash_access_check(&d->access, req, res)) {
        /* answered by the access check */
    } else if (!is_ascii_path(req->path)) {
        bf_http_error(res, 404, "no such page: the path holds bytes that are "
                      "not printable ASCII (percent-encode them)");
    } else if (strcmp(req->method, "GET") != 0
               && strcmp(req->method, "HEAD") != 0) {
        bf_http_error(res, 405, "read-only: only GET and HEAD are served");
        bf_http_add_header(res, "Allow: GET, HEAD");
    } else if (strncmp(req->path, "/api/", 5) == 0) {
        answer_api(d, req->path, req->query, res);
    } else if (is_page(req->path)) {
        answer_page(d, res);
    } else {
        bf_http_error(res, 404, "no such page (the dashboard serves /, "
                      "/sweeps/N, /jobs/N and /api/...)");
    }
    bf_log_debug("dashboard: %s %s -> %d (%.1f ms)", req->method, req->path,
                 res->status, 1000 * (bf_now_seconds() - t0));
}

int bf_dashboard_init(bf_dashboard *d, sqlite3 *db, const char *db_path,
                      const char *token, int session_ttl_s)
{
    *d = (bf_dashboard){ 0 };
    bf_dash_access_init(&d->access, token, session_ttl_s);
    json_t *config = json_pack("{s:i, s:s}", "poll_ms", BF_DASHBOARD_POLL_MS,
                               "db", db_path);
    FILE *out = open_memstream(&d->page, &d->page_len);
    int rc = bf_web_page_write(out, bf_web_dashboard_html, config);
    fclose(out);
    json_decref(config);
    if (rc) {
        bf_dashboard_free(d);
        return -1;
    }
    d->api = bf_dash_api_new(db, db_path);
    if (!d->api) {
        bf_dashboard_free(d);
        return -1;
    }
    return 0;
}

void bf_dashboard_free(bf_dashboard *d)
{
    bf_dash_api_free(d->api);
    free(d->page);
    *d = (bf_dashboard){ 0 };
}

/* ---- serving ------------------------------------------------------------- */

typedef struct dashboard_run {
    uv_loop_t loop;
    bf_http_server server;
    uv_signal_t sigint, sigterm;
} dashboard_run;

static void on_stop_signal(uv_signal_t *h, int signum)
{
    dashboard_run *r = h->data;
    bf_log_info("dashboard: received %s, stopping", strsignal(signum));
    bf_http_close(&r->server);
    uv_close((uv_handle_t *)&r->sigint, NULL);
    uv_close((uv_handle_t *)&r->sigterm, NULL);
}

/* Whether HOST of HOST:PORT is a loopback address (only loopback peers
 * can reach it, so no token is needed). */
static int listens_on_loopback(const char *listen)
{
    struct sockaddr_storage addr;
    bf_error err;
    return bf_wire_parse_listen(listen, &addr, &err) == 0
           && bf_dash_is_loopback((struct sockaddr *)&addr);
}

/* The daemon's token when the dashboard listens beyond loopback ("" on
 * loopback).  0, or -1 after saying why it cannot be read. */
static int read_token(const bf_dashboard_opts *o, char *token, size_t cap)
{
    token[0] = '\0';
    if (listens_on_loopback(o->listen))
        return 0;
    char fallback[PATH_MAX];
    snprintf(fallback, sizeof fallback, "%s.token", o->db);
    const char *path = o->token_file ? o->token_file : fallback;
    bf_error err;
    if (bf_wire_read_token(path, token, cap, &err) == 0)
        return 0;
    fprintf(stderr, "bifocal dashboard: listening on %s (beyond loopback) "
                    "needs the daemon's token: %s\n", o->listen, err.msg);
    return -1;
}

static int write_port(const char *path, int port)
{
    char line[16];
    int n = snprintf(line, sizeof line, "%d\n", port);
    bf_error err;
    if (bf_write_file_atomic(path, line, (size_t)n, &err) == 0)
        return 0;
    fprintf(stderr, "bifocal dashboard: %s\n", err.msg);
    return -1;
}

/* Listens and serves until SIGINT or SIGTERM. */
static int serve(bf_dashboard *d, const bf_dashboard_opts *o)
{
    dashboard_run r;
    uv_loop_init(&r.loop);
    bf_error err;
    if (bf_http_listen(&r.server, &r.loop, o->listen, bf_dashboard_handle, d,
                       &err)) {
        fprintf(stderr, "bifocal dashboard: %s\n", err.msg);
        uv_run(&r.loop, UV_RUN_DEFAULT);
        uv_loop_close(&r.loop);
        return 1;
    }
    bf_dash_access_set_port(&d->access, r.server.port);
    uv_signal_init(&r.loop, &r.sigint);
    uv_signal_init(&r.loop, &r.sigterm);
    r.sigint.data = r.sigterm.data = &r;
    uv_signal_start(&r.sigint, on_stop_signal, SIGINT);
    uv_signal_start(&r.sigterm, on_stop_signal, SIGTERM);
    char host[256];
    int port;
    bf_wire_parse_host_port(o->listen, host, sizeof host, &port, &err);
    int status = o->port_file && write_port(o->port_file, r.server.port);
    if (status) {
        bf_http_close(&r.server);
        uv_close((uv_handle_t *)&r.sigint, NULL);
        uv_close((uv_handle_t *)&r.sigterm, NULL);
    } else {
        printf("bifocal dashboard: http://%s%s%s:%d/ (%s, read-only)\n",
               strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
               r.server.port, o->db);
        fflush(stdout);
    }
    uv_run(&r.loop, UV_RUN_DEFAULT);
    uv_loop_close(&r.loop);
    return status;
}

int bf_dashboard_serve(const bf_dashboard_opts *o)
{
    /* Before any other libuv call: libuv allocates through common/alloc. */
    bf_stream_use_allocator();
    signal(SIGPIPE, SIG_IGN);
    char token[BF_TOKEN_HEX_LEN + 1];
    if (read_token(o, token, sizeof token))
        return 1;
    sqlite3 *db = bf_db_open(o->db, BF_DB_DASHBOARD_VERSION);
    if (!db)
        return 1;
    /* A reader never writes, whatever a bug might try. */
    sqlite3_exec(db, "PRAGMA query_only = 1", NULL, NULL, NULL);
    bf_dashboard d;
    int status = 1;
    if (bf_dashboard_init(&d, db, o->db, token, o->session_ttl_s) == 0) {
        status = serve(&d, o);
        bf_dashboard_free(&d);
    }
    sqlite3_close(db);
    return status;
}
