/* AdamW over the model's flat parameter layout (see model.h). */
#include <math.h>

#include "model.h"

typedef struct adamw_ctx {
    bf_model *m;
    const bf_adamw_hparams *hp;
    float bias1, bias2; /* 1 - beta^t */
    float grad_scale;
} adamw_ctx;

/* One range of parameters with a single learning rate and decay. */
static void adamw_range(void *ctx, size_t offset, size_t count, int decay,
                        int is_freq)
{
    adamw_ctx *c = ctx;
    const bf_adamw_hparams *hp = c->hp;
    float *p = c->m->params_memory + offset;
    const float *g = c->m->grads_memory + offset;
    float *mom = c->m->adam_m + offset, *vel = c->m->adam_v + offset;
    float lr = is_freq ? hp->lr * hp->freq_lr_mult : hp->lr;
    float wd = decay ? hp->weight_decay : 0.0f;
    float b1 = hp->beta1, b2 = hp->beta2, eps = hp->eps;
    for (size_t i = 0; i < count; i++) {
        float gi = g[i] * c->grad_scale;
        mom[i] = b1 * mom[i] + (1.0f - b1) * gi;
        vel[i] = b2 * vel[i] + (1.0f - b2) * gi * gi;
        float mhat = mom[i] / c->bias1, vhat = vel[i] / c->bias2;
        /* decoupled decay: p -= lr * (update + wd * p), as torch AdamW */
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    }
}

void bf_adamw_step(bf_model *m, const bf_adamw_hparams *hp, int t,
                   float grad_scale)
{
    adamw_ctx c = {
        .m = m,
        .hp = hp,
        .bias1 = (float)(1.0 - pow(hp->beta1, t)),
        .bias2 = (float)(1.0 - pow(hp->beta2, t)),
        .grad_scale = grad_scale,
    };
    /* fixed theta is not a trainable range, so it is never written */
    bf_model_foreach_trainable(m, adamw_range, &c);
}
