/* peers: a chained hash table of source addresses (peers.h). */
#include "peers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hash.h"
#include "log.h"

#define N_BUCKETS 4096

void bf_peers_init(bf_peers *p, int free_failures)
{
    memset(p, 0, sizeof *p);
    p->n_buckets = N_BUCKETS;
    p->buckets = bf_xcalloc(p->n_buckets, sizeof *p->buckets);
    p->free_failures = free_failures;
}

void bf_peers_free(bf_peers *p)
{
    for (size_t i = 0; i < p->n_buckets; i++)
        for (bf_peer *e = p->buckets[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(p->buckets);
    memset(p, 0, sizeof *p);
}

/* FNV-1a: addresses are short, and an attacker choosing them gains at most
 * long chains in a table that holds BF_PEERS_MAX entries. */
static size_t bucket_of(const bf_peers *p, const char *addr)
{
    return (size_t)bf_fnv1a64(addr, strlen(addr)) & (p->n_buckets - 1);
}

bf_peer *bf_peers_get(bf_peers *p, const char *addr)
{
    size_t b = bucket_of(p, addr);
    for (bf_peer *e = p->buckets[b]; e; e = e->next)
        if (strcmp(e->addr, addr) == 0)
            return e;
    if (p->n >= BF_PEERS_MAX)
        return NULL;
    bf_peer *e = bf_xcalloc(1, sizeof *e);
    snprintf(e->addr, sizeof e->addr, "%s", addr);
    e->next = p->buckets[b];
    p->buckets[b] = e;
    p->n++;
    return e;
}

int64_t bf_peers_failed(bf_peers *p, bf_peer *e, int64_t now_ms)
{
    if (e->failures > 0 && now_ms - e->last_failure_ms > BF_PEERS_FORGIVE_MS) {
        e->failures = 0;
        e->delay_ms = 0;
    }
    e->failures++;
    e->last_failure_ms = now_ms;
    if (p->free_failures <= 0 || e->failures <= p->free_failures)
        return 0;
    e->delay_ms = e->delay_ms ? 2 * e->delay_ms : BF_PEERS_FIRST_DELAY_MS;
    if (e->delay_ms > BF_PEERS_MAX_DELAY_MS)
        e->delay_ms = BF_PEERS_MAX_DELAY_MS;
    return e->delay_ms;
}

void bf_peer_report_dropped(bf_peer *e)
{
    if (!e->log.dropped)
        return;
    bf_log_warn("strangers of %s: %ld log lines dropped (over the address's "
                "budget)", e->addr, e->log.dropped);
    e->log.dropped = 0;
}

static int idle(const bf_peer *e, int64_t now_ms)
{
    return e->strangers.n == 0
        && now_ms - e->last_failure_ms > BF_PEERS_FORGIVE_MS;
}

void bf_peers_forget_idle(bf_peers *p, int64_t now_ms)
{
    for (size_t i = 0; i < p->n_buckets; i++)
        for (bf_peer **link = &p->buckets[i]; *link;) {
            bf_peer *e = *link;
            if (idle(e, now_ms)) {
                bf_peer_report_dropped(e);
                *link = e->next;
                free(e);
                p->n--;
            } else {
                link = &e->next;
            }
        }
}
