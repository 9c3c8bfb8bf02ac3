/* libFuzzer: sweep files through parsing and expansion (server/store/
 * sweep*.c: stages, zip, exclude, warnings), as `bifocal submit` sends
 * them.  Expansion runs for sweeps of at most 4096 jobs (a bigger one
 * costs time, not coverage): every job it yields must carry a valid
 * config whose hash matches its canonical JSON, and a source only if its
 * init_from names a stage, an earlier job. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "job_config.h"
#include "sweep.h"

static int visit(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    size_t *n = ctx;
    (*n)++;
    if (bf_job_config_validate(job->cfg, err) != 0)
        abort();   /* expansion validated it already */
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)
             bf_fnv1a64(job->config_json, strlen(job->config_json)));
    if (strcmp(hex, job->hash_hex) != 0)
        abort();
    /* a source is an earlier job, and only a stage reference has one */
    int ref = strncmp(job->cfg->init_from, "stage:", 6) == 0;
    if (ref != (job->source != BF_SWEEP_NO_SOURCE) ||
        (ref && job->source >= job->index))
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bf_error err;
    bf_sweep *sw = bf_sweep_parse("fuzz.yaml", "/fuzz", (const char *)data, size,
                                  &err);
    if (!sw)
        return 0;
    size_t n = 0;
    if (sw->n_jobs <= 4096 && bf_sweep_expand(sw, visit, &n, &err) == 0
        && (n != sw->n_jobs || !json_is_array(sw->warnings)))
        abort();
    bf_sweep_free(sw);
    return 0;
}
