/* task_kind: which synthetic tasks exist and how long their examples get.
 *
 * The part of the tasks that the job config needs to validate a job (can an
 * example of the deepest depth fit in seq_len?) without depending on the
 * generators in tasks.h, which read the job config. */
#ifndef BF_TASK_KIND_H
#define BF_TASK_KIND_H

typedef enum { BF_TASK_DYCK, BF_TASK_COUNTER, BF_TASK_MODARITH } bf_task_kind;

/* counter: items per loop iteration are 1..BF_COUNTER_MAX_ITEMS */
#define BF_COUNTER_MAX_ITEMS 3

/* Longest sequence (tokens, answer included) an example of this task and
 * depth can have; an example fits a row of T tokens iff max_len <= T. */
int bf_task_max_len(bf_task_kind task, int depth);

#endif
