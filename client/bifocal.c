/* bifocal: the command-line client.  Global options, then a command from
 * bf_client_commands (client.c). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

static void print_usage(FILE *out)
{
    fputs("usage: bifocal [--server HOST:PORT] [--token-file FILE] COMMAND "
          "[ARGS]\n\n"
          "  --server HOST:PORT  daemon address (env BIFOCAL_SERVER, default "
          BF_WIRE_DEFAULT_SERVER ")\n"
          "  --token-file FILE   token of the daemon (env BIFOCAL_TOKEN_FILE, "
          "default ./bifocal.db.token)\n\ncommands:\n", out);
    for (const bf_client_command *c = bf_client_commands; c->name; c++)
        fprintf(out, "  %-8s %s\n", c->name, c->usage);
    fputs("\n`bifocal COMMAND --help` describes a command.\n", out);
}

static const bf_client_command *find_command(const char *name)
{
    for (const bf_client_command *c = bf_client_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "server", required_argument, NULL, 's' },
        { "token-file", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    bf_client cl = { 0 };
    cl.server = getenv("BIFOCAL_SERVER");
    cl.token_file = getenv("BIFOCAL_TOKEN_FILE");
    if (!cl.server || !*cl.server)
        cl.server = BF_WIRE_DEFAULT_SERVER;
    if (!cl.token_file || !*cl.token_file)
        cl.token_file = "./bifocal.db.token";
    int opt;
    /* "+": stop at the command name; its options are its own. */
    while ((opt = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (opt) {
        case 's': cl.server = optarg; break;
        case 't': cl.token_file = optarg; break;
        case 'h': print_usage(stdout); return 0;
        default: print_usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        print_usage(stderr);
        return 2;
    }
    const bf_client_command *cmd = find_command(argv[optind]);
    if (!cmd) {
        fprintf(stderr, "bifocal: unknown command '%s'\n\n", argv[optind]);
        print_usage(stderr);
        return 2;
    }
    int cargc = argc - optind;
    char **cargv = argv + optind;
    if (wants_help(cargc, cargv)) {
        printf("usage: bifocal %s %s\n\n%s\n", cmd->name, cmd->usage,
               cmd->help);
        return 0;
    }
    int rc = cmd->run(&cl, cargc, cargv);
    bf_client_close(&cl);
    return rc;
}
