/* stream: libuv plumbing shared by the transports; see stream.h. */
#include "stream.h"

#include <pthread.h>
#include <stdlib.h>

#include "alloc.h"
#include "wire.h"

/* An owned buffer on its way out. */
typedef struct stream__write {
    uv_write_t req;
    char *bytes;
    bf_stream_written_cb done;
} stream__write;

typedef struct stream__shutdown {
    uv_shutdown_t req;
    bf_stream_shut_cb done;
} stream__shutdown;

static void stream__install_allocator(void)
{
    /* Safe even if the caller made a loop with plain malloc already:
     * bf_xmalloc & co allocate with malloc and libuv frees with free. */
    uv_replace_allocator(bf_xmalloc, bf_xrealloc, bf_xcalloc, free);
}

void bf_stream_use_allocator(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, stream__install_allocator);
}

int bf_stream_listen(uv_tcp_t *listener, uv_loop_t *loop,
                     const char *host_port, int backlog,
                     uv_connection_cb on_connection, void *data, int *port,
                     bf_error *err)
{
    struct sockaddr_storage addr;
    if (bf_wire_parse_listen(host_port, &addr, err))
        return -1;
    uv_tcp_init(loop, listener);
    listener->data = data;
    int rc = uv_tcp_bind(listener, (struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)listener, backlog, on_connection);
    if (rc < 0) {
        uv_close((uv_handle_t *)listener, NULL);
        return bf_error_set(err, NULL, 0, "listen", "cannot listen on %s: %s",
                            host_port, uv_strerror(rc));
    }
    struct sockaddr_storage bound;
    int len = sizeof bound;
    uv_tcp_getsockname(listener, (struct sockaddr *)&bound, &len);
    *port = bf_wire_addr_port(&bound);
    return 0;
}

static void stream__on_written(uv_write_t *req, int status)
{
    stream__write *w = (stream__write *)req;
    bf_stream_written_cb done = w->done;
    uv_stream_t *s = req->handle;
    free(w->bytes);
    free(w);
    if (done)
        done(s, status);
}

int bf_stream_write(uv_stream_t *s, char *bytes, size_t len,
                    bf_stream_written_cb done)
{
    stream__write *w = bf_xmalloc(sizeof *w);
    w->bytes = bytes;
    w->done = done;
    uv_buf_t buf = uv_buf_init(bytes, (unsigned)len);
    int rc = uv_write(&w->req, s, &buf, 1, stream__on_written);
    if (rc < 0) {
        free(bytes);
        free(w);
    }
    return rc;
}

static void stream__on_shutdown(uv_shutdown_t *req, int status)
{
    stream__shutdown *sh = (stream__shutdown *)req;
    bf_stream_shut_cb done = sh->done;
    uv_stream_t *s = req->handle;
    free(sh);
    if (done)
        done(s, status);
}

int bf_stream_shutdown(uv_stream_t *s, bf_stream_shut_cb done)
{
    stream__shutdown *sh = bf_xmalloc(sizeof *sh);
    sh->done = done;
    int rc = uv_shutdown(&sh->req, s, stream__on_shutdown);
    if (rc < 0)
        free(sh);
    return rc;
}

size_t bf_stream_queued(uv_stream_t *s)
{
    return uv_stream_get_write_queue_size(s);
}

bf_stream_verdict bf_stream_judge(bf_stream_budget *b, size_t queued,
                                  int held, int64_t now_ms)
{
    if (queued > BF_STREAM_MAX_QUEUED) {
        if (!b->over_since_ms)
            b->over_since_ms = now_ms;
        return now_ms - b->over_since_ms >= BF_STREAM_OVER_BUDGET_MS
               ? BF_STREAM_CUT : BF_STREAM_HOLD;
    }
    b->over_since_ms = 0;
    /* Hysteresis: a held peer reads again once half has drained, not at
     * the first byte under the budget. */
    return held && queued > BF_STREAM_MAX_QUEUED / 2
           ? BF_STREAM_HOLD : BF_STREAM_READ;
}
