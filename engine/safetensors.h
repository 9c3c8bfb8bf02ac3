/* safetensors: a reader and an atomic writer for the safetensors format, so
 * that PyTorch and Hugging Face tools can open Bifocal checkpoints.
 *
 * File layout (https://huggingface.co/docs/safetensors):
 *   8 bytes    N, the header size, unsigned little-endian
 *   N bytes    JSON object: name -> {"dtype","shape","data_offsets":[b,e]},
 *              plus an optional "__metadata__" object of string -> string;
 *              padded with spaces so the data section starts 8-aligned
 *   rest       the data section; offsets are relative to its start
 * Only F32 tensors are written or accepted: that is all Bifocal stores.
 * The host must be little-endian (checked at compile time).
 *
 * Writing goes through bf_atomic_file (common/file.h), so a crash leaves either the old file
 * or the complete new one, never a torn checkpoint. */
#ifndef BF_SAFETENSORS_H
#define BF_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "bf_error.h"

enum { BF_ST_MAX_DIMS = 8 };

/* ---- writer --------------------------------------------------------------- */

typedef struct bf_st_writer bf_st_writer;

bf_st_writer *bf_st_writer_new(void);
void bf_st_writer_free(bf_st_writer *w);

/* Adds a float32 tensor.  `data` (prod(shape) floats) is BORROWED: it must
 * stay valid until bf_st_writer_write returns.  Names must be unique and may
 * not be "__metadata__". */
int bf_st_writer_add_f32(bf_st_writer *w, const char *name, int ndim,
                         const int64_t *shape, const float *data,
                         bf_error *err);

/* Sets a metadata entry (both strings are copied). */
int bf_st_writer_set_metadata(bf_st_writer *w, const char *key,
                              const char *value, bf_error *err);

/* Writes every tensor, in the order added, atomically to `path`. */
int bf_st_writer_write(const bf_st_writer *w, const char *path,
                       bf_error *err);

/* ---- reader --------------------------------------------------------------- */

typedef struct bf_st_tensor {
    const char *name;                /* owned by the bf_st_file */
    int ndim;
    int64_t shape[BF_ST_MAX_DIMS];
    const void *data;                /* little-endian F32, maybe unaligned */
    size_t nbytes;
} bf_st_tensor;

typedef struct bf_st_file bf_st_file;

/* Reads and validates the whole file: header size against file size, the
 * header JSON, every tensor's dtype, shape and offsets (within the data
 * section, matching the shape, non-overlapping, covering it exactly).
 * Errors name the file and the tensor.  Caller frees with bf_st_close. */
int bf_st_open(bf_st_file **out, const char *path, bf_error *err);
void bf_st_close(bf_st_file *f);

const char *bf_st_path(const bf_st_file *f);
size_t bf_st_num_tensors(const bf_st_file *f);
/* NULL when absent. */
const bf_st_tensor *bf_st_find(const bf_st_file *f, const char *name);
/* Metadata value, NULL when absent; owned by the bf_st_file. */
const char *bf_st_metadata(const bf_st_file *f, const char *key);

/* Error about one tensor: "path: tensor 'name': ...", with err->field set
 * to the tensor name.  Returns -1. */
int bf_st_tensor_error(bf_error *err, const char *path, const char *name,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* "[2, 3]" into buf, for error messages. */
const char *bf_st_shape_str(int ndim, const int64_t *shape, char *buf,
                            size_t cap);

#endif
