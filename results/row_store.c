/* row_store: a view's rows, one pointer per column, values shared. */
#include "row_store.h"

#include "alloc.h"

#include <string.h>

void bf_row_store_clear(bf_row_store *s)
{
    for (size_t i = 0; i < s->n_rows * s->n_columns; i++)
        json_decref(s->cells[i]);
    for (size_t i = 0; s->small_ints && i < BF_ROW_STORE_SMALL_INTS; i++)
        json_decref(s->small_ints[i]);
    free(s->small_ints);
    free(s->cells);
    free(s->seed_moved);
    json_decref(s->columns);
    json_decref(s->strings);
    json_decref(s->configs);
    *s = (bf_row_store){ 0 };
}

int bf_row_store_column(const bf_row_store *s, const char *name)
{
    for (size_t c = 0; c < s->n_columns; c++)
        if (strcmp(json_string_value(json_array_get(s->columns, c)), name) == 0)
            return (int)c;
    return -1;
}

/* The first row: the columns, and the maps of shared values. */
static void set_columns(bf_row_store *s, const json_t *row)
{
    s->columns = json_array();
    s->strings = json_object();
    s->configs = json_object();
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)row, key, value)
        json_array_append_new(s->columns, json_string(key));
    s->n_columns = json_array_size(s->columns);
    s->config_column = bf_row_store_column(s, "config");
    s->seed_column = bf_row_store_column(s, "seed");
}

/* The one copy of a value that many rows hold: a string, or a small
 * non-negative integer (depths, steps, attempts, ids of small sweeps). */
static json_t *shared_value(bf_row_store *s, json_t *value)
{
    if (json_is_string(value)
        && strlen(json_string_value(value)) == json_string_length(value)) {
        json_t *have = json_object_get(s->strings, json_string_value(value));
        if (!have)
            json_object_set(s->strings, json_string_value(value),
                            have = value);
        return json_incref(have);
    }
    if (json_is_integer(value) && json_integer_value(value) >= 0
        && json_integer_value(value) < BF_ROW_STORE_SMALL_INTS) {
        if (!s->small_ints)
            s->small_ints = bf_xcalloc(BF_ROW_STORE_SMALL_INTS,
                                       sizeof *s->small_ints);
        json_t **slot = &s->small_ints[json_integer_value(value)];
        if (!*slot)
            *slot = json_incref(value);
        return json_incref(*slot);
    }
    return json_incref(value);
}

/* The shared config of a row: its seed null when the seed is the row's
 * seed column (*moved set), so that the jobs of a cell share one; the
 * seed keeps its place, and the row handed out whole its key order. */
static json_t *shared_config(bf_row_store *s, json_t *config,
                             const json_t *seed, unsigned char *moved)
{
    json_t *parsed = json_is_string(config)
        ? json_loads(json_string_value(config), 0, NULL) : json_incref(config);
    if (!json_is_object(parsed)) {
        json_decref(parsed);
        *moved = 0;
        return shared_value(s, config);
    }
    json_t *key_config = parsed;
    *moved = seed && json_equal(json_object_get(parsed, "seed"), seed);
    if (*moved) {
        key_config = json_copy(parsed);
        json_object_set(key_config, "seed", json_null());
        json_decref(parsed);
    }
    char *key = json_dumps(key_config, JSON_COMPACT | JSON_SORT_KEYS
                                       | JSON_REAL_PRECISION(17));
    json_t *have = json_object_get(s->configs, key);
    if (!have)
        json_object_set(s->configs, key, have = key_config);
    free(key);
    json_decref(key_config);
    return json_incref(have);
}

void bf_row_store_add(bf_row_store *s, const json_t *row)
{
    if (!s->columns)
        set_columns(s, row);
    if (s->n_rows == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->cells = bf_xrealloc(s->cells, s->cap * (s->n_columns + !s->n_columns)
                                         * sizeof *s->cells);
        s->seed_moved = bf_xrealloc(s->seed_moved, s->cap);
    }
    json_t **cells = s->cells + s->n_rows * s->n_columns;
    unsigned char *moved = &s->seed_moved[s->n_rows];
    *moved = 0;
    const json_t *seed = s->seed_column < 0 ? NULL
        : json_object_get(row, "seed");
    for (size_t c = 0; c < s->n_columns; c++) {
        json_t *value = json_object_get(row, json_string_value(
            json_array_get(s->columns, c)));
        cells[c] = !value ? NULL
            : (int)c == s->config_column ? shared_config(s, value, seed, moved)
            : shared_value(s, value);
    }
    s->n_rows++;
}

json_t *bf_row_store_at(const bf_row_store *s, size_t row, int column)
{
    return column < 0 || (size_t)column >= s->n_columns || row >= s->n_rows
        ? NULL : s->cells[row * s->n_columns + (size_t)column];
}

json_t *bf_row_store_get(const bf_row_store *s, size_t row, const char *name)
{
    return bf_row_store_at(s, row, bf_row_store_column(s, name));
}

json_t *bf_row_store_config(const bf_row_store *s, size_t row,
                            const char *field)
{
    if (s->config_column < 0 || row >= s->n_rows)
        return NULL;
    json_t **cells = s->cells + row * s->n_columns;
    if (s->seed_moved[row] && strcmp(field, "seed") == 0)
        return cells[s->seed_column];
    return json_object_get(cells[s->config_column], field);
}

json_t *bf_row_store_row(const bf_row_store *s, size_t row)
{
    json_t *out = json_object();
    if (row >= s->n_rows)
        return out;
    json_t **cells = s->cells + row * s->n_columns;
    for (size_t c = 0; c < s->n_columns; c++) {
        if (!cells[c])
            continue;
        json_t *value = json_incref(cells[c]);
        if ((int)c == s->config_column && s->seed_moved[row]) {
            json_decref(value);
            value = json_copy(cells[c]);
            json_object_set(value, "seed", cells[s->seed_column]);
        }
        json_object_set_new(out, json_string_value(json_array_get(s->columns,
                                                                   c)), value);
    }
    return out;
}
