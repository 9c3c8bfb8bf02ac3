#include "heartbeats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"

/* Notes one renewal's reply r (NULL: none) that took ms. */
static void note(bft_heartbeats *h, json_t *r, double ms)
{
    pthread_mutex_lock(&h->lock);
    h->beats++;
    if (h->n_rtt == h->cap_rtt) {
        h->cap_rtt = h->cap_rtt ? 2 * h->cap_rtt : 256;
        h->rtt_ms = bf_xrealloc(h->rtt_ms, h->cap_rtt * sizeof *h->rtt_ms);
    }
    h->rtt_ms[h->n_rtt++] = ms;
    if ((!r || strcmp(bf_wire_type(r), "ack") != 0) && !h->not_acked++) {
        char *text = r ? json_dumps(r, 0) : NULL;
        snprintf(h->first_refusal, sizeof h->first_refusal, "%s",
                 text ? text : "no reply");
        free(text);
    }
    pthread_mutex_unlock(&h->lock);
}

static void *beat(void *arg)
{
    bft_heartbeats *h = arg;
    for (;;) {
        pthread_mutex_lock(&h->lock);
        int stop = h->stop;
        pthread_mutex_unlock(&h->lock);
        if (stop)
            return NULL;
        double t0 = bf_now_seconds();
        json_t *r = bft_worker_heartbeat(h->w, h->attempt);
        note(h, r, 1e3 * (bf_now_seconds() - t0));
        json_decref(r);
        bf_sleep_ms(h->every_ms);
    }
}

void bft_heartbeats_start(bft_heartbeats *h, bft_worker *w, int64_t attempt,
                          int every_ms)
{
    memset(h, 0, sizeof *h);
    h->w = w;
    h->attempt = attempt;
    h->every_ms = every_ms;
    pthread_mutex_init(&h->lock, NULL);
    if (pthread_create(&h->thread, NULL, beat, h) != 0) {
        fprintf(stderr, "heartbeats: cannot start a thread\n");
        abort();
    }
}

void bft_heartbeats_reset(bft_heartbeats *h)
{
    pthread_mutex_lock(&h->lock);
    h->n_rtt = 0;
    pthread_mutex_unlock(&h->lock);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bft_heartbeats_figures(bft_heartbeats *h, bft_beat_figures *f)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_lock(&h->lock);
    f->beats = h->beats;
    f->not_acked = h->not_acked;
    memcpy(f->first_refusal, h->first_refusal, sizeof f->first_refusal);
    f->n = h->n_rtt;
    double *sorted = bf_xmalloc((f->n + 1) * sizeof *sorted);
    memcpy(sorted, h->rtt_ms, f->n * sizeof *sorted);
    pthread_mutex_unlock(&h->lock);
    qsort(sorted, f->n, sizeof *sorted, by_value);
    if (f->n) {
        f->p50 = sorted[f->n / 2];
        f->p99 = sorted[f->n * 99 / 100];
        f->max = sorted[f->n - 1];
    }
    free(sorted);
}

void bft_heartbeats_stop(bft_heartbeats *h)
{
    pthread_mutex_lock(&h->lock);
    h->stop = 1;
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    pthread_mutex_destroy(&h->lock);
    free(h->rtt_ms);
    h->rtt_ms = NULL;
    h->n_rtt = h->cap_rtt = 0;
}
