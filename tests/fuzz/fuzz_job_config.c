/* libFuzzer: a YAML (or JSON) job file through the loader the worker and
 * the coordinator share: YAML -> JSON -> bf_job_config -> validation, and a
 * valid config through its canonical JSON and back to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "job_config.h"
#include "yaml_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bf_error err;
    json_t *lines = NULL;
    json_t *doc = bf_yaml_parse((const char *)data, size, "fuzz.yaml", &lines,
                                &err);
    if (!doc)
        return 0;
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    if (bf_job_config_apply_json(&cfg, doc, "fuzz.yaml", lines, &err) == 0
        && bf_job_config_validate_in(&cfg, "fuzz.yaml", lines, &err) == 0) {
        char *canon = bf_job_config_to_canonical_json(&cfg);
        json_t *again = json_loads(canon, 0, NULL);
        bf_job_config back;
        bf_job_config_defaults(&back);
        if (!again || bf_job_config_apply_json(&back, again, NULL, NULL,
                                               &err) != 0)
            abort();
        char *canon2 = bf_job_config_to_canonical_json(&back);
        if (strcmp(canon, canon2) != 0)
            abort();   /* the canonical form must be a fixed point */
        free(canon);
        free(canon2);
        json_decref(again);
    }
    json_decref(doc);
    json_decref(lines);
    return 0;
}
