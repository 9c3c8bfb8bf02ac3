/* dash_access: who may read the dashboard (docs/dashboard.md, "Access").
 *
 * A peer on loopback may, without a token: it is on this machine, where
 * the database itself can be read.  Its Host header must name loopback too
 * (localhost, 127.x.y.z, [::1]; or be absent), so that a web page from
 * elsewhere cannot reach the dashboard through DNS rebinding.
 *
 * Any other peer needs the daemon's token (the file <db>.token), but the
 * token never leaves the request it comes in: it allows submitting,
 * cancelling and speaking as a worker, so it is neither stored by a
 * browser nor put where a browser keeps it.
 *   - A browser signs in once at /login: a form whose POST carries the
 *     token in its body (a URL would stay in the browser's history),
 *     answered by a 303 to the page it came for with a session cookie.
 *   - The cookie holds a session secret of this dashboard: random, made at
 *     sign-in, ending after the session's lifetime (then: sign in again),
 *     gone when the dashboard stops.  It is named after the dashboard's
 *     port (bifocal_session_PORT), since cookies are not kept per port:
 *     two dashboards in one browser keep theirs.  HttpOnly, SameSite=Lax,
 *     and Secure when the request came through a TLS proxy (which says so
 *     with X-Forwarded-Proto: https).
 *   - Scripts send `Authorization: Bearer TOKEN` with each request.
 * Without these: 401, the sign-in form for a page, a JSON error saying how
 * for the API; a token in the query (?token=) is refused the same way.
 * A refused request's connection is closed after the answer.  Tokens and
 * secrets are compared in constant time. */
#ifndef BF_DASH_ACCESS_H
#define BF_DASH_ACCESS_H

#include <stdint.h>

#include "http.h"
#include "wire.h"

#define BF_DASH_SESSION_HEX 64           /* 32 random bytes as hex */
#define BF_DASH_MAX_SESSIONS 256         /* then the oldest is replaced */
#define BF_DASH_SESSION_TTL_S (12 * 3600) /* a working day */
#define BF_DASH_MAX_SESSION_TTL_S (30 * 86400)

typedef struct bf_dash_session {
    /* private (dash_access.c) */
    char secret[BF_DASH_SESSION_HEX + 1]; /* "": a free slot */
    int64_t expires_ms;                   /* on bf_monotonic_ms() */
} bf_dash_session;

typedef struct bf_dash_access {
    /* read-only: set by bf_dash_access_init */
    char token[BF_TOKEN_HEX_LEN + 1];   /* "": loopback peers only */
    char cookie[32];                    /* the session cookie's name */
    int ttl_s;                          /* a session's lifetime */
    /* private */
    bf_dash_session sessions[BF_DASH_MAX_SESSIONS];
} bf_dash_access;

/* With the daemon's token ("" lets in loopback peers only; copied) and a
 * session lifetime in seconds.  The cookie is "bifocal_session" until
 * bf_dash_access_set_port names it. */
void bf_dash_access_init(bf_dash_access *a, const char *token, int ttl_s);

/* Names the session cookie after the port the dashboard listens on. */
void bf_dash_access_set_port(bf_dash_access *a, int port);

/* Whether addr is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x);
 * NULL is not. */
int bf_dash_is_loopback(const struct sockaddr *addr);

/* 1 when req may be answered (res->let_in set); 0 with res filled in:
 * 401 (no or a wrong token or session, or a token in the query; close
 * set), 403 (a Host that is not loopback on a loopback connection; close
 * set), the sign-in form (GET /login; close set) or 303 (a right token
 * posted to /login: the cookie and a redirect; let_in set). */
int bf_dash_access_check(bf_dash_access *a, const bf_http_request *req,
                         bf_http_response *res);

#endif
