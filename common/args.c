#include "args.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses all of s as a decimal integer in [min, max] into *out.
 * Returns 0, or -1 (leaving *out alone) on anything else. */
static int args__parse_int(const char *s, long min, long max, int *out)
{
    if (!s || !*s || max > INT_MAX || min < INT_MIN)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

/* Prints "prog: " and the message; with list_options, then every valid
 * option with its value: what to type instead.  Returns BF_ARGS_USAGE. */
__attribute__((format(printf, 3, 4)))
static int args__error(const bf_args *a, int list_options, const char *fmt,
                       ...)
{
    if (a->quiet)
        return BF_ARGS_USAGE;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", a->prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (!list_options)
        return BF_ARGS_USAGE;
    fprintf(stderr, "valid options:");
    for (const bf_option *o = a->options; o && o->name; o++)
        fprintf(stderr, " --%s%s%s,", o->name, o->value ? " " : "",
                o->value ? o->value : "");
    fprintf(stderr, " --help\n");
    return BF_ARGS_USAGE;
}

static const bf_option *args__find(const bf_args *a, const char *name,
                                   size_t len)
{
    for (const bf_option *o = a->options; o && o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

/* Stores the value of option o; 0 or BF_ARGS_USAGE. */
static int args__store(const bf_args *a, const bf_option *o,
                       const char *value)
{
    switch (o->kind) {
    case BF_OPT_STRING:
        *(const char **)o->out = value;
        return 0;
    case BF_OPT_FLAG:
        *(int *)o->out = 1;
        return 0;
    case BF_OPT_INT:
        if (args__parse_int(value, o->min, o->max, o->out) == 0)
            return 0;
        return args__error(a, 0, "--%s: '%s' is not a number from %ld to %ld",
                           o->name, value, o->min, o->max);
    }
    return BF_ARGS_USAGE;
}

/* argv[*i] is "--name" or "--name=value"; consumes it (and its value). */
static int args__option(bf_args *a, int argc, char **argv, int *i)
{
    const char *name = argv[*i] + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    if (len == 4 && strncmp(name, "help", 4) == 0 && !eq)
        return BF_ARGS_HELP;
    const bf_option *o = args__find(a, name, len);
    if (!o)
        return args__error(a, 1, "unknown option '--%.*s'", (int)len,
                                   name);
    if (o->kind == BF_OPT_FLAG) {
        if (eq)
            return args__error(a, 1, "option '--%s' takes no value",
                                      o->name);
        return args__store(a, o, NULL);
    }
    if (eq)
        return args__store(a, o, eq + 1);
    if (*i + 1 >= argc)
        return args__error(a, 1, "option '--%s' needs a value %s",
                                  o->name, o->value);
    return args__store(a, o, argv[++*i]);
}

int bf_args_parse(bf_args *a, int argc, char **argv)
{
    a->n_positional = 0;
    int only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        a->rest = i;
        int positional = only_positional || arg[0] != '-' || !arg[1];
        if (!positional && strcmp(arg, "--") == 0) {
            only_positional = 1;
            continue;
        }
        if (positional) {
            if (a->stop_at_positional)
                return BF_ARGS_OK;
            if (a->n_positional >= a->max_positional)
                return args__error(a, 0, "unexpected argument '%s'", arg);
            a->positional[a->n_positional++] = arg;
            continue;
        }
        if (strcmp(arg, "-h") == 0)
            return BF_ARGS_HELP;
        if (arg[1] != '-')
            return args__error(a, 1, "unknown option '%s'", arg);
        int rc = args__option(a, argc, argv, &i);
        if (rc != 0)
            return rc;
    }
    a->rest = argc;
    return BF_ARGS_OK;
}
