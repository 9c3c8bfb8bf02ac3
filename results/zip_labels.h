/* zip_labels: the names a sweep file gives its zip entries,
 *
 *   zip:
 *     label: [nope, rope, rope-5e5]
 *     rope: [none, rope, rope]
 *     rope_base: [1.0e4, 1.0e4, 5.0e5]
 *
 * read back from the file as submitted (sweeps.source; the coordinator
 * checked the list: docs/sweeps.md), so that a group of jobs is called
 * "rope-5e5" rather than "rope=rope rope_base=500000.0". */
#ifndef BF_ZIP_LABELS_H
#define BF_ZIP_LABELS_H

#include <jansson.h>

/* Calls fn on each zip mapping of a node of a parsed sweep file (the
 * file, or one of its stages): its `zip`, or each of its list. */
typedef void (*bf_zip_fn)(void *ctx, const json_t *zip);
void bf_zip_labels_each(const json_t *node, bf_zip_fn fn, void *ctx);

/* The labelled zips of a sweep file: an array (new reference; empty when
 * the file has none or does not parse) of
 *   {"stage": NAME or null, "fields": [field, ...],
 *    "entries": [{"label": "nope", "values": {field: value}}, ...]}
 * with values canonical as in a job's config. */
json_t *bf_zip_labels(const char *source);

/* The label of the entry of zip (one element of bf_zip_labels) that a job
 * of stage (NULL: none) and config (its canonical config, or some of its
 * fields: those it lacks are not compared) belongs to, or NULL (the first
 * such entry).  Borrowed from zip. */
const char *bf_zip_label_of(const json_t *zip, const char *stage,
                            const json_t *config);

#endif
