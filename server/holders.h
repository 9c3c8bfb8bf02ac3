/* holders: which worker connection holds each attempt it leased (or
 * re-claimed by heartbeat), so that a cancel reaches the right worker and
 * lease renewals by metrics can be rate-limited.  The one place that knows
 * it: the transport and the protocol only ask.
 *
 * An attempt has at most one holder.  A worker that reconnected may leave
 * its old, half-dead connection behind: the attempt belongs to the newest
 * connection that claimed it, where cancels go. */
#ifndef BF_HOLDERS_H
#define BF_HOLDERS_H

#include <stdint.h>

struct bf_conn;

typedef struct bf_held_attempt {
    /* read-only */
    int64_t attempt_id;
    struct bf_conn *holder;
    int64_t renewed_ms;     /* the last lease renewal through the holder */
} bf_held_attempt;

typedef struct bf_holders {
    /* private */
    bf_held_attempt *v;
    int n, cap;
} bf_holders;               /* zero-initialized is empty */

/* The connection holding attempt_id, or NULL. */
struct bf_conn *bf_holders_holder(const bf_holders *h, int64_t attempt_id);
/* attempt_id's entry if conn holds it, else NULL. */
bf_held_attempt *bf_holders_held_by(bf_holders *h, const struct bf_conn *conn,
                                    int64_t attempt_id);
/* Makes conn the holder of attempt_id, taking it from any other connection;
 * a new entry starts with renewed_ms = now_ms. */
bf_held_attempt *bf_holders_hold(bf_holders *h, struct bf_conn *conn,
                                 int64_t attempt_id, int64_t now_ms);
/* Forgets attempt_id if conn holds it. */
void bf_holders_release(bf_holders *h, const struct bf_conn *conn,
                        int64_t attempt_id);
/* Forgets everything conn holds (it is closing). */
void bf_holders_release_all(bf_holders *h, const struct bf_conn *conn);
void bf_holders_free(bf_holders *h);

#endif
