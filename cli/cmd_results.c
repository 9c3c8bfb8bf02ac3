/* cmd_results: the result commands of `bifocal` (results, compare,
 * report): their arguments parsed and the source they name opened, then
 * what results/ prints or writes of it.  See cmd_results.h. */
#include "cmd_results.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "compare.h"
#include "format.h"
#include "report.h"
#include "results.h"
#include "source.h"

/* The options of the result commands (results, compare, report): the
 * SWEEP id and --db for all, the others where `allowed` has their bit. */
enum {
    BF_RESULT_OPT_FORMAT = 1, BF_RESULT_OPT_BY = 2, BF_RESULT_OPT_BASELINE = 4,
    BF_RESULT_OPT_OUTPUT = 8, BF_RESULT_OPT_JSON = 16,
    BF_RESULT_OPT_VERBOSE = 32
};
typedef struct bf_result_opts {
    int sweep;
    const char *db;             /* --db FILE, or NULL: the daemon */
    bf_row_format fmt;          /* --format */
    const char *by, *baseline;  /* --by, --baseline */
    const char *where;          /* --where */
    const char *output;         /* -o / --output */
    int json;                   /* --json */
    int verbose;                /* --verbose */
} bf_result_opts;

static int usage(const char *cmd, const char *text)
{
    fprintf(stderr, "bifocal %s: %s (see bifocal %s --help)\n", cmd, text,
            cmd);
    return 2;
}

/* -o FILE is --output FILE (the one short option, as the issue names it). */
static void expand_short_output(int argc, char **argv)
{
    static char output[] = "--output";
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-o") == 0)
            argv[i] = output;
}

static int parse_opts(int argc, char **argv, unsigned allowed,
                      bf_result_opts *o)
{
    const char *format = "table", *sweep = NULL;
    *o = (bf_result_opts){ .fmt = BF_FORMAT_TABLE };
    const bf_option all[] = {
        BF_OPT_STR("db", "FILE", &o->db),
        BF_OPT_STR("format", "table|csv|json", &format),
        BF_OPT_STR("where", "FIELD=VALUE[,...]", &o->where),
        BF_OPT_STR("by", "FIELD,...", &o->by),
        BF_OPT_STR("baseline", "FIELD=VALUE[,...]", &o->baseline),
        BF_OPT_STR("output", "FILE", &o->output),
        BF_OPT_FLAG("json", &o->json),
        BF_OPT_FLAG("verbose", &o->verbose),
    };
    static const unsigned bit[] = { 0, BF_RESULT_OPT_FORMAT, 0, BF_RESULT_OPT_BY,
                                    BF_RESULT_OPT_BASELINE,
                                    BF_RESULT_OPT_OUTPUT, BF_RESULT_OPT_JSON,
                                    BF_RESULT_OPT_VERBOSE };
    bf_option options[sizeof all / sizeof *all + 1];
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (bit[i] == 0 || (allowed & bit[i]))
            options[n++] = all[i];
    options[n] = (bf_option)BF_OPT_END;
    expand_short_output(argc, argv);
    int n_pos = bf_command_args(options, &sweep, 1, argc, argv);
    if (n_pos < 0)
        return 2;
    if (bf_format_parse(format, &o->fmt))
        return usage(argv[0], "--format is table, csv or json");
    char *end = NULL;
    long id = n_pos == 1 ? strtol(sweep, &end, 10) : 0;
    if (n_pos != 1 || !*sweep || *end || id < 1 || id > 2147483647)
        return usage(argv[0], "expected one SWEEP id (a positive integer)");
    o->sweep = (int)id;
    return 0;
}

/* Parses argv (argv[0]: the command) and opens the source it names (the
 * daemon of cl, or --db).  0; or the exit status after printing what is
 * wrong: 2 for bad usage, 1 for a file that cannot be read. */
static int command_start(bf_client *cl, int argc, char **argv,
                         unsigned allowed, bf_result_opts *o, bf_source *src)
{
    int rc = parse_opts(argc, argv, allowed, o);
    if (rc)
        return rc;
    return bf_source_open(src, cl, o->db) ? 1 : 0;
}

/* What each command does with its parsed options and open source: 0, or
 * 1 after printing why not. */
static int print_results(bf_source *src, bf_result_opts *o)
{
    return bf_results_print(src, o->sweep, o->where, o->fmt);
}

static int print_compare(bf_source *src, bf_result_opts *o)
{
    return bf_compare_print(src, o->sweep, o->by, o->where, o->baseline,
                            o->fmt, o->verbose);
}

static int write_report(bf_source *src, bf_result_opts *o)
{
    char fallback[64];
    if (!o->output) {
        snprintf(fallback, sizeof fallback, "bifocal-report-%d.%s", o->sweep,
                 o->json ? "json" : "html");
        o->output = fallback;
    }
    return bf_report_write(src, o->sweep, o->by, o->where, o->baseline,
                           o->output, o->json);
}

/* A result command: the options `allowed` has parsed, its source opened,
 * run done with them, the source closed.  The exit status. */
static int result_command(bf_client *cl, int argc, char **argv,
                          unsigned allowed,
                          int (*run)(bf_source *, bf_result_opts *))
{
    bf_result_opts o;
    bf_source src;
    int rc = command_start(cl, argc, argv, allowed, &o, &src);
    if (rc)
        return rc;
    int status = run(&src, &o);
    bf_source_close(&src);
    return status;
}

int bf_client_cmd_results(bf_client *cl, int argc, char **argv)
{
    return result_command(cl, argc, argv, BF_RESULT_OPT_FORMAT, print_results);
}

int bf_client_cmd_compare(bf_client *cl, int argc, char **argv)
{
    return result_command(cl, argc, argv, BF_RESULT_OPT_FORMAT
                          | BF_RESULT_OPT_BY | BF_RESULT_OPT_BASELINE
                          | BF_RESULT_OPT_VERBOSE, print_compare);
}

int bf_client_cmd_report(bf_client *cl, int argc, char **argv)
{
    return result_command(cl, argc, argv, BF_RESULT_OPT_OUTPUT
                          | BF_RESULT_OPT_JSON | BF_RESULT_OPT_BASELINE
                          | BF_RESULT_OPT_BY, write_report);
}
