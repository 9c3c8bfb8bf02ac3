/* run: `bifocal run FILE [--db FILE] [--groups G] [--ranks N]
 *       [--checkpoint-dir DIR] [--lease-seconds S] [--dashboard HOST:PORT]
 *       [--no-dashboard]`, the embedded default: a daemon on a free
 * loopback port, G local mpirun worker groups of N ranks, a dashboard, the
 * sweep submitted, followed and reported, everything stopped again. */
#ifndef BF_RUN_H
#define BF_RUN_H

#include "session.h"

/* A bf_client_command: argv[0] is "run".  Returns the exit status. */
int bf_client_cmd_run(bf_client *cl, int argc, char **argv);

#endif
