/* holders: one small table over all connections.  Live attempts number
 * about the worker groups, so a linear scan beats any index. */
#include "holders.h"

#include <stdlib.h>

#include "alloc.h"

static bf_held_attempt *find(const bf_holders *h, int64_t attempt_id)
{
    for (int i = 0; i < h->n; i++)
        if (h->v[i].attempt_id == attempt_id)
            return &h->v[i];
    return NULL;
}

struct bf_conn *bf_holders_holder(const bf_holders *h, int64_t attempt_id)
{
    bf_held_attempt *e = find(h, attempt_id);
    return e ? e->holder : NULL;
}

bf_held_attempt *bf_holders_held_by(bf_holders *h, const struct bf_conn *conn,
                                    int64_t attempt_id)
{
    bf_held_attempt *e = find(h, attempt_id);
    return e && e->holder == conn ? e : NULL;
}

bf_held_attempt *bf_holders_hold(bf_holders *h, struct bf_conn *conn,
                                 int64_t attempt_id, int64_t now_ms)
{
    bf_held_attempt *e = find(h, attempt_id);
    if (e && e->holder == conn)
        return e;
    if (!e) {
        if (h->n == h->cap) {
            h->cap = h->cap ? 2 * h->cap : 16;
            h->v = bf_xrealloc(h->v, (size_t)h->cap * sizeof *h->v);
        }
        e = &h->v[h->n++];
        e->attempt_id = attempt_id;
    }
    e->holder = conn;
    e->renewed_ms = now_ms;
    return e;
}

void bf_holders_release(bf_holders *h, const struct bf_conn *conn,
                        int64_t attempt_id)
{
    bf_held_attempt *e = bf_holders_held_by(h, conn, attempt_id);
    if (e)
        *e = h->v[--h->n];
}

void bf_holders_release_all(bf_holders *h, const struct bf_conn *conn)
{
    for (int i = 0; i < h->n;)
        if (h->v[i].holder == conn)
            h->v[i] = h->v[--h->n];
        else
            i++;
}

void bf_holders_free(bf_holders *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}
