/* sweep_view: one sweep as the results commands see it: its jobs (rows of
 * the job_results view), the config fields that vary between them, and the
 * jobs grouped by those fields except the seed (or by the fields the user
 * names), so that a group's jobs differ only in their seed.  In a sweep
 * with stages, "stage" is a field too, always the first grouping field:
 * groups, and so comparisons, stay within a stage, and the varying fields
 * are those that vary within a stage.  The fields a job took from an
 * earlier stage's selection (`from: "stage:NAME"`) follow from its cell:
 * they are no grouping field of its stage unless --by names them, though
 * they may vary (each cell chose its own lr) and its row shows them. */
#ifndef BF_SWEEP_VIEW_H
#define BF_SWEEP_VIEW_H

#include <stdint.h>
#include <jansson.h>

#include "row_store.h"
#include "source.h"

#define BF_SWEEP_MAX_FIELDS 32

/* --where FIELD=VALUE[,...], split once: fields[i] = values[i]. */
typedef struct bf_sweep_where {
    char *text;                       /* owned: the list, cut in place */
    const char *fields[BF_SWEEP_MAX_FIELDS], *values[BF_SWEEP_MAX_FIELDS];
    int n;
} bf_sweep_where;

/* A job held: its id, its row in jobs (-1: its row not held) and group. */
typedef struct bf_sweep_held {
    int64_t id;
    int row, group;
} bf_sweep_held;

typedef struct bf_sweep_view {
    /* read-only: made by bf_sweep_view_scan and _hold, or by
     * dashboard/dash_sweep.c from its aggregates (which fills the private
     * part too) */
    int64_t sweep_id;
    json_t *sweep;          /* the sweeps row (name, filename, source, ...) */
    size_t n_jobs;          /* the jobs --where keeps, of any status */
    size_t n_succeeded;     /* those of them that succeeded */
    json_t *depths;         /* their distinct training depths, in order of
                               their first job */
    bf_row_store jobs;      /* the job_results rows held, by job_id
                               (read-only) */
    /* Config fields whose value differs between jobs (of a stage), in the
     * order of the sweep file's grid and zip (then alphabetical); "seed"
     * among them if seeds; "stage" first in a sweep with stages. */
    const char *varying[BF_SWEEP_MAX_FIELDS];
    int n_varying;
    /* The grouping fields: varying minus seed, or the --by fields. */
    const char *by[BF_SWEEP_MAX_FIELDS];
    int n_by;
    int n_groups;
    json_t *groups;         /* per group: {field: value} over `by`, less
                               the fields its stage took from a selection */
    int *job_group;         /* per row of jobs: its group */
    /* per group of a view held with bf_sweep_hold.count: its jobs, and
     * those that succeeded; else NULL */
    size_t *group_jobs, *group_succeeded;
    /* private */
    int n_counted;          /* groups with counts */
    bf_sweep_where where;
    json_t *first;          /* the first job's row: candidates point into
                               its config */
    json_t *stage_first;    /* stage (or "") -> its first job's row */
    const char **candidates;    /* fields that may vary, in order */
    unsigned char *varies;      /* per candidate: whether it does */
    int n_candidates;
    int *group_row;         /* per group: the row of its first job */
    json_t *taken;          /* taken_fields (sweep_view.c); NULL with --by */
    json_t *searched;       /* the stages of the sweep file that search:
                               {stage: its search space} */
    json_t *zips;           /* the sweep file's labelled zips
                               (zip_labels.h): groups are named by them */
    bf_sweep_held *held;    /* the jobs held, by id ascending: for */
    size_t n_held;          /* bf_sweep_view_config_row and _group_of */
} bf_sweep_view;

/* Reads the sweep: its row, the jobs counted (n_jobs, n_succeeded) and
 * the fields that vary, in one pass over its job_results rows that holds
 * none of them (only the first job's row of each stage), so that a sweep
 * of a million jobs costs what its stages' first jobs do.  by is a
 * comma-separated field list or NULL; a field that does not vary in the
 * sweep is refused by name.  where is "FIELD=VALUE[,FIELD=VALUE...]" or
 * NULL: only the jobs with those values (a config field, or "stage") are
 * in the view, as if the sweep held no others; none matching is refused.
 * 0, or -1 after printing the problem.  Clear v either way. */
int bf_sweep_view_scan(bf_sweep_view *v, bf_source *src, int64_t sweep_id,
                       const char *by, const char *where);

/* The same, from rows a caller reads its own way (the dashboard reads
 * one per cell from its index): _begin with the sweep's row (borrowed),
 * _note each row of its jobs in id order (a job_results row, or one with
 * at least its stage, config and status; borrowed, kept while v lives),
 * _end with by as _scan takes it.  Then bf_sweep_view_group gives each
 * job its group, bf_sweep_view_hold_job holds the jobs and
 * bf_sweep_view_held ends the hold, as bf_sweep_view_hold does. */
void bf_sweep_view_begin(bf_sweep_view *v, int64_t sweep_id, json_t *sweep);
void bf_sweep_view_note(bf_sweep_view *v, json_t *row);
/* Notes that field varies (the dashboard: seeds that its rows, one per
 * cell, do not show). */
void bf_sweep_view_note_varies(bf_sweep_view *v, const char *field);
int bf_sweep_view_end(bf_sweep_view *v, const char *by);

/* The group of row's job after bf_sweep_view_end: a new one, its key
 * appended to v->groups, when no row of index has its key (index: key
 * text -> group, the caller's, empty at first). */
int bf_sweep_view_group(bf_sweep_view *v, const json_t *row, json_t *index);

/* Holds row's job, of group g, by id: its row too when whole (row
 * borrowed, its values copied). */
void bf_sweep_view_hold_job(bf_sweep_view *v, const json_t *row, int g,
                            int whole);

/* Ends a hold: the jobs held sorted by id, each group's first row found. */
void bf_sweep_view_held(bf_sweep_view *v);

/* Why a view is not compared: more than max groups have a job of status
 * (bf_sweep_hold.max_groups), with how to narrow it.  Caller frees. */
char *bf_sweep_view_too_many_groups(const bf_sweep_view *v, size_t max,
                                    const char *status);

/* Which jobs bf_sweep_view_hold holds. */
typedef struct bf_sweep_hold {
    const char *status;     /* the jobs of this status (NULL: every job) */
    size_t first;           /* and the first `first` jobs, of any status */
    int count;              /* count each group's jobs and succeeded
                               jobs (group_jobs, group_succeeded), those
                               not held among them */
    /* > 0: at most this many groups may have a job of `status` (the
     * groups compared); the hold stops at the next, saying how to narrow
     * the view, so that memory per group stays bounded however many
     * trials a search has. */
    size_t max_groups;
    /* Set: each job held is handed to on_job as read (borrowed) and held
     * as its id and group alone (16 bytes), jobs keeping only the rows of
     * the first `first` jobs and of each group's first job held (its
     * label's config): a million results cost 16 MB, not their rows. */
    void (*on_job)(void *ctx, const json_t *row);
    void *ctx;
    /* With on_job: config fields (NULL-terminated; NULL: none) a job must
     * share with its group's first row held, else its row is held too, so
     * that bf_sweep_view_config_row answers for every job held. */
    const char *const *alike;
} bf_sweep_hold;

/* After a scan, holds the jobs h names in v->jobs and groups them (memory:
 * per job held, and per group).  Groups are numbered in order of their
 * first job of any status (one more pass over the jobs not held, which
 * also counts them), so that a comparison of the succeeded jobs lists
 * them as one of every job does; a group none of whose jobs is held is
 * not in the view.  0, or -1 after printing the problem. */
int bf_sweep_view_hold(bf_sweep_view *v, bf_source *src,
                       const bf_sweep_hold *h);

void bf_sweep_view_clear(bf_sweep_view *v);

/* The next job_results row of c (opened on the view's sweep) that --where
 * keeps, borrowed until the next call; NULL past the last. */
json_t *bf_sweep_view_next(const bf_sweep_view *v, bf_source_cursor *c);

/* The value of field in a job_results row as read: its stage for
 * "stage", else the field of its config (borrowed; NULL if absent). */
json_t *bf_sweep_view_row_value(const json_t *row, const char *field);

/* The row in v->jobs of a job id, or when its row is not held
 * (bf_sweep_hold.on_job) its group's first row, which has the same values
 * of the fields bf_sweep_hold.alike names; -1 if the job is not held. */
int bf_sweep_view_config_row(const bf_sweep_view *v, int64_t job_id);

/* The value of field in row `row` of v->jobs: its stage for "stage", else
 * the field of its config (borrowed; NULL if absent). */
json_t *bf_sweep_view_value(const bf_sweep_view *v, size_t row,
                            const char *field);

/* Whether a value reads as text: as a table prints it, or as the same
 * number (rope_base=10000 names the value printed as 1e+04). */
int bf_sweep_view_value_is(const json_t *value, const char *text);

/* Whether field changes what a job of config's rope variant trains
 * (bf_job_config_field_matters): a label leaves out the rest, as
 * freq_lr_mult of rope=rope, where nothing is learnable. */
int bf_sweep_view_has_effect(const json_t *config, const char *field);

/* Whether group's jobs are trials of a search (a stage with `search:`, or
 * a sweep file searching at its top level): a search is read as a search
 * (its trials and selection), not as comparisons with verdicts. */
int bf_sweep_view_searched(const bf_sweep_view *v, int group);

/* The group of a job id; -1 if the job is not in the sweep. */
int bf_sweep_view_group_of(const bf_sweep_view *v, int64_t job_id);

/* "rope=spectral depth=4" (by-field values), or "all jobs" with no
 * grouping field.  The fields of a zip whose entries the sweep file names
 * (`label:`) give way to the name of the group's entry: "rope-5e5
 * depth=4".  Reals at 4 significant digits, more where another group's
 * value would print the same (bf_format_digits_apart); a field without
 * effect on the group's rope variant (bf_job_config_field_matters:
 * freq_lr_mult of rope=rope) is left out unless nothing else names the
 * group.  Caller frees. */
char *bf_sweep_view_label(const bf_sweep_view *v, int group);

/* The same, naming only the fields whose values differ among the groups
 * among[0..n) (group among them): "rope=spectral" against its baseline
 * "rope=rope" where both share every other field.  Caller frees. */
char *bf_sweep_view_label_among(const bf_sweep_view *v, int group,
                                const int *among, int n);

/* The fields a sweep file (source, as submitted) sweeps: the keys of its
 * grid and zips (then of each stage's) in order, once each, then "seed"
 * when it has seeds.  They tell its jobs apart before
 * any has run (`bifocal watch` labels running jobs with them).  An array of
 * strings (new reference), empty when source does not parse. */
json_t *bf_sweep_view_swept_fields(const char *source);

/* "rope=spectral seed=2": config's values of fields (an array of names),
 * those config lacks or that have no effect on its rope variant left out,
 * reals at 4 significant digits.  Caller frees. */
char *bf_sweep_view_fields_label(const json_t *fields, const json_t *config);


#endif
