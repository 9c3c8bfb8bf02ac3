/* client: the `bifocal` command-line client.  Each command is one entry of
 * bf_client_commands; adding a command is writing its function and adding a
 * line to that table (client.c). */
#ifndef BF_CLIENT_H
#define BF_CLIENT_H

#include "session.h"

typedef struct bf_client_command {
    const char *name;
    const char *usage;       /* arguments after the name, e.g. "FILE" */
    const char *help;        /* one paragraph for `bifocal NAME --help` */
    /* argv[0] is the command name; returns the process exit status. */
    int (*run)(bf_client *cl, int argc, char **argv);
} bf_client_command;

/* Terminated by an entry with name NULL. */
extern const bf_client_command bf_client_commands[];

#endif
