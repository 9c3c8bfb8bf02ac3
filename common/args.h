/* args: the one command-line convention of bifocald, bifocal-worker and
 * bifocal (and each of bifocal's commands).
 *
 *   --name VALUE  or  --name=VALUE   an option with a value
 *   --name                           a flag
 *   --help  or  -h                   the caller's help
 *   --                               everything after it is positional
 *
 * Long names match exactly: unlike getopt_long, "--port" is not taken for
 * "--port-file", so an abbreviation or a typo is refused, with the list of
 * valid options, instead of silently meaning something else.  Options and
 * positional arguments may come in any order ("results 1 --format csv").
 *
 * A table of bf_option says where each value goes; numbers are checked
 * against their range, so "4294967297", "3x" or "" are refused the same way
 * everywhere instead of wrapping or being read as a prefix. */
#ifndef BF_ARGS_H
#define BF_ARGS_H

typedef enum {
    BF_OPT_STRING,  /* out: const char **, the value as given */
    BF_OPT_FLAG,    /* out: int *, set to 1; takes no value */
    BF_OPT_INT,     /* out: int *, a decimal integer in [min, max] */
} bf_opt_kind;

typedef struct bf_option {
    const char *name;   /* without the dashes: "port-file"; NULL ends a table */
    const char *value;  /* what the value is, for messages: "FILE" */
    bf_opt_kind kind;
    void *out;
    long min, max;      /* BF_OPT_INT only */
} bf_option;

#define BF_OPT_STR(name, value, out) { name, value, BF_OPT_STRING, out, 0, 0 }
#define BF_OPT_FLAG(name, out) { name, NULL, BF_OPT_FLAG, out, 0, 0 }
#define BF_OPT_INT(name, value, out, min, max) \
    { name, value, BF_OPT_INT, out, min, max }
#define BF_OPT_END { NULL, NULL, BF_OPT_STRING, NULL, 0, 0 }

typedef struct bf_args {
    /* public: filled by the caller */
    const char *prog;          /* starts every message: "bifocal status" */
    const bf_option *options;  /* ended by BF_OPT_END; NULL: none */
    const char **positional;   /* receives the positional arguments */
    int max_positional;        /* more than this is refused */
    int stop_at_positional;    /* the first positional argument (a command
                                  name) ends parsing; it and what follows
                                  are left to the caller from argv[rest] */
    int quiet;                 /* print nothing (e.g. MPI ranks but one) */
    /* read-only: set by bf_args_parse */
    int n_positional;
    int rest;                  /* argv index where parsing stopped */
} bf_args;

enum { BF_ARGS_OK = 0, BF_ARGS_HELP = 1, BF_ARGS_USAGE = 2 };

/* Parses argv[1..argc) (argv[0] is the program or command name) into the
 * outputs of a->options and a->positional.  Returns BF_ARGS_OK;
 * BF_ARGS_HELP at --help or -h (the caller prints its help, exits 0); or
 * BF_ARGS_USAGE after printing to stderr what is wrong (unknown option,
 * missing or unexpected value, number out of range, one positional
 * argument too many) and, for an option, the valid ones.  BF_ARGS_USAGE is
 * 2, the exit status of bad usage. */
int bf_args_parse(bf_args *a, int argc, char **argv);

#endif
