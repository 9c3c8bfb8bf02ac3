/* command: what the commands of `bifocal` share on the command line:
 * parsing a command's arguments with common/args.  The commands of
 * client.c, cmd_results.c, cmd_dashboard.c and run.c build on it. */
#ifndef BF_COMMAND_H
#define BF_COMMAND_H

#include "args.h"

/* Parses the arguments of command argv[0] with common/args into options
 * and at most max_positional arguments in pos (bifocal.c has answered
 * --help before the command runs).  Returns how many positional arguments
 * there were, or -1 after printing what is wrong. */
int bf_command_args(const bf_option *options, const char **pos,
                    int max_positional, int argc, char **argv);

#endif
