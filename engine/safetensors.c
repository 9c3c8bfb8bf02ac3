#include "safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "file.h"

#include "alloc.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code copies it verbatim"
#endif

/* The reference implementation refuses larger headers; so do we, which also
 * bounds what a corrupt size field can make us allocate. */
#define ST_MAX_HEADER (100u * 1024 * 1024)

/* ---- shared helpers --------------------------------------------------------- */

const char *bf_st_shape_str(int ndim, const int64_t *shape, char *buf,
                            size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "",
                              (long long)shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}

int bf_st_tensor_error(bf_error *err, const char *path, const char *name,
                        const char *fmt, ...)
{
    char body[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    bf_error_set(err, path, 0, NULL, "tensor '%s': %s", name, body);
    if (err)
        snprintf(err->field, sizeof err->field, "%s", name);
    return -1;
}

/* ---- writer --------------------------------------------------------------- */

typedef struct st_entry {
    char *name;
    int ndim;
    int64_t shape[BF_ST_MAX_DIMS];
    const float *data;
    size_t nbytes;
} st_entry;

struct bf_st_writer {
    st_entry *entries;
    size_t n, cap;
    json_t *metadata;   /* object of strings */
};

bf_st_writer *bf_st_writer_new(void)
{
    bf_st_writer *w = bf_xcalloc(1, sizeof *w);
    w->metadata = json_object(); /* jansson allocates through bf_xmalloc */
    return w;
}

void bf_st_writer_free(bf_st_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->entries[i].name);
    free(w->entries);
    json_decref(w->metadata);
    free(w);
}

static int writer_has(const bf_st_writer *w, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->entries[i].name, name) == 0)
            return 1;
    return 0;
}

int bf_st_writer_add_f32(bf_st_writer *w, const char *name, int ndim,
                         const int64_t *shape, const float *data,
                         bf_error *err)
{
    if (ndim < 0 || ndim > BF_ST_MAX_DIMS)
        return bf_st_tensor_error(err, "", name, "%d dims (at most %d)", ndim,
                            BF_ST_MAX_DIMS);
    if (strcmp(name, "__metadata__") == 0 || writer_has(w, name))
        return bf_st_tensor_error(err, "", name, "duplicate or reserved name");
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        w->entries = bf_xrealloc(w->entries, cap * sizeof *w->entries);
        w->cap = cap;
    }
    st_entry *e = &w->entries[w->n];
    e->name = bf_xstrdup(name);
    e->ndim = ndim;
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        e->shape[i] = shape[i];
        count *= (size_t)shape[i];
    }
    e->data = data;
    e->nbytes = count * sizeof(float);
    w->n++;
    return 0;
}

int bf_st_writer_set_metadata(bf_st_writer *w, const char *key,
                              const char *value, bf_error *err)
{
    if (json_object_set_new(w->metadata, key, json_string(value)) != 0)
        return bf_error_set(err, NULL, 0, key,
                            "metadata must be valid UTF-8");
    return 0;
}

/* The header JSON, padded with spaces to a multiple of 8.  Caller frees. */
static char *writer_header(const bf_st_writer *w, size_t *len)
{
    json_t *hdr = json_object();
    if (json_object_size(w->metadata) > 0)
        json_object_set(hdr, "__metadata__", w->metadata);
    size_t offset = 0;
    for (size_t i = 0; i < w->n; i++) {
        const st_entry *e = &w->entries[i];
        json_t *shape = json_array();
        for (int d = 0; d < e->ndim; d++)
            json_array_append_new(shape, json_integer(e->shape[d]));
        json_object_set_new(hdr, e->name,
            json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32", "shape", shape,
                      "data_offsets", (json_int_t)offset,
                      (json_int_t)(offset + e->nbytes)));
        offset += e->nbytes;
    }
    char *text = json_dumps(hdr, JSON_COMPACT);
    json_decref(hdr);
    if (!text)
        return NULL;
    size_t n = strlen(text), padded = (n + 7) / 8 * 8;
    char *out = bf_xrealloc(text, padded + 1);
    memset(out + n, ' ', padded - n);
    out[padded] = '\0';
    *len = padded;
    return out;
}

int bf_st_writer_write(const bf_st_writer *w, const char *path,
                       bf_error *err)
{
    size_t hlen = 0;
    char *header = writer_header(w, &hlen);
    if (!header)
        return bf_error_set(err, path, 0, NULL, "cannot build header");
    bf_atomic_file f;
    if (bf_atomic_open(&f, path, err) != 0) {
        free(header);
        return -1;
    }
    uint64_t n = hlen;
    int rc = bf_atomic_write(&f, &n, sizeof n, err);
    if (rc == 0)
        rc = bf_atomic_write(&f, header, hlen, err);
    for (size_t i = 0; rc == 0 && i < w->n; i++)
        rc = bf_atomic_write(&f, w->entries[i].data, w->entries[i].nbytes,
                             err);
    free(header);
    if (rc != 0) {
        bf_atomic_abort(&f);
        return -1;
    }
    return bf_atomic_commit(&f, err);
}

/* ---- reader --------------------------------------------------------------- */

struct bf_st_file {
    char *path;
    unsigned char *bytes;     /* the whole file */
    size_t size;
    json_t *header;           /* keeps names and metadata strings alive */
    bf_st_tensor *tensors;
    size_t n;
};

static int read_whole_file(const char *path, unsigned char **out,
                           size_t *size, bf_error *err)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return bf_error_set(err, path, 0, NULL, "cannot open: %s",
                            strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return bf_error_set(err, path, 0, NULL, "not a regular file");
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = bf_xmalloc(n);
    if (fread(buf, 1, n, fp) != n) {
        free(buf);
        fclose(fp);
        return bf_error_set(err, path, 0, NULL, "cannot read %zu bytes", n);
    }
    fclose(fp);
    *out = buf;
    *size = n;
    return 0;
}

static int parse_shape(const json_t *arr, bf_st_tensor *t, const char *path,
                       bf_error *err)
{
    if (!json_is_array(arr) || json_array_size(arr) > BF_ST_MAX_DIMS)
        return bf_st_tensor_error(err, path, t->name,
                            "'shape' must be an array of at most %d integers",
                            BF_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(arr);
    for (int i = 0; i < t->ndim; i++) {
        const json_t *d = json_array_get(arr, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return bf_st_tensor_error(err, path, t->name,
                                "shape[%d] is not a non-negative integer", i);
        t->shape[i] = json_integer_value(d);
    }
    return 0;
}

/* Validates one header entry against a data section of data_size bytes and
 * fills t; *begin gets its start offset. */
static int parse_tensor(const char *name, const json_t *v, const char *path,
                        const unsigned char *data, size_t data_size,
                        bf_st_tensor *t, size_t *begin, bf_error *err)
{
    t->name = name;
    if (!json_is_object(v))
        return bf_st_tensor_error(err, path, name, "entry is not an object");
    const char *dtype = json_string_value(json_object_get(v, "dtype"));
    if (!dtype)
        return bf_st_tensor_error(err, path, name, "missing 'dtype'");
    if (strcmp(dtype, "F32") != 0)
        return bf_st_tensor_error(err, path, name,
                            "dtype '%s' is not supported (only F32)", dtype);
    if (parse_shape(json_object_get(v, "shape"), t, path, err) != 0)
        return -1;
    const json_t *off = json_object_get(v, "data_offsets");
    const json_t *b = json_array_get(off, 0), *e = json_array_get(off, 1);
    if (json_array_size(off) != 2 || !json_is_integer(b) ||
        !json_is_integer(e))
        return bf_st_tensor_error(err, path, name,
                            "'data_offsets' must be [begin, end]");
    json_int_t ob = json_integer_value(b), oe = json_integer_value(e);
    if (ob < 0 || oe < ob || (uint64_t)oe > data_size)
        return bf_st_tensor_error(err, path, name,
                            "data_offsets [%lld, %lld] out of range (data "
                            "section has %zu bytes)", (long long)ob,
                            (long long)oe, data_size);
    uint64_t count = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] > 0 && count > UINT64_MAX / 4 / (uint64_t)t->shape[i])
            return bf_st_tensor_error(err, path, name, "shape too large");
        count *= (uint64_t)t->shape[i];
    }
    if ((uint64_t)(oe - ob) != count * 4) {
        char s[128];
        return bf_st_tensor_error(err, path, name,
                            "data_offsets span %lld bytes but shape %s of F32 "
                            "needs %llu", (long long)(oe - ob),
                            bf_st_shape_str(t->ndim, t->shape, s, sizeof s),
                            (unsigned long long)(count * 4));
    }
    t->data = data + ob;
    t->nbytes = (size_t)(oe - ob);
    *begin = (size_t)ob;
    return 0;
}

typedef struct span { size_t begin, end; const char *name; } span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* Tensors may not share bytes, and (as the reference implementation
 * requires) together they cover the data section with no holes. */
static int check_layout(bf_st_file *f, size_t data_size, const size_t *begins,
                        bf_error *err)
{
    span *s = bf_xcalloc(f->n, sizeof *s);
    for (size_t i = 0; i < f->n; i++)
        s[i] = (span){begins[i], begins[i] + f->tensors[i].nbytes,
                      f->tensors[i].name};
    qsort(s, f->n, sizeof *s, span_cmp);
    size_t pos = 0;
    int rc = 0;
    for (size_t i = 0; i < f->n && rc == 0; i++) {
        if (s[i].begin < pos)
            rc = bf_st_tensor_error(err, f->path, s[i].name,
                              "data overlaps tensor '%s'", s[i - 1].name);
        else if (s[i].begin > pos)
            rc = bf_st_tensor_error(err, f->path, s[i].name,
                              "hole of %zu bytes before its data",
                              s[i].begin - pos);
        pos = s[i].end;
    }
    if (rc == 0 && pos != data_size)
        rc = bf_error_set(err, f->path, 0, NULL,
                          "data section has %zu bytes but tensors cover %zu",
                          data_size, pos);
    free(s);
    return rc;
}

static int parse_header(bf_st_file *f, bf_error *err)
{
    if (f->size < 8)
        return bf_error_set(err, f->path, 0, NULL,
                            "file has %zu bytes, too short for the 8-byte "
                            "header size", f->size);
    uint64_t hlen;
    memcpy(&hlen, f->bytes, 8);
    if (hlen > ST_MAX_HEADER || hlen > f->size - 8)
        return bf_error_set(err, f->path, 0, NULL,
                            "header size %llu exceeds the file (%zu bytes) "
                            "or the limit (%u)", (unsigned long long)hlen,
                            f->size, ST_MAX_HEADER);
    json_error_t jerr;
    f->header = json_loadb((const char *)f->bytes + 8, (size_t)hlen, 0, &jerr);
    if (!f->header)
        return bf_error_set(err, f->path, 0, NULL,
                            "header is not valid JSON: %s (at header byte "
                            "%d)", jerr.text, jerr.position);
    if (!json_is_object(f->header))
        return bf_error_set(err, f->path, 0, NULL,
                            "header is not a JSON object");
    const json_t *meta = json_object_get(f->header, "__metadata__");
    if (meta) {
        const char *k;
        const json_t *v;
        if (!json_is_object(meta))
            return bf_error_set(err, f->path, 0, "__metadata__",
                                "must be an object of strings");
        json_object_foreach((json_t *)meta, k, v)
            if (!json_is_string(v))
                return bf_error_set(err, f->path, 0, "__metadata__",
                                    "value of '%s' is not a string", k);
    }

    const unsigned char *data = f->bytes + 8 + hlen;
    size_t data_size = f->size - 8 - (size_t)hlen;
    size_t ntensors = json_object_size(f->header) - (meta ? 1 : 0);
    f->tensors = bf_xcalloc(ntensors, sizeof *f->tensors);
    size_t *begins = bf_xcalloc(ntensors, sizeof *begins);
    const char *name;
    json_t *v;
    int rc = 0;
    json_object_foreach(f->header, name, v) {
        if (strcmp(name, "__metadata__") == 0)
            continue;
        rc = parse_tensor(name, v, f->path, data, data_size,
                          &f->tensors[f->n], &begins[f->n], err);
        if (rc != 0)
            break;
        f->n++;
    }
    if (rc == 0)
        rc = check_layout(f, data_size, begins, err);
    free(begins);
    return rc;
}

int bf_st_open(bf_st_file **out, const char *path, bf_error *err)
{
    *out = NULL;
    bf_st_file *f = bf_xcalloc(1, sizeof *f);
    f->path = bf_xstrdup(path);
    if (read_whole_file(path, &f->bytes, &f->size, err) != 0 ||
        parse_header(f, err) != 0) {
        bf_st_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

void bf_st_close(bf_st_file *f)
{
    if (!f)
        return;
    json_decref(f->header);
    free(f->tensors);
    free(f->bytes);
    free(f->path);
    free(f);
}

const char *bf_st_path(const bf_st_file *f) { return f->path; }
size_t bf_st_num_tensors(const bf_st_file *f) { return f->n; }

const bf_st_tensor *bf_st_find(const bf_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

const char *bf_st_metadata(const bf_st_file *f, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(f->header, "__metadata__"), key));
}
