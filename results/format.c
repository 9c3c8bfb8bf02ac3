/* format: tables, CSV and JSON for the client's commands. */
#include "format.h"

#include "alloc.h"

#include <math.h>
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

int bf_format_digits_apart(double x, double y)
{
    /* apart by more than a part in 10^3, they differ at 4 digits */
    if (x == y || fabs(x - y) > 2e-3 * fmax(fabs(x), fabs(y)))
        return BF_FORMAT_DIGITS;
    for (int d = BF_FORMAT_DIGITS; d < 17; d++) {
        char a[32], b[32];
        snprintf(a, sizeof a, "%.*g", d, x);
        snprintf(b, sizeof b, "%.*g", d, y);
        if (strcmp(a, b) != 0)
            return d;
    }
    return 17;
}

void bf_format_number(double x, int digits, char *buf, size_t cap)
{
    if (x == floor(x) && fabs(x) < 1e9)
        snprintf(buf, cap, "%.0f", x);
    else
        snprintf(buf, cap, "%.*g", digits, x);
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
        bf_format_number(json_real_value(v), csv ? 17 : BF_FORMAT_DIGITS,
                         buf, sizeof buf);
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

/* The columns of a table being printed, with their widths. */
typedef struct columns {
    json_t *names;      /* the names, in order */
    json_t *index;      /* name -> its position */
    size_t *width;
    size_t cap;
} columns;

static void add_column(columns *c, const char *name)
{
    if (json_object_get(c->index, name))
        return;
    size_t n = json_array_size(c->names);
    json_object_set_new(c->index, name, json_integer((json_int_t)n));
    json_array_append_new(c->names, json_string(name));
    if (n == c->cap) {
        c->cap = 2 * c->cap + 8;
        c->width = bf_xrealloc(c->width, c->cap * sizeof *c->width);
    }
    c->width[n] = strlen(name);
}

static const char *column_name(const columns *c, size_t i)
{
    return json_string_value(json_array_get(c->names, i));
}

/* The first pass: the given columns, or every row's keys in the order they
 * first appear (rows may lack some, e.g. a baseline has no difference), and
 * the width of each. */
static void measure(columns *c, size_t n_rows, bf_format_row_fn row_fn,
                    void *ctx, const char *const *given, int csv)
{
    for (size_t i = 0; given && given[i]; i++)
        add_column(c, given[i]);
    for (size_t r = 0; r < n_rows; r++) {
        json_t *row = row_fn(ctx, r);
        const char *key;
        json_t *v;
        if (!given)
            json_object_foreach(row, key, v)
                add_column(c, key);
        for (size_t k = 0; !csv && k < json_array_size(c->names); k++) {
            char *s = bf_format_cell(json_object_get(row, column_name(c, k)), 0);
            if (strlen(s) > c->width[k])
                c->width[k] = strlen(s);
            free(s);
        }
        json_decref(row);
    }
}

static void print_cell(FILE *out, const columns *c, size_t k, const char *s,
                       bf_row_format fmt)
{
    size_t n = json_array_size(c->names);
    if (fmt == BF_FORMAT_CSV) {
        if (k)
            fputc(',', out);
        print_csv_cell(out, s);
    } else if (k + 1 < n) {
        fprintf(out, "%-*s  ", (int)c->width[k], s);
    } else {
        fputs(s, out);    /* no trailing blanks */
    }
}

/* JSON: the array as json_dumpf prints it (indent 2), a row at a time. */
static void print_json_rows(FILE *out, size_t n_rows, bf_format_row_fn row_fn,
                            void *ctx)
{
    if (n_rows == 0) {
        fputs("[]\n", out);
        return;
    }
    fputs("[\n", out);
    for (size_t r = 0; r < n_rows; r++) {
        json_t *row = row_fn(ctx, r);
        char *text = json_dumps(row, JSON_INDENT(2) | JSON_REAL_PRECISION(17)
                                     | JSON_ENCODE_ANY);
        fputs("  ", out);
        for (const char *p = text; *p; p++) {
            fputc(*p, out);
            if (*p == '\n')
                fputs("  ", out);
        }
        fputs(r + 1 < n_rows ? ",\n" : "\n", out);
        free(text);
        json_decref(row);
    }
    fputs("]\n", out);
}

void bf_format_print_each(FILE *out, size_t n_rows, bf_format_row_fn row_fn,
                          void *ctx, const char *const *given,
                          bf_row_format fmt)
{
    if (fmt == BF_FORMAT_JSON) {
        print_json_rows(out, n_rows, row_fn, ctx);
        return;
    }
    if (n_rows == 0 && fmt == BF_FORMAT_TABLE) {
        fputs("(none)\n", out);
        return;
    }
    int csv = fmt == BF_FORMAT_CSV;
    columns c = { .names = json_array(), .index = json_object() };
    measure(&c, n_rows, row_fn, ctx, given, csv);
    size_t n_cols = json_array_size(c.names);
    for (size_t k = 0; k < n_cols; k++)
        print_cell(out, &c, k, column_name(&c, k), fmt);
    fputc('\n', out);
    for (size_t r = 0; r < n_rows; r++) {
        json_t *row = row_fn(ctx, r);
        for (size_t k = 0; k < n_cols; k++) {
            char *s = bf_format_cell(json_object_get(row, column_name(&c, k)),
                                     csv);
            print_cell(out, &c, k, s, fmt);
            free(s);
        }
        fputc('\n', out);
        json_decref(row);
    }
    json_decref(c.names);
    json_decref(c.index);
    free(c.width);
}

static json_t *array_row(void *rows, size_t i)
{
    return json_incref(json_array_get(rows, i));
}

void bf_format_print(FILE *out, const json_t *rows, const char *const *columns,
                     bf_row_format fmt)
{
    bf_format_print_each(out, json_array_size(rows), array_row, (void *)rows,
                         columns, fmt);
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
