/* stream_conn: connections, their set and its timer, the linger; see
 * stream_conn.h. */
#include "stream_conn.h"

#include <stdlib.h>

#include "alloc.h"
#include "clock.h"

static void stream__on_closed(uv_handle_t *h)
{
    bf_stream_conn *c = (bf_stream_conn *)h;
    c->closed_cb(c);
}

static void stream__unlink(bf_stream_set *s, bf_stream_conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        s->newest = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    s->n--;
}

void bf_stream_conn_close(bf_stream_conn *c)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    c->ending = 1;
    /* Closing first: a close asked for from on_closing does nothing. */
    uv_close((uv_handle_t *)&c->tcp, stream__on_closed);
    bf_stream_set *s = c->set;
    if (!s)
        return;
    stream__unlink(s, c);
    if (s->cb.on_closing)
        s->cb.on_closing(c);
}

void bf_stream_alloc_owned(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = bf_xmalloc(suggested);
    buf->len = suggested;
}

/* ---- the ending ----------------------------------------------------------- */

/* What a peer sends to an ending connection is dropped unread. */
static void stream__sink_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    free(buf->base);
    bf_stream_conn *c = (bf_stream_conn *)s;
    if (n >= 0)
        return;
    if (c->linger_until_ms || n != UV_EOF) {
        bf_stream_conn_close(c);    /* lingered enough, or it broke */
        return;
    }
    /* It said all before our FIN went: nothing to linger for. */
    c->linger_ms = 0;
    uv_read_stop(s);
}

static void stream__on_shut(uv_stream_t *s, int status)
{
    bf_stream_conn *c = (bf_stream_conn *)s;
    if (status < 0 || c->linger_ms == 0) {
        bf_stream_conn_close(c);
        return;
    }
    c->linger_until_ms = bf_monotonic_ms() + c->linger_ms;
}

void bf_stream_conn_end(bf_stream_conn *c, int linger_ms)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    if (c->ending) {
        if (linger_ms > 0)
            return;
        c->linger_ms = 0;
        uv_read_stop((uv_stream_t *)&c->tcp);
        if (c->linger_until_ms)
            bf_stream_conn_close(c);
        return;
    }
    c->ending = 1;
    c->linger_ms = linger_ms;
    uv_read_stop((uv_stream_t *)&c->tcp);
    /* Read (and drop) from now on, not only after the FIN: a peer still
     * sending while it is answered must not fill our socket's buffer, as
     * closing with its bytes unread would reset the connection and could
     * destroy our last words before the peer reads them. */
    if (linger_ms > 0)
        uv_read_start((uv_stream_t *)&c->tcp, bf_stream_alloc_owned,
                      stream__sink_read);
    if (bf_stream_shutdown((uv_stream_t *)&c->tcp, stream__on_shut) < 0)
        bf_stream_conn_close(c);
}

/* ---- the slow-reader policy ----------------------------------------------- */

bf_stream_verdict bf_stream_conn_judge(bf_stream_conn *c)
{
    bf_stream_verdict v = bf_stream_judge(&c->budget,
                                          bf_stream_queued((uv_stream_t *)&c->tcp),
                                          c->held, bf_monotonic_ms());
    c->held = v != BF_STREAM_READ;
    return v;
}

/* ---- the set and its timer ------------------------------------------------ */

/* One tick's look at c: the linger, the slow-reader cut, the owner's
 * deadline, in that order; each may close c. */
static void stream__visit(bf_stream_set *s, bf_stream_conn *c, int64_t now)
{
    if (c->linger_until_ms) {
        if (now >= c->linger_until_ms)
            bf_stream_conn_close(c);
        return;
    }
    if (c->held && !c->ending
        && bf_stream_judge(&c->budget,
                           bf_stream_queued((uv_stream_t *)&c->tcp), 1,
                           now) == BF_STREAM_CUT) {
        if (s->cb.on_cut)
            s->cb.on_cut(c);
        bf_stream_conn_close(c);
        return;
    }
    if (!c->deadline_ms || now < c->deadline_ms)
        return;
    if (s->cb.on_deadline)
        s->cb.on_deadline(c, now);
    else
        bf_stream_conn_close(c);
}

static void stream__on_tick(uv_timer_t *t)
{
    bf_stream_set *s = t->data;
    int64_t now = bf_monotonic_ms();
    for (bf_stream_conn *c = s->newest, *next; c; c = next) {
        next = c->next;
        stream__visit(s, c, now);
    }
    if (s->cb.on_tick)
        s->cb.on_tick(s, now);
}

void bf_stream_set_init(bf_stream_set *s, uv_loop_t *loop, int tick_ms,
                        const bf_stream_set_callbacks *cb, void *data)
{
    *s = (bf_stream_set){ .data = data, .loop = loop, .cb = *cb };
    uv_timer_init(loop, &s->tick);
    s->tick.data = s;
    uv_timer_start(&s->tick, stream__on_tick, (uint64_t)tick_ms,
                   (uint64_t)tick_ms);
}

int bf_stream_set_accept(bf_stream_set *s, uv_stream_t *listener,
                         bf_stream_conn *c)
{
    c->set = s;
    c->closed_cb = s->cb.on_closed;
    uv_tcp_init(s->loop, &c->tcp);
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
        uv_close((uv_handle_t *)&c->tcp, stream__on_closed);
        return -1;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->next = s->newest;
    if (s->newest)
        s->newest->prev = c;
    s->newest = c;
    s->n++;
    return 0;
}

static void stream__on_tick_closed(uv_handle_t *h)
{
    bf_stream_set *s = h->data;
    if (s->stopped)
        s->stopped(s);
}

void bf_stream_set_stop(bf_stream_set *s, void (*stopped)(bf_stream_set *s))
{
    if (uv_is_closing((uv_handle_t *)&s->tick))
        return;
    s->stopped = stopped;
    uv_close((uv_handle_t *)&s->tick, stream__on_tick_closed);
}

void bf_stream_set_close_all(bf_stream_set *s)
{
    while (s->newest)
        bf_stream_conn_close(s->newest);
}

void bf_stream_conn_init(bf_stream_conn *c, uv_loop_t *loop,
                         bf_stream_closed_cb closed)
{
    c->closed_cb = closed;
    uv_tcp_init(loop, &c->tcp);
    uv_tcp_nodelay(&c->tcp, 1);
}
