/* code_corpus: loading a directory of source files into code symbols, and
 * cutting snippets out of them (code_corpus.h).
 *
 * Memory: one byte per symbol for every usable file, the relative paths,
 * and one block record (start, end, file, a count per depth) per ~1,024
 * symbols.  Blocks start where no bracket is open, so the scan that finds
 * a snippet starts from an empty stack and stays short. */
#include "code_corpus.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "file.h"
#include "hash.h"
#include "task_kind.h"

/* A file nested deeper than this is left out as unbalanced. */
#define MAX_NEST 256
/* A block ends at the first bracket-free point after this many symbols. */
#define BLOCK_MIN 1024
/* One file in this many (by the hash of its path) is held out. */
#define EVAL_ONE_IN 5

typedef struct block {
    uint32_t start, end;     /* symbols [start, end), no bracket open at
                                either end */
    int file;
    /* snippets per depth in this block and every earlier block of its
     * split: binary search finds the block of the r-th snippet */
    uint32_t cum[BF_CODE_MAX_DEPTH + 1];
} block;

typedef struct file_entry {
    char *path;
    int split;
    uint32_t start, end;     /* its symbols */
} file_entry;

struct bf_code_corpus {
    uint8_t *sym;
    uint32_t n_sym;
    size_t cap_sym;
    file_entry *files;
    int n_files, cap_files;
    block *blocks[BF_CODE_N_SPLITS];
    int n_blocks[BF_CODE_N_SPLITS], cap_blocks[BF_CODE_N_SPLITS];
    bf_code_stats stats;
};

/* +1 for an opening bracket, -1 for a closing one, 0 for any other symbol */
static int bracket_delta(uint8_t s)
{
    if (s > BF_CODE_CURLY_CLOSE)
        return 0;
    return s % 2 == 0 ? 1 : -1;
}

/* ---- lexing: one file's text into symbols -------------------------------- */

typedef enum { LANG_PYTHON, LANG_C } lang;

/* The language of a file by its extension, or -1 for none we read. */
static int lang_of(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot)
        return -1;
    if (strcmp(dot, ".py") == 0)
        return LANG_PYTHON;
    if (strcmp(dot, ".c") == 0 || strcmp(dot, ".h") == 0)
        return LANG_C;
    return -1;
}

typedef struct lexer {
    bf_code_corpus *c;
    uint32_t file_start;
    uint8_t open[MAX_NEST];  /* types of the brackets open now */
    int level;
    int bad;                 /* a close that pairs with nothing */
} lexer;

static void push_symbol(bf_code_corpus *c, uint8_t s)
{
    if (c->n_sym == c->cap_sym) {
        c->cap_sym = c->cap_sym ? 2 * c->cap_sym : 1 << 16;
        c->sym = bf_xrealloc(c->sym, c->cap_sym);
    }
    c->sym[c->n_sym++] = s;
}

static void emit(lexer *lx, uint8_t s)
{
    bf_code_corpus *c = lx->c;
    int last = c->n_sym > lx->file_start ? c->sym[c->n_sym - 1] : -1;
    /* blank lines and comment lines add nothing; nor does a file's start */
    if (s == BF_CODE_NEWLINE && (last == -1 || last == BF_CODE_NEWLINE))
        return;
    int delta = bracket_delta(s), type = s / 2;
    if (delta > 0 && lx->level == MAX_NEST)
        lx->bad = 1;
    else if (delta > 0)
        lx->open[lx->level++] = (uint8_t)type;
    else if (delta < 0 && (lx->level == 0 || lx->open[--lx->level] != type))
        lx->bad = 1;
    push_symbol(c, s);
}

static int is_name_byte(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '_' || ch >= 0x80;
}

static int is_digit(unsigned char ch) { return ch >= '0' && ch <= '9'; }

static int is_blank(unsigned char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v';
}

/* The symbol of a one-character token, or -1. */
static int single_symbol(unsigned char ch)
{
    static const char singles[] = "()[]{},.:";
    static const uint8_t symbols[] = {
        BF_CODE_PAREN_OPEN, BF_CODE_PAREN_CLOSE, BF_CODE_SQUARE_OPEN,
        BF_CODE_SQUARE_CLOSE, BF_CODE_CURLY_OPEN, BF_CODE_CURLY_CLOSE,
        BF_CODE_COMMA, BF_CODE_DOT, BF_CODE_COLON};
    const char *at = ch ? strchr(singles, ch) : NULL;
    return at ? symbols[at - singles] : -1;
}

/* A comment at p: returns where it ends (the newline stays), or p. */
static const char *skip_comment(lang lg, const char *p, const char *end)
{
    const char *q = p;
    if (lg == LANG_PYTHON && *p == '#')
        q = p + 1;
    else if (lg == LANG_C && end - p >= 2 && p[0] == '/' && p[1] == '/')
        q = p + 2;
    else if (lg == LANG_C && end - p >= 2 && p[0] == '/' && p[1] == '*') {
        for (q = p + 2; q < end && !(q[0] == '*' && q + 1 < end && q[1] == '/');
             q++)
            ;
        return q < end ? q + 2 : end;
    } else
        return p;
    while (q < end && *q != '\n')
        q++;
    return q;
}

/* The string literal opening at p (a quote): returns the byte after it.
 * Python's triple quotes span lines; other literals end at their line. */
static const char *skip_string(lang lg, const char *p, const char *end)
{
    char quote = *p;
    int triple = lg == LANG_PYTHON && end - p >= 3 && p[1] == quote &&
                 p[2] == quote;
    const char *q = p + (triple ? 3 : 1);
    while (q < end) {
        if (*q == '\\' && q + 1 < end) {
            q += 2;
            continue;
        }
        if (!triple && *q == '\n')
            return q;
        if (*q == quote && (!triple || (end - q >= 3 && q[1] == quote &&
                                        q[2] == quote)))
            return q + (triple ? 3 : 1);
        q++;
    }
    return end;
}

/* Python string prefixes (r, b, f, u and pairs of them) before a quote. */
static int is_string_prefix(const char *p, const char *q)
{
    if (q - p > 2)
        return 0;
    for (; p < q; p++)
        if (!strchr("rRbBfFuU", *p))
            return 0;
    return 1;
}

/* The next token at p (not a blank or comment): emits it, returns the
 * byte after it. */
static const char *lex_token(lexer *lx, lang lg, const char *p,
                             const char *end)
{
    unsigned char ch = (unsigned char)*p;
    int single = single_symbol(ch);
    if (ch == '\n') {
        emit(lx, BF_CODE_NEWLINE);
        return p + 1;
    }
    if (ch == '"' || ch == '\'') {
        emit(lx, BF_CODE_STRING);
        return skip_string(lg, p, end);
    }
    if (is_name_byte(ch)) {
        const char *q = p;
        while (q < end && is_name_byte((unsigned char)*q))
            q++;
        int digits = is_digit(ch);
        while (digits && q < end && *q == '.')  /* 1.5, 1.e3 */
            for (q++; q < end && is_name_byte((unsigned char)*q); q++)
                ;
        if (!digits && lg == LANG_PYTHON && q < end &&
            (*q == '"' || *q == '\'') && is_string_prefix(p, q)) {
            emit(lx, BF_CODE_STRING);
            return skip_string(lg, q, end);
        }
        emit(lx, digits ? BF_CODE_NUMBER : BF_CODE_NAME);
        return q;
    }
    if (single >= 0) {
        emit(lx, (uint8_t)single);
        return p + 1;
    }
    /* a run of other punctuation is one operator */
    const char *q = p + 1;
    while (q < end && !is_name_byte((unsigned char)*q) &&
           !is_blank((unsigned char)*q) && *q != '\n' && *q != '"' &&
           *q != '\'' && single_symbol((unsigned char)*q) < 0 &&
           skip_comment(lg, q, end) == q)
        q++;
    emit(lx, BF_CODE_OP);
    return q;
}

/* Appends the symbols of one file; returns 0, or -1 (and removes them)
 * when its brackets do not pair up. */
static int lex_file(bf_code_corpus *c, lang lg, const char *text, size_t len)
{
    lexer lx = {.c = c, .file_start = c->n_sym};
    const char *p = text, *end = text + len;
    while (p < end && !lx.bad) {
        const char *after = skip_comment(lg, p, end);
        if (after != p)
            p = after;
        else if (is_blank((unsigned char)*p) ||
                 (*p == '\\' && p + 1 < end && p[1] == '\n'))
            p += *p == '\\' ? 2 : 1;   /* a continued line is one line */
        else
            p = lex_token(&lx, lg, p, end);
    }
    if (lx.bad || lx.level != 0) {
        c->n_sym = lx.file_start;
        return -1;
    }
    return 0;
}

/* ---- cuts: where snippets end -------------------------------------------- */

/* One cut found by walk_cuts: after symbol e - 1, `level` brackets open,
 * opened at stack[0 .. level-1]. */
typedef struct cut {
    uint32_t e;
    int level;
    uint32_t stack[MAX_NEST];
} cut;

/* Walks the cuts of symbols [start, end) (no bracket open at start).  A
 * cut after symbol e - 1 has depth d when at least d brackets are open
 * there and the d-th innermost opened within the last
 * bf_code_prompt_max(d) symbols.  With depth 0, adds the cuts of every
 * depth to counts[]; otherwise stops at cut number `index` of that depth,
 * into *found, and returns 1 (0 if there are not that many). */
static int walk_cuts(const uint8_t *sym, uint32_t start, uint32_t end,
                     int depth, uint32_t index, uint32_t *counts, cut *found)
{
    uint32_t stack[MAX_NEST];
    int level = 0;
    for (uint32_t e = start + 1; e <= end; e++) {
        int delta = bracket_delta(sym[e - 1]);
        if (delta > 0)
            stack[level] = e - 1;
        level += delta;
        if (depth == 0) {
            int top = level < BF_CODE_MAX_DEPTH ? level : BF_CODE_MAX_DEPTH;
            for (int d = 1; d <= top; d++)
                counts[d] += e - stack[level - d] <=
                             (uint32_t)bf_code_prompt_max(d);
        } else if (depth <= level &&
                   e - stack[level - depth] <=
                       (uint32_t)bf_code_prompt_max(depth) &&
                   index-- == 0) {
            found->e = e;
            found->level = level;
            memcpy(found->stack, stack, (size_t)level * sizeof *stack);
            return 1;
        }
    }
    return 0;
}

static block *add_block(bf_code_corpus *c, int split)
{
    if (c->n_blocks[split] == c->cap_blocks[split]) {
        c->cap_blocks[split] = c->cap_blocks[split] ? 2 * c->cap_blocks[split]
                                                    : 64;
        c->blocks[split] = bf_xrealloc(c->blocks[split],
                                       (size_t)c->cap_blocks[split] *
                                           sizeof(block));
    }
    block *b = &c->blocks[split][c->n_blocks[split]++];
    memset(b, 0, sizeof *b);
    if (c->n_blocks[split] > 1)
        memcpy(b->cum, b[-1].cum, sizeof b->cum);
    return b;
}

/* Cuts file f's symbols into blocks at bracket-free points and counts
 * their snippets. */
static void index_file(bf_code_corpus *c, int f)
{
    const file_entry *fe = &c->files[f];
    uint32_t start = fe->start;
    int level = 0;
    for (uint32_t p = fe->start; p < fe->end; p++) {
        level += bracket_delta(c->sym[p]);
        if ((level == 0 && p + 1 - start >= BLOCK_MIN) || p + 1 == fe->end) {
            block *b = add_block(c, fe->split);
            b->start = start;
            b->end = p + 1;
            b->file = f;
            uint32_t counts[BF_CODE_MAX_DEPTH + 1] = {0};
            walk_cuts(c->sym, b->start, b->end, 0, 0, counts, NULL);
            for (int d = 1; d <= BF_CODE_MAX_DEPTH; d++)
                b->cum[d] += counts[d];
            start = p + 1;
        }
    }
}

/* ---- reading a directory ------------------------------------------------- */

typedef struct path_list {
    char **paths;   /* relative to the root */
    int n, cap;
    int entries;    /* directory entries walked */
} path_list;

static int compare_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

#define PATH_CAP 4096

/* The walk met more of `what` than `limit` allows: the tree is refused,
 * named by its root (path's first root_len bytes). */
static int over_limit(const char *path, size_t root_len, const char *what,
                      int limit, bf_error *err)
{
    return bf_error_set(err, NULL, 0, NULL, "'%.*s' holds more than %d %s "
                        "(the limit, docs/tasks.md); choose a smaller tree",
                        (int)root_len, path, limit, what);
}

/* Adds the source files under the directory `path` (a PATH_CAP buffer,
 * extended in place for each entry; the first root_len bytes are the
 * root), relative to the root; skips hidden entries and symbolic links (no
 * loops, no file read twice). */
static int list_sources(char *path, size_t root_len, path_list *out,
                        bf_error *err)
{
    DIR *dir = opendir(path);
    if (!dir)
        return bf_error_set(err, NULL, 0, NULL, "cannot read directory "
                            "'%s': %s", path, strerror(errno));
    size_t len = strlen(path);
    struct dirent *ent;
    int rc = 0;
    while (rc == 0 && (ent = readdir(dir)) != NULL) {
        size_t name_len = strlen(ent->d_name);
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
            continue;
        if (++out->entries > BF_CODE_MAX_ENTRIES) {
            rc = over_limit(path, root_len, "directory entries",
                            BF_CODE_MAX_ENTRIES, err);
            break;
        }
        if (ent->d_name[0] == '.')
            continue;
        if (len + 1 + name_len >= PATH_CAP) {
            rc = bf_error_set(err, NULL, 0, NULL, "path '%s/%s' is longer "
                              "than %d bytes", path, ent->d_name, PATH_CAP);
            break;
        }
        path[len] = '/';
        memcpy(path + len + 1, ent->d_name, name_len + 1);
        struct stat st;
        if (lstat(path, &st) != 0)
            ;   /* gone since readdir: nothing to read */
        else if (S_ISDIR(st.st_mode))
            rc = list_sources(path, root_len, out, err);
        else if (S_ISREG(st.st_mode) && lang_of(ent->d_name) >= 0) {
            if (out->n == BF_CODE_MAX_FILES) {
                rc = over_limit(path, root_len, "source files",
                                BF_CODE_MAX_FILES, err);
                break;
            }
            if (out->n == out->cap) {
                out->cap = out->cap ? 2 * out->cap : 256;
                out->paths = bf_xrealloc(out->paths,
                                         (size_t)out->cap * sizeof(char *));
            }
            out->paths[out->n++] = bf_xstrdup(path + root_len + 1);
        }
        path[len] = '\0';
    }
    closedir(dir);
    return rc;
}

static void add_file(bf_code_corpus *c, char *path, uint32_t start)
{
    if (c->n_files == c->cap_files) {
        c->cap_files = c->cap_files ? 2 * c->cap_files : 256;
        c->files = bf_xrealloc(c->files,
                               (size_t)c->cap_files * sizeof(file_entry));
    }
    c->files[c->n_files++] = (file_entry){path, bf_code_split_of(path), start,
                                          c->n_sym};
}

/* Reads one listed file into c; takes the path.  -1 when the corpus
 * would grow past its limits. */
static int load_file(bf_code_corpus *c, const char *root, char *path,
                     bf_error *err)
{
    char full[PATH_CAP];
    snprintf(full, sizeof full, "%s/%s", root, path); /* fits: listed so */
    struct stat st;
    uint64_t left = BF_CODE_MAX_SOURCE_BYTES - c->stats.source_bytes;
    if (stat(full, &st) == 0 && (uint64_t)st.st_size > left) {
        free(path);
        return bf_error_set(err, NULL, 0, NULL, "'%s' holds more than %llu "
                            "bytes of source (the limit); choose a smaller "
                            "tree", root,
                            (unsigned long long)BF_CODE_MAX_SOURCE_BYTES);
    }
    size_t len = 0;
    char *text = bf_read_file(full, &len, NULL);
    uint32_t start = c->n_sym;
    int usable = text && len <= left &&
                 lex_file(c, lang_of(path), text, len) == 0;
    free(text);
    if (!usable) {
        c->stats.files_left_out++;
        free(path);
        return 0;
    }
    c->stats.source_bytes += len;
    add_file(c, path, start);
    return 0;
}

static void corpus_free(bf_code_corpus *c)
{
    for (int i = 0; i < c->n_files; i++)
        free(c->files[i].path);
    free(c->files);
    free(c->sym);
    for (int s = 0; s < BF_CODE_N_SPLITS; s++)
        free(c->blocks[s]);
    free(c);
}

static void fill_stats(bf_code_corpus *c)
{
    bf_code_stats *st = &c->stats;
    st->memory_bytes = sizeof *c + c->cap_sym +
                       (size_t)c->cap_files * sizeof(file_entry);
    for (int i = 0; i < c->n_files; i++) {
        const file_entry *f = &c->files[i];
        st->files[f->split]++;
        st->symbols[f->split] += f->end - f->start;
        st->memory_bytes += strlen(f->path) + 1;
    }
    for (int s = 0; s < BF_CODE_N_SPLITS; s++) {
        st->memory_bytes += (size_t)c->cap_blocks[s] * sizeof(block);
        for (int d = 1; d <= BF_CODE_MAX_DEPTH; d++)
            st->snippets[s][d] = bf_code_snippet_count(c, s, d);
    }
}

static bf_code_corpus *corpus_load(const char *dir, bf_error *err)
{
    char path[PATH_CAP];
    size_t len = strlen(dir);
    if (len >= PATH_CAP)
        return bf_error_set(err, NULL, 0, NULL, "'%s' is longer than %d "
                            "bytes", dir, PATH_CAP), NULL;
    memcpy(path, dir, len + 1);
    path_list list = {0};
    bf_code_corpus *c = bf_xcalloc(1, sizeof *c);
    int rc = list_sources(path, len, &list, err);
    if (list.n > 1)
        qsort(list.paths, (size_t)list.n, sizeof *list.paths, compare_paths);
    c->stats.files_seen = list.n;
    int i = 0;
    for (; rc == 0 && i < list.n; i++)
        rc = load_file(c, dir, list.paths[i], err);
    for (; i < list.n; i++)
        free(list.paths[i]);
    free(list.paths);
    if (rc == 0 && c->n_files == 0)
        rc = bf_error_set(err, NULL, 0, NULL, "'%s' holds no usable source "
                          "file (of %d .py/.c/.h files, %d are unreadable "
                          "or have brackets that do not pair up)", dir,
                          c->stats.files_seen, c->stats.files_left_out);
    if (rc != 0) {
        corpus_free(c);
        return NULL;
    }
    for (int f = 0; f < c->n_files; f++)
        index_file(c, f);
    fill_stats(c);
    return c;
}

/* ---- the process's corpora ----------------------------------------------- */

/* A cached corpus, keyed by its directory's canonical path (realpath):
 * every spelling of one directory (".", "..", "//", symbolic links) is one
 * entry.  The last spelling that found it is kept too, so that the same
 * spelling again (every example a job draws) costs no system call.  refs
 * counts the callers holding it; one that nobody holds is idle, and at
 * most BF_CODE_CACHE_IDLE idle ones are kept, the least recently used
 * leaving first. */
typedef struct loaded {
    char *real;
    char *spelling;
    bf_code_corpus *corpus;
    int refs;
    uint64_t used;            /* when it last became idle */
    struct loaded *next;
} loaded;

static pthread_mutex_t loaded_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded *loaded_list;
static uint64_t loaded_clock;

/* Frees idle entries beyond `keep`, least recently used first. */
static void trim_idle(int keep)
{
    for (;;) {
        int idle = 0;
        loaded **oldest = NULL;
        for (loaded **l = &loaded_list; *l; l = &(*l)->next)
            if ((*l)->refs == 0) {
                idle++;
                if (!oldest || (*l)->used < (*oldest)->used)
                    oldest = l;
            }
        if (idle <= keep)
            return;
        loaded *gone = *oldest;
        *oldest = gone->next;
        corpus_free(gone->corpus);
        free(gone->real);
        free(gone->spelling);
        free(gone);
    }
}

/* The entry whose canonical path (real: 1) or last spelling is `key`. */
static loaded *find_loaded(const char *key, int real)
{
    loaded *l = loaded_list;
    while (l && strcmp(real ? l->real : l->spelling, key) != 0)
        l = l->next;
    return l;
}

/* dir's canonical path (malloc'd), or NULL with err. */
static char *canonical_dir(const char *dir, bf_error *err)
{
    if (dir[0] != '/')
        return bf_error_set(err, NULL, 0, NULL, "'%s' is not an absolute "
                            "path", dir), NULL;
    struct stat st;
    char *real = realpath(dir, NULL);
    if (real && stat(real, &st) == 0 && S_ISDIR(st.st_mode))
        return real;
    bf_error_set(err, NULL, 0, NULL, "cannot read directory '%s': %s", dir,
                 real ? "not a directory" : strerror(errno));
    free(real);
    return NULL;
}

/* The entry of dir, loaded if need be (under loaded_lock), or NULL. */
static loaded *lookup(const char *dir, bf_error *err)
{
    loaded *l = find_loaded(dir, 0);
    if (l)
        return l;
    char *real = canonical_dir(dir, err);
    if (!real)
        return NULL;
    l = find_loaded(real, 1);
    if (!l) {
        bf_code_corpus *c = corpus_load(real, err);
        if (!c) {
            free(real);
            return NULL;
        }
        l = bf_xcalloc(1, sizeof *l);
        *l = (loaded){.real = real, .corpus = c, .next = loaded_list};
        loaded_list = l;
    } else {
        free(real);
    }
    free(l->spelling);
    l->spelling = bf_xstrdup(dir);
    return l;
}

const bf_code_corpus *bf_code_corpus_get(const char *dir, bf_error *err)
{
    pthread_mutex_lock(&loaded_lock);
    loaded *l = lookup(dir, err);
    if (l)
        l->refs++;
    pthread_mutex_unlock(&loaded_lock);
    return l ? l->corpus : NULL;
}

void bf_code_corpus_put(const bf_code_corpus *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&loaded_lock);
    loaded *l = loaded_list;
    while (l->corpus != c)
        l = l->next;
    if (--l->refs == 0) {
        l->used = ++loaded_clock;
        trim_idle(BF_CODE_CACHE_IDLE);
    }
    pthread_mutex_unlock(&loaded_lock);
}

void bf_code_corpus_drop_idle(void)
{
    pthread_mutex_lock(&loaded_lock);
    trim_idle(0);
    pthread_mutex_unlock(&loaded_lock);
}

int bf_code_corpus_cached(size_t *bytes)
{
    int n = 0;
    size_t sum = 0;
    pthread_mutex_lock(&loaded_lock);
    for (loaded *l = loaded_list; l; l = l->next, n++)
        sum += l->corpus->stats.memory_bytes;
    pthread_mutex_unlock(&loaded_lock);
    if (bytes)
        *bytes = sum;
    return n;
}

/* ---- queries ------------------------------------------------------------- */

void bf_code_corpus_stats(const bf_code_corpus *c, bf_code_stats *out)
{
    *out = c->stats;
}

uint32_t bf_code_snippet_count(const bf_code_corpus *c, int split, int depth)
{
    int n = c->n_blocks[split];
    if (depth < 1 || depth > BF_CODE_MAX_DEPTH || n == 0)
        return 0;
    return c->blocks[split][n - 1].cum[depth];
}

/* The first block of the split whose running count passes index. */
static const block *block_of(const bf_code_corpus *c, int split, int depth,
                             uint32_t index)
{
    const block *b = c->blocks[split];
    int lo = 0, hi = c->n_blocks[split] - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (b[mid].cum[depth] > index)
            hi = mid;
        else
            lo = mid + 1;
    }
    return &b[lo];
}

/* Where the window of a cut begins: as far back as the prompt allows, but
 * inside the bracket enclosing the d open ones (or the block) and at a
 * point where every bracket before the d open ones is closed again. */
static uint32_t window_start(const uint8_t *sym, const block *b,
                             const cut *k, int depth)
{
    int outer = k->level - depth;           /* brackets open around them */
    uint32_t first_open = k->stack[outer];
    uint32_t lo = outer > 0 ? k->stack[outer - 1] + 1 : b->start;
    uint32_t budget = (uint32_t)bf_code_prompt_max(depth);
    if (k->e - lo > budget)
        lo = k->e - budget;
    uint32_t start = first_open;
    int rel = 0;   /* brackets open at p, relative to first_open */
    for (uint32_t p = first_open; p-- > lo;) {
        rel -= bracket_delta(sym[p]);
        if (rel == 0)
            start = p;
    }
    return start;
}

void bf_code_snippet_get(const bf_code_corpus *c, int split, int depth,
                         uint32_t index, bf_code_snippet *out)
{
    const block *b = block_of(c, split, depth, index);
    uint32_t before = b == c->blocks[split] ? 0 : b[-1].cum[depth];
    cut k = {.level = 0};
    int found = walk_cuts(c->sym, b->start, b->end, depth, index - before,
                          NULL, &k);
    assert(found); /* the block's count says it is there */
    (void)found;
    uint32_t start = window_start(c->sym, b, &k, depth);
    out->prompt = c->sym + start;
    out->prompt_len = (int)(k.e - start);
    for (int i = 0; i < depth; i++)
        out->closes[i] = c->sym[k.stack[k.level - 1 - i]] | 1;
    out->file = b->file;
}

int bf_code_file_count(const bf_code_corpus *c) { return c->n_files; }

void bf_code_file_at(const bf_code_corpus *c, int i, bf_code_file *out)
{
    const file_entry *f = &c->files[i];
    *out = (bf_code_file){f->path, f->split, c->sym + f->start,
                          f->end - f->start};
}

int bf_code_split_of(const char *relative_path)
{
    uint64_t h = bf_fnv1a64(relative_path, strlen(relative_path));
    return h % EVAL_ONE_IN == 0 ? BF_CODE_EVAL : BF_CODE_TRAIN;
}

const char *bf_code_symbol_name(int symbol)
{
    static const char *const names[BF_CODE_N_SYMBOLS] = {
        "(", ")", "[", "]", "{", "}", "name", "num", "str", "nl", ",", ".",
        ":", "op"};
    return symbol >= 0 && symbol < BF_CODE_N_SYMBOLS ? names[symbol] : NULL;
}
