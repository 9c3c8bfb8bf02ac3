/* peers: what the daemon remembers about each source address, so that
 * strangers (connections that have not said a good hello) cannot crowd out
 * everyone else and a token cannot be guessed at wire speed:
 *   - how many strangers an address holds open now (net.c caps it),
 *   - its failed hellos (wrong token, garbage, silence past the hello
 *     timeout) and the back-off they earned: after `free_failures` of them,
 *     each further one refuses the address's connections for twice as long
 *     as the last (1 s, 2 s, 4 s, ... at most BF_PEERS_MAX_BACKOFF_MS).  An
 *     address that fails nothing for BF_PEERS_FORGIVE_MS starts over.
 * An address is an IPv4 address, or an IPv6 /64 prefix: one host usually
 * holds a whole /64, so keying on the full address would let it dodge both
 * limits.  The table holds at most BF_PEERS_MAX entries; an address that
 * finds it full goes untracked (net.c still applies the overall cap).
 * One loop thread; the entries are owned by the table. */
#ifndef BF_PEERS_H
#define BF_PEERS_H

#include <stddef.h>
#include <stdint.h>

#define BF_PEERS_FIRST_BACKOFF_MS 1000
#define BF_PEERS_MAX_BACKOFF_MS (5 * 60 * 1000)
#define BF_PEERS_FORGIVE_MS (10 * 60 * 1000)
#define BF_PEERS_MAX 65536

typedef struct bf_peer {
    char addr[48];             /* IPv4 address or IPv6 /64 prefix */
    int strangers;             /* its connections not yet past hello */
    int failures;              /* failed hellos since it was last forgiven */
    int64_t last_failure_ms;
    int64_t blocked_until_ms;  /* its connections are refused until then */
    int64_t backoff_ms;        /* the length of the last block */
    long refused;              /* connections refused during that block */
    struct bf_peer *next;      /* hash chain */
} bf_peer;

typedef struct bf_peers {
    bf_peer **buckets;
    size_t n_buckets, n;
    int free_failures;         /* failed hellos before back-off; 0: never */
} bf_peers;

void bf_peers_init(bf_peers *p, int free_failures);
void bf_peers_free(bf_peers *p);

/* The entry of addr, made if missing; NULL when the table is full. */
bf_peer *bf_peers_get(bf_peers *p, const char *addr);

/* Counts a failed hello of e at now_ms.  Returns the back-off it starts
 * (e->blocked_until_ms is set), or 0 when it starts none. */
int64_t bf_peers_failed(bf_peers *p, bf_peer *e, int64_t now_ms);

/* Drops the entries nothing depends on any more: no strangers, no block
 * running, no failure within BF_PEERS_FORGIVE_MS. */
void bf_peers_forget_idle(bf_peers *p, int64_t now_ms);

#endif
