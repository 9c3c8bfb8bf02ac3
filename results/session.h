/* session: one connection to the daemon (a bf_client) and requests over
 * it, submitting a sweep among them: what the commands of `bifocal`
 * (cli/client.c), `bifocal run` (cli/run.c) and the results read through
 * the daemon (source.c) share.  A command's arguments and printing the
 * rows of a reply are the CLI's (cli/command.c, cli/client.c); following a
 * sweep is cli/watch.c. */
#ifndef BF_SESSION_H
#define BF_SESSION_H

#include <stdint.h>
#include <jansson.h>

#include "rpc.h"
#include "format.h"

typedef struct bf_client {
    /* public */
    const char *server;      /* HOST:PORT (option, env, or default) */
    const char *token_file;
    /* private */
    bf_rpc conn;       /* opened by the first request */
    int connected;
} bf_client;

/* Sends req (taken over: the caller's reference is dropped) and waits for
 * the reply.  0 with the reply in *reply (dropped if reply is NULL), or 1
 * after printing why (connection failure or the server's error). */
int bf_session_request(bf_client *cl, json_t *req, json_t **reply);

void bf_session_close(bf_client *cl);

/* Submits the sweep file at path, with its folder (a relative init_from in
 * it is relative to that); strict: warnings reject it.  0 with the new
 * sweep's id and job count, after printing its warnings on stderr, or 1
 * after printing the server's refusal. */
int bf_session_submit(bf_client *cl, const char *path, int strict,
                     int64_t *sweep_id, int *n_jobs);

#endif
