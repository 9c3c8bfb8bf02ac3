#include "task_kind.h"

int bf_task_max_len(bf_task_kind task, int depth)
{
    switch (task) {
    case BF_TASK_DYCK: /* d opens + 2d filler + SEP + d closes + END */
        return 4 * depth + 2;
    case BF_TASK_COUNTER: /* d * (ITER + items) + SEP + digit + END */
        return (1 + BF_COUNTER_MAX_ITEMS) * depth + 3;
    case BF_TASK_MODARITH: /* 4 tokens per level + digit + SEP + digit + END */
        return 4 * depth + 4;
    case BF_TASK_CODE: /* prompt + SEP + d closes + END */
        return bf_code_prompt_max(depth) + depth + 2;
    }
    return 0;
}

int bf_code_prompt_max(int depth)
{
    return 6 * depth + 8;
}
