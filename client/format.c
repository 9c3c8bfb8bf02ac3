/* format: tables, CSV and JSON for the client's commands. */
#include "format.h"

#include "alloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int bf_format_parse(const char *name, bf_row_format *out)
{
    static const char *const names[] = { "table", "csv", "json" };
    for (int i = 0; i < 3; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (bf_row_format)i;
            return 0;
        }
    return -1;
}

void bf_format_duration(double s, char *buf, size_t cap)
{
    if (s >= 3600)
        snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60)
        snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, cap, "%.1fs", s);
}

char *bf_format_cell(const json_t *v, int csv)
{
    char buf[64];
    if (!v || json_is_null(v))
        return bf_xstrdup("");
    if (json_is_string(v))
        return bf_xstrdup(json_string_value(v));
    if (json_is_integer(v))
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, sizeof buf, csv ? "%.17g" : "%.4g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, sizeof buf, "%s", json_is_true(v) ? "true" : "false");
    else
        return json_dumps(v, JSON_COMPACT);
    return bf_xstrdup(buf);
}

static void print_csv_cell(FILE *out, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

/* The column names: the given list, or every row's keys in the order they
 * first appear (rows may lack some, e.g. a baseline has no difference). */
static const char **column_list(const json_t *rows, const char *const *columns,
                                size_t *n)
{
    *n = 0;
    if (columns) {
        while (columns[*n])
            (*n)++;
        const char **keys = bf_xcalloc(*n + 1, sizeof *keys);
        memcpy(keys, columns, *n * sizeof *keys);
        return keys;
    }
    json_t *seen = json_object();
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        const char *key;
        json_t *v;
        json_object_foreach(row, key, v)
            if (!json_object_get(seen, key))
                json_object_set_new(seen, key, json_integer((json_int_t)(*n)++));
    }
    const char **keys = bf_xcalloc(*n + 1, sizeof *keys);
    const char *key;
    json_t *index;
    /* the names stay alive in the rows */
    json_array_foreach(rows, i, row) {
        json_t *v;
        json_object_foreach(row, key, v) {
            index = json_object_get(seen, key);
            keys[json_integer_value(index)] = key;
        }
    }
    json_decref(seen);
    return keys;
}

void bf_format_print(FILE *out, const json_t *rows, const char *const *columns,
                     bf_row_format fmt)
{
    if (fmt == BF_FORMAT_JSON) {
        json_dumpf(rows, out, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        fputc('\n', out);
        return;
    }
    size_t n_rows = json_array_size(rows), n_cols;
    if (n_rows == 0 && fmt == BF_FORMAT_TABLE) {
        fputs("(none)\n", out);
        return;
    }
    const char **keys = column_list(rows, columns, &n_cols);
    size_t *width = bf_xcalloc(n_cols ? n_cols : 1, sizeof *width);
    char **cells = bf_xcalloc(n_rows * n_cols + 1, sizeof *cells);
    for (size_t c = 0; c < n_cols; c++)
        width[c] = strlen(keys[c]);
    for (size_t r = 0; r < n_rows; r++)
        for (size_t c = 0; c < n_cols; c++) {
            char *s = bf_format_cell(json_object_get(json_array_get(rows, r),
                                                     keys[c]),
                                     fmt == BF_FORMAT_CSV);
            cells[r * n_cols + c] = s;
            if (strlen(s) > width[c])
                width[c] = strlen(s);
        }
    for (size_t r = 0; r <= n_rows; r++) {
        for (size_t c = 0; c < n_cols; c++) {
            const char *s = r == 0 ? keys[c] : cells[(r - 1) * n_cols + c];
            if (fmt == BF_FORMAT_CSV) {
                if (c)
                    fputc(',', out);
                print_csv_cell(out, s);
            } else if (c + 1 < n_cols) {
                fprintf(out, "%-*s  ", (int)width[c], s);
            } else {
                fputs(s, out);    /* no trailing blanks */
            }
        }
        fputc('\n', out);
    }
    for (size_t i = 0; i < n_rows * n_cols; i++)
        free(cells[i]);
    free(cells);
    free(width);
    free(keys);
}

json_t *bf_format_time_ms(const json_t *ms)
{
    if (!json_is_integer(ms))
        return json_null();
    time_t t = (time_t)(json_integer_value(ms) / 1000);
    struct tm tm;
    char buf[32];
    localtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return json_string(buf);
}

/* What a table or CSV shows of a reply's row: no config blob, times (the
 * *_ms columns) as local clock times under the name without _ms. */
static json_t *readable_row(const json_t *row)
{
    json_t *out = json_object();
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)row, key, v) {
        size_t len = strlen(key);
        if (strcmp(key, "config") == 0)
            continue;
        if (len > 3 && strcmp(key + len - 3, "_ms") == 0) {
            char *name = bf_xstrndup(key, len - 3);
            json_object_set_new(out, name, bf_format_time_ms(v));
            free(name);
        } else {
            json_object_set(out, key, v);
        }
    }
    return out;
}

void bf_format_print_readable(FILE *out, const json_t *rows, bf_row_format fmt)
{
    if (fmt == BF_FORMAT_JSON) {
        bf_format_print(out, rows, NULL, fmt);
        return;
    }
    json_t *shown = json_array();
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
        json_array_append_new(shown, readable_row(row));
    bf_format_print(out, shown, NULL, fmt);
    json_decref(shown);
}
