/* compare: what `bifocal compare SWEEP [--by FIELD,...] [--baseline
 * FIELD=VALUE] [--format table|csv|json] [--db FILE]` prints (its command
 * line is cli/cmd_results.c): seed statistics per group and eval depth,
 * and each group against its baseline (docs/results.md). */
#ifndef BF_COMPARE_H
#define BF_COMPARE_H

#include <jansson.h>

#include "session.h"
#include "source.h"
#include "sweep_view.h"

/* The most groups compare and report compare (groups with a succeeded
 * job; per group they hold its rows of numbers, a few KB): a search of a
 * million trials is refused by name, with how to narrow it, instead of
 * taking gigabytes (docs/results.md, Memory). */
#define BF_COMPARE_MAX_GROUPS 2048

/* The view compare and report read, holding the jobs h names (at least
 * the succeeded ones), after checking that a job succeeded: without
 * --where from the sweep's counts of jobs by status, before any job is
 * read, else from bf_sweep_view_scan's count; "sweep N has no succeeded
 * job yet" otherwise.  0, or -1 after printing the problem (clear v
 * either way). */
int bf_compare_view_load(bf_sweep_view *v, bf_source *src, int64_t sweep_id,
                         const char *by, const char *where,
                         const bf_sweep_hold *h);

/* Prints what `bifocal compare` prints of the sweep in fmt (a table with
 * the selections below it, CSV or JSON), grouped by `by` ("FIELD,..." or
 * NULL), of the jobs `where` selects, each group against its baseline
 * (bf_compare_rows_of_facts).  The table is compact, within 100 columns:
 * each search's best trials, one line per comparison (its loss ratio,
 * p_adj, verdict and stopping rule), what they mean once below; verbose,
 * every group's statistics and a long line per comparison.  0, or 1 after
 * printing why not. */
int bf_compare_print(bf_source *src, int64_t sweep_id, const char *by,
                     const char *where, const char *baseline,
                     bf_row_format fmt, int verbose);

/* What compare keeps of each succeeded job a view holds by id alone (its
 * training loss and eval examples, not its row), gathered as the view
 * reads it: bf_sweep_hold.on_job = bf_compare_facts_add, .ctx = facts. */
typedef struct bf_compare_facts bf_compare_facts;

bf_compare_facts *bf_compare_facts_new(void);
void bf_compare_facts_add(void *facts, const json_t *row);
void bf_compare_facts_free(bf_compare_facts *facts);

/* One object per (group, eval depth), as `compare --format json` prints
 * them, of a view that held its succeeded jobs by id alone (at least one),
 * their facts gathered (sorted here).  baseline is "FIELD=VALUE" or NULL
 * (rope=rope where the sweep has it).  NULL after printing the problem
 * (bad baseline, ...). */
json_t *bf_compare_rows_of_facts(const bf_sweep_view *v, bf_source *src,
                                 const char *baseline,
                                 bf_compare_facts *facts);

#endif
