/* The one option convention (common/args): exact long names, both value
 * spellings, flags, ranges, positional arguments, --help, and errors that
 * name the problem and list the valid options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "args.h"

/* The daemon's table: "port-file" is the option getopt_long's prefix
 * matching used to pick for "--port". */
typedef struct opts {
    const char *db, *port_file;
    int lease, verbose;
} opts;

typedef struct parsed {
    opts o;
    const char *pos[2];
    bf_args a;
    int rc;
    char err[1024];   /* what bf_args_parse printed on stderr */
} parsed;

/* Parses the NULL-terminated arguments after "prog" with stderr captured. */
static void parse(parsed *p, int max_positional, int stop, ...)
{
    char *argv[16] = { "prog" };
    int argc = 1;
    va_list ap;
    va_start(ap, stop);
    for (char *s; (s = va_arg(ap, char *)) && argc < 15;)
        argv[argc++] = s;
    va_end(ap);
    memset(p, 0, sizeof *p);
    p->o.lease = 30;
    const bf_option options[] = {
        BF_OPT_STR("db", "FILE", &p->o.db),
        BF_OPT_STR("port-file", "FILE", &p->o.port_file),
        BF_OPT_INT("lease-seconds", "N", &p->o.lease, 1, 604800),
        BF_OPT_FLAG("verbose", &p->o.verbose),
        BF_OPT_END,
    };
    p->a = (bf_args){ .prog = "prog", .options = options,
                      .positional = p->pos, .max_positional = max_positional,
                      .stop_at_positional = stop };
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(tmp), STDERR_FILENO);
    p->rc = bf_args_parse(&p->a, argc, argv);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(p->err, 1, sizeof p->err - 1, tmp);
    p->err[n] = '\0';
    fclose(tmp);
    p->a.options = NULL;   /* the table was on this frame */
}

static void test_both_value_spellings(void **state)
{
    (void)state;
    parsed p;
    parse(&p, 0, 0, "--db", "a.db", "--port-file=p", "--lease-seconds=7",
          "--verbose", NULL);
    assert_int_equal(p.rc, BF_ARGS_OK);
    assert_string_equal(p.o.db, "a.db");
    assert_string_equal(p.o.port_file, "p");
    assert_int_equal(p.o.lease, 7);
    assert_int_equal(p.o.verbose, 1);
    assert_string_equal(p.err, "");
    /* A value may itself look like an option, as with getopt. */
    parse(&p, 0, 0, "--db", "--verbose", NULL);
    assert_int_equal(p.rc, BF_ARGS_OK);
    assert_string_equal(p.o.db, "--verbose");
    assert_int_equal(p.o.verbose, 0);
    parse(&p, 0, 0, "--db=", NULL);
    assert_int_equal(p.rc, BF_ARGS_OK);
    assert_string_equal(p.o.db, "");
}

static void test_prefix_is_not_an_option(void **state)
{
    (void)state;
    parsed p;
    parse(&p, 0, 0, "--port", "9", NULL);
    assert_int_equal(p.rc, BF_ARGS_USAGE);
    assert_null(p.o.port_file);
    assert_non_null(strstr(p.err, "prog: unknown option '--port'"));
    assert_non_null(strstr(p.err, "valid options: --db FILE, --port-file "
                                  "FILE, --lease-seconds N, --verbose, "
                                  "--help"));
    parse(&p, 0, 0, "--port=9", NULL);
    assert_int_equal(p.rc, BF_ARGS_USAGE);
    assert_non_null(strstr(p.err, "unknown option '--port'"));
    parse(&p, 0, 0, "--dbx", "a", NULL);
    assert_int_equal(p.rc, BF_ARGS_USAGE);
    parse(&p, 0, 0, "-d", "a", NULL);
    assert_int_equal(p.rc, BF_ARGS_USAGE);
    assert_non_null(strstr(p.err, "unknown option '-d'"));
    parse(&p, 0, 0, "--help-me", NULL);
    assert_int_equal(p.rc, BF_ARGS_USAGE);
}

static void test_values_are_checked(void **state)
{
    (void)state;
    parsed p;
    const char *bad[] = { "0", "604801", "3x", "", "4294967297", "-1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        parse(&p, 0, 0, "--lease-seconds", bad[i], NULL);
        assert_int_equal(p.rc, BF_ARGS_USAGE);
        assert_int_equal(p.o.lease, 30);
        assert_non_null(strstr(p.err, "--lease-seconds"));
        assert_non_null(strstr(p.err, "from 1 to 604800"));
    }
    parse(&p, 0, 0, "--db", NULL);
    assert_int_equal(p.rc, BF_ARGS_USAGE);
    assert_non_null(strstr(p.err, "option '--db' needs a value FILE"));
    parse(&p, 0, 0, "--verbose=yes", NULL);
    assert_int_equal(p.rc, BF_ARGS_USAGE);
    assert_non_null(strstr(p.err, "option '--verbose' takes no value"));
}

static void test_help(void **state)
{
    (void)state;
    parsed p;
    parse(&p, 0, 0, "--help", NULL);
    assert_int_equal(p.rc, BF_ARGS_HELP);
    parse(&p, 0, 0, "--db", "x", "-h", NULL);
    assert_int_equal(p.rc, BF_ARGS_HELP);
    assert_string_equal(p.err, "");
    parse(&p, 0, 0, "--help=x", NULL);
    assert_int_equal(p.rc, BF_ARGS_USAGE);
}

static void test_positional(void **state)
{
    (void)state;
    parsed p;
    parse(&p, 2, 0, "one", "--db", "a", "two", NULL);
    assert_int_equal(p.rc, BF_ARGS_OK);
    assert_int_equal(p.a.n_positional, 2);
    assert_string_equal(p.pos[0], "one");
    assert_string_equal(p.pos[1], "two");
    parse(&p, 1, 0, "one", "two", NULL);
    assert_int_equal(p.rc, BF_ARGS_USAGE);
    assert_non_null(strstr(p.err, "prog: unexpected argument 'two'"));
    parse(&p, 0, 0, "one", NULL);
    assert_int_equal(p.rc, BF_ARGS_USAGE);
    /* After "--" and for "-" alone: positional, whatever they look like. */
    parse(&p, 2, 0, "--", "--verbose", "-", NULL);
    assert_int_equal(p.rc, BF_ARGS_OK);
    assert_int_equal(p.o.verbose, 0);
    assert_string_equal(p.pos[0], "--verbose");
    assert_string_equal(p.pos[1], "-");
}

static void test_stop_at_command(void **state)
{
    (void)state;
    parsed p;
    parse(&p, 0, 1, "--db", "a", "status", "--unknown", NULL);
    assert_int_equal(p.rc, BF_ARGS_OK);
    assert_int_equal(p.a.rest, 3);
    assert_string_equal(p.o.db, "a");
    parse(&p, 0, 1, "--db", "a", NULL);
    assert_int_equal(p.rc, BF_ARGS_OK);
    assert_int_equal(p.a.rest, 3);   /* == argc: no command */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_both_value_spellings),
        cmocka_unit_test(test_prefix_is_not_an_option),
        cmocka_unit_test(test_values_are_checked),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_positional),
        cmocka_unit_test(test_stop_at_command),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
