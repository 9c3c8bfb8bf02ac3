/* peers: what the daemon remembers about each source address, so that
 * strangers (connections that have not said a good hello) cannot crowd out
 * everyone else, and a token guesser or a misconfigured peer is slowed
 * down, without ever refusing a connection that presents the right token
 * (strangers and token holders often share an address: one login node,
 * one NAT):
 *   - the strangers an address holds open now, oldest first (net.c caps
 *     them and closes the oldest to make room for a newcomer),
 *   - its failed hellos (wrong token, garbage, silence past the hello
 *     timeout): after `free_failures` of them, each further one is answered
 *     late, twice as late as the last (1 s, 2 s, 4 s, ... at most
 *     BF_PEERS_MAX_DELAY_MS).  Only the failed hello's answer waits; a good
 *     hello of the same address is admitted at once.  An address that
 *     fails nothing for BF_PEERS_FORGIVE_MS starts over.
 * An address is an IPv4 address, or an IPv6 /64 prefix: one host usually
 * holds a whole /64, so keying on the full address would let it dodge the
 * per-address cap.  The table holds at most BF_PEERS_MAX entries; an
 * address that finds it full goes untracked (net.c still applies the
 * overall cap).  One loop thread; the entries are owned by the table. */
#ifndef BF_PEERS_H
#define BF_PEERS_H

#include <stddef.h>
#include <stdint.h>

#define BF_PEERS_FIRST_DELAY_MS 1000
/* Below the 10 s a client waits for its hello's answer, so that a user
 * with a wrong token still reads "wrong token". */
#define BF_PEERS_MAX_DELAY_MS 8000
#define BF_PEERS_FORGIVE_MS (10 * 60 * 1000)
#define BF_PEERS_MAX 65536

struct bf_conn;

/* A log budget, which net.c spends (net.h, Logs): lines over it are
 * counted until they can be reported.  Zeroed: full, never spent. */
typedef struct bf_log_budget {
    /* read-only (net.c reports the dropped count, peers.c spends it) */
    double tokens;
    int64_t refill_ms;         /* monotonic; 0: never spent */
    long dropped;              /* lines over it not yet reported */
} bf_log_budget;

/* Strangers oldest first, linked through the connections (net.c). */
typedef struct bf_conn_queue {
    /* public: net.c links its strangers in */
    struct bf_conn *oldest, *newest;
    int n;
} bf_conn_queue;

typedef struct bf_peer {
    /* public */
    bf_conn_queue strangers;   /* its connections not yet past hello */
    bf_log_budget log;         /* its strangers' log lines share this
                                  budget: a flood of connections from one
                                  address logs no more than one would */
    /* read-only */
    char addr[48];             /* IPv4 address or IPv6 /64 prefix */
    int failures;              /* failed hellos since it was last forgiven */
    int64_t last_failure_ms;
    int64_t delay_ms;          /* how late its failed hellos are answered */
    /* private */
    struct bf_peer *next;      /* hash chain */
} bf_peer;

typedef struct bf_peers {
    /* private */
    bf_peer **buckets;
    size_t n_buckets, n;
    int free_failures;         /* failed hellos answered at once; 0: all */
} bf_peers;

void bf_peers_init(bf_peers *p, int free_failures);
void bf_peers_free(bf_peers *p);

/* The entry of addr, made if missing; NULL when the table is full. */
bf_peer *bf_peers_get(bf_peers *p, const char *addr);

/* Counts a failed hello of e at now_ms.  Returns how long its answer is to
 * wait (e->delay_ms), 0 while the address has failures to spare. */
int64_t bf_peers_failed(bf_peers *p, bf_peer *e, int64_t now_ms);

/* Logs how many of e's strangers' lines its budget dropped (net.c), if
 * any, and counts afresh. */
void bf_peer_report_dropped(bf_peer *e);

/* Drops the entries nothing depends on any more: no strangers, no failure
 * within BF_PEERS_FORGIVE_MS (logging how many of its strangers' lines
 * were dropped, if any were). */
void bf_peers_forget_idle(bf_peers *p, int64_t now_ms);

#endif
