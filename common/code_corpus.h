/* code_corpus: the real source files the `code` task cuts its snippets from.
 *
 * A corpus is every usable source file under one directory (`code_dir`),
 * read once per process, lexed into a compact alphabet of code symbols
 * (brackets as themselves, everything else as a few classes; comments and
 * blanks dropped: docs/tasks.md) and kept as one byte per symbol, with an
 * index that makes the r-th snippet of a depth a short scan.
 *
 * Files are taken in byte order of their path relative to the directory,
 * and each belongs to the training split or the held-out evaluation split
 * by a hash of that relative path alone: a file is never in both, and
 * adding or removing other files moves no file between splits.
 *
 * A snippet of depth d (1 .. BF_CODE_MAX_DEPTH) is a window of one file's
 * symbols that ends with exactly d brackets open, all opened inside the
 * window, within the last bf_code_prompt_max(d) symbols (task_kind.h); the
 * window reaches back up to that length but never past the bracket that
 * encloses the d open ones, so it is always a bracket prefix whose closing
 * sequence is determined.  Snippets are numbered 0 .. n-1 per (split,
 * depth), in file order. */
#ifndef BF_CODE_CORPUS_H
#define BF_CODE_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "bf_error.h"

/* Deepest snippet depth counted; deeper nests are still read correctly. */
#define BF_CODE_MAX_DEPTH 32

/* Code symbols.  Bracket type i opens as 2i and closes as 2i + 1. */
enum {
    BF_CODE_PAREN_OPEN, BF_CODE_PAREN_CLOSE,     /* ( ) */
    BF_CODE_SQUARE_OPEN, BF_CODE_SQUARE_CLOSE,   /* [ ] */
    BF_CODE_CURLY_OPEN, BF_CODE_CURLY_CLOSE,     /* { } */
    BF_CODE_NAME,    /* an identifier or keyword (any non-ASCII byte too) */
    BF_CODE_NUMBER,  /* a numeric literal */
    BF_CODE_STRING,  /* a whole string or character literal */
    BF_CODE_NEWLINE, /* line breaks, with the indentation after them */
    BF_CODE_COMMA, BF_CODE_DOT, BF_CODE_COLON,
    BF_CODE_OP,      /* a run of other punctuation: = += -> ** ; ... */
    BF_CODE_N_SYMBOLS
};
#define BF_CODE_N_BRACKET_TYPES 3

enum { BF_CODE_TRAIN, BF_CODE_EVAL, BF_CODE_N_SPLITS };

typedef struct bf_code_corpus bf_code_corpus;

/* Limits on the tree a corpus is read from, so that no code_dir (say "/"
 * or "/usr") can make a process walk or hold more: directory entries
 * walked (hidden ones counted, not entered), source files listed, and
 * bytes of source read.  A tree over any of them is refused, named. */
#define BF_CODE_MAX_ENTRIES 100000
#define BF_CODE_MAX_FILES 20000
#define BF_CODE_MAX_SOURCE_BYTES (128ULL << 20)
/* Corpora that nobody holds, kept for the next caller of the process. */
#define BF_CODE_CACHE_IDLE 2

/* The corpus of `dir` (an absolute path to a directory), held by the
 * caller until bf_code_corpus_put.  Corpora are shared within the process
 * (thread-safe) and keyed by the directory itself, not its spelling: every
 * path to one directory is one corpus.  NULL with err (message only: the
 * caller adds the field) when the directory cannot be read, is over the
 * limits above, or holds no usable file. */
const bf_code_corpus *bf_code_corpus_get(const char *dir, bf_error *err);

/* Lets go of a corpus got above (NULL: nothing).  Once nobody holds it, it
 * stays cached as one of the BF_CODE_CACHE_IDLE most recently used, or is
 * freed. */
void bf_code_corpus_put(const bf_code_corpus *c);

/* Frees every corpus nobody holds (the daemon, after a refused sweep). */
void bf_code_corpus_drop_idle(void);

/* How many corpora the process holds or keeps, and (bytes, may be NULL)
 * their memory: for the tests and benchmarks. */
int bf_code_corpus_cached(size_t *bytes);

/* What a corpus holds, for the docs (`bifocal-worker code-stats`) and the
 * validator. */
typedef struct bf_code_stats {
    int files_seen;        /* source files by extension */
    int files_left_out;    /* unreadable, or brackets that do not pair up */
    int files[BF_CODE_N_SPLITS];     /* usable files per split */
    uint64_t source_bytes;           /* of the usable files */
    uint64_t symbols[BF_CODE_N_SPLITS];
    size_t memory_bytes;             /* what the loaded corpus occupies */
    uint32_t snippets[BF_CODE_N_SPLITS][BF_CODE_MAX_DEPTH + 1];
} bf_code_stats;

void bf_code_corpus_stats(const bf_code_corpus *c, bf_code_stats *out);

/* Snippets of `depth` in `split` (0 for a depth over BF_CODE_MAX_DEPTH). */
uint32_t bf_code_snippet_count(const bf_code_corpus *c, int split, int depth);

/* One snippet as the task lays it out. */
typedef struct bf_code_snippet {
    const uint8_t *prompt;   /* into the corpus: the window's symbols */
    int prompt_len;          /* 1 .. bf_code_prompt_max(depth) */
    uint8_t closes[BF_CODE_MAX_DEPTH]; /* the answer, innermost first */
    int file;                /* index of its file (bf_code_file) */
} bf_code_snippet;

/* Snippet `index` (< bf_code_snippet_count) of `depth` in `split`. */
void bf_code_snippet_get(const bf_code_corpus *c, int split, int depth,
                         uint32_t index, bf_code_snippet *out);

/* The usable files, 0 .. files[TRAIN] + files[EVAL] - 1, in path order. */
typedef struct bf_code_file {
    const char *path;        /* relative to the corpus directory */
    int split;
    const uint8_t *symbols;  /* the file's symbols */
    uint32_t n_symbols;
} bf_code_file;

int bf_code_file_count(const bf_code_corpus *c);
void bf_code_file_at(const bf_code_corpus *c, int i, bf_code_file *out);

/* The split a file of this relative path belongs to. */
int bf_code_split_of(const char *relative_path);

/* Printable name of a code symbol ("(", "name", "nl", ...). */
const char *bf_code_symbol_name(int symbol);

#endif
