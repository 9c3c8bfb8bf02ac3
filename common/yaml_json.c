/* YAML -> jansson over libyaml's event API.  One recursive reader walks the
 * event stream, keeping the JSON pointer of the node it is on so that the
 * line table and error messages can name it. */
#include "yaml_json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "file.h"

/* Deep enough for any config; shallow enough that hostile input cannot
 * exhaust the C stack through recursion. */
#define MAX_NESTING 64
#define POINTER_CAP 1024

typedef struct yaml_reader {
    yaml_parser_t parser;
    const char *file;
    json_t *lines;            /* line table being built */
    bf_error *err;
    char pointer[POINTER_CAP];/* JSON pointer of the current node */
    size_t pointer_len;
} yaml_reader;

/* "/grid/rope/1" -> "grid.rope.1": the dotted form bf_error uses. */
static void pointer_to_dotted(const char *pointer, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = pointer; *p && n + 1 < cap; p++) {
        char c = *p;
        if (c == '/') {
            if (p == pointer)
                continue;
            c = '.';
        } else if (c == '~' && (p[1] == '0' || p[1] == '1')) {
            c = p[1] == '0' ? '~' : '/';
            p++;
        }
        out[n++] = c;
    }
    out[n] = '\0';
}

/* Sets err at `line`, naming the current node (if any). */
static json_t *reader_fail(yaml_reader *r, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static json_t *reader_fail(yaml_reader *r, int line, const char *fmt, ...)
{
    char body[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    char field[128];
    pointer_to_dotted(r->pointer, field, sizeof field);
    bf_error_set(r->err, r->file, line, field, "%s", body);
    return NULL;
}

static int event_line(const yaml_event_t *ev)
{
    return (int)ev->start_mark.line + 1;
}

static json_t *syntax_error(yaml_reader *r)
{
    const yaml_parser_t *p = &r->parser;
    int line = (int)p->problem_mark.line + 1;
    const char *problem = p->problem ? p->problem : "unknown problem";
    if (p->context)
        return reader_fail(r, line, "YAML syntax error: %s (%s, from line %d)",
                           problem, p->context, (int)p->context_mark.line + 1);
    return reader_fail(r, line, "YAML syntax error: %s", problem);
}

static int next_event(yaml_reader *r, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&r->parser, ev)) {
        syntax_error(r);
        return -1;
    }
    return 0;
}

/* Appends "/" + escaped token to the pointer; returns the old length so the
 * caller can pop it. */
static int pointer_push(yaml_reader *r, const char *token, size_t *saved)
{
    *saved = r->pointer_len;
    size_t n = r->pointer_len;
    if (n + 1 >= POINTER_CAP)
        return -1;
    r->pointer[n++] = '/';
    for (const char *p = token; *p; p++) {
        const char *esc = *p == '~' ? "~0" : *p == '/' ? "~1" : NULL;
        size_t need = esc ? 2 : 1;
        if (n + need >= POINTER_CAP)
            return -1;
        if (esc) {
            memcpy(r->pointer + n, esc, 2);
        } else {
            r->pointer[n] = *p;
        }
        n += need;
    }
    r->pointer[n] = '\0';
    r->pointer_len = n;
    return 0;
}

static void pointer_pop(yaml_reader *r, size_t saved)
{
    r->pointer_len = saved;
    r->pointer[saved] = '\0';
}

/* Records the line of the current node unless one is recorded already
 * (a mapping member keeps the line of its key). */
static void record_line(yaml_reader *r, int line)
{
    if (!json_object_get(r->lines, r->pointer))
        json_object_set_new(r->lines, r->pointer, json_integer(line));
}

static int all_in(const char *s, size_t n, const char *set)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr(set, s[i]))
            return 0;
    return 1;
}

static int is_one_of(const char *s, const char *const *words)
{
    for (; *words; words++)
        if (strcmp(s, *words) == 0)
            return 1;
    return 0;
}

/* YAML 1.2 core float: [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? )
 *                      ( [eE] [-+]? [0-9]+ )?  (and not an integer). */
static int is_core_float(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    size_t int_digits = strspn(s, "0123456789");
    s += int_digits;
    size_t frac_digits = 0;
    if (*s == '.') {
        s++;
        frac_digits = strspn(s, "0123456789");
        s += frac_digits;
    }
    if (int_digits == 0 && frac_digits == 0)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+')
            s++;
        size_t exp_digits = strspn(s, "0123456789");
        if (exp_digits == 0)
            return 0;
        s += exp_digits;
    }
    return *s == '\0';
}

static json_t *resolve_integer(yaml_reader *r, int line, const char *s,
                               int base)
{
    errno = 0;
    if (base == 10) {
        long long v = strtoll(s, NULL, 10);
        if (errno == ERANGE)
            return reader_fail(r, line, "integer %s is out of range "
                               "(allowed: -2^63 .. 2^63-1)", s);
        return json_integer(v);
    }
    unsigned long long v = strtoull(s + 2, NULL, base); /* after 0o / 0x */
    if (errno == ERANGE || v > (unsigned long long)LLONG_MAX)
        return reader_fail(r, line, "integer %s is out of range "
                           "(allowed: 0 .. 2^63-1)", s);
    return json_integer((json_int_t)v);
}

/* Plain scalar -> typed JSON value, YAML 1.2 core schema. */
static json_t *resolve_plain(yaml_reader *r, int line, const char *s, size_t n)
{
    static const char *const nulls[] = {"~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    if (n == 0 || is_one_of(s, nulls))
        return json_null();
    if (is_one_of(s, trues))
        return json_true();
    if (is_one_of(s, falses))
        return json_false();
    const char *unsigned_part = (*s == '-' || *s == '+') ? s + 1 : s;
    if (all_in(unsigned_part, strlen(unsigned_part), "0123456789"))
        return resolve_integer(r, line, s, 10);
    if (n > 2 && s[0] == '0' && s[1] == 'o' && all_in(s + 2, n - 2, "01234567"))
        return resolve_integer(r, line, s, 8);
    if (n > 2 && s[0] == '0' && s[1] == 'x' &&
        all_in(s + 2, n - 2, "0123456789abcdefABCDEF"))
        return resolve_integer(r, line, s, 16);
    if (is_core_float(s)) {
        errno = 0;
        double v = strtod(s, NULL);
        /* Underflow to 0 would pass 1e-400 on as another value, silently. */
        if (!isfinite(v) || (v == 0 && errno == ERANGE))
            return reader_fail(r, line, "number %s is out of range (a double "
                               "would hold it as %s)", s, v == 0 ? "0" :
                               "infinity");
        return json_real(v);
    }
    return json_stringn(s, n);
}

static json_t *read_node(yaml_reader *r, yaml_event_t *ev, int depth);

static json_t *read_scalar(yaml_reader *r, yaml_event_t *ev)
{
    int line = event_line(ev);
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    if (strlen(s) != n)
        return reader_fail(r, line, "scalar contains a NUL byte");
    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        return resolve_plain(r, line, s, n);
    return json_stringn(s, n); /* libyaml has checked the UTF-8 already */
}

static json_t *read_sequence(yaml_reader *r, int depth)
{
    json_t *arr = json_array();
    for (size_t i = 0;; i++) {
        yaml_event_t ev;
        if (next_event(r, &ev) < 0)
            goto fail;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return arr;
        }
        char index[32];
        snprintf(index, sizeof index, "%zu", i);
        size_t saved;
        if (pointer_push(r, index, &saved) < 0) {
            reader_fail(r, event_line(&ev), "document nested too deeply");
            yaml_event_delete(&ev);
            goto fail;
        }
        json_t *item = read_node(r, &ev, depth + 1);
        pointer_pop(r, saved);
        if (!item)
            goto fail;
        json_array_append_new(arr, item);
    }
fail:
    json_decref(arr);
    return NULL;
}

/* Why a mapping key event cannot be used, or NULL when it can. */
static const char *key_problem(const yaml_event_t *ev)
{
    if (ev->type != YAML_SCALAR_EVENT)
        return "mapping keys must be scalars";
    if (ev->data.scalar.anchor || ev->data.scalar.tag)
        return "anchors and tags are not supported";
    if (strlen((const char *)ev->data.scalar.value) != ev->data.scalar.length)
        return "mapping key contains a NUL byte";
    return NULL;
}

/* Reads one key/value pair whose key event is `key_ev` (consumed). */
static int read_member(yaml_reader *r, json_t *obj, yaml_event_t *key_ev,
                       int depth)
{
    int line = event_line(key_ev);
    const char *problem = key_problem(key_ev);
    const char *key = problem ? NULL : (const char *)key_ev->data.scalar.value;
    size_t saved = r->pointer_len;
    json_t *value = NULL;
    if (problem) {
        reader_fail(r, line, "%s", problem);
    } else if (pointer_push(r, key, &saved) < 0) {
        reader_fail(r, line, "document nested too deeply");
    } else if (json_object_get(obj, key)) {
        reader_fail(r, line, "duplicate key '%s' (first at line %d)", key,
                    bf_yaml_line(r->lines, r->pointer));
    } else {
        record_line(r, line);
        yaml_event_t value_ev;
        if (next_event(r, &value_ev) == 0)
            value = read_node(r, &value_ev, depth + 1);
    }
    int rc = value ? json_object_set_new(obj, key, value) : -1;
    if (value && rc < 0)
        reader_fail(r, line, "cannot store key '%s'", key);
    pointer_pop(r, saved);
    yaml_event_delete(key_ev);
    return rc;
}

static json_t *read_mapping(yaml_reader *r, int depth)
{
    json_t *obj = json_object();
    for (;;) {
        yaml_event_t ev;
        if (next_event(r, &ev) < 0)
            break;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return obj;
        }
        if (read_member(r, obj, &ev, depth) < 0)
            break;
    }
    json_decref(obj);
    return NULL;
}

/* Converts the node that starts with `ev`; always deletes `ev`. */
static json_t *read_node(yaml_reader *r, yaml_event_t *ev, int depth)
{
    int line = event_line(ev);
    json_t *v = NULL;
    if (depth > MAX_NESTING) {
        reader_fail(r, line, "document nested deeper than %d levels",
                    MAX_NESTING);
        yaml_event_delete(ev);
        return NULL;
    }
    record_line(r, line);
    switch (ev->type) {
    case YAML_ALIAS_EVENT:
        reader_fail(r, line, "aliases (*%s) are not supported",
                    (const char *)ev->data.alias.anchor);
        break;
    case YAML_SCALAR_EVENT:
        if (ev->data.scalar.anchor || ev->data.scalar.tag)
            reader_fail(r, line, "anchors and tags are not supported");
        else
            v = read_scalar(r, ev);
        break;
    case YAML_SEQUENCE_START_EVENT:
        if (ev->data.sequence_start.anchor || ev->data.sequence_start.tag)
            reader_fail(r, line, "anchors and tags are not supported");
        else
            v = read_sequence(r, depth);
        break;
    case YAML_MAPPING_START_EVENT:
        if (ev->data.mapping_start.anchor || ev->data.mapping_start.tag)
            reader_fail(r, line, "anchors and tags are not supported");
        else
            v = read_mapping(r, depth);
        break;
    default:
        reader_fail(r, line, "unexpected YAML event %d", (int)ev->type);
        break;
    }
    yaml_event_delete(ev);
    return v;
}

/* Expects an event of `type` next; fails with `what` otherwise. */
static int expect_event(yaml_reader *r, yaml_event_type_t type,
                        const char *what)
{
    yaml_event_t ev;
    if (next_event(r, &ev) < 0)
        return -1;
    int ok = ev.type == type;
    if (!ok)
        reader_fail(r, event_line(&ev), "%s", what);
    yaml_event_delete(&ev);
    return ok ? 0 : -1;
}

static json_t *read_stream(yaml_reader *r)
{
    if (expect_event(r, YAML_STREAM_START_EVENT, "expected a YAML stream") < 0)
        return NULL;
    yaml_event_t ev;
    if (next_event(r, &ev) < 0)
        return NULL;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        return json_null();
    }
    yaml_event_delete(&ev); /* DOCUMENT_START */
    if (next_event(r, &ev) < 0)
        return NULL;
    json_t *root = read_node(r, &ev, 0);
    if (!root)
        return NULL;
    if (expect_event(r, YAML_DOCUMENT_END_EVENT,
                     "expected end of document") < 0 ||
        expect_event(r, YAML_STREAM_END_EVENT,
                     "only one YAML document per file is supported") < 0) {
        json_decref(root);
        return NULL;
    }
    return root;
}

json_t *bf_yaml_parse(const char *text, size_t len, const char *file,
                      json_t **lines, bf_error *err)
{
    /* The line table is built even when the caller does not want it: the
     * duplicate-key message cites the first occurrence's line. */
    yaml_reader r = {.file = file, .err = err, .lines = json_object()};
    if (lines)
        *lines = NULL;
    bf_error_clear(err);
    if (!yaml_parser_initialize(&r.parser)) {
        json_decref(r.lines);
        bf_error_set(err, file, 0, NULL, "out of memory starting YAML parser");
        return NULL;
    }
    yaml_parser_set_input_string(&r.parser, (const unsigned char *)text, len);
    json_t *root = read_stream(&r);
    yaml_parser_delete(&r.parser);
    if (root && lines)
        *lines = r.lines;
    else
        json_decref(r.lines);
    return root;
}

json_t *bf_yaml_parse_file(const char *path, json_t **lines, bf_error *err)
{
    if (lines)
        *lines = NULL;
    size_t len;
    char *text = bf_read_file(path, &len, err);
    if (!text)
        return NULL;
    json_t *root = bf_yaml_parse(text, len, path, lines, err);
    free(text);
    return root;
}

int bf_yaml_line(const json_t *lines, const char *pointer)
{
    if (!lines || !pointer)
        return 0;
    const json_t *v = json_object_get(lines, pointer);
    return json_is_integer(v) ? (int)json_integer_value(v) : 0;
}

json_t *bf_yaml_lines_subtree(const json_t *lines, const char *prefix)
{
    json_t *sub = json_object();
    if (!lines)
        return sub;
    size_t plen = strlen(prefix);
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)lines, key, value) {
        if (strncmp(key, prefix, plen) == 0 &&
            (key[plen] == '\0' || key[plen] == '/'))
            json_object_set(sub, key + plen, value);
    }
    return sub;
}
