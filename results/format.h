/* format: rows of results printed as an aligned table, CSV or JSON
 * (`--format table|csv|json`). */
#ifndef BF_FORMAT_H
#define BF_FORMAT_H

#include <stdio.h>
#include <jansson.h>

typedef enum { BF_FORMAT_TABLE, BF_FORMAT_CSV, BF_FORMAT_JSON } bf_row_format;

/* Parses "table", "csv" or "json"; -1 on anything else. */
int bf_format_parse(const char *name, bf_row_format *out);

/* Prints an array of flat objects.  columns (NULL-terminated; NULL: the
 * keys of the first row) picks and orders the columns of a table or CSV;
 * JSON prints every row whole.  Numbers print with 4 significant digits in
 * a table and in full in CSV; a missing value is an empty cell. */
void bf_format_print(FILE *out, const json_t *rows, const char *const *columns,
                     bf_row_format fmt);

/* The same of n_rows rows made one at a time by row_fn (a new reference
 * each), none held together: a table or CSV makes each row twice (columns
 * and widths, then text), JSON once.  For listings of a million jobs. */
typedef json_t *(*bf_format_row_fn)(void *ctx, size_t i);
void bf_format_print_each(FILE *out, size_t n_rows, bf_format_row_fn row_fn,
                          void *ctx, const char *const *columns,
                          bf_row_format fmt);

/* Rows of a daemon reply (status, jobs, workers): JSON whole; a table or
 * CSV without the config blob and with each *_ms time as a local clock time
 * ("2026-12-02 18:04:05", column named without _ms). */
void bf_format_print_readable(FILE *out, const json_t *rows,
                              bf_row_format fmt);

/* "2026-12-02 18:04:05" (local time) of a time in ms since the epoch, or
 * json null. */
json_t *bf_format_time_ms(const json_t *ms);

/* "1h02m", "3m05s" or "12.3s": a duration of `seconds` (>= 0) as the
 * tables and `bifocal watch` show it. */
void bf_format_duration(double seconds, char *buf, size_t cap);

/* The significant digits a terminal shows a number with (W&B's run
 * tables show 3 to 4): labels, table cells, warnings and titles. */
#define BF_FORMAT_DIGITS 4

/* The fewest significant digits, BF_FORMAT_DIGITS or more (at most 17),
 * at which x and y print apart with "%.*g"; BF_FORMAT_DIGITS when they
 * are equal: two different values never print the same. */
int bf_format_digits_apart(double x, double y);

/* x at `digits` significant digits ("%.*g"), a whole number below 10^9
 * whole ("10000", not "1e+04"). */
void bf_format_number(double x, int digits, char *buf, size_t cap);

/* A cell's text in a table (csv = 0) or CSV (csv = 1).  Caller frees. */
char *bf_format_cell(const json_t *v, int csv);

#endif
