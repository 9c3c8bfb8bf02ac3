/* client: the `bifocal` command-line client.  Each command is one entry of
 * bf_client_commands; adding a command is writing its function and adding a
 * line to that table (client.c). */
#ifndef BF_CLIENT_H
#define BF_CLIENT_H

#include <stdint.h>
#include <jansson.h>

#include "conn.h"

typedef struct bf_client {
    const char *server;      /* HOST:PORT (option, env, or default) */
    const char *token_file;
    bf_wire_conn conn;       /* opened by bf_client_connect */
    int connected;
} bf_client;

typedef struct bf_client_command {
    const char *name;
    const char *usage;       /* arguments after the name, e.g. "FILE" */
    const char *help;        /* one paragraph for `bifocal NAME --help` */
    /* argv[0] is the command name; returns the process exit status. */
    int (*run)(bf_client *cl, int argc, char **argv);
} bf_client_command;

/* Terminated by an entry with name NULL. */
extern const bf_client_command bf_client_commands[];

/* Connects and says hello as a client, once.  0 or -1 (message printed). */
int bf_client_connect(bf_client *cl);

/* Sends req (stays the caller's) and returns the reply, or NULL after
 * printing why (connection failure or the server's error) to stderr. */
json_t *bf_client_call(bf_client *cl, json_t *req);

void bf_client_close(bf_client *cl);

typedef enum { BF_FORMAT_TABLE, BF_FORMAT_CSV, BF_FORMAT_JSON } bf_row_format;

/* Submits the sweep file at path; 0 with the new sweep's id and job count,
 * or 1 after printing the server's refusal. */
int bf_client_submit(bf_client *cl, const char *path, int64_t *sweep_id,
                     int *n_jobs);

/* Follows a sweep until it ends, printing progress (a bar on a terminal).
 * tick (may be NULL) runs between polls; non-zero from it stops the watch
 * with status 1.  Returns 0 when the sweep ended. */
int bf_client_watch(bf_client *cl, int64_t sweep_id, int (*tick)(void *ctx),
                    void *ctx);

/* Prints the `results` rows of a sweep; 0 or 1. */
int bf_client_print_results(bf_client *cl, int64_t sweep_id,
                            bf_row_format fmt);

#endif
