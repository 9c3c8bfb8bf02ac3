/* result_views: the whitelist of views a client may read by name, each
 * with the order its readers rely on (a frequency's history by step).
 * train_loss, millions of rows, is read in storage order: its reader
 * buckets steps without needing them sorted.  live_jobs (the running jobs
 * with their newest step) is what `bifocal watch` and the dashboard poll. */
#include "result_views.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    const char *order_by;
} views[] = {
    { "sweeps",            "sweep_id" },
    { "job_results",       "job_id" },
    { "final_evals",       "job_id, eval_depth" },
    { "eval_summary",      "group_config, eval_depth" },
    { "train_loss",        NULL },   /* the largest: read unsorted */
    { "frequency_history", "job_id, layer, head, pair, step" },
    { "live_jobs",         "job_id" },   /* schema/005_dashboard.sql */
};

int bf_result_view_sql(const char *view, char *buf, size_t cap)
{
    for (size_t i = 0; i < sizeof views / sizeof *views; i++)
        if (strcmp(view, views[i].name) == 0) {
            const char *order = views[i].order_by;
            int n = snprintf(buf, cap, "SELECT * FROM %s WHERE sweep_id = ?1"
                             "%s%s", views[i].name, order ? " ORDER BY " : "",
                             order ? order : "");
            return n > 0 && (size_t)n < cap ? 0 : -1;
        }
    return -1;
}

const char *bf_result_view_names(void)
{
    static char names[256];
    if (!names[0])
        for (size_t i = 0, len = 0; i < sizeof views / sizeof *views; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
                                    i ? ", " : "", views[i].name);
    return names;
}
