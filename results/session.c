/* session: the connection to the daemon and the requests over it that the
 * commands and source.c share.  See session.h. */
#include "session.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "file.h"

#define BF_CLIENT_TIMEOUT_MS 60000
/* A sweep of a million jobs is expanded and stored in about a minute (the
 * daemon serves everyone else meanwhile). */
#define BF_SUBMIT_TIMEOUT_MS (10 * 60000)

/* ---- connection ----------------------------------------------------------- */

/* Connects and says hello as a client, once.  0 or -1 (message printed). */
static int session__connect(bf_client *cl)
{
    if (cl->connected)
        return 0;
    bf_error err;
    bf_error_clear(&err);
    char token[BF_TOKEN_HEX_LEN + 1];
    if (bf_wire_read_token(cl->token_file, token, sizeof token, &err)
        || bf_rpc_connect(&cl->conn, cl->server, &err)) {
        fprintf(stderr, "bifocal: %s\n", err.msg);
        return -1;
    }
    if (bf_rpc_hello(&cl->conn, token, "client", NULL, NULL, 0, &err)) {
        fprintf(stderr, "bifocal: server %s refused us: %s\n", cl->server,
                err.msg);
        bf_rpc_close(&cl->conn);
        return -1;
    }
    cl->connected = 1;
    return 0;
}

void bf_session_close(bf_client *cl)
{
    if (cl->connected)
        bf_rpc_close(&cl->conn);
    cl->connected = 0;
}

/* "bifocal: warning: ..." for each of a submission's warnings. */
static void session__print_warnings(const json_t *reply)
{
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(reply, "warnings"), i, w)
        fprintf(stderr, "bifocal: warning: %s\n", json_string_value(w));
}

/* The reply to req (stays the caller's), or NULL after printing why. */
static json_t *session__call(bf_client *cl, json_t *req, int timeout_ms)
{
    if (session__connect(cl))
        return NULL;
    bf_error err;
    bf_error_clear(&err);
    json_t *reply = bf_rpc_request(&cl->conn, req, timeout_ms, NULL, NULL,
                                    &err);
    if (!reply) {
        fprintf(stderr, "bifocal: %s: %s\n", cl->server, err.msg);
        return NULL;
    }
    if (strcmp(bf_wire_type(reply), "error") == 0) {
        fprintf(stderr, "bifocal: %s\n", err.msg);
        session__print_warnings(reply);   /* a strict submission's */
        json_decref(reply);
        return NULL;
    }
    return reply;
}

/* bf_session_request with a timeout of its own. */
static int session__request(bf_client *cl, json_t *req, int timeout_ms,
                            json_t **reply_out)
{
    json_t *reply = session__call(cl, req, timeout_ms);
    json_decref(req);
    if (!reply)
        return 1;
    if (reply_out)
        *reply_out = reply;
    else
        json_decref(reply);
    return 0;
}

int bf_session_request(bf_client *cl, json_t *req, json_t **reply_out)
{
    return session__request(cl, req, BF_CLIENT_TIMEOUT_MS, reply_out);
}

/* ---- submit -------------------------------------------------------------- */

/* The absolute folder of the file at path, into dir; -1 after printing. */
static int session__folder_of(const char *path, char *dir)
{
    char *copy = bf_xstrdup(path);
    const char *folder = dirname(copy);
    int ok = realpath(folder, dir) != NULL;
    if (!ok)
        fprintf(stderr, "bifocal: %s: %s\n", folder, strerror(errno));
    free(copy);
    return ok ? 0 : -1;
}

int bf_session_submit(bf_client *cl, const char *path, int strict,
                     int64_t *sweep_id, int *n_jobs)
{
    size_t len;
    bf_error err;
    char dir[PATH_MAX];
    if (session__folder_of(path, dir))
        return 1;
    char *text = bf_read_file(path, &len, &err);
    if (!text) {
        fprintf(stderr, "bifocal: %s\n", err.msg);
        return 1;
    }
    json_t *req = json_pack("{s:s, s:s, s:s%, s:s, s:b}", "type", "submit",
                            "filename", path, "text", text, len, "dir", dir,
                            "strict", strict);
    free(text);
    if (!req) {
        fprintf(stderr, "bifocal: %s is not valid UTF-8 text\n", path);
        return 1;
    }
    json_t *reply;
    if (session__request(cl, req, BF_SUBMIT_TIMEOUT_MS, &reply))
        return 1;
    session__print_warnings(reply);
    *sweep_id = json_integer_value(json_object_get(reply, "sweep_id"));
    *n_jobs = (int)json_integer_value(json_object_get(reply, "jobs"));
    json_decref(reply);
    return 0;
}
