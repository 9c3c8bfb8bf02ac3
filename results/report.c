/* report: the report data (JSON) and the self-contained page around it. */
#include "report.h"

#include "adaptive.h"
#include "selections.h"
#include "alloc.h"
#include "compare.h"
#include "curves.h"
#include "results.h"
#include "sweep_view.h"
#include "web_page.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define BF_REPORT_VERSION 1

/* The jobs table of a report lists the first jobs by id, no more: a page
 * of a million rows helps no reader (`bifocal results` lists them all). */
#define BF_REPORT_MAX_JOBS 10000

/* Each group with its jobs and succeeded jobs, counted as the view was
 * held (none in a view made without them, as the dashboard's). */
static json_t *groups_json(const bf_sweep_view *v)
{
    json_t *groups = json_array();
    for (int g = 0; g < v->n_groups; g++) {
        char *label = bf_sweep_view_label(v, g);
        json_array_append_new(groups, json_pack(
            "{s:s, s:O, s:I, s:I}", "label", label, "fields",
            json_array_get(v->groups, (size_t)g), "jobs",
            (json_int_t)(v->group_jobs ? v->group_jobs[g] : 0), "succeeded",
            (json_int_t)(v->group_succeeded ? v->group_succeeded[g] : 0)));
        free(label);
    }
    return groups;
}

static json_t *names_json(const char *const *names, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_string(names[i]));
    return a;
}

/* The distinct training depths of the jobs, to mark them. */
static json_t *train_depths(const bf_sweep_view *v)
{
    return v->depths ? json_copy(v->depths) : json_array();
}

static json_t *sweep_json(const bf_sweep_view *v)
{
    static const char *const keys[] = { "sweep_id", "name", "filename",
                                        "status", "source", "submitted_ms" };
    json_t *s = json_object();
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        json_object_set(s, keys[i], json_object_get(v->sweep, keys[i]));
    json_object_set_new(s, "n_jobs", json_integer((json_int_t)v->n_jobs));
    /* stored as JSON text (docs/schema.md); a database from before they
     * were stored has none */
    const char *warnings = json_string_value(json_object_get(v->sweep,
                                                             "warnings"));
    json_t *list = warnings ? json_loads(warnings, 0, NULL) : NULL;
    json_object_set_new(s, "warnings", json_is_array(list) ? list : json_array());
    if (!json_is_array(list))
        json_decref(list);
    return s;
}

json_t *bf_report_summary(const bf_sweep_view *v, json_t *compare)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}",
                     "sweep", sweep_json(v),
                     "varying", names_json(v->varying, v->n_varying),
                     "fields", names_json(v->by, v->n_by),
                     "groups", groups_json(v),
                     "train_depths", train_depths(v),
                     "compare", compare);
}

/* The report data of a sweep, or of its jobs matching where (NULL: all),
 * grouped by the fields by (NULL: as compare groups by default; see
 * bf_sweep_view_scan); NULL after printing the problem. */
static json_t *report_data(bf_source *src, int64_t sweep_id,
                           const char *by, const char *where,
                           const char *baseline)
{
    bf_sweep_view v;
    json_t *data = NULL, *compare = NULL, *loss = NULL, *freq = NULL,
           *adaptive = NULL, *chosen = NULL;
    /* The succeeded jobs by id and group with compare's facts (the
     * comparison and the curves), the first ones' rows (the job table),
     * and the groups of those counted: memory per group and a few
     * numbers per result, no row past the first ones, none per pending
     * job. */
    bf_compare_facts *facts = bf_compare_facts_new();
    bf_sweep_hold held = { .status = "succeeded", .first = BF_REPORT_MAX_JOBS,
                           .count = 1, .max_groups = BF_COMPARE_MAX_GROUPS,
                           .on_job = bf_compare_facts_add,
                           .ctx = facts, .alike = bf_curves_job_fields };
    if (bf_compare_view_load(&v, src, sweep_id, by, where, &held) == 0
        && (compare = bf_compare_rows_of_facts(&v, src, baseline, facts))
        && (loss = bf_curves_train_loss(&v, src))
        && (freq = bf_curves_frequencies(&v, src))
        && (adaptive = bf_adaptive_read(src, sweep_id))
        && (chosen = bf_selections_read(src, sweep_id))) {
        time_t now = time(NULL);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        data = json_pack("{s:s, s:i, s:s}", "format", "bifocal-report",
                         "version", BF_REPORT_VERSION, "generated", stamp);
        json_t *summary = bf_report_summary(&v, compare);
        compare = NULL;
        json_object_update(data, summary);
        json_decref(summary);
        json_object_set_new(data, "train_loss", loss);
        json_object_set_new(data, "frequencies", freq);
        json_object_set_new(data, "jobs", bf_results_rows(&v,
                                                          BF_REPORT_MAX_JOBS));
        json_object_set_new(data, "adaptive_seeds", adaptive);
        json_object_set_new(data, "selections", chosen);
        json_object_set(data, "searches", v.searched);
        loss = freq = adaptive = chosen = NULL;
    }
    bf_compare_facts_free(facts);
    json_decref(chosen);
    json_decref(adaptive);
    json_decref(compare);
    json_decref(loss);
    json_decref(freq);
    bf_sweep_view_clear(&v);
    return data;
}

static int write_report(const char *path, const json_t *data, int as_json)
{
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "bifocal: cannot write %s: %s\n", path,
                strerror(errno));
        return 1;
    }
    int rc = as_json ? json_dumpf(data, out, JSON_INDENT(1)
                                             | JSON_REAL_PRECISION(6))
                     : bf_web_page_write(out, bf_web_report_html, data);
    if (fclose(out) != 0 || rc != 0) {
        fprintf(stderr, "bifocal: writing %s failed\n", path);
        return 1;
    }
    struct stat st;
    stat(path, &st);
    printf("wrote %s (%.1f KB)%s\n", path, st.st_size / 1024.0,
           as_json ? "" : ": open it in a browser, no network needed");
    return 0;
}

int bf_report_write(bf_source *src, int64_t sweep_id, const char *by,
                    const char *where, const char *baseline,
                    const char *output, int as_json)
{
    json_t *data = report_data(src, sweep_id, by, where, baseline);
    int status = data ? write_report(output, data, as_json) : 1;
    json_decref(data);
    return status;
}
