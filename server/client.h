/* client: the `bifocal` command-line client.  Each command is one entry of
 * bf_client_commands; adding a command is writing its function and adding a
 * line to that table (client.c). */
#ifndef BF_CLIENT_H
#define BF_CLIENT_H

#include <jansson.h>

#include "wire.h"

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

#endif
