/* dashboard: the server of `bifocal dashboard [--db FILE] [--listen HOST:PORT]
 * [--token-file FILE] [--port-file FILE] [--log-level LEVEL]
 * [--session-ttl SECONDS]` (cli/cmd_dashboard.c): a live view
 * of the sweeps in a database, served over HTTP while the daemon and the
 * workers run (docs/dashboard.md).
 *
 * A separate process that opens the database read-only (WAL readers never
 * block the daemon's writer, and the daemon never blocks them), serves the
 * front-end of results/web/ (dashboard.html, which draws with report.js)
 * and the JSON API of dashboard/dash_api.c, lets in whom
 * dashboard/dash_access.c lets in, over the transport of dashboard/http.c. */
#ifndef BF_DASHBOARD_H
#define BF_DASHBOARD_H

#include <sqlite3.h>

#include "dash_access.h"
#include "dash_api.h"
#include "http.h"
#include "session.h"

#define BF_DASHBOARD_DEFAULT_LISTEN "127.0.0.1:8080"

/* What answers the dashboard's requests. */
typedef struct bf_dashboard {
    /* private */
    bf_dash_api *api;
    bf_dash_access access;
    char *page;                  /* the page, rendered once */
    size_t page_len;
} bf_dashboard;

/* Over db (read-only, BF_DB_DASHBOARD_VERSION; stays the caller's), named
 * db_path; token "" lets in loopback peers only; a browser's session
 * (dash_access.h) lasts session_ttl_s.  0, or -1 (printed). */
int bf_dashboard_init(bf_dashboard *d, sqlite3 *db, const char *db_path,
                      const char *token, int session_ttl_s);
void bf_dashboard_free(bf_dashboard *d);

/* A bf_http_handler (ctx: a bf_dashboard): access first, then GET or HEAD
 * of the page ("/", "/sweeps/N", "/jobs/N") or of the API ("/api/..."). */
void bf_dashboard_handle(void *ctx, const bf_http_request *req,
                         bf_http_response *res);

/* What `bifocal dashboard` serves, and where (its options). */
typedef struct bf_dashboard_opts {
    const char *db, *listen, *token_file, *port_file;
    int session_ttl_s;
} bf_dashboard_opts;

/* Opens o->db read-only and serves it on o->listen until SIGINT or
 * SIGTERM, reading the daemon's token when listening beyond loopback.
 * The process's exit status: 0, or 1 after printing why. */
int bf_dashboard_serve(const bf_dashboard_opts *o);

#endif
