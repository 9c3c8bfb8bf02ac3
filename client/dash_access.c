/* dash_access: loopback, or the daemon's token once and then a cookie. */
#include "dash_access.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A month: a researcher's browser on a shared dashboard. */
#define COOKIE_MAX_AGE_S 2592000

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
static int same_token(const char *a, const char *given, size_t given_len)
{
    size_t len = strlen(a);
    unsigned diff = (unsigned)(len ^ given_len);
    for (size_t i = 0; i < len; i++)
        diff |= (unsigned char)a[i] ^ (unsigned char)(i < given_len ? given[i] : 0);
    return len > 0 && diff == 0;
}

/* The value of the cookie BF_DASH_COOKIE in a Cookie header; length in
 * *len, NULL if absent. */
static const char *cookie_token(const char *cookies, size_t *len)
{
    size_t name_len = strlen(BF_DASH_COOKIE);
    for (const char *p = cookies; p && *p;) {
        p += strspn(p, " \t");
        size_t n = strcspn(p, ";");
        if (n > name_len && strncmp(p, BF_DASH_COOKIE, name_len) == 0
            && p[name_len] == '=') {
            *len = n - name_len - 1;
            return p + name_len + 1;
        }
        p += n + (p[n] == ';');
    }
    return NULL;
}

static int bearer_token(const bf_dash_access *a, const bf_http_request *req)
{
    const char *auth = bf_http_header(req, "Authorization");
    return auth && strncasecmp(auth, "Bearer ", 7) == 0
           && same_token(a->token, auth + 7, strlen(auth + 7));
}

/* Characters a redirect keeps: a local path and a query as browsers send
 * them.  Anything else ("//host", "\\", quotes) redirects to "/". */
static int safe_for_location(const char *s)
{
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789/_.-~%=&+,") == strlen(s);
}

/* Sets the cookie and redirects to the page asked for, without its token
 * parameter, so the token stays out of the address bar and history. */
static void set_cookie(const bf_dash_access *a, const bf_http_request *req,
                       bf_http_response *res)
{
    char location[1024] = "/";
    const char *path = req->path;
    if (path[0] == '/' && path[1] != '/' && safe_for_location(path)
        && safe_for_location(req->query)
        && strlen(path) + strlen(req->query) + 2 < sizeof location) {
        size_t len = (size_t)snprintf(location, sizeof location, "%s", path);
        char sep = '?';
        for (const char *p = req->query; *p;) {
            size_t n = strcspn(p, "&");
            if (n > 0 && !(n >= 6 && strncmp(p, "token=", 6) == 0)
                && !(n == 5 && strncmp(p, "token", 5) == 0)) {
                len += (size_t)snprintf(location + len, sizeof location - len,
                                        "%c%.*s", sep, (int)n, p);
                sep = '&';
            }
            p += n + (p[n] == '&');
        }
    }
    res->status = 303;
    res->content_type = "text/plain; charset=utf-8";
    res->static_body = "token accepted\n";
    res->body_len = strlen(res->static_body);
    bf_http_add_header(res, "Location: %s", location);
    bf_http_add_header(res, "Set-Cookie: %s=%s; Path=/; HttpOnly; "
                       "SameSite=Lax; Max-Age=%d", BF_DASH_COOKIE, a->token,
                       COOKIE_MAX_AGE_S);
}

int bf_dash_access_check(const bf_dash_access *a, const bf_http_request *req,
                         bf_http_response *res)
{
    if (bf_dash_is_loopback(req->peer)) {
        const char *host = bf_http_header(req, "Host");
        if (!host || host_is_loopback(host))
            return 1;
        bf_http_error(res, 403, "a connection on loopback must name a "
                      "loopback host (localhost, 127.0.0.1, [::1]); this "
                      "guards against DNS rebinding");
        return 0;
    }
    if (!a->token[0]) {
        bf_http_error(res, 403, "this dashboard serves loopback only");
        return 0;
    }
    size_t len = 0;
    const char *cookie = cookie_token(bf_http_header(req, "Cookie"), &len);
    if ((cookie && same_token(a->token, cookie, len)) || bearer_token(a, req))
        return 1;
    char given[BF_TOKEN_HEX_LEN + 2];
    if (bf_http_query_param(req->query, "token", given, sizeof given) > 0
        && same_token(a->token, given, strlen(given))) {
        set_cookie(a, req, res);
        return 0;
    }
    bf_http_error(res, 401, "the daemon's token is needed beyond loopback: "
                  "open this page once with ?token=TOKEN (TOKEN is in the "
                  "file DB.token beside the database), or send "
                  "'Authorization: Bearer TOKEN'");
    return 0;
}
