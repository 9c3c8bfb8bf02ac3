/* scratch: a fresh directory under /tmp for each test, as cmocka setup and
 * teardown functions: *state is a scratch, removed with what the test
 * left in it. */
#ifndef BF_TEST_SCRATCH_H
#define BF_TEST_SCRATCH_H

#include <stdio.h>
#include <stdlib.h>

typedef struct scratch {
    char dir[64];
    char path[128];   /* dir/target: a file the test may make */
} scratch;

static int scratch_setup(void **state)
{
    scratch *s = calloc(1, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/bf-test.XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    snprintf(s->path, sizeof s->path, "%s/target", s->dir);
    *state = s;
    return 0;
}

static int scratch_teardown(void **state)
{
    scratch *s = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    int rc = system(cmd);
    free(s);
    return rc == 0 ? 0 : -1;
}

#endif
