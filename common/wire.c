#include "wire.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"

/* ---- frame reader --------------------------------------------------------- */

void bf_frame_reader_init(bf_frame_reader *r, size_t max_frame)
{
    memset(r, 0, sizeof *r);
    r->max_frame = max_frame ? max_frame : BF_WIRE_MAX_FRAME;
}

void bf_frame_reader_free(bf_frame_reader *r)
{
    free(r->buf);
    memset(r, 0, sizeof *r);
}

int bf_frame_reader_feed(bf_frame_reader *r, const char *data, size_t n)
{
    if (r->start == r->len)
        r->start = r->scan = r->len = 0;
    if (r->cap - r->len < n && r->start > 0) {
        /* Reclaim the consumed prefix before growing. */
        memmove(r->buf, r->buf + r->start, r->len - r->start);
        r->len -= r->start;
        r->scan -= r->start;
        r->start = 0;
    }
    if (r->cap - r->len < n) {
        /* Small to start with: most frames are a few hundred bytes, and
         * a connection that never sends a big one never holds a big
         * buffer. */
        size_t cap = r->cap ? r->cap : 4096;
        while (cap - r->len < n)
            cap *= 2;
        r->buf = bf_xrealloc(r->buf, cap);
        r->cap = cap;
    }
    memcpy(r->buf + r->len, data, n);
    r->len += n;
    return 0;
}

int bf_frame_reader_next(bf_frame_reader *r, const char **line, size_t *len)
{
    char *nl = r->scan < r->len
        ? memchr(r->buf + r->scan, '\n', r->len - r->scan) : NULL;
    if (!nl) {
        r->scan = r->len;
        return r->len - r->start >= r->max_frame ? -1 : 0;
    }
    size_t end = (size_t)(nl - r->buf);
    if (end - r->start + 1 > r->max_frame)
        return -1;
    *line = r->buf + r->start;
    *len = end - r->start;
    r->start = r->scan = end + 1;
    return 1;
}

/* ---- messages ------------------------------------------------------------- */

json_t *bf_wire_parse(const char *line, size_t len, bf_error *err)
{
    json_error_t jerr;
    json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!msg) {
        bf_error_set(err, NULL, 0, NULL, "malformed JSON at column %d: %s",
                     jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(msg)) {
        json_decref(msg);
        bf_error_set(err, NULL, 0, NULL, "a message must be a JSON object");
        return NULL;
    }
    if (!json_is_string(json_object_get(msg, "type"))) {
        json_decref(msg);
        bf_error_set(err, NULL, 0, "type",
                     "a message needs a string \"type\"");
        return NULL;
    }
    return msg;
}

char *bf_wire_encode(const json_t *msg, size_t *len)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    if (!text)
        return NULL;
    size_t n = strlen(text);
    char *frame = bf_xrealloc(text, n + 2);
    frame[n] = '\n';
    frame[n + 1] = '\0';
    if (len)
        *len = n + 1;
    return frame;
}

const char *bf_wire_type(const json_t *msg)
{
    const char *t = json_string_value(json_object_get(msg, "type"));
    return t ? t : "";
}

json_t *bf_wire_error(const char *code, const json_t *id, const bf_error *err,
                      const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    json_t *m = json_pack("{s:s, s:s, s:s}", "type", "error", "code", code,
                          "message", text);
    if (id)
        json_object_set(m, "id", (json_t *)id);
    if (err && err->file[0])
        json_object_set_new(m, "file", json_string(err->file));
    if (err && err->line > 0)
        json_object_set_new(m, "line", json_integer(err->line));
    if (err && err->field[0])
        json_object_set_new(m, "field", json_string(err->field));
    return m;
}

/* ---- helpers -------------------------------------------------------------- */

int bf_wire_parse_host_port(const char *s, char *host, size_t host_cap,
                            int *port, bf_error *err)
{
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (!colon || colon == s || (size_t)(colon - s) >= host_cap)
        return bf_error_set(err, NULL, 0, NULL,
                            "'%s' is not HOST:PORT", s ? s : "(null)");
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || p < 0 || p > 65535)
        return bf_error_set(err, NULL, 0, NULL,
                            "'%s': port must be a number 0..65535", s);
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    *port = (int)p;
    return 0;
}

int bf_wire_parse_listen(const char *host_port, struct sockaddr_storage *addr,
                         bf_error *err)
{
    char host[256];
    int port;
    if (bf_wire_parse_host_port(host_port, host, sizeof host, &port, err))
        return -1;
    memset(addr, 0, sizeof *addr);
    struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
    } else {
        return bf_error_set(err, NULL, 0, "listen",
                            "'%s' is not a numeric IPv4/IPv6 address", host);
    }
    return 0;
}

int bf_wire_addr_port(const struct sockaddr_storage *addr)
{
    return ntohs(addr->ss_family == AF_INET6
                 ? ((const struct sockaddr_in6 *)addr)->sin6_port
                 : ((const struct sockaddr_in *)addr)->sin_port);
}

/* Opens the token file after the checks ssh makes of a private key: a
 * regular file that only its owner may read or write. */
static FILE *open_token_file(const char *path, bf_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        bf_error_set(err, path, 0, NULL, "cannot read token file: %s",
                     strerror(errno));
        return NULL;
    }
    struct stat st;
    const char *why = NULL;
    char mode_text[64];
    if (fstat(fileno(f), &st) != 0) {
        why = strerror(errno);
    } else if (S_ISDIR(st.st_mode)) {
        why = "is a directory, not a token file";
    } else if (!S_ISREG(st.st_mode)) {
        why = "is not a regular file";
    } else if (st.st_mode & 077) {
        snprintf(mode_text, sizeof mode_text, "permissions %04o are too open",
                 (unsigned)(st.st_mode & 07777));
        why = mode_text;
    }
    if (why) {
        fclose(f);
        bf_error_set(err, path, 0, NULL, "token file %s%s", why,
                     why == mode_text ? ": the token must be readable by its "
                     "owner only (chmod 600)" : "");
        return NULL;
    }
    return f;
}

int bf_wire_read_token(const char *path, char *out, size_t cap, bf_error *err)
{
    FILE *f = open_token_file(path, err);
    if (!f)
        return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    if (n == sizeof buf - 1)
        return bf_error_set(err, path, 0, NULL, "token file is larger than "
                            "%zu bytes: it must hold one hex token",
                            sizeof buf - 2);
    buf[n] = '\0';
    char *p = buf + strspn(buf, " \t\r\n");
    size_t len = strspn(p, "0123456789abcdefABCDEF");
    const char *rest = p + len + strspn(p + len, " \t\r\n");
    if (*rest != '\0')
        return bf_error_set(err, path, 1, NULL, "token file must hold one "
                            "hex token and nothing else; found %s at byte "
                            "%zu", isprint((unsigned char)*rest)
                            ? "a non-hex character" : "a non-printable byte",
                            (size_t)(rest - buf) + 1);
    if (len < BF_TOKEN_MIN_HEX_LEN || len >= cap)
        return bf_error_set(err, path, 1, NULL, "token is %zu hex digits; "
                            "it must be %d to %zu (at least 128 bits)", len,
                            BF_TOKEN_MIN_HEX_LEN, cap - 1);
    memcpy(out, p, len);
    out[len] = '\0';
    return 0;
}
