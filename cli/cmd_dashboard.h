/* cmd_dashboard: `bifocal dashboard [--db FILE] [--listen HOST:PORT]
 * [--token-file FILE] [--port-file FILE] [--log-level LEVEL]
 * [--session-ttl SECONDS]`: the arguments of the command line, over the
 * server of dashboard/dashboard.c (docs/dashboard.md). */
#ifndef BF_CMD_DASHBOARD_H
#define BF_CMD_DASHBOARD_H

#include "session.h"

/* A bf_client_command (client.h). */
int bf_client_cmd_dashboard(bf_client *cl, int argc, char **argv);

#endif
