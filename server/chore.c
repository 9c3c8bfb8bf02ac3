/* chore: time-bounded slices of background work on the loop (chore.h). */
#include "chore.h"

#include <stdlib.h>

#include "alloc.h"
#include "clock.h"

struct bf_chore {
    bf_chore_slice_fn slice;
    bf_chore_done_fn done;
    void *ctx;
    bf_chore *next;
};

static bf_chore *pop(bf_chores *m)
{
    bf_chore *c = m->head;
    m->head = c->next;
    if (!m->head)
        m->tail = NULL;
    c->next = NULL;
    return c;
}

static void push(bf_chores *m, bf_chore *c)
{
    if (m->tail)
        m->tail->next = c;
    else
        m->head = c;
    m->tail = c;
}

/* One slice of the oldest chore per pass; it goes to the back. */
static void on_idle(uv_idle_t *h)
{
    bf_chores *m = h->data;
    bf_chore *c = pop(m);
    int rc = c->slice(c->ctx, bf_monotonic_us() + BF_CHORE_SLICE_US);
    if (rc == 1) {
        push(m, c);
        return;
    }
    if (!m->head)
        uv_idle_stop(&m->idle);
    c->done(c->ctx, rc);
    free(c);
}

void bf_chores_init(bf_chores *m, uv_loop_t *loop)
{
    m->head = m->tail = NULL;
    m->stopping = 0;
    uv_idle_init(loop, &m->idle);
    m->idle.data = m;
}

int bf_chores_start(bf_chores *m, bf_chore_slice_fn slice,
                    bf_chore_done_fn done, void *ctx)
{
    if (m->stopping)
        return -1;
    bf_chore *c = bf_xcalloc(1, sizeof *c);
    c->slice = slice;
    c->done = done;
    c->ctx = ctx;
    push(m, c);
    uv_idle_start(&m->idle, on_idle);
    return 0;
}

void bf_chores_stop(bf_chores *m)
{
    if (m->stopping)
        return;
    m->stopping = 1;
    uv_idle_stop(&m->idle);
    while (m->head) {
        bf_chore *c = pop(m);
        c->done(c->ctx, 1);
        free(c);
    }
    uv_close((uv_handle_t *)&m->idle, NULL);
}
