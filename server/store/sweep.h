/* Sweep files: a YAML description of many job configurations.
 *
 *   name: structure-gap          # required, non-empty string
 *   description: ...             # optional free text
 *   base: {steps: 2000, ...}     # optional job-config fields for every job
 *   grid:                        # optional: cartesian product of job fields
 *     rope: [rope, spectral, bifocal]
 *     task: [dyck, counter]
 *   seeds: 3                     # optional: N (seeds 1..N) or a list [1, 2, 7]
 *   max_attempts: 3              # optional, >= 1, default 3
 *   priority: 0                  # optional, higher leases first, default 0
 *
 * Expansion order (deterministic): the grid axes in file order, like nested
 * loops with the first axis outermost and the last innermost, and the seeds
 * innermost of all.  So job index i, written in the mixed radix of the axis
 * lengths (seeds last), names the value of each axis.
 *
 * Every job = defaults, then base, then its grid values, then its seed, and
 * must pass bf_job_config_validate; duplicate configurations are refused.
 * Errors name the file, the line (of the grid value or base field that
 * caused it), the field and the value. */
#ifndef BF_SWEEP_H
#define BF_SWEEP_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "bf_error.h"
#include "job_config.h"

#define BF_SWEEP_MAX_JOBS 1000000
#define BF_SWEEP_MAX_BYTES (4 << 20)

typedef struct bf_sweep_axis bf_sweep_axis;

/* A parsed sweep.  Everything is owned by the struct (bf_sweep_free). */
typedef struct bf_sweep {
    char *file;          /* name used in messages */
    char *name;
    int max_attempts;
    int priority;
    size_t n_jobs;       /* product of the axis lengths, times the seeds */
    /* private to sweep.c */
    json_t *doc, *lines;
    bf_job_config base;  /* defaults + base */
    bf_sweep_axis *axes;
    size_t n_axes;
    uint64_t *seeds;     /* NULL: the seed comes from base/grid/defaults */
    size_t n_seeds;      /* 1 when seeds is NULL */
    int seeds_line;
} bf_sweep;

/* One expanded job, valid only during the visit callback. */
typedef struct bf_sweep_job {
    size_t index;                /* 0-based, in expansion order */
    const bf_job_config *cfg;    /* validated */
    const char *config_json;     /* bf_job_config_to_canonical_json */
    char hash_hex[17];           /* FNV-1a 64 of config_json */
} bf_sweep_job;

/* Return 0 to continue, -1 (with err set) to stop the expansion. */
typedef int (*bf_sweep_visit_fn)(void *ctx, const bf_sweep_job *job,
                                 bf_error *err);

/* Parses and checks the file's structure and every grid value on its own.
 * Returns NULL with err set (file, line, field) on any problem. */
bf_sweep *bf_sweep_parse(const char *file, const char *text, size_t len,
                         bf_error *err);

/* Expands, validates and visits every job in order.  A job that fails
 * validation, or duplicates an earlier one, stops it with err set; jobs
 * visited before then have been seen, so callers store inside a
 * transaction they roll back on failure. */
int bf_sweep_expand(const bf_sweep *sw, bf_sweep_visit_fn visit, void *ctx,
                    bf_error *err);

void bf_sweep_free(bf_sweep *sw);

/* FNV-1a, 64 bit. */
uint64_t bf_fnv1a64(const void *data, size_t len);

#endif
