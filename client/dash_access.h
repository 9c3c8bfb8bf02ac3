/* dash_access: who may read the dashboard (docs/dashboard.md, "Access").
 *
 * A peer on loopback may, without a token: it is on this machine, where
 * the database itself can be read.  Its Host header must name loopback too
 * (localhost, 127.x.y.z, [::1]; or be absent), so that a web page from
 * elsewhere cannot reach the dashboard through DNS rebinding.
 * Any other peer needs the daemon's token (the file <db>.token): once, as
 * ?token=TOKEN on any page, answered by a cookie and a redirect to the same
 * page without the token; then the cookie.  Scripts may send it as
 * `Authorization: Bearer TOKEN` instead.  Without it, or with a wrong one:
 * 401 with a JSON error saying how.  Tokens are compared in constant time. */
#ifndef BF_DASH_ACCESS_H
#define BF_DASH_ACCESS_H

#include "http.h"
#include "wire.h"

#define BF_DASH_COOKIE "bifocal_token"

typedef struct bf_dash_access {
    char token[BF_TOKEN_HEX_LEN + 1];   /* "": loopback peers only */
} bf_dash_access;

/* Whether addr is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x);
 * NULL is not. */
int bf_dash_is_loopback(const struct sockaddr *addr);

/* 1 when req may be answered; 0 with res filled in: 401 (no or a wrong
 * token), 403 (a Host that is not loopback on a loopback connection) or
 * 303 (a right ?token: the cookie and a redirect without it). */
int bf_dash_access_check(const bf_dash_access *a, const bf_http_request *req,
                         bf_http_response *res);

#endif
