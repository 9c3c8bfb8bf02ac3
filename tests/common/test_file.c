/* common/file: atomic replacement leaves the old file or the complete new
 * one, never a temporary beside it; failures name the file and the cause. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "file.h"
#include "scratch.h"

/* Entries in dir other than . and .. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void assert_contents(const char *path, const char *want)
{
    size_t len = 0;
    bf_error err;
    char *got = bf_read_file(path, &len, &err);
    assert_non_null(got);
    assert_int_equal(len, strlen(want));
    assert_string_equal(got, want);
    free(got);
}

static void test_write_creates_and_replaces(void **state)
{
    scratch *s = *state;
    bf_error err;
    assert_int_equal(bf_write_file_atomic(s->path, "first\n", 6, &err), 0);
    assert_contents(s->path, "first\n");
    assert_int_equal(bf_write_file_atomic(s->path, "2\n", 2, &err), 0);
    assert_contents(s->path, "2\n");
    assert_int_equal(entries(s->dir), 1);   /* no temporary left behind */
}

/* Writes `old` to path, then starts replacing it by `new`, in two writes. */
static void start_replacing(bf_atomic_file *f, const char *path,
                            const char *old, const char *new)
{
    bf_error err;
    assert_int_equal(bf_write_file_atomic(path, old, strlen(old), &err), 0);
    assert_int_equal(bf_atomic_open(f, path, &err), 0);
    size_t half = strlen(new) / 2;
    assert_int_equal(bf_atomic_write(f, new, half, &err), 0);
    assert_int_equal(bf_atomic_write(f, new + half, strlen(new) - half, &err),
                     0);
}

/* Until commit, the destination keeps its old contents: a reader polling
 * for the file never sees a part of the new one. */
static void test_streamed_write_appears_at_commit(void **state)
{
    scratch *s = *state;
    bf_atomic_file f;
    start_replacing(&f, s->path, "old", "new contents");
    assert_contents(s->path, "old");
    bf_error err;
    assert_int_equal(bf_atomic_commit(&f, &err), 0);
    assert_contents(s->path, "new contents");
    assert_int_equal(entries(s->dir), 1);
}

static void test_abort_keeps_the_old_file(void **state)
{
    scratch *s = *state;
    bf_atomic_file f;
    start_replacing(&f, s->path, "kept", "dropped");
    assert_int_equal(entries(s->dir), 2);   /* the temporary, beside it */
    bf_atomic_abort(&f);
    bf_atomic_abort(&f);                    /* a second abort is a no-op */
    assert_contents(s->path, "kept");
    assert_int_equal(entries(s->dir), 1);
}

static void test_missing_directory_is_named(void **state)
{
    scratch *s = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/no-such-dir/target", s->dir);
    bf_error err;
    bf_error_clear(&err);
    assert_int_equal(bf_write_file_atomic(path, "x", 1, &err), -1);
    assert_non_null(strstr(err.file, "no-such-dir/target"));
    assert_non_null(strstr(err.msg, "cannot create"));
    assert_non_null(strstr(err.msg, "No such file or directory"));
}

/* A rename that fails (the destination is a non-empty directory) leaves
 * the destination as it was and removes the temporary. */
static void test_failed_rename_leaves_nothing(void **state)
{
    scratch *s = *state;
    assert_int_equal(mkdir(s->path, 0700), 0);
    char inner[160];
    snprintf(inner, sizeof inner, "%s/inner", s->path);
    bf_error err;
    assert_int_equal(bf_write_file_atomic(inner, "i", 1, &err), 0);
    bf_error_clear(&err);
    assert_int_equal(bf_write_file_atomic(s->path, "x", 1, &err), -1);
    assert_non_null(strstr(err.msg, "rename failed"));
    assert_string_equal(err.file, s->path);
    struct stat st;
    assert_int_equal(stat(s->path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_contents(inner, "i");
    assert_int_equal(entries(s->dir), 1);
}

static void test_overlong_path_is_refused(void **state)
{
    (void)state;
    char path[2048];
    memset(path, 'a', sizeof path - 1);
    path[sizeof path - 1] = '\0';
    bf_error err;
    bf_error_clear(&err);
    assert_int_equal(bf_write_file_atomic(path, "x", 1, &err), -1);
    assert_non_null(strstr(err.msg, "path too long"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_creates_and_replaces,
                                        scratch_setup, scratch_teardown),
        cmocka_unit_test_setup_teardown(test_streamed_write_appears_at_commit,
                                        scratch_setup, scratch_teardown),
        cmocka_unit_test_setup_teardown(test_abort_keeps_the_old_file,
                                        scratch_setup, scratch_teardown),
        cmocka_unit_test_setup_teardown(test_missing_directory_is_named,
                                        scratch_setup, scratch_teardown),
        cmocka_unit_test_setup_teardown(test_failed_rename_leaves_nothing,
                                        scratch_setup, scratch_teardown),
        cmocka_unit_test(test_overlong_path_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
