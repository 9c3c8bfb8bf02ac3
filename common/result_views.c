/* result_views: the whitelist of views a client may read by name, each
 * with its key (result_views.h).  Most views hold rows of one job each
 * (per_job): their pages walk the sweep's jobs by primary key, CROSS JOIN
 * keeping that walk outermost, and read each job's rows in the order of
 * the index beneath the view, so no page sorts and none scans the rows
 * before its cursor (train_loss runs to millions of rows a job).
 * live_jobs (the running jobs with their newest step) is what `bifocal
 * watch` and the dashboard poll; results is the `results` request's. */
#include "result_views.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct view {
    const char *name;
    int per_job;
    /* per_job: the order of a job's rows (none: one row per job); else the
     * order of the sweep's rows, unique. */
    const char *order[BF_RESULT_VIEW_MAX_KEY - 1];
    /* per_job: the one status of the jobs it has rows of (NULL: any); its
     * pages walk only those, in the sweep's status index. */
    const char *status;
} view;

static const view views[] = {
    { "sweeps",            0, { "sweep_id" },                     NULL },
    /* the sweep's analysis: block (a table; one row or none) */
    { "sweep_analysis",    0, { "sweep_id" },                     NULL },
    { "job_results",       1, { NULL },                           NULL },
    { "final_evals",       1, { "eval_depth" },                   "succeeded" },
    { "final_outcomes",    1, { "eval_depth" },                   "succeeded" },
    { "eval_summary",      0, { "group_config", "eval_depth", "stage" }, NULL },
    { "train_loss",        1, { "step" },                         NULL },
    { "frequency_history", 1, { "layer", "head", "pair", "step" }, NULL },
    /* The running jobs: keyed, so that the sweep's index finds them (a
     * per-job walk would read every job of the sweep each poll). */
    { "live_jobs",         0, { "job_id" },                       NULL },
    { "results",           1, { NULL },                           NULL },
    /* adaptive seeds: one row per comparison (migration 17) */
    { "adaptive_seeds",    0, { "variant_cell" },                 NULL },
    /* selections of search trials, ranked per cell (migration 18) */
    { "trial_selections",  0, { "select_id", "grp", "rank" },     NULL },
    /* every trial of a search that selects, pruned ones too (migration 28) */
    { "search_trials",     0, { "job_id" },                       NULL },
};

static const view *find(const char *name)
{
    for (size_t i = 0; i < sizeof views / sizeof *views; i++)
        if (strcmp(name, views[i].name) == 0)
            return &views[i];
    return NULL;
}

static int n_order(const view *v)
{
    int n = 0;
    while (n < BF_RESULT_VIEW_MAX_KEY - 1 && v->order[n])
        n++;
    return n;
}

/* SQL text being written into a caller's buffer; overflow sticks. */
typedef struct sql_buf {
    char *buf;
    size_t cap, len;
    int overflow;
} sql_buf;

__attribute__((format(printf, 2, 3)))
static void add(sql_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = b->overflow ? 0 : vsnprintf(b->buf + b->len, b->cap - b->len,
                                        fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= b->cap - b->len)
        b->overflow = 1;
    else
        b->len += (size_t)n;
}

/* ", v.a, v.b" or "a, b" (prefix "v." or ""), from column `from` on. */
static void add_columns(sql_buf *b, const view *v, const char *prefix,
                        int from)
{
    for (int i = from; i < n_order(v); i++)
        add(b, "%s%s%s", i > from ? ", " : "", prefix, v->order[i]);
}

/* The rows after the cursor ?3, ?4, ... in the order of `order`, NULLs
 * first as ORDER BY puts them: k1 after c1, or k1 the same and the rest
 * after. */
static void add_after(sql_buf *b, const view *v, int i)
{
    const char *k = v->order[i];
    int p = 3 + i;
    add(b, "(%s > ?%d OR (?%d IS NULL AND %s IS NOT NULL)", k, p, p, k);
    if (i + 1 < n_order(v)) {
        add(b, " OR (%s IS ?%d AND ", k, p);
        add_after(b, v, i + 1);
        add(b, ")");
    }
    add(b, ")");
}

static void per_job_sql(sql_buf *b, const view *v, bf_page_part part)
{
    int n = n_order(v);
    if (part == BF_PAGE_REST_OF_JOB) {
        /* A job's order columns are never NULL (their tables declare them
         * NOT NULL), so one row value compares them, unlike add_after. */
        add(b, "SELECT * FROM %s WHERE sweep_id = ?1 AND job_id = ?3 AND (",
            v->name);
        add_columns(b, v, "", 0);
        add(b, ") > (");
        for (int i = 0; i < n; i++)
            add(b, "%s?%d", i ? ", " : "", 4 + i);
        add(b, ") ORDER BY ");
        add_columns(b, v, "", 0);
    } else {
        /* The jobs of one status: the sweep's status index holds them in
         * job id order.  Of any: +p.sweep_id walks the primary key, not
         * that index (whose order is by status first). */
        if (v->status)
            add(b, "SELECT v.* FROM jobs p INDEXED BY jobs_by_sweep_status"
                   " CROSS JOIN %s v WHERE p.sweep_id = ?1"
                   " AND p.status = '%s'", v->name, v->status);
        else
            add(b, "SELECT v.* FROM jobs p CROSS JOIN %s v"
                   " WHERE +p.sweep_id = ?1", v->name);
        add(b, " AND v.job_id = p.job_id%s ORDER BY p.job_id",
            part == BF_PAGE_AFTER_JOB ? " AND p.job_id > ?3" : "");
        if (n) {
            add(b, ", ");
            add_columns(b, v, "v.", 0);
        }
    }
    add(b, " LIMIT ?2");
}

static void keyed_sql(sql_buf *b, const view *v, bf_page_part part)
{
    add(b, "SELECT * FROM %s WHERE sweep_id = ?1", v->name);
    if (part == BF_PAGE_AFTER) {
        add(b, " AND ");
        add_after(b, v, 0);
    }
    add(b, " ORDER BY ");
    add_columns(b, v, "", 0);
    add(b, " LIMIT ?2");
}

int bf_result_view_sql(const char *name, bf_page_part part, char *buf,
                       size_t cap)
{
    const view *v = find(name);
    if (!v || cap == 0)
        return -1;
    int fits = v->per_job
        ? part == BF_PAGE_FROM_START || part == BF_PAGE_AFTER_JOB
          || (part == BF_PAGE_REST_OF_JOB && n_order(v) > 0)
        : part == BF_PAGE_FROM_START || part == BF_PAGE_AFTER;
    if (!fits)
        return -1;
    sql_buf b = { .buf = buf, .cap = cap };
    if (v->per_job)
        per_job_sql(&b, v, part);
    else
        keyed_sql(&b, v, part);
    return b.overflow ? -1 : 0;
}

int bf_result_view_key(const char *name, const char **columns, int *per_job)
{
    const view *v = find(name);
    if (!v)
        return -1;
    int n = 0;
    *per_job = v->per_job;
    if (v->per_job)
        columns[n++] = "job_id";
    for (int i = 0; i < n_order(v); i++)
        columns[n++] = v->order[i];
    return n;
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
