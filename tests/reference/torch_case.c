/* See torch_case.h. */
#include "torch_case.h"

#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

static void write_bytes(const char *dir, const char *name, const void *p,
                        size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

void torch_case_write(const char *dir, const bf_model *m,
                      const bf_adamw_hparams *hp, float grad_scale,
                      const int *inputs, const int *targets, const int *pos,
                      int B, int T)
{
    const bf_model_shape *s = &m->shape;
    json_t *j = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:i, s:i, "
                          "s:b, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                          "V", s->vocab, "C", s->d_model, "L", s->n_layers,
                          "NH", s->n_heads, "T", T, "B", B,
                          "rope", bf_rope_name(s->rope), "spectral_heads",
                          s->spectral_heads, "prope_pairs", s->prope_pairs,
                          "default_positions", pos == NULL,
                          "rope_base", s->rope_base, "grad_scale",
                          (double)grad_scale, "lr", (double)hp->lr, "beta1",
                          (double)hp->beta1, "beta2", (double)hp->beta2,
                          "eps", (double)hp->eps, "weight_decay",
                          (double)hp->weight_decay, "freq_lr_mult",
                          (double)hp->freq_lr_mult);
    assert_non_null(j);
    char path[512];
    snprintf(path, sizeof path, "%s/case.json", dir);
    assert_int_equal(json_dump_file(j, path, 0), 0);
    json_decref(j);
    write_bytes(dir, "params.f32", m->params_memory,
                m->num_params * sizeof(float));
    size_t n = (size_t)B * T;
    int32_t *batch = malloc(3 * n * sizeof *batch);
    assert_non_null(batch);
    for (size_t i = 0; i < n; i++) {
        batch[i] = inputs[i];
        batch[n + i] = targets[i];
        batch[2 * n + i] = pos ? pos[i] : (int32_t)(i % (size_t)T);
    }
    write_bytes(dir, "batch.i32", batch, 3 * n * sizeof *batch);
    free(batch);
}

void torch_case_run(const char *script, char *const *dirs, int n)
{
    size_t cap = 64 + strlen(script);
    for (int i = 0; i < n; i++)
        cap += strlen(dirs[i]) + 1;
    char *cmd = malloc(cap);
    assert_non_null(cmd);
    int len = snprintf(cmd, cap, "%s %s", TORCH_CASE_PYTHON, script);
    for (int i = 0; i < n; i++)
        len += snprintf(cmd + len, cap - (size_t)len, " %s", dirs[i]);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

void torch_case_read_floats(const char *dir, const char *name, float *p,
                            size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(p, sizeof *p, n, f), n);
    assert_int_equal(fgetc(f), EOF); /* exactly the layout's size */
    fclose(f);
}

double torch_case_rel_diff(const float *a, const float *b, size_t n)
{
    double d2 = 0, b2 = 0;
    for (size_t i = 0; i < n; i++) {
        d2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        b2 += (double)b[i] * b[i];
    }
    return b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
}

const char *torch_case_script(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH/torch_check.py\n", argv[0]);
        exit(2);
    }
    if (system(TORCH_CASE_PYTHON " -c 'import torch, numpy' 2>/dev/null") !=
        0) {
        fprintf(stderr, "FAIL: %s cannot import torch and numpy: install "
                "python3-torch (scripts/test.sh does)\n", TORCH_CASE_PYTHON);
        exit(1);
    }
    return argv[1];
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void torch_case_remove_tree(const char *root)
{
    nftw(root, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}
