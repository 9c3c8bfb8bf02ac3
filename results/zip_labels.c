/* zip_labels: a sweep file's names for its zip entries (zip_labels.h). */
#include "zip_labels.h"

#include <string.h>

#include "job_config.h"
#include "yaml_json.h"

/* The entries of one zip mapping that has a label list, or NULL. */
static json_t *labelled_zip(const json_t *zip, const json_t *stage)
{
    const json_t *labels = json_object_get(zip, "label");
    if (!json_is_array(labels))
        return NULL;
    json_t *fields = json_array(), *entries = json_array();
    size_t i;
    json_t *label;
    json_array_foreach(labels, i, label)
        json_array_append_new(entries, json_pack("{s:O, s:{}}", "label",
                                                 label, "values"));
    const char *field;
    json_t *values;
    json_object_foreach((json_t *)zip, field, values) {
        if (!strcmp(field, "label"))
            continue;
        json_array_append_new(fields, json_string(field));
        json_array_foreach(entries, i, label) {
            json_t *v = bf_job_config_canonical_value(
                field, json_array_get(values, i), NULL);
            json_object_set_new(json_object_get(label, "values"), field,
                                v ? v : json_null());
        }
    }
    return json_pack("{s:O, s:o, s:o}", "stage", stage ? stage : json_null(),
                     "fields", fields, "entries", entries);
}

void bf_zip_labels_each(const json_t *node, bf_zip_fn fn, void *ctx)
{
    const json_t *zip = json_object_get(node, "zip");
    size_t i;
    json_t *group;
    if (json_is_object(zip))
        fn(ctx, zip);
    json_array_foreach(zip, i, group)
        fn(ctx, group);
}

/* Where labelled zips are collected: the stage they belong to. */
typedef struct collect {
    json_t *out;
    const json_t *stage;
} collect;

static void add_zip(void *ctx, const json_t *zip)
{
    collect *c = ctx;
    json_t *z = labelled_zip(zip, c->stage);
    if (z)
        json_array_append_new(c->out, z);
}

json_t *bf_zip_labels(const char *source)
{
    json_t *out = json_array();
    bf_error err;
    json_t *sweep = source ? bf_yaml_parse(source, strlen(source), NULL, NULL,
                                           &err) : NULL;
    collect c = { out, NULL };
    bf_zip_labels_each(sweep, add_zip, &c);
    size_t i;
    json_t *stage;
    json_array_foreach(json_object_get(sweep, "stages"), i, stage) {
        c.stage = json_object_get(stage, "name");
        bf_zip_labels_each(stage, add_zip, &c);
    }
    json_decref(sweep);
    return out;
}

const char *bf_zip_label_of(const json_t *zip, const char *stage,
                            const json_t *config)
{
    const char *own = json_string_value(json_object_get(zip, "stage"));
    if ((own || stage) && (!own || !stage || strcmp(own, stage)))
        return NULL;
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(zip, "entries"), i, entry) {
        const char *field;
        json_t *value;
        int match = 1;
        json_object_foreach(json_object_get(entry, "values"), field, value)
            match &= !json_object_get(config, field) ||
                     json_equal(value, json_object_get(config, field));
        if (match)
            return json_string_value(json_object_get(entry, "label"));
    }
    return NULL;
}
