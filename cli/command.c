/* command: a command's arguments.  See command.h. */
#include "command.h"

#include <stdio.h>

int bf_command_args(const bf_option *options, const char **pos,
                    int max_positional, int argc, char **argv)
{
    char prog[64];
    snprintf(prog, sizeof prog, "bifocal %s", argv[0]);
    bf_args a = { .prog = prog, .options = options, .positional = pos,
                  .max_positional = max_positional };
    int rc = bf_args_parse(&a, argc, argv);
    if (rc == BF_ARGS_OK)
        return a.n_positional;
    /* BF_ARGS_HELP cannot come back: bifocal.c prints a command's help
     * when --help is among its arguments, before the command runs. */
    return -1;
}
