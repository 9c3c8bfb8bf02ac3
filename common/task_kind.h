/* task_kind: which synthetic tasks exist and how long their examples get.
 *
 * The part of the tasks that the job config needs to validate a job (can an
 * example of the deepest depth fit in seq_len?) without depending on the
 * generators in tasks.h, which read the job config. */
#ifndef BF_TASK_KIND_H
#define BF_TASK_KIND_H

typedef enum {
    BF_TASK_DYCK, BF_TASK_COUNTER, BF_TASK_MODARITH, BF_TASK_CODE
} bf_task_kind;

/* counter: items per loop iteration are 1..BF_COUNTER_MAX_ITEMS */
#define BF_COUNTER_MAX_ITEMS 3

/* Longest sequence (tokens, answer included) an example of this task and
 * depth can have; an example fits a row of T tokens iff max_len <= T. */
int bf_task_max_len(bf_task_kind task, int depth);

/* code: the longest prompt (code symbols before the separator) a snippet of
 * this depth may have; a deeper snippet gets a longer window so that its
 * brackets, which real code opens several symbols apart, fit in it. */
int bf_code_prompt_max(int depth);

#endif
