#include "checkpoint.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"

/* Hugging Face GPT-2 names, in bf_params order; per-layer tensors get an
 * "h.N." prefix.  log_freq is ours: theta = log(omega), [n_heads, d_head/2]. */
static const struct { const char *name; int per_layer; }
hf_names[BF_NUM_PARAM_TENSORS] = {
    {"wte.weight", 0},
    {"ln_1.weight", 1}, {"ln_1.bias", 1},
    {"attn.c_attn.weight", 1}, {"attn.c_attn.bias", 1},
    {"attn.c_proj.weight", 1}, {"attn.c_proj.bias", 1},
    {"ln_2.weight", 1}, {"ln_2.bias", 1},
    {"mlp.c_fc.weight", 1}, {"mlp.c_fc.bias", 1},
    {"mlp.c_proj.weight", 1}, {"mlp.c_proj.bias", 1},
    {"ln_f.weight", 0}, {"ln_f.bias", 0},
    {"attn.rope.log_freq", 1},
};

#define MOMENT1_PREFIX "optimizer.exp_avg."
#define MOMENT2_PREFIX "optimizer.exp_avg_sq."

/* Safetensors name of parameter tensor i (bf_params order) at layer l
 * (ignored for tensors without a layer dimension), e.g. "h.1.ln_2.bias". */
static void tensor_name(char *buf, size_t cap, int i, int l)
{
    if (hf_names[i].per_layer)
        snprintf(buf, cap, "h.%d.%s", l, hf_names[i].name);
    else
        snprintf(buf, cap, "%s", hf_names[i].name);
}

/* Calls fn for every (tensor, layer) slice of a buffer laid out like
 * params_memory: the unit a safetensors tensor holds. */
typedef int (*slice_fn)(void *ctx, const char *name, const bf_param_info *ti,
                        size_t offset, bf_error *err);

static int for_each_slice(const bf_model *m, const char *prefix, slice_fn fn,
                          void *ctx, bf_error *err)
{
    for (int i = 0; i < BF_NUM_PARAM_TENSORS; i++) {
        const bf_param_info *ti = &m->tensors[i];
        int layers = ti->per_layer ? m->shape.n_layers : 1;
        size_t slice = ti->count / (size_t)layers;
        for (int l = 0; l < layers; l++) {
            char base[96], name[128];
            tensor_name(base, sizeof base, i, l);
            snprintf(name, sizeof name, "%s%s", prefix, base);
            if (fn(ctx, name, ti, ti->offset + (size_t)l * slice, err) != 0)
                return -1;
        }
    }
    return 0;
}

/* ---- saving --------------------------------------------------------------- */

typedef struct add_ctx { bf_st_writer *w; const float *base; } add_ctx;

static int add_slice(void *ctx, const char *name, const bf_param_info *ti,
                     size_t offset, bf_error *err)
{
    add_ctx *a = ctx;
    int64_t shape[3];
    for (int d = 0; d < ti->ndim; d++)
        shape[d] = ti->dims[d];
    return bf_st_writer_add_f32(a->w, name, ti->ndim, shape, a->base + offset,
                                err);
}

/* "[[0,0,1,1],[0,0,1,1]]": which heads of each layer are learnable. */
static char *learnable_json(const bf_model *m)
{
    json_t *layers = json_array();
    for (int l = 0; l < m->shape.n_layers; l++) {
        json_t *heads = json_array();
        for (int h = 0; h < m->shape.n_heads; h++)
            json_array_append_new(heads, json_integer(
                m->freq_learnable[l * m->shape.n_heads + h]));
        json_array_append_new(layers, heads);
    }
    char *s = json_dumps(layers, JSON_COMPACT);
    json_decref(layers);
    return s;
}

static int set_metadata(bf_st_writer *w, const bf_model *m,
                        const bf_job_config *cfg,
                        const bf_checkpoint_owner *owner, int step,
                        bf_error *err)
{
    char num[32], ver[16], job[32];
    snprintf(num, sizeof num, "%d", step);
    snprintf(ver, sizeof ver, "%d", BF_CHECKPOINT_VERSION);
    int owned = owner && owner->database_id[0];
    snprintf(job, sizeof job, "%lld", owned ? (long long)owner->job_id : 0LL);
    char *config = bf_job_config_to_canonical_json(cfg);
    char *learnable = learnable_json(m);
    const char *entries[][2] = {
        {"format", BF_CHECKPOINT_FORMAT}, {"format_version", ver},
        {"config", config}, {"rope", bf_rope_name(cfg->rope)},
        {"learnable", learnable}, {"step", num}, {"optimizer", "adamw"},
        /* last: written only for a job of a coordinator's database */
        {"database_id", owned ? owner->database_id : NULL}, {"job_id", job},
    };
    size_t n = sizeof entries / sizeof entries[0] - (owned ? 0 : 2);
    int rc = (!config || !learnable)
        ? bf_error_set(err, NULL, 0, NULL, "out of memory") : 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = bf_st_writer_set_metadata(w, entries[i][0], entries[i][1], err);
    free(config);
    free(learnable);
    return rc;
}

int bf_checkpoint_save(const char *path, const bf_model *m,
                       const bf_job_config *cfg,
                       const bf_checkpoint_owner *owner, int step,
                       bf_error *err)
{
    bf_st_writer *w = bf_st_writer_new();
    if (!w)
        return bf_error_set(err, path, 0, NULL, "out of memory");
    add_ctx params = {w, m->params_memory}, m1 = {w, m->adam_m},
            m2 = {w, m->adam_v};
    int rc = set_metadata(w, m, cfg, owner, step, err);
    if (rc == 0)
        rc = for_each_slice(m, "", add_slice, &params, err);
    if (rc == 0)
        rc = for_each_slice(m, MOMENT1_PREFIX, add_slice, &m1, err);
    if (rc == 0)
        rc = for_each_slice(m, MOMENT2_PREFIX, add_slice, &m2, err);
    if (rc == 0)
        rc = bf_st_writer_write(w, path, err);
    bf_st_writer_free(w);
    return rc;
}

/* ---- loading -------------------------------------------------------------- */

/* A metadata value that is a decimal integer in 0 .. max, all of it. */
static int parse_count(const char *s, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : -1;
    if (!s || errno || *end || end == s || v < 0 || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_step(const char *s, int *out)
{
    long long v;
    if (parse_count(s, INT_MAX, &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

/* ---- owners --------------------------------------------------------------- */

static int is_database_id(const char *s)
{
    if (!s || strlen(s) != BF_DATABASE_ID_LEN)
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

int bf_checkpoint_owner_set(bf_checkpoint_owner *owner,
                            const char *database_id, int64_t job_id,
                            bf_error *err)
{
    memset(owner, 0, sizeof *owner);
    if (!is_database_id(database_id))
        return bf_error_set(err, NULL, 0, "database_id", "'%s' is not %d "
                            "lowercase hex digits",
                            database_id ? database_id : "(none)",
                            BF_DATABASE_ID_LEN);
    if (job_id < 1)
        return bf_error_set(err, NULL, 0, "job_id", "%lld is not a job id",
                            (long long)job_id);
    memcpy(owner->database_id, database_id, BF_DATABASE_ID_LEN + 1);
    owner->job_id = job_id;
    return 0;
}

/* The owner metadata, both keys or neither. */
static int parse_owner(bf_checkpoint *ck, const char *path, bf_error *err)
{
    const char *db = bf_st_metadata(ck->file, "database_id");
    const char *job = bf_st_metadata(ck->file, "job_id");
    if (!db && !job)
        return 0;
    long long id;
    bf_error inner;
    if (!db || parse_count(job, INT64_MAX, &id) != 0 ||
        bf_checkpoint_owner_set(&ck->owner, db, id, &inner) != 0)
        return bf_error_set(err, path, 0, "__metadata__.database_id",
                            "database_id '%s' and job_id '%s' must be given "
                            "together: %d hex digits and a job id",
                            db ? db : "(none)", job ? job : "(none)",
                            BF_DATABASE_ID_LEN);
    return 0;
}

/* Whether ck may be loaded as want's: BF_CHECKPOINT_FOREIGN (err names
 * both owners) when ck belongs to another job or database.  A checkpoint
 * with no owner (from before database ids, or a run without coordinator)
 * passes, as does any checkpoint when want is NULL or has no owner. */
static int check_owner(const bf_checkpoint *ck,
                       const bf_checkpoint_owner *want, bf_error *err)
{
    const bf_checkpoint_owner *has = &ck->owner;
    if (!want || !want->database_id[0] || !has->database_id[0] ||
        (strcmp(has->database_id, want->database_id) == 0 &&
         has->job_id == want->job_id))
        return 0;
    bf_error_set(err, bf_st_path(ck->file), 0, "__metadata__.database_id",
                 "the checkpoint belongs to job %lld of database %s, not to "
                 "job %lld of database %s: refusing another job's weights",
                 (long long)has->job_id, has->database_id,
                 (long long)want->job_id, want->database_id);
    return BF_CHECKPOINT_FOREIGN;
}

static int parse_config(bf_checkpoint *ck, const char *path, bf_error *err)
{
    json_error_t jerr;
    json_t *obj = json_loads(ck->config_json, 0, &jerr);
    if (!obj)
        return bf_error_set(err, path, 0, "__metadata__.config",
                            "not valid JSON: %s", jerr.text);
    bf_error inner;
    bf_job_config_defaults(&ck->cfg);
    int rc = bf_job_config_apply_json(&ck->cfg, obj, path, NULL, &inner);
    if (rc == 0)
        rc = bf_job_config_validate(&ck->cfg, &inner);
    json_decref(obj);
    if (rc != 0)
        return bf_error_set(err, path, 0, "__metadata__.config",
                            "invalid job config: %s", inner.msg);
    return 0;
}

int bf_checkpoint_open(bf_checkpoint *ck, const char *path, bf_error *err)
{
    memset(ck, 0, sizeof *ck);
    if (bf_st_open(&ck->file, path, err) != 0)
        return -1;
    const char *format = bf_st_metadata(ck->file, "format");
    const char *version = bf_st_metadata(ck->file, "format_version");
    int rc = 0;
    if (!format || strcmp(format, BF_CHECKPOINT_FORMAT) != 0)
        rc = bf_error_set(err, path, 0, "__metadata__.format",
                          "not a Bifocal checkpoint (format '%s', expected "
                          "'%s')", format ? format : "(none)",
                          BF_CHECKPOINT_FORMAT);
    else if (!version || atoi(version) != BF_CHECKPOINT_VERSION)
        rc = bf_error_set(err, path, 0, "__metadata__.format_version",
                          "version '%s' is not supported (this build reads "
                          "%d)", version ? version : "(none)",
                          BF_CHECKPOINT_VERSION);
    else if (parse_step(bf_st_metadata(ck->file, "step"), &ck->step) != 0)
        rc = bf_error_set(err, path, 0, "__metadata__.step",
                          "missing or not a non-negative integer");
    else if (!(ck->config_json = bf_st_metadata(ck->file, "config")))
        rc = bf_error_set(err, path, 0, "__metadata__.config", "missing");
    else if ((rc = parse_owner(ck, path, err)) == 0)
        rc = parse_config(ck, path, err);
    if (rc != 0)
        bf_checkpoint_close(ck);
    return rc;
}

void bf_checkpoint_close(bf_checkpoint *ck)
{
    bf_st_close(ck->file);
    memset(ck, 0, sizeof *ck);
}

typedef struct copy_ctx { const bf_st_file *file; float *base; } copy_ctx;

static int copy_slice(void *ctx, const char *name, const bf_param_info *ti,
                      size_t offset, bf_error *err)
{
    copy_ctx *c = ctx;
    const char *path = bf_st_path(c->file);
    const bf_st_tensor *t = bf_st_find(c->file, name);
    if (!t)
        return bf_st_tensor_error(err, path, name, "missing");
    int64_t want[3];
    int same = t->ndim == ti->ndim;
    for (int d = 0; d < ti->ndim; d++) {
        want[d] = ti->dims[d];
        same = same && t->shape[d] == want[d];
    }
    if (!same) {
        char a[96], b[96];
        return bf_st_tensor_error(err, path, name,
            "shape %s in the checkpoint, %s in this model",
            bf_st_shape_str(t->ndim, t->shape, a, sizeof a),
            bf_st_shape_str(ti->ndim, want, b, sizeof b));
    }
    memcpy(c->base + offset, t->data, t->nbytes);
    return 0;
}

/* A checkpoint with more layers than the model would otherwise load
 * silently truncated; fewer is caught by the missing tensor. */
static int check_layers(const bf_checkpoint *ck, const bf_model *m,
                        bf_error *err)
{
    int L = m->shape.n_layers;
    if (ck->cfg.n_layers <= L)
        return 0;
    char name[96];
    tensor_name(name, sizeof name, 1, L);
    return bf_st_tensor_error(err, bf_st_path(ck->file), name,
                              "the checkpoint has %d layers, this model %d",
                              ck->cfg.n_layers, L);
}

int bf_checkpoint_load_params(const bf_checkpoint *ck, bf_model *m,
                              bf_error *err)
{
    copy_ctx c = {ck->file, m->params_memory};
    if (check_layers(ck, m, err) != 0)
        return -1;
    return for_each_slice(m, "", copy_slice, &c, err);
}

int bf_checkpoint_load_moments(const bf_checkpoint *ck, bf_model *m,
                               bf_error *err)
{
    copy_ctx c1 = {ck->file, m->adam_m}, c2 = {ck->file, m->adam_v};
    if (for_each_slice(m, MOMENT1_PREFIX, copy_slice, &c1, err) != 0)
        return -1;
    return for_each_slice(m, MOMENT2_PREFIX, copy_slice, &c2, err);
}

/* "field 'lr': checkpoint 0.001, job 0.002; ..." for every differing field. */
static void describe_config_diff(const char *a_json, const char *b_json,
                                 char *out, size_t cap)
{
    json_t *a = json_loads(a_json, 0, NULL), *b = json_loads(b_json, 0, NULL);
    size_t n = 0;
    out[0] = '\0';
    const char *key;
    json_t *va;
    json_object_foreach(a, key, va) {
        json_t *vb = json_object_get(b, key);
        if (vb && json_equal(va, vb))
            continue;
        char *sa = json_dumps(va, JSON_ENCODE_ANY | JSON_REAL_PRECISION(9));
        char *sb = vb ? json_dumps(vb, JSON_ENCODE_ANY |
                                   JSON_REAL_PRECISION(9)) : NULL;
        if (n < cap)
            n += (size_t)snprintf(out + n, cap - n,
                                  "%sfield '%s': checkpoint %s, job %s",
                                  n ? "; " : "", key, sa ? sa : "?",
                                  sb ? sb : "(absent)");
        free(sa);
        free(sb);
    }
    json_decref(a);
    json_decref(b);
}

/* Whether the job of cfg, owned by owner (may be NULL), may continue from
 * ck: not another owner's (BF_CHECKPOINT_FOREIGN), the same config
 * (compared in canonical form, so a checkpoint written before a field was
 * added, at its default, still matches) and a step within the job's
 * steps (-1). */
static int check_resumable(const bf_checkpoint *ck, const char *path,
                           const bf_job_config *cfg,
                           const bf_checkpoint_owner *owner, bf_error *err)
{
    int rc = check_owner(ck, owner, err);
    if (rc != 0)
        return rc;
    char *mine = bf_job_config_to_canonical_json(cfg);
    char *theirs = bf_job_config_to_canonical_json(&ck->cfg);
    if (!mine || !theirs) {
        rc = bf_error_set(err, path, 0, NULL, "out of memory");
    } else if (strcmp(mine, theirs) != 0) {
        char diff[600];
        describe_config_diff(theirs, mine, diff, sizeof diff);
        rc = bf_error_set(err, path, 0, NULL,
                          "cannot resume: the checkpoint was written by a "
                          "different job config (%s)", diff);
    } else if (ck->step < 0 || ck->step > cfg->steps) {
        rc = bf_error_set(err, path, 0, "__metadata__.step", "cannot resume: "
                          "the checkpoint is at step %d, outside the job's "
                          "0 .. %d steps", ck->step, cfg->steps);
    }
    free(mine);
    free(theirs);
    return rc;
}

int bf_checkpoint_check_resume(const char *path, const bf_job_config *cfg,
                               const bf_checkpoint_owner *owner, int *step,
                               bf_error *err)
{
    bf_checkpoint ck;
    if (bf_checkpoint_open(&ck, path, err) != 0)
        return -1;
    int rc = check_resumable(&ck, path, cfg, owner, err);
    if (rc == 0 && step)
        *step = ck.step;
    bf_checkpoint_close(&ck);
    return rc;
}

int bf_checkpoint_resume(const char *path, bf_model *m,
                         const bf_job_config *cfg,
                         const bf_checkpoint_owner *owner, int *step,
                         bf_error *err)
{
    bf_checkpoint ck;
    if (bf_checkpoint_open(&ck, path, err) != 0)
        return -1;
    /* Compared as parsed, not as stored: a checkpoint written before a
     * field existed holds that field's default, so it resumes unchanged. */
    int rc = check_resumable(&ck, path, cfg, owner, err);
    if (rc == 0)
        rc = bf_checkpoint_load_params(&ck, m, err);
    if (rc == 0)
        rc = bf_checkpoint_load_moments(&ck, m, err);
    if (rc == 0)
        *step = ck.step;
    bf_checkpoint_close(&ck);
    return rc;
}

int bf_checkpoint_init_from(const char *path,
                            const bf_checkpoint_owner *source, bf_model *m,
                            bf_error *err)
{
    bf_checkpoint ck;
    if (bf_checkpoint_open(&ck, path, err) != 0)
        return -1;
    int rc = check_owner(&ck, source, err);
    if (rc == 0)
        rc = bf_checkpoint_load_params(&ck, m, err);
    bf_checkpoint_close(&ck);
    if (rc != 0)
        return rc;
    /* A fresh optimizer: the new variant's learnable heads start their own
     * trajectory from the source model's frequencies. */
    bf_model_zero_grad(m);
    memset(m->adam_m, 0, m->num_params * sizeof *m->adam_m);
    memset(m->adam_v, 0, m->num_params * sizeof *m->adam_v);
    return 0;
}

/* ---- checkpoint directories ------------------------------------------------ */

#define LATEST_NAME "latest"

void bf_checkpoint_step_path(char *buf, size_t cap, const char *dir,
                             int step)
{
    snprintf(buf, cap, "%s/step-%06d.safetensors", dir, step);
}

int bf_checkpoint_save_in_dir(const char *dir, const bf_model *m,
                              const bf_job_config *cfg,
                              const bf_checkpoint_owner *owner, int step,
                              char *path_out, size_t cap, bf_error *err)
{
    char path[BF_PATH_MAX + 64], latest[BF_PATH_MAX + 16];
    bf_checkpoint_step_path(path, sizeof path, dir, step);
    if (bf_checkpoint_save(path, m, cfg, owner, step, err) != 0)
        return -1;
    /* The pointer holds the bare file name so the directory can move. */
    char line[64];
    int n = snprintf(line, sizeof line, "step-%06d.safetensors\n", step);
    snprintf(latest, sizeof latest, "%s/%s", dir, LATEST_NAME);
    if (bf_write_file_atomic(latest, line, (size_t)n, err) != 0)
        return -1;
    if (path_out)
        snprintf(path_out, cap, "%s", path);
    return 0;
}

int bf_checkpoint_latest(const char *dir, char *path_out, size_t cap,
                         bf_error *err)
{
    char latest[BF_PATH_MAX + 16];
    snprintf(latest, sizeof latest, "%s/%s", dir, LATEST_NAME);
    FILE *fp = fopen(latest, "r");
    if (!fp) {
        if (errno == ENOENT)
            return 0;
        return bf_error_set(err, latest, 0, NULL, "cannot open: %s",
                            strerror(errno));
    }
    char name[256] = "";
    int ok = fgets(name, sizeof name, fp) != NULL;
    fclose(fp);
    name[strcspn(name, "\r\n")] = '\0';
    if (!ok || !name[0] || strchr(name, '/'))
        return bf_error_set(err, latest, 1, NULL,
                            "expected the file name of a checkpoint in %s",
                            dir);
    snprintf(path_out, cap, "%s/%s", dir, name);
    return 1;
}
