/* safetensors files and checkpoints: bitwise round trips, rejection of
 * corrupt files with messages naming file and tensor, resume refusal, and
 * surgical integration across positional variants. */
#include "test_train_util.h"

#include <math.h>
#include <stdint.h>

#include "checkpoint.h"
#include "file.h"
#include "model.h"
#include "safetensors.h"
#include "tasks.h"

static void path_in(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

/* ---- safetensors ------------------------------------------------------------ */

static void test_safetensors_round_trip(void **state)
{
    (void)state;
    float a[6], b[1] = {-0.0f}, c[4];
    for (int i = 0; i < 6; i++)
        a[i] = (float)(i * 0.37 - 1.1);
    for (int i = 0; i < 4; i++)
        c[i] = (i % 2) ? NAN : 1e-38f * (float)i;  /* odd bit patterns */
    int64_t sa[2] = {2, 3}, sc[3] = {1, 2, 2};
    bf_error err;
    bf_st_writer *w = bf_st_writer_new();
    assert_int_equal(bf_st_writer_add_f32(w, "a.weight", 2, sa, a, &err), 0);
    assert_int_equal(bf_st_writer_add_f32(w, "scalar", 0, NULL, b, &err), 0);
    assert_int_equal(bf_st_writer_add_f32(w, "c", 3, sc, c, &err), 0);
    assert_int_equal(bf_st_writer_add_f32(w, "c", 3, sc, c, &err), -1);
    assert_non_null(strstr(err.msg, "'c'"));
    assert_int_equal(bf_st_writer_set_metadata(w, "k", "v \"q\"", &err), 0);
    char path[128];
    path_in(path, sizeof path, "rt.safetensors");
    assert_int_equal(bf_st_writer_write(w, path, &err), 0);
    bf_st_writer_free(w);

    /* The header size is 8-aligned, so the data section is too. */
    FILE *fp = fopen(path, "rb");
    uint64_t hlen = 0;
    assert_int_equal(fread(&hlen, 8, 1, fp), 1);
    fclose(fp);
    assert_int_equal(hlen % 8, 0);

    bf_st_file *f;
    assert_int_equal(bf_st_open(&f, path, &err), 0);
    assert_int_equal(bf_st_num_tensors(f), 3);
    const bf_st_tensor *t = bf_st_find(f, "a.weight");
    assert_non_null(t);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->nbytes, sizeof a);
    assert_memory_equal(t->data, a, sizeof a);
    t = bf_st_find(f, "scalar");
    assert_int_equal(t->ndim, 0);
    assert_memory_equal(t->data, b, sizeof b);
    t = bf_st_find(f, "c");
    assert_int_equal(t->ndim, 3);
    assert_memory_equal(t->data, c, sizeof c);
    assert_null(bf_st_find(f, "missing"));
    assert_string_equal(bf_st_metadata(f, "k"), "v \"q\"");
    assert_null(bf_st_metadata(f, "nope"));
    bf_st_close(f);
}

/* Writes 8-byte size + header + n_data bytes of zeros. */
static void write_raw(const char *path, uint64_t hlen, const char *header,
                      size_t n_data)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fwrite(&hlen, 8, 1, fp);
    fwrite(header, 1, strlen(header), fp);
    for (size_t i = 0; i < n_data; i++)
        fputc(0, fp);
    fclose(fp);
}

/* Opening must fail, and the message must name the file and contain each
 * of the given fragments. */
static void expect_rejected(const char *path, const char *frag1,
                            const char *frag2)
{
    bf_st_file *f = NULL;
    bf_error err;
    bf_error_clear(&err);
    assert_int_equal(bf_st_open(&f, path, &err), -1);
    assert_null(f);
    if (!strstr(err.msg, path) || !strstr(err.msg, frag1) ||
        (frag2 && !strstr(err.msg, frag2)))
        fail_msg("message '%s' lacks '%s' / '%s'", err.msg, frag1,
                 frag2 ? frag2 : "");
}

static void test_safetensors_rejects_corrupt(void **state)
{
    (void)state;
    char p[128];
    const char *ok = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],"
                     "\"data_offsets\":[0,8]}}";

    path_in(p, sizeof p, "short.safetensors");
    write_text(p, "abc");
    expect_rejected(p, "too short", NULL);

    path_in(p, sizeof p, "hsize.safetensors");
    write_raw(p, 1000000, ok, 8);
    expect_rejected(p, "header size 1000000", NULL);

    path_in(p, sizeof p, "json.safetensors");
    write_raw(p, 11, "{\"x\": [1,2,", 0);
    expect_rejected(p, "not valid JSON", NULL);

    path_in(p, sizeof p, "truncated.safetensors");
    write_raw(p, strlen(ok), ok, 4);   /* data section 4 of 8 bytes */
    expect_rejected(p, "tensor 'x'", "out of range");

    const char *far = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],"
                      "\"data_offsets\":[8,16]}}";
    path_in(p, sizeof p, "offsets.safetensors");
    write_raw(p, strlen(far), far, 8);
    expect_rejected(p, "tensor 'x'", "[8, 16] out of range");

    const char *overlap = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[4,12]}}";
    path_in(p, sizeof p, "overlap.safetensors");
    write_raw(p, strlen(overlap), overlap, 12);
    expect_rejected(p, "tensor 'b'", "overlaps tensor 'a'");

    const char *f16 = "{\"x\":{\"dtype\":\"F16\",\"shape\":[2],"
                      "\"data_offsets\":[0,4]}}";
    path_in(p, sizeof p, "dtype.safetensors");
    write_raw(p, strlen(f16), f16, 4);
    expect_rejected(p, "tensor 'x'", "dtype 'F16'");

    const char *span = "{\"x\":{\"dtype\":\"F32\",\"shape\":[3],"
                       "\"data_offsets\":[0,8]}}";
    path_in(p, sizeof p, "span.safetensors");
    write_raw(p, strlen(span), span, 8);
    expect_rejected(p, "tensor 'x'", "needs 12");

    path_in(p, sizeof p, "trailing.safetensors");
    write_raw(p, strlen(ok), ok, 12);
    expect_rejected(p, "12 bytes but tensors cover 8", NULL);

    path_in(p, sizeof p, "absent.safetensors");
    expect_rejected(p, "cannot open", NULL);
}

/* ---- checkpoints ------------------------------------------------------------ */

static void make_model(bf_model *m, const bf_job_config *cfg)
{
    bf_model_shape s;
    bf_model_size_from_config(&s, cfg, bf_vocab_size(cfg));
    bf_error err;
    if (bf_model_create(m, &s, 2, cfg->seq_len, &err) != 0)
        fail_msg("model: %s", err.msg);
    bf_model_init_weights(m, cfg->seed);
}

static void test_checkpoint_round_trip(void **state)
{
    (void)state;
    bf_job_config cfg;
    tiny_config(&cfg, BF_ROPE_BIFOCAL);
    bf_model a, b;
    make_model(&a, &cfg);
    for (size_t i = 0; i < a.num_params; i++) {   /* distinct moments */
        a.adam_m[i] = (float)i * 1e-3f;
        a.adam_v[i] = 1.0f / (float)(i + 1);
    }
    char path[128];
    path_in(path, sizeof path, "model.safetensors");
    bf_error err;
    assert_int_equal(bf_checkpoint_save(path, &a, &cfg, NULL, 7, &err), 0);

    bf_job_config other = cfg;
    other.seed = 99;
    make_model(&b, &other);   /* different weights before loading */
    assert_memory_not_equal(a.params_memory, b.params_memory,
                            a.num_params * sizeof(float));
    bf_checkpoint ck;
    assert_int_equal(bf_checkpoint_open(&ck, path, &err), 0);
    assert_int_equal(ck.step, 7);
    char *canon = bf_job_config_to_canonical_json(&cfg);
    assert_string_equal(ck.config_json, canon);
    free(canon);
    assert_string_equal(bf_st_metadata(ck.file, "learnable"),
                        "[[0,1],[0,1]]");
    assert_non_null(bf_st_find(ck.file, "h.1.attn.c_attn.weight"));
    assert_non_null(bf_st_find(ck.file, "optimizer.exp_avg_sq.ln_f.bias"));
    const bf_st_tensor *lf = bf_st_find(ck.file, "h.0.attn.rope.log_freq");
    assert_int_equal(lf->ndim, 2);
    assert_int_equal(lf->shape[0], 2);   /* heads */
    assert_int_equal(lf->shape[1], 4);   /* d_head / 2 */
    assert_int_equal(bf_checkpoint_load_params(&ck, &b, &err), 0);
    assert_int_equal(bf_checkpoint_load_moments(&ck, &b, &err), 0);
    bf_checkpoint_close(&ck);
    size_t bytes = a.num_params * sizeof(float);
    assert_memory_equal(a.params_memory, b.params_memory, bytes);
    assert_memory_equal(a.adam_m, b.adam_m, bytes);
    assert_memory_equal(a.adam_v, b.adam_v, bytes);

    /* Resuming under another config is refused, naming the field. */
    int step = -1;
    other.seed = cfg.seed;
    other.lr = 0.5;
    assert_int_equal(bf_checkpoint_resume(path, &b, &other, NULL, &step, &err), -1);
    assert_non_null(strstr(err.msg, "field 'lr'"));
    assert_non_null(strstr(err.msg, path));
    assert_int_equal(step, -1);
    if (bf_checkpoint_resume(path, &b, &cfg, NULL, &step, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(step, 7);
    /* A checkpoint past the job's steps is refused (one claiming step
     * 1,000,000 of a 20-step job used to "finish" it untrained). */
    assert_int_equal(bf_checkpoint_check_resume(path, &cfg, NULL, &step, &err), 0);
    assert_int_equal(step, 7);
    step = -1;
    assert_int_equal(bf_checkpoint_save(path, &a, &cfg, NULL, cfg.steps + 1, &err), 0);
    assert_int_equal(bf_checkpoint_resume(path, &b, &cfg, NULL, &step, &err), -1);
    assert_non_null(strstr(err.msg, "outside the job's 0 .. 10 steps"));
    assert_int_equal(step, -1);
    assert_int_equal(bf_checkpoint_check_resume(path, &cfg, NULL, NULL, &err), -1);
    bf_model_free(&a);
    bf_model_free(&b);
}

/* Blanks `text` out of the file at path (it must be there once): spaces
 * of the same length, so every offset in the file stays valid. */
static void blank_out(const char *path, const char *text)
{
    size_t n;
    bf_error err;
    char *buf = bf_read_file(path, &n, &err);
    assert_non_null(buf);
    char *at = memmem(buf, n, text, strlen(text));
    assert_non_null(at);
    memset(at, ' ', strlen(text));
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    free(buf);
}

/* A checkpoint written before prope_fraction and random_positions existed
 * (its config lacks them) resumes under a job that has their defaults, and
 * not under one that changed them. */
static void test_resume_checkpoint_without_new_fields(void **state)
{
    (void)state;
    bf_job_config cfg;
    tiny_config(&cfg, BF_ROPE_SPECTRAL);
    bf_model m;
    make_model(&m, &cfg);
    char path[128];
    path_in(path, sizeof path, "old.safetensors");
    bf_error err;
    assert_int_equal(bf_checkpoint_save(path, &m, &cfg, NULL, 5, &err), 0);
    /* the config as an older version wrote it: without the two fields
     * (blanks between JSON tokens are still valid JSON) */
    blank_out(path, "\\\"prope_fraction\\\":0.25,"
                    "\\\"random_positions\\\":0,");

    int step = -1;
    if (bf_checkpoint_resume(path, &m, &cfg, NULL, &step, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(step, 5);
    bf_job_config changed = cfg;
    changed.random_positions = 4 * cfg.seq_len;
    assert_int_equal(bf_checkpoint_resume(path, &m, &changed, NULL, &step, &err),
                     -1);
    assert_non_null(strstr(err.msg, "field 'random_positions': checkpoint 0"));
    bf_model_free(&m);
}

/* Trains a rope model for a few steps and returns its checkpoint path. */
static void rope_checkpoint(bf_job_config *src, char *path, size_t cap)
{
    tiny_config(src, BF_ROPE_GEOMETRIC);
    src->steps = 4;
    char ck_dir[128];
    path_in(ck_dir, sizeof ck_dir, "src");
    mkdir(ck_dir, 0777);
    record_log log = {json_array()};
    run_job(src, ck_dir, NULL, &log, NULL);
    json_decref(log.records);
    bf_checkpoint_step_path(path, cap, ck_dir, 4);
}

/* Starts a `variant` job from a rope checkpoint: weights and frequencies
 * equal the source at step 0, moments are fresh, and training moves
 * exactly the frequencies the new variant makes learnable. */
static void check_integration(bf_rope_kind variant, const uint8_t *mask)
{
    bf_job_config src;
    char src_path[256];
    rope_checkpoint(&src, src_path, sizeof src_path);
    bf_checkpoint ck;
    bf_error err;
    assert_int_equal(bf_checkpoint_open(&ck, src_path, &err), 0);
    bf_model source;
    make_model(&source, &src);
    assert_int_equal(bf_checkpoint_load_params(&ck, &source, &err), 0);
    assert_int_equal(bf_checkpoint_load_moments(&ck, &source, &err), 0);
    bf_checkpoint_close(&ck);

    bf_job_config job = src;
    job.rope = variant;
    job.seed = 1234;     /* the init must come from the checkpoint */
    job.steps = 5;
    snprintf(job.init_from, sizeof job.init_from, "%s", src_path);
    bf_trainer_opts o = {.rank = 0, .nranks = 1};
    bf_trainer *t;
    assert_int_equal(bf_trainer_create(&t, &job, &o, &err), 0);
    bf_model *m = bf_trainer_model(t);
    size_t bytes = m->num_params * sizeof(float);
    int heads = src.n_layers * src.n_heads;
    assert_int_equal(bf_trainer_current_step(t), 0);
    assert_memory_equal(m->params_memory, source.params_memory, bytes);
    assert_memory_equal(m->freq_learnable, mask, (size_t)heads);
    float *zeros = calloc(m->num_params, sizeof(float));
    assert_memory_equal(m->adam_m, zeros, bytes);
    assert_memory_equal(m->adam_v, zeros, bytes);
    /* ...whereas the source had moving moments after 4 steps. */
    assert_memory_not_equal(source.adam_m, zeros, bytes);
    free(zeros);

    const bf_param_info *lf = &m->tensors[BF_NUM_PARAM_TENSORS - 1];
    for (int s = 0; s < 3; s++)
        bf_trainer_step(t, NULL, NULL, NULL);
    size_t P = lf->count / (size_t)heads;
    for (int h = 0; h < heads; h++) {
        const float *now = m->params_memory + lf->offset + (size_t)h * P;
        const float *was = source.params_memory + lf->offset + (size_t)h * P;
        int moved = 0;
        for (size_t i = 0; i < P; i++)
            moved += now[i] != was[i];
        assert_int_equal(moved, mask[h] ? (int)P : 0);
    }
    bf_trainer_free(t);
    bf_model_free(&source);
}

static void test_surgical_integration(void **state)
{
    (void)state;
    const uint8_t all[4] = {1, 1, 1, 1}, last_head[4] = {0, 1, 0, 1};
    check_integration(BF_ROPE_SPECTRAL, all);
    check_integration(BF_ROPE_BIFOCAL, last_head);
}

static void expect_init_mismatch(bf_job_config *job, const char *tensor,
                                 const char *shape_ck, const char *shape_m)
{
    bf_trainer_opts o = {.rank = 0, .nranks = 1};
    bf_trainer *t = NULL;
    bf_error err;
    bf_error check;
    assert_int_equal(bf_job_config_validate(job, &check), 0);
    /* the job's own input: no attempt anywhere would do better */
    assert_int_equal(bf_trainer_create(&t, job, &o, &err), BF_TRAIN_PERMANENT);
    assert_null(t);
    if (!strstr(err.msg, tensor) || !strstr(err.msg, shape_ck) ||
        !strstr(err.msg, shape_m) || !strstr(err.msg, job->init_from))
        fail_msg("message '%s' lacks %s / %s / %s", err.msg, tensor,
                 shape_ck, shape_m);
    assert_string_equal(err.field, tensor);
}

static void test_surgical_shape_mismatch(void **state)
{
    (void)state;
    bf_job_config src, job;
    char src_path[256];
    rope_checkpoint(&src, src_path, sizeof src_path);
    int V = bf_vocab_size(&src);
    char a[64], b[64];

    job = src;
    job.d_model = 32;
    snprintf(job.init_from, sizeof job.init_from, "%s", src_path);
    snprintf(a, sizeof a, "[%d, 16]", V);
    snprintf(b, sizeof b, "[%d, 32]", V);
    expect_init_mismatch(&job, "wte.weight", a, b);

    job = src;
    job.dyck_k = src.dyck_k + 1;     /* a larger vocabulary */
    snprintf(job.init_from, sizeof job.init_from, "%s", src_path);
    snprintf(b, sizeof b, "[%d, 16]", bf_vocab_size(&job));
    snprintf(a, sizeof a, "[%d, 16]", V);
    expect_init_mismatch(&job, "wte.weight", a, b);

    job = src;
    job.n_heads = 4;                 /* same matrices, other rotary table */
    snprintf(job.init_from, sizeof job.init_from, "%s", src_path);
    expect_init_mismatch(&job, "h.0.attn.rope.log_freq", "[2, 4]", "[4, 2]");

    job = src;
    job.n_layers = 1;
    snprintf(job.init_from, sizeof job.init_from, "%s", src_path);
    bf_trainer_opts o = {.rank = 0, .nranks = 1};
    bf_trainer *t = NULL;
    bf_error err;
    assert_int_equal(bf_trainer_create(&t, &job, &o, &err), BF_TRAIN_PERMANENT);
    assert_non_null(strstr(err.msg, "2 layers, this model 1"));

    /* A missing init_from is permanent too; a resume checkpoint that will
     * not load is not (the job can start over elsewhere). */
    job = src;
    snprintf(job.init_from, sizeof job.init_from, "%s.missing", src_path);
    assert_int_equal(bf_trainer_create(&t, &job, &o, &err), BF_TRAIN_PERMANENT);
    assert_non_null(strstr(err.msg, ".missing"));
    job = src;
    bf_trainer_opts resume = {.rank = 0, .nranks = 1,
                              .resume_path = "/nonexistent/step-1.safetensors"};
    assert_int_equal(bf_trainer_create(&t, &job, &resume, &err), -1);
}

/* A checkpoint names its database and job; resuming or starting a stage
 * from another job's is refused with both owners named, and the trainer
 * fails such a job for good.  A checkpoint without owner (from before
 * database ids, or a run without coordinator) still loads. */
static void test_checkpoint_owner(void **state)
{
    (void)state;
    bf_job_config cfg;
    tiny_config(&cfg, BF_ROPE_GEOMETRIC);
    bf_model m;
    make_model(&m, &cfg);
    bf_checkpoint_owner a, b, other_job;
    bf_error err;
    assert_int_equal(bf_checkpoint_owner_set(&a, "00112233aabbccdd", 1, &err),
                     0);
    assert_int_equal(bf_checkpoint_owner_set(&b, "ffeeddcc00112233", 1, &err),
                     0);
    assert_int_equal(bf_checkpoint_owner_set(&other_job, "00112233aabbccdd",
                                             2, &err), 0);
    assert_int_equal(bf_checkpoint_owner_set(&b, "00112233AABBCCDD", 1, &err),
                     -1);
    assert_string_equal(err.field, "database_id");
    assert_int_equal(bf_checkpoint_owner_set(&b, "ffeeddcc00112233", 1, &err),
                     0);

    char owned[128], plain[128];
    path_in(owned, sizeof owned, "owned.safetensors");
    path_in(plain, sizeof plain, "plain.safetensors");
    assert_int_equal(bf_checkpoint_save(owned, &m, &cfg, &a, 3, &err), 0);
    assert_int_equal(bf_checkpoint_save(plain, &m, &cfg, NULL, 3, &err), 0);
    bf_checkpoint ck;
    assert_int_equal(bf_checkpoint_open(&ck, owned, &err), 0);
    assert_string_equal(bf_st_metadata(ck.file, "database_id"),
                        "00112233aabbccdd");
    assert_string_equal(bf_st_metadata(ck.file, "job_id"), "1");
    assert_string_equal(ck.owner.database_id, "00112233aabbccdd");
    assert_int_equal(ck.owner.job_id, 1);
    bf_checkpoint_close(&ck);
    assert_int_equal(bf_checkpoint_open(&ck, plain, &err), 0);
    assert_null(bf_st_metadata(ck.file, "database_id"));
    assert_string_equal(ck.owner.database_id, "");
    bf_checkpoint_close(&ck);

    int step = -1;
    assert_int_equal(bf_checkpoint_check_resume(owned, &cfg, &a, &step, &err),
                     0);
    assert_int_equal(step, 3);
    assert_int_equal(bf_checkpoint_check_resume(owned, &cfg, &b, NULL, &err),
                     BF_CHECKPOINT_FOREIGN);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, owned));
    assert_non_null(strstr(err.msg, "belongs to job 1 of database "
                                    "00112233aabbccdd, not to job 1 of "
                                    "database ffeeddcc00112233"));
    assert_int_equal(bf_checkpoint_resume(owned, &m, &cfg, &other_job, &step,
                                          &err), BF_CHECKPOINT_FOREIGN);
    assert_non_null(strstr(err.msg, "not to job 2 of database "
                                    "00112233aabbccdd"));
    assert_int_equal(bf_checkpoint_init_from(owned, &b, &m, &err),
                     BF_CHECKPOINT_FOREIGN);
    assert_int_equal(bf_checkpoint_init_from(owned, &a, &m, &err), 0);
    assert_int_equal(bf_checkpoint_init_from(owned, NULL, &m, &err), 0);
    /* no owner in the file: loads whoever asks */
    assert_int_equal(bf_checkpoint_check_resume(plain, &cfg, &b, NULL, &err),
                     0);
    assert_int_equal(bf_checkpoint_init_from(plain, &b, &m, &err), 0);

    /* The trainer: another job's weights fail the job for good. */
    bf_job_config job = cfg;
    snprintf(job.init_from, sizeof job.init_from, "%s", owned);
    bf_trainer_opts o = {.rank = 0, .nranks = 1, .init_source = &b};
    bf_trainer *t = NULL;
    assert_int_equal(bf_trainer_create(&t, &job, &o, &err),
                     BF_TRAIN_PERMANENT);
    assert_non_null(strstr(err.msg, "belongs to job 1 of database "
                                    "00112233aabbccdd"));
    bf_trainer_opts r = {.rank = 0, .nranks = 1, .resume_path = owned,
                         .owner = &other_job};
    assert_int_equal(bf_trainer_create(&t, &cfg, &r, &err),
                     BF_TRAIN_PERMANENT);
    /* and it writes its owner into every checkpoint */
    char dir[128], written[512];
    path_in(dir, sizeof dir, "owner-dir");
    mkdir(dir, 0777);
    assert_int_equal(bf_checkpoint_save_in_dir(dir, &m, &cfg, &other_job, 4,
                                               written, sizeof written, &err),
                     0);
    assert_int_equal(bf_checkpoint_check_resume(written, &cfg, &other_job,
                                                NULL, &err), 0);
    assert_int_equal(bf_checkpoint_check_resume(written, &cfg, &a, NULL,
                                                &err), BF_CHECKPOINT_FOREIGN);
    bf_model_free(&m);
}

/* A job over the trainer's memory budget fails for good before anything
 * is allocated, with the figures; the estimate is what the model
 * allocates. */
static void test_memory_budget(void **state)
{
    (void)state;
    bf_job_config cfg;
    tiny_config(&cfg, BF_ROPE_GEOMETRIC);
    bf_job_memory need;
    bf_job_memory_of(&cfg, 1, &need);
    bf_trainer_opts o = {.rank = 0, .nranks = 1,
                         .memory_budget = need.total - 1};
    bf_trainer *t = NULL;
    bf_error err;
    assert_int_equal(bf_trainer_create(&t, &cfg, &o, &err),
                     BF_TRAIN_PERMANENT);
    print_message("%s\n", err.msg);
    char bytes[64];
    snprintf(bytes, sizeof bytes, "the job needs %zu bytes", need.total);
    assert_non_null(strstr(err.msg, bytes));
    assert_non_null(strstr(err.msg, "memory budget per rank"));
    o.memory_budget = need.total;
    if (bf_trainer_create(&t, &cfg, &o, &err) != 0)
        fail_msg("%s", err.msg);
    bf_model *m = bf_trainer_model(t);
    assert_int_equal(need.micro, m->B);
    assert_int_equal(need.params, 4 * m->num_params * sizeof(float));
    bf_trainer_free(t);
    /* the micro-batch shrinks with the rank's share of the batch */
    bf_job_memory two;
    cfg.batch_size = 4;
    bf_job_memory_of(&cfg, 1, &need);
    bf_job_memory_of(&cfg, 2, &two);
    assert_int_equal(need.micro, 4);
    assert_int_equal(two.micro, 2);
    assert_true(two.total < need.total);
}

static void test_checkpoint_dir_latest(void **state)
{
    (void)state;
    char d[128], found[512];
    bf_error err;
    path_in(d, sizeof d, "latest-test");
    mkdir(d, 0777);
    assert_int_equal(bf_checkpoint_latest(d, found, sizeof found, &err), 0);
    bf_job_config cfg;
    tiny_config(&cfg, BF_ROPE_NONE);
    bf_model m;
    make_model(&m, &cfg);
    char written[512];
    assert_int_equal(bf_checkpoint_save_in_dir(d, &m, &cfg, NULL, 3, written,
                                               sizeof written, &err), 0);
    assert_int_equal(bf_checkpoint_save_in_dir(d, &m, &cfg, NULL, 12, written,
                                               sizeof written, &err), 0);
    assert_int_equal(bf_checkpoint_latest(d, found, sizeof found, &err), 1);
    assert_string_equal(found, written);
    assert_non_null(strstr(found, "step-000012.safetensors"));
    bf_model_free(&m);

    char latest[160];
    snprintf(latest, sizeof latest, "%s/latest", d);
    write_text(latest, "../elsewhere\n");
    assert_int_equal(bf_checkpoint_latest(d, found, sizeof found, &err), -1);
    assert_non_null(strstr(err.msg, "latest"));
}

static void test_not_a_checkpoint(void **state)
{
    (void)state;
    float x[2] = {1, 2};
    int64_t s[1] = {2};
    bf_error err;
    bf_st_writer *w = bf_st_writer_new();
    bf_st_writer_add_f32(w, "x", 1, s, x, &err);
    char path[128];
    path_in(path, sizeof path, "plain.safetensors");
    assert_int_equal(bf_st_writer_write(w, path, &err), 0);
    bf_st_writer_free(w);
    bf_checkpoint ck;
    assert_int_equal(bf_checkpoint_open(&ck, path, &err), -1);
    assert_non_null(strstr(err.msg, "not a Bifocal checkpoint"));
    assert_string_equal(err.field, "__metadata__.format");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safetensors_round_trip),
        cmocka_unit_test(test_safetensors_rejects_corrupt),
        cmocka_unit_test(test_checkpoint_round_trip),
        cmocka_unit_test(test_resume_checkpoint_without_new_fields),
        cmocka_unit_test(test_surgical_integration),
        cmocka_unit_test(test_surgical_shape_mismatch),
        cmocka_unit_test(test_checkpoint_dir_latest),
        cmocka_unit_test(test_checkpoint_owner),
        cmocka_unit_test(test_memory_budget),
        cmocka_unit_test(test_not_a_checkpoint),
    };
    return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
