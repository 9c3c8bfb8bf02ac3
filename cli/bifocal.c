/* bifocal: the command-line client.  Global options, then a command from
 * bf_client_commands (client.c), whose own options follow it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "args.h"
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

/* --help (or -h) anywhere among a command's options: its help, whatever
 * else is there. */
static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

/* Fills the global options of cl from the environment and the command
 * line; *command is the argv index of the command name (argc: none).
 * Returns BF_ARGS_OK, BF_ARGS_HELP or BF_ARGS_USAGE (message printed). */
static int parse_global_options(bf_client *cl, int argc, char **argv,
                                int *command)
{
    cl->server = getenv("BIFOCAL_SERVER");
    cl->token_file = getenv("BIFOCAL_TOKEN_FILE");
    if (!cl->server || !*cl->server)
        cl->server = BF_WIRE_DEFAULT_SERVER;
    if (!cl->token_file || !*cl->token_file)
        cl->token_file = "./bifocal.db.token";
    const bf_option options[] = {
        BF_OPT_STR("server", "HOST:PORT", &cl->server),
        BF_OPT_STR("token-file", "FILE", &cl->token_file),
        BF_OPT_END,
    };
    /* The command name ends the global options; its options are its own. */
    bf_args a = { .prog = "bifocal", .options = options,
                  .stop_at_positional = 1 };
    int rc = bf_args_parse(&a, argc, argv);
    *command = a.rest;
    return rc;
}

int main(int argc, char **argv)
{
    bf_alloc_init();
    bf_client cl = { 0 };
    int command;
    int rc = parse_global_options(&cl, argc, argv, &command);
    if (rc == BF_ARGS_HELP) {
        print_usage(stdout);
        return 0;
    }
    if (rc != BF_ARGS_OK)
        return rc;
    if (command >= argc) {
        print_usage(stderr);
        return 2;
    }
    const bf_client_command *cmd = find_command(argv[command]);
    if (!cmd) {
        fprintf(stderr, "bifocal: unknown command '%s'\n\n", argv[command]);
        print_usage(stderr);
        return 2;
    }
    int cargc = argc - command;
    char **cargv = argv + command;
    if (wants_help(cargc, cargv)) {
        printf("usage: bifocal %s %s\n\n%s\n", cmd->name, cmd->usage,
               cmd->help);
        return 0;
    }
    rc = cmd->run(&cl, cargc, cargv);
    bf_session_close(&cl);
    return rc;
}
