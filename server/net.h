/* net: the daemon's transport.  libuv TCP: listening, one bf_conn per peer,
 * newline-delimited framing (common/wire.h) and queued writes.  It knows
 * nothing of what a message means: as libuv hands bytes to a read callback,
 * it hands each complete frame, and each connection's start and end, to the
 * callbacks given to bf_net_listen.  Everything runs on the one loop
 * thread. */
#ifndef BF_NET_H
#define BF_NET_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <uv.h>

#include "bf_error.h"
#include "wire.h"

typedef struct bf_net bf_net;
typedef struct bf_conn bf_conn;

typedef struct bf_net_callbacks {
    /* c was accepted; set c->data up here. */
    void (*on_connect)(bf_conn *c);
    /* One complete frame, without its '\n'; valid only during the call. */
    void (*on_frame)(bf_conn *c, const char *frame, size_t len);
    /* c is closing: already off the connection list, and no frame follows;
     * free c->data here.  c itself stays valid until the callback returns. */
    void (*on_close)(bf_conn *c);
} bf_net_callbacks;

struct bf_conn {
    uv_tcp_t tcp;          /* first: handles are cast back to bf_conn */
    bf_net *net;
    bf_conn *prev, *next;
    uint64_t serial;       /* for log lines */
    char peer[64];         /* "IP:PORT" */
    /* Frames over rd.max_frame close the connection.  It starts at
     * BF_WIRE_HELLO_MAX_FRAME; the user raises it for a peer it knows. */
    bf_frame_reader rd;
    int closing;           /* no more reads or writes */
    void *data;            /* the user's state for this connection */
};

struct bf_net {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bf_net_callbacks cb;
    void *data;            /* the user's */
    bf_conn *conns;        /* every open connection */
    uint64_t next_serial;
    int port;              /* the bound port */
};

/* Listens on HOST:PORT (numeric; port 0 = any free one, then n->port says
 * which) and serves every connection through cb.  On error nothing is left
 * open once the loop has run. */
int bf_net_listen(bf_net *n, uv_loop_t *loop, const char *host_port,
                  const bf_net_callbacks *cb, void *data, bf_error *err);
/* Sends msg (the reference is stolen) unless the connection is closing. */
void bf_conn_send(bf_conn *c, json_t *msg);
/* Sends msg (stolen; may be NULL), then closes once it is written. */
void bf_conn_fail(bf_conn *c, json_t *msg);
/* Stops accepting and closes every connection after its pending writes. */
void bf_net_shutdown(bf_net *n);
/* Closes every connection now (those that would not drain). */
void bf_net_close_all(bf_net *n);

#endif
