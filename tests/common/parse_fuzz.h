/* Seeded text mutations for the parser fuzz tests (tests/common and
 * tests/server): byte flips, insertions, deletions, truncation, swapped,
 * duplicated and deleted lines, and inserted YAML constructs (anchors,
 * aliases, tags, documents, block scalars, deep nesting, tabs, BOMs, NULs,
 * very long lines).  Header-only; every draw comes from the caller's
 * bf_rng, so a seed names the whole run.  Include it after <cmocka.h>: the
 * run helpers at the end assert. */
#ifndef BFT_PARSE_FUZZ_H
#define BFT_PARSE_FUZZ_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf_error.h"
#include "file.h"
#include "rng.h"

typedef struct bft_text { char *p; size_t n, cap; } bft_text;

static inline void bft_text_reserve(bft_text *t, size_t more)
{
    if (t->n + more + 1 > t->cap) {
        t->cap = 2 * (t->n + more + 1);
        t->p = realloc(t->p, t->cap);
    }
}

static inline void bft_text_insert(bft_text *t, size_t at, const char *s, size_t n)
{
    bft_text_reserve(t, n);
    memmove(t->p + at + n, t->p + at, t->n - at);
    memcpy(t->p + at, s, n);
    t->n += n;
    t->p[t->n] = '\0';
}

static inline void bft_text_set(bft_text *t, const char *s, size_t n)
{
    t->n = 0;
    bft_text_insert(t, 0, s, n);
}

/* Start offset of line k (0-based) and its length including the newline. */
static inline size_t bft_line_span(const bft_text *t, size_t k, size_t *len)
{
    size_t start = 0;
    for (size_t i = 0; i < t->n && k; i++)
        if (t->p[i] == '\n') {
            start = i + 1;
            k--;
        }
    size_t end = start;
    while (end < t->n && t->p[end] != '\n')
        end++;
    *len = end - start + (end < t->n);
    return start;
}

static inline size_t bft_n_lines(const bft_text *t)
{
    size_t n = 1;
    for (size_t i = 0; i < t->n; i++)
        n += t->p[i] == '\n';
    return n;
}

static const char *const bft_yaml_bits[] = {
    "&a ", "*a", "&anchor x: 1\n", "<<: *a\n", "!!str ", "!tag ", "!!int ",
    "---\n", "...\n", "%YAML 1.2\n", "? key\n", ": value\n", "- ", "- - - ",
    "key: |\n  block\n  text\n", "key: >-\n  folded\n", "\"unterminated",
    "'single", "\"esc \\x41 \\u00e9 \\q\"", "\t", "  ", "# comment\n",
    "key: [1, 2", "{a: 1, b", "a: b: c\n", "\xef\xbb\xbf", "\xff\xfe",
    "\xc3", "\xed\xa0\x80", "~", "null", "0x1F", "0o17", "1e999",
    "99999999999999999999", "-", ".inf", ".nan", ":", ",", "[]", "{}",
    "steps: -5\n", "depth: 1000000\n", "rope: [a, b]\n", "grid: {}\n",
    "seeds: 0\n", "seeds: [1, 1]\n", "base: 3\n", "name: \n",
};

/* One random mutation of t. */
static inline void bft_mutate_text(bf_rng *r, bft_text *t)
{
    size_t at = t->n ? bf_rng_below(r, (uint32_t)t->n) : 0;
    size_t nl = bft_n_lines(t);
    switch (bf_rng_below(r, 12)) {
    case 0:                                         /* bit flips */
        for (int i = 0, k = 1 + (int)bf_rng_below(r, 4); i < k && t->n; i++)
            t->p[bf_rng_below(r, (uint32_t)t->n)] ^= (char)(1u << bf_rng_below(r, 8));
        break;
    case 1:                                         /* truncation */
        t->n = at;
        t->p[t->n] = '\0';
        break;
    case 2: {                                       /* a random byte */
        char c = (char)bf_rng_below(r, 256);
        bft_text_insert(t, at, &c, 1);
        break;
    }
    case 3: {                                       /* delete a span */
        size_t len = bf_rng_below(r, 32);
        if (at + len > t->n)
            len = t->n - at;
        memmove(t->p + at, t->p + at + len, t->n - at - len + 1);
        t->n -= len;
        break;
    }
    case 4: {                                       /* swap two lines */
        size_t la, lb, a = bft_line_span(t, bf_rng_below(r, (uint32_t)nl), &la);
        char *copy = malloc(la + 1);
        memcpy(copy, t->p + a, la);
        memmove(t->p + a, t->p + a + la, t->n - a - la + 1);
        t->n -= la;
        size_t b = bft_line_span(t, bf_rng_below(r, (uint32_t)bft_n_lines(t)), &lb);
        bft_text_insert(t, b, copy, la);
        free(copy);
        break;
    }
    case 5: {                                       /* duplicate a line */
        size_t len, a = bft_line_span(t, bf_rng_below(r, (uint32_t)nl), &len);
        char *copy = malloc(len + 1);
        memcpy(copy, t->p + a, len);
        bft_text_insert(t, a, copy, len);
        free(copy);
        break;
    }
    case 6: {                                       /* delete a line */
        size_t len, a = bft_line_span(t, bf_rng_below(r, (uint32_t)nl), &len);
        memmove(t->p + a, t->p + a + len, t->n - a - len + 1);
        t->n -= len;
        break;
    }
    case 7: case 8: {                               /* a YAML construct */
        const char *s = bft_yaml_bits[bf_rng_below(r,
            sizeof bft_yaml_bits / sizeof *bft_yaml_bits)];
        size_t len, a = bft_line_span(t, bf_rng_below(r, (uint32_t)nl), &len);
        bft_text_insert(t, bf_rng_below(r, 2) ? a : at, s, strlen(s));
        break;
    }
    case 9: {                                       /* re-indent a line */
        size_t len, a = bft_line_span(t, bf_rng_below(r, (uint32_t)nl), &len);
        bft_text_insert(t, a, "   ", 1 + bf_rng_below(r, 3));
        break;
    }
    case 10: {                                      /* deep nesting */
        size_t depth = 100 + bf_rng_below(r, 20000);
        const char *open = bf_rng_below(r, 3) == 0 ? "- " : bf_rng_below(r, 2) ? "[" : "{a: ";
        size_t ol = strlen(open);
        char *s = malloc(depth * ol + 1);
        for (size_t i = 0; i < depth; i++)
            memcpy(s + i * ol, open, ol);
        if (open[0] == '-')       /* block sequences nest by indentation */
            for (size_t i = 0; i < depth; i++)
                s[i * ol + 1] = i % 2 ? '\n' : ' ';
        bft_text_insert(t, at, s, depth * ol);
        free(s);
        break;
    }
    default: {                                      /* a NUL or a long line */
        if (bf_rng_below(r, 2)) {
            bft_text_insert(t, at, "", 1);
        } else {
            size_t n = 1000 + bf_rng_below(r, 100000);
            char *s = malloc(n);
            memset(s, 'x', n);
            bft_text_insert(t, at, s, n);
            free(s);
        }
    }
    }
}

/* The fixed seed (BFT_FUZZ_SEED overrides it), printed so a failure can be
 * repeated. */
static inline uint64_t bft_fuzz_seed(uint64_t dflt)
{
    const char *env = getenv("BFT_FUZZ_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0) : dflt;
    printf("fuzz seed 0x%llx (BFT_FUZZ_SEED=0x%llx to repeat)\n",
           (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

/* One example file under fuzz: its original text and the run's PRNG. */
typedef struct bft_fuzz_run {
    char *orig;
    size_t len;
    bf_rng r;
} bft_fuzz_run;

/* Reads example (a path relative to $BF_SOURCE_ROOT, default ".") and seeds
 * the run from seed and the example, failing the test if it is missing. */
static inline void bft_fuzz_begin(bft_fuzz_run *run, const char *example,
                                  uint64_t seed)
{
    const char *root = getenv("BF_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", example);
    bf_error err;
    run->orig = bf_read_file(path, &run->len, &err);
    if (!run->orig)
        fail_msg("%s", err.msg);
    bf_rng_seed(&run->r, bf_rng_key(seed, (uint64_t)strlen(example)));
}

/* The next input: the original with one to four mutations. */
static inline void bft_fuzz_next(bft_fuzz_run *run, bft_text *t)
{
    bft_text_set(t, run->orig, run->len);
    for (int k = 0, n = 1 + (int)bf_rng_below(&run->r, 4); k < n; k++)
        bft_mutate_text(&run->r, t);
}

static inline void bft_fuzz_end(bft_fuzz_run *run, bft_text *t)
{
    free(t->p);
    free(run->orig);
}

/* A rejected input's error must say what and where: a message naming file,
 * and a line > 0 when need_line (broken YAML). */
static inline void bft_assert_error_names(const bf_error *err,
                                          const char *file, int need_line,
                                          const char *stage, const bft_text *t)
{
    if (!err->msg[0] || strcmp(err->file, file) != 0 || !strstr(err->msg, file)
        || (need_line && err->line <= 0))
        fail_msg("bad %s error for %s (line %d, file '%s'): '%s'\n--- input "
                 "(%zu bytes) ---\n%.2000s", stage, file, err->line, err->file,
                 err->msg, t->n, t->p);
}

#endif
