/* dash_access: loopback, or the daemon's token exchanged once for a session
 * of this dashboard (a cookie), or the token with each request. */
#include "dash_access.h"

#include "clock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

int bf_dash_is_loopback(const struct sockaddr *addr)
{
    if (!addr)
        return 0;
    if (addr->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (addr->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)addr)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a)
               || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

/* Whether a Host header names this machine's loopback: "localhost",
 * "127.0.0.1:8080", "[::1]:8080", ... */
static int host_is_loopback(const char *host)
{
    char name[64];
    size_t len;
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        len = end ? (size_t)(end - host - 1) : sizeof name;
        host++;
    } else {
        len = strcspn(host, ":");
    }
    if (len == 0 || len >= sizeof name)
        return 0;
    memcpy(name, host, len);
    name[len] = '\0';
    if (strcasecmp(name, "localhost") == 0)
        return 1;
    struct sockaddr_in v4 = { .sin_family = AF_INET };
    struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };
    if (inet_pton(AF_INET, name, &v4.sin_addr) == 1)
        return bf_dash_is_loopback((struct sockaddr *)&v4);
    if (inet_pton(AF_INET6, name, &v6.sin6_addr) == 1)
        return bf_dash_is_loopback((struct sockaddr *)&v6);
    return 0;
}

/* Constant-time: how long it takes says nothing of how much matched. */
static int same_secret(const char *a, const char *given, size_t given_len)
{
    size_t len = strlen(a);
    unsigned diff = (unsigned)(len ^ given_len);
    for (size_t i = 0; i < len; i++)
        diff |= (unsigned char)a[i] ^ (unsigned char)(i < given_len ? given[i] : 0);
    return len > 0 && diff == 0;
}

void bf_dash_access_init(bf_dash_access *a, const char *token, int ttl_s)
{
    memset(a, 0, sizeof *a);
    snprintf(a->token, sizeof a->token, "%s", token);
    snprintf(a->cookie, sizeof a->cookie, "bifocal_session");
    a->ttl_s = ttl_s;
}

void bf_dash_access_set_port(bf_dash_access *a, int port)
{
    snprintf(a->cookie, sizeof a->cookie, "bifocal_session_%d", port);
}

/* ---- sessions -------------------------------------------------------------- */

/* Whether value (len bytes) is a live session's secret.  Every slot is
 * compared, whatever matched. */
static int is_session(const bf_dash_access *a, const char *value, size_t len)
{
    int64_t now = bf_monotonic_ms();
    int found = 0;
    for (int i = 0; i < BF_DASH_MAX_SESSIONS; i++)
        found |= same_secret(a->sessions[i].secret, value, len)
                 & (now < a->sessions[i].expires_ms);
    return found;
}

/* Whether a cookie of this dashboard's name in the Cookie header holds a
 * live session (a browser may send several of one name: any will do). */
static int cookie_session(const bf_dash_access *a, const char *cookies)
{
    size_t name_len = strlen(a->cookie);
    int found = 0;
    for (const char *p = cookies; p && *p;) {
        p += strspn(p, " \t");
        size_t n = strcspn(p, ";");
        if (n > name_len && strncmp(p, a->cookie, name_len) == 0
            && p[name_len] == '=')
            found |= is_session(a, p + name_len + 1, n - name_len - 1);
        p += n + (p[n] == ';');
    }
    return found;
}

/* A new session's secret, in the slot that ends soonest (a free or an
 * ended one first).  NULL when no random bytes could be had. */
static const char *new_session(bf_dash_access *a)
{
    unsigned char bytes[BF_DASH_SESSION_HEX / 2];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes)
        return NULL;
    bf_dash_session *slot = &a->sessions[0];
    for (int i = 1; i < BF_DASH_MAX_SESSIONS; i++)
        if (a->sessions[i].expires_ms < slot->expires_ms)
            slot = &a->sessions[i];
    for (size_t i = 0; i < sizeof bytes; i++)
        snprintf(slot->secret + 2 * i, 3, "%02x", bytes[i]);
    slot->expires_ms = bf_monotonic_ms() + (int64_t)a->ttl_s * 1000;
    return slot->secret;
}

/* ---- answers ----------------------------------------------------------------- */

/* Room for the page a sign-in comes back to, with its NUL. */
#define TARGET_CAP 1024

#define NEEDS_TOKEN "Beyond loopback this dashboard needs the daemon's token."

/* Characters a redirect keeps: a local path and a query as browsers send
 * them.  Anything else ("//host", "\\", quotes) is not a target. */
static int safe_target(const char *s)
{
    return s[0] == '/' && s[1] != '/'
           && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                        "0123456789/_.-~%=&+,?") == strlen(s);
}

/* The page to go back to after signing in: the one asked for, else "/". */
static void page_asked(const bf_http_request *req, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s%s%s", req->path, *req->query ? "?" : "",
                     req->query);
    if (n < 0 || (size_t)n >= cap || !safe_target(out))
        snprintf(out, cap, "/");
}

/* The page a sign-in form names in its "next" parameter (params: the
 * query of GET /login or the body of POST /login; NULL: none), else "/". */
static void page_named(const char *params, char *out, size_t cap)
{
    if (bf_http_query_param(params, "next", out, cap) != 1
        || !safe_target(out))
        snprintf(out, cap, "/");
}

#define SIGN_IN_PAGE \
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">" \
    "<title>bifocal dashboard: sign in</title><style>body{font:15px " \
    "system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em}" \
    "input,button{font:inherit}code{background:#eee}</style></head><body>" \
    "<h1>bifocal dashboard</h1><p>%s</p>" \
    "<form method=\"post\" action=\"/login\">" \
    "<input type=\"hidden\" name=\"next\" value=\"%s\">" \
    "<label>Token <input type=\"password\" name=\"token\" " \
    "autocomplete=\"off\" autofocus required></label> " \
    "<button>Sign in</button></form>" \
    "<p>The token is the daemon's: the file <code>DB.token</code> beside " \
    "the database. It is sent once and not kept; this browser gets a " \
    "session of this dashboard instead.</p></body></html>\n"

/* The sign-in form (status 200 or 401) coming back to target, which
 * safe_target holds to (only '&' needs escaping in the attribute). */
static void sign_in_page(bf_http_response *res, int status, const char *why,
                         const char *target)
{
    char escaped[TARGET_CAP * 5 + 1];   /* each byte an "&amp;" at most */
    size_t k = 0;
    for (const char *p = target; *p && k + 6 < sizeof escaped; p++) {
        if (*p == '&') {
            memcpy(escaped + k, "&amp;", 5);
            k += 5;
        } else {
            escaped[k++] = *p;
        }
    }
    escaped[k] = '\0';
    free(res->body);
    res->status = status;
    res->content_type = "text/html; charset=utf-8";
    res->body = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&res->body, &size);
    fprintf(f, SIGN_IN_PAGE, why, escaped);
    fclose(f);
    res->body_len = size;
    bf_http_add_header(res, "Content-Security-Policy: default-src 'none'; "
                       "style-src 'unsafe-inline'; form-action 'self'; "
                       "frame-ancestors 'none'; base-uri 'none'");
    bf_http_add_header(res, "Referrer-Policy: no-referrer");
    res->close = 1;
}

/* Whether the request came through a proxy that speaks TLS to the
 * browser: the cookie must then never travel in plain HTTP. */
static int behind_tls(const bf_http_request *req)
{
    const char *proto = bf_http_header(req, "X-Forwarded-Proto");
    return proto && strcasecmp(proto, "https") == 0;
}

/* A refusal: res answers it, and the connection closes after; 0. */
static int refuse(bf_http_response *res, int status, const char *message)
{
    bf_http_error(res, status, message);
    res->close = 1;
    return 0;
}

/* POST /login: the token in a form's body exchanged for a session. */
static void sign_in(bf_dash_access *a, const bf_http_request *req,
                    bf_http_response *res)
{
    char token[BF_TOKEN_HEX_LEN + 2], target[TARGET_CAP];
    page_named(req->body, target, sizeof target);
    int given = bf_http_query_param(req->body, "token", token, sizeof token);
    if (given != 1 || !same_secret(a->token, token, strlen(token))) {
        sign_in_page(res, 401, given == 1 ? "That is not the daemon's token."
                     : "The form came without a token.", target);
        return;
    }
    const char *secret = new_session(a);
    if (!secret) {
        refuse(res, 500, "no random bytes for a session secret");
        return;
    }
    res->status = 303;
    res->content_type = "text/plain; charset=utf-8";
    res->static_body = "signed in\n";
    res->body_len = strlen(res->static_body);
    res->let_in = 1;
    bf_http_add_header(res, "Location: %s", target);
    bf_http_add_header(res, "Set-Cookie: %s=%s; Path=/; Max-Age=%d; HttpOnly; "
                       "SameSite=Lax%s", a->cookie, secret, a->ttl_s,
                       behind_tls(req) ? "; Secure" : "");
}

static int bearer_token(const bf_dash_access *a, const bf_http_request *req)
{
    const char *auth = bf_http_header(req, "Authorization");
    return auth && strncasecmp(auth, "Bearer ", 7) == 0
           && same_secret(a->token, auth + 7, strlen(auth + 7));
}

int bf_dash_access_check(bf_dash_access *a, const bf_http_request *req,
                         bf_http_response *res)
{
    if (bf_dash_is_loopback(req->peer)) {
        const char *host = bf_http_header(req, "Host");
        if (host && !host_is_loopback(host))
            return refuse(res, 403, "a connection on loopback must name a "
                          "loopback host (localhost, 127.0.0.1, [::1]); this "
                          "guards against DNS rebinding");
        res->let_in = 1;
        return 1;
    }
    if (!a->token[0])
        return refuse(res, 403, "this dashboard serves loopback only");
    if (strcmp(req->path, "/login") == 0) {
        if (strcmp(req->method, "POST") == 0) {
            sign_in(a, req, res);
        } else {
            char target[TARGET_CAP];
            page_named(req->query, target, sizeof target);
            sign_in_page(res, 200, NEEDS_TOKEN, target);
        }
        return 0;
    }
    if (cookie_session(a, bf_http_header(req, "Cookie"))
        || bearer_token(a, req)) {
        res->let_in = 1;
        return 1;
    }
    char target[TARGET_CAP], unused[2];
    const char *why =
        bf_http_query_param(req->query, "token", unused, sizeof unused)
        ? "A token in the address would stay in the browser's history: it "
          "is not accepted there. Sign in below instead."
        : NEEDS_TOKEN;
    if (strncmp(req->path, "/api/", 5) != 0) {
        page_asked(req, target, sizeof target);
        sign_in_page(res, 401, why, target);
        return 0;
    }
    return refuse(res, 401, "the daemon's token is needed beyond loopback: "
                  "sign in at /login (a browser; the token is in the file "
                  "DB.token beside the database), or send "
                  "'Authorization: Bearer TOKEN' with each request; a token "
                  "in the URL is not accepted");
}
