#include "score.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "checkpoint.h"
#include "model.h"
#include "records.h"
#include "tasks.h"

/* The longest input line, in bytes: 16 per id of each array (an id of the
 * vocabulary is at most 3 digits, 5 bytes with ", ") and 1 KiB for the
 * keys and spacing.  A longer line is refused once that many bytes are
 * read, so memory stays at this, whatever the file holds. */
#define LINE_BYTES_PER_POSITION 32
#define LINE_BYTES_SLACK 1024

typedef struct scorer {
    bf_model model;
    int vocab, max_len;
    int *inputs, *targets;   /* [max_len] */
    char *line;              /* [line_limit + 2]: the line, '\n', NUL */
    size_t line_limit;       /* bytes of a line, its newline not counted */
    const char *path;        /* input file, for messages */
} scorer;

static int scorer_open(scorer *s, const char *checkpoint_path, bf_error *err)
{
    bf_checkpoint ck;
    if (bf_checkpoint_open(&ck, checkpoint_path, err) != 0)
        return -1;
    s->vocab = bf_vocab_size(&ck.cfg);
    s->max_len = ck.cfg.seq_len;
    bf_model_shape shape;
    bf_model_size_from_config(&shape, &ck.cfg, s->vocab);
    int rc = bf_model_create(&s->model, &shape, 1, s->max_len, err);
    if (rc == 0 && bf_checkpoint_load_params(&ck, &s->model, err) != 0) {
        bf_model_free(&s->model);
        rc = -1;
    }
    bf_checkpoint_close(&ck);
    if (rc != 0)
        return -1;
    s->inputs = bf_xmalloc((size_t)s->max_len * sizeof *s->inputs);
    s->targets = bf_xmalloc((size_t)s->max_len * sizeof *s->targets);
    s->line_limit = LINE_BYTES_SLACK +
                    (size_t)LINE_BYTES_PER_POSITION * (size_t)s->max_len;
    s->line = bf_xmalloc(s->line_limit + 2);
    return 0;
}

static void scorer_close(scorer *s)
{
    bf_model_free(&s->model);
    free(s->inputs);
    free(s->targets);
    free(s->line);
}

/* Copies arr into out, checking every id lies in [lowest, vocab). */
static int parse_ids(const scorer *s, const json_t *arr, const char *field,
                     int lineno, int lowest, int *out, bf_error *err)
{
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *v = json_array_get(arr, i);
        char where[64];
        snprintf(where, sizeof where, "%s[%zu]", field, i);
        if (!json_is_integer(v))
            return bf_error_set(err, s->path, lineno, where,
                                "not an integer");
        json_int_t id = json_integer_value(v);
        if (id < lowest || id >= s->vocab)
            return bf_error_set(err, s->path, lineno, where,
                                "id %lld outside [%d, %d) (vocabulary of "
                                "the checkpoint's task)", (long long)id,
                                lowest, s->vocab);
        out[i] = (int)id;
    }
    return 0;
}

/* Validates one line's object into s->inputs/targets; *len gets its length. */
static int parse_line(scorer *s, const json_t *obj, int lineno, int *len,
                      bf_error *err)
{
    if (!json_is_object(obj))
        return bf_error_set(err, s->path, lineno, NULL,
                            "expected an object {\"input\": [...], "
                            "\"target\": [...]}");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
        if (strcmp(key, "input") != 0 && strcmp(key, "target") != 0)
            return bf_error_set(err, s->path, lineno, key, "unknown field");
    const json_t *in = json_object_get(obj, "input");
    const json_t *tg = json_object_get(obj, "target");
    if (!json_is_array(in))
        return bf_error_set(err, s->path, lineno, "input",
                            "missing or not an array");
    if (!json_is_array(tg))
        return bf_error_set(err, s->path, lineno, "target",
                            "missing or not an array");
    size_t n = json_array_size(in);
    if (json_array_size(tg) != n)
        return bf_error_set(err, s->path, lineno, "target",
                            "has %zu entries but input has %zu",
                            json_array_size(tg), n);
    if (n < 1 || n > (size_t)s->max_len)
        return bf_error_set(err, s->path, lineno, "input",
                            "length %zu outside 1..%d (the model's seq_len)",
                            n, s->max_len);
    if (parse_ids(s, in, "input", lineno, 0, s->inputs, err) != 0 ||
        parse_ids(s, tg, "target", lineno, -1, s->targets, err) != 0)
        return -1;
    *len = (int)n;
    return 0;
}

static int print_record(FILE *out, json_t *rec, bf_error *err)
{
    int rc = rec ? bf_record_print(out, rec) : -1;
    json_decref(rec);
    if (rc != 0)
        return bf_error_set(err, NULL, 0, NULL, "cannot write output: %s",
                            strerror(errno));
    return 0;
}

/* Scores one non-blank line of `bytes` bytes; adds to the running totals.
 * Whatever follows the object on the line is an error (jansson's EOF
 * check), not ignored. */
static int score_line(scorer *s, size_t bytes, int lineno, FILE *out,
                      double *loss_total, long *target_total, bf_error *err)
{
    json_error_t jerr;
    json_t *obj = json_loadb(s->line, bytes, 0, &jerr);
    if (!obj)
        return bf_error_set(err, s->path, lineno, NULL,
                            "not valid JSON: %s (column %d)", jerr.text,
                            jerr.column);
    int len = 0, n = 0;
    int rc = parse_line(s, obj, lineno, &len, err);
    json_decref(obj);
    if (rc != 0)
        return -1;
    double sum = bf_model_forward(&s->model, s->inputs, s->targets, NULL, 1,
                                  len, &n);
    *loss_total += sum;
    *target_total += n;
    return print_record(out, json_pack("{s:o, s:i}", "loss",
                        bf_record_real(n > 0 ? sum / n : NAN),
                        "targets", n), err);
}

static int is_blank(const char *line)
{
    return line[strspn(line, " \t\r\n")] == '\0';
}

/* Reads line lineno into s->line, stopping past s->line_limit bytes: 1
 * with its length in *len, 0 at the end of the file, -1 with err set when
 * the line is too long, holds a NUL byte (which would hide what follows
 * it) or cannot be read. */
static int read_line(scorer *s, FILE *in, int lineno, size_t *len,
                     bf_error *err)
{
    size_t n = 0;
    int c = 0;
    while (n <= s->line_limit && c != '\n' && (c = getc_unlocked(in)) != EOF)
        s->line[n++] = (char)c;
    if (ferror(in))
        return bf_error_set(err, s->path, lineno, NULL, "cannot read: %s",
                            strerror(errno));
    if (n > s->line_limit && c != '\n')
        return bf_error_set(err, s->path, lineno, NULL, "line longer than "
                            "%zu bytes (%d + %d per position of the model's "
                            "seq_len %d)", s->line_limit, LINE_BYTES_SLACK,
                            LINE_BYTES_PER_POSITION, s->max_len);
    const char *nul = memchr(s->line, '\0', n);
    if (nul)
        return bf_error_set(err, s->path, lineno, NULL, "NUL byte at "
                            "column %zu", (size_t)(nul - s->line) + 1);
    s->line[n] = '\0';
    *len = n;
    return n > 0;
}

/* Scores every line of in, printing a record per non-blank line; *lines
 * gets their count. */
static int score_lines(scorer *s, FILE *in, FILE *out, double *loss_total,
                       long *target_total, int *lines, bf_error *err)
{
    size_t len = 0;
    int got;
    for (int lineno = 1; (got = read_line(s, in, lineno, &len, err)) > 0;
         lineno++) {
        if (is_blank(s->line))
            continue;
        if (score_line(s, len, lineno, out, loss_total, target_total,
                       err) != 0)
            return -1;
        ++*lines;
    }
    return got;
}

int bf_score_file(const char *checkpoint_path, const char *input_path,
                  FILE *out, bf_error *err)
{
    FILE *in = fopen(input_path, "r");
    if (!in)
        return bf_error_set(err, input_path, 0, NULL, "cannot open: %s",
                            strerror(errno));
    scorer s = {.path = input_path};
    if (scorer_open(&s, checkpoint_path, err) != 0) {
        fclose(in);
        return -1;
    }
    double loss_total = 0;
    long target_total = 0;
    int lines = 0;
    int rc = score_lines(&s, in, out, &loss_total, &target_total, &lines,
                         err);
    fclose(in);
    scorer_close(&s);
    if (rc != 0)
        return -1;
    return print_record(out, json_pack("{s:o, s:I, s:i}", "mean_loss",
        bf_record_real(target_total > 0 ? loss_total / target_total : NAN),
        "targets", (json_int_t)target_total, "lines", lines), err);
}
