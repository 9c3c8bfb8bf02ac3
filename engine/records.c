#include "records.h"

#include <math.h>
#include <stdlib.h>

json_t *bf_record_real(double x)
{
    if (isfinite(x))
        return json_real(x);
    return json_string(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

json_t *bf_record_train(int step, double loss, double lr, double grad_norm,
                        double tokens_per_s)
{
    return json_pack("{s:s, s:i, s:o, s:o, s:o, s:o}", "type", "train",
                     "step", step, "loss", bf_record_real(loss),
                     "lr", bf_record_real(lr),
                     "grad_norm", bf_record_real(grad_norm),
                     "tokens_per_s", bf_record_real(tokens_per_s));
}

json_t *bf_record_eval(int step, int depth, double loss, double accuracy)
{
    return json_pack("{s:s, s:i, s:i, s:o, s:o}", "type", "eval",
                     "step", step, "depth", depth,
                     "loss", bf_record_real(loss),
                     "accuracy", bf_record_real(accuracy));
}

json_t *bf_record_freq(int step, int layer, int head, const float *omega,
                       int n)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++)
        json_array_append_new(arr, bf_record_real(omega[i]));
    return json_pack("{s:s, s:i, s:i, s:i, s:o}", "type", "freq",
                     "step", step, "layer", layer, "head", head,
                     "omega", arr);
}

json_t *bf_record_checkpoint(int step, const char *path)
{
    return json_pack("{s:s, s:i, s:s}", "type", "checkpoint", "step", step,
                     "path", path);
}

int bf_record_print(FILE *fp, const json_t *record)
{
    char *line = json_dumps(record, BF_RECORD_DUMP_FLAGS);
    if (!line)
        return -1;
    int rc = (fputs(line, fp) < 0 || fputc('\n', fp) == EOF ||
              fflush(fp) != 0) ? -1 : 0;
    free(line);
    return rc;
}
