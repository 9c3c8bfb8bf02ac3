/* row_store: the rows of a per-job result view (job_results, results) held
 * compactly, so that `results`, `compare` and `report` read a sweep of a
 * million jobs in bounded memory.
 *
 * As jansson objects a job_results row costs about 10 KB, half of it its
 * parsed config.  Here a row is one pointer per column; strings and small
 * integers are shared between rows, and a config is kept once per distinct
 * value with its seed set aside (the jobs of a cell share everything else),
 * the seed read from the row's seed column.
 *
 * The columns are those of the first row added (the rows of one view all
 * have the same); a later row's other keys are not kept. */
#ifndef BF_ROW_STORE_H
#define BF_ROW_STORE_H

#include <stddef.h>
#include <jansson.h>

typedef struct bf_row_store {
    /* read-only */
    size_t n_rows;
    /* private */
    json_t *columns;            /* names, in the first row's order */
    size_t n_columns;
    int config_column, seed_column;     /* -1 without one (once a row is in) */
    json_t **cells;             /* [n_rows][n_columns], owned references */
    unsigned char *seed_moved;  /* [n_rows]: config's seed is null, the
                                   row's seed column holds it */
    size_t cap;
    json_t *strings;            /* text -> the shared string */
    json_t *configs;            /* compact text -> the shared config */
    json_t **small_ints;        /* [BF_ROW_STORE_SMALL_INTS], lazily */
} bf_row_store;

#define BF_ROW_STORE_SMALL_INTS 65536

/* A zeroed store is empty; clear frees what rows added and empties it. */
void bf_row_store_clear(bf_row_store *s);

/* Adds a copy of row (an object keyed by column; a "config" given as an
 * object or as its JSON text). */
void bf_row_store_add(bf_row_store *s, const json_t *row);

/* The index of column `name` (-1 if the store has none, as before its
 * first row): resolved once by a caller that reads many rows, which then
 * reads them with bf_row_store_at, not a search by name per read. */
int bf_row_store_column(const bf_row_store *s, const char *name);

/* Column `column` (bf_row_store_column's) of row `row` (borrowed; NULL for
 * column -1, past the last row, or if the row lacked it).  The "config"
 * column is the shared config, whose seed may be null: read config fields
 * with bf_row_store_config. */
json_t *bf_row_store_at(const bf_row_store *s, size_t row, int column);

/* Column `name` of row `row`: bf_row_store_at of bf_row_store_column, for
 * a read or two (a loop over the rows resolves the column once). */
json_t *bf_row_store_get(const bf_row_store *s, size_t row, const char *name);

/* Field of row's config (borrowed; NULL if absent), its seed included. */
json_t *bf_row_store_config(const bf_row_store *s, size_t row,
                            const char *field);

/* The row whole, as it was added (a new object; config with its seed;
 * empty past the last row). */
json_t *bf_row_store_row(const bf_row_store *s, size_t row);

#endif
