/* job_status: the table of job_status.h, as names. */
#include "job_status.h"

#include <string.h>

static const char *const names[BF_JOB_N_STATUSES] = {
#define BF_JOB_STATUS_NAME(id, name) name,
    BF_JOB_STATUSES(BF_JOB_STATUS_NAME)
#undef BF_JOB_STATUS_NAME
};

const char *bf_job_status_name(int status)
{
    return status >= 0 && status < BF_JOB_N_STATUSES ? names[status]
                                                     : "unknown";
}

int bf_job_status_parse(const char *name)
{
    for (int i = 0; name && i < BF_JOB_N_STATUSES; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

const char *bf_job_status_list(void)
{
#define BF_JOB_STATUS_LISTED(id, name) ", " name
    static const char list[] = BF_JOB_STATUSES(BF_JOB_STATUS_LISTED);
#undef BF_JOB_STATUS_LISTED
    return list + 2;   /* past the first ", " */
}
