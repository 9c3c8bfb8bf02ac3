/* The worker's records: one JSON object per event, printed one per line on
 * stdout in standalone mode and batched to the coordinator later.  Field
 * names are a contract with the coordinator's store (server/store/store.h) and are
 * listed in docs/training.md.  Every builder returns a new reference (NULL
 * only when out of memory); a non-finite real becomes the string "nan",
 * "inf" or "-inf", since JSON has no such numbers (the store keeps them). */
#ifndef BF_RECORDS_H
#define BF_RECORDS_H

#include <stdio.h>
#include <jansson.h>

/* Reals keep 9 significant digits: a float32 survives the round trip. */
#define BF_RECORD_DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

/* A real, or "nan" / "inf" / "-inf" when x is not finite (new reference). */
json_t *bf_record_real(double x);

json_t *bf_record_train(int step, double loss, double lr, double grad_norm,
                        double tokens_per_s);
json_t *bf_record_eval(int step, int depth, double loss, double accuracy);
json_t *bf_record_freq(int step, int layer, int head, const float *omega,
                       int n);
json_t *bf_record_checkpoint(int step, const char *path);

/* Writes the record as one line and flushes, so a reader on a pipe sees
 * every record as it happens.  Returns 0, or -1 on a write error. */
int bf_record_print(FILE *fp, const json_t *record);

#endif
