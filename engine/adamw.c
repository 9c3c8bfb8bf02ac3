/* AdamW over the model's flat parameter layout (see model.h). */
#include <math.h>

#include "layers.h"
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
    float lr = is_freq ? hp->lr * hp->freq_lr_mult : hp->lr;
    float wd = decay ? hp->weight_decay : 0.0f;
    bf_adamw_update(c->m->params_memory + offset, c->m->adam_m + offset,
                    c->m->adam_v + offset, c->m->grads_memory + offset, count,
                    c->grad_scale, lr, wd, hp->beta1, hp->beta2, hp->eps,
                    c->bias1, c->bias2);
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
