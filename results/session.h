/* session: what the commands of `bifocal` (client.c) and `bifocal run`
 * (run.c) share: one connection to the daemon, requests over it, submitting
 * a sweep, printing rows of a reply (client/format.c), and parsing a
 * command's arguments.  Both build on this module; neither includes the
 * other.  Following a sweep is client/watch.c. */
#ifndef BF_SESSION_H
#define BF_SESSION_H

#include <stdint.h>
#include <jansson.h>

#include "args.h"
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
int bf_client_request(bf_client *cl, json_t *req, json_t **reply);

void bf_client_close(bf_client *cl);

/* Requests req (taken over) and prints the array under `key` of the reply
 * (bf_format_print_readable: JSON whole; a table or CSV without the config
 * and with readable times).  0 or 1. */
int bf_client_print_rows(bf_client *cl, json_t *req, const char *key,
                         bf_row_format fmt);

/* Submits the sweep file at path, with its folder (a relative init_from in
 * it is relative to that); strict: warnings reject it.  0 with the new
 * sweep's id and job count, after printing its warnings on stderr, or 1
 * after printing the server's refusal. */
int bf_client_submit(bf_client *cl, const char *path, int strict,
                     int64_t *sweep_id, int *n_jobs);

/* Parses the arguments of command argv[0] with common/args into options
 * and at most max_positional arguments in pos (bifocal.c has answered
 * --help before the command runs).  Returns how many positional arguments
 * there were, or -1 after printing what is wrong. */
int bf_client_args(const bf_option *options, const char **pos,
                   int max_positional, int argc, char **argv);

#endif
