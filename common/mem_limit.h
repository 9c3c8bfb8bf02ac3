/* mem_limit: how much memory this process may use, for the worker's
 * default memory budget.  A node's physical memory is not the answer in a
 * container or under a Slurm job with a memory limit: the kernel kills a
 * process past its cgroup's limit long before the machine runs out. */
#ifndef BF_MEM_LIMIT_H
#define BF_MEM_LIMIT_H

#include <stddef.h>

/* The least of this machine's physical memory and the memory limits of
 * this process's cgroup (bf_mem_cgroup_limit of /proc/self/cgroup under
 * /sys/fs/cgroup), in bytes; 0 when none is known. */
size_t bf_mem_limit(void);

/* The least memory limit, in bytes, of the cgroup that proc_cgroup (a
 * /proc/PID/cgroup file) names and of its ancestors, as set in the
 * hierarchy mounted at cgroup_root: cgroup v2's memory.max under
 * cgroup_root/PATH (the "0::PATH" line), cgroup v1's
 * memory.limit_in_bytes under cgroup_root/memory/PATH (the "N:memory:PATH"
 * line).  Levels without the file (a namespace that shows a path it does
 * not mount) and "max" are no limit.  SIZE_MAX when there is none. */
size_t bf_mem_cgroup_limit(const char *proc_cgroup,
                           const char *cgroup_root);

#endif
