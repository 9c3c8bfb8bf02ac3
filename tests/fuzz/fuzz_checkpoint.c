/* libFuzzer: checkpoint files (safetensors) as a worker opens them to
 * resume: the header, every tensor's offsets and shape, the metadata
 * (format, version, config, step), then for a small enough config the
 * tensors themselves into a model built for it.  The input is written to an
 * anonymous in-memory file, since the loader reads a path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checkpoint.h"
#include "tasks.h"

/* A model for ck's config, when it is small: its tensors are loaded. */
static void load_into_model(const bf_checkpoint *ck)
{
    const bf_job_config *c = &ck->cfg;
    if (c->d_model > 64 || c->n_layers > 4 || c->seq_len > 128)
        return;
    bf_model_shape s;
    bf_model_size_from_config(&s, c, bf_vocab_size(c));
    bf_model m;
    bf_error err;
    if (bf_model_create(&m, &s, 1, c->seq_len, &err) != 0)
        return;
    if (bf_checkpoint_load_params(ck, &m, &err) == 0)
        bf_checkpoint_load_moments(ck, &m, &err);
    bf_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz-checkpoint", 0);
        if (fd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    bf_error err;
    bf_st_file *f = NULL;
    if (bf_st_open(&f, path, &err) == 0) {
        for (size_t i = 0; i < bf_st_num_tensors(f); i++)
            (void)bf_st_metadata(f, "step");
        bf_st_close(f);
    }
    bf_checkpoint ck;
    if (bf_checkpoint_open(&ck, path, &err) == 0) {
        load_into_model(&ck);
        bf_checkpoint_close(&ck);
    }
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    bf_checkpoint_check_resume(path, &cfg, NULL, NULL, &err);
    return 0;
}
