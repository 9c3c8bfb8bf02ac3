/* mem_limit: physical memory and cgroup v1/v2 memory limits. */
#include "mem_limit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The limit in a memory.max or memory.limit_in_bytes file; SIZE_MAX for
 * "max", an absent file or one that does not parse. */
static size_t limit_in_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return SIZE_MAX;
    char line[64] = "";
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char *end;
    unsigned long long v = got ? strtoull(line, &end, 10) : 0;
    if (!got || end == line || (*end && *end != '\n') || v > SIZE_MAX)
        return SIZE_MAX;
    return (size_t)v;
}

/* The least limit in file `name` of dir/path and each of its ancestors up
 * to dir itself. */
static size_t least_up_the_tree(const char *dir, const char *path,
                                const char *name)
{
    char sub[1024];
    snprintf(sub, sizeof sub, "%s", path);
    size_t least = SIZE_MAX;
    for (;;) {
        char file[2048];
        snprintf(file, sizeof file, "%s%s/%s", dir, sub, name);
        size_t v = limit_in_file(file);
        if (v < least)
            least = v;
        char *slash = strrchr(sub, '/');
        if (!slash)
            break;
        *slash = '\0';   /* "/a/b" -> "/a" -> "" (dir itself) */
    }
    return least;
}

size_t bf_mem_cgroup_limit(const char *proc_cgroup, const char *cgroup_root)
{
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return SIZE_MAX;
    size_t least = SIZE_MAX;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        /* "ID:CONTROLLERS:PATH"; v2's line is "0::PATH". */
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c1 = '\0';
        *c2 = '\0';
        const char *controllers = c1 + 1, *path = c2 + 1;
        char dir[1024];
        size_t v = SIZE_MAX;
        if (strcmp(line, "0") == 0 && controllers[0] == '\0') {
            v = least_up_the_tree(cgroup_root, path, "memory.max");
        } else if (strcmp(controllers, "memory") == 0) {
            snprintf(dir, sizeof dir, "%s/memory", cgroup_root);
            v = least_up_the_tree(dir, path, "memory.limit_in_bytes");
        }
        if (v < least)
            least = v;
    }
    fclose(f);
    return least;
}

size_t bf_mem_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t phys = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    size_t cg = bf_mem_cgroup_limit("/proc/self/cgroup", "/sys/fs/cgroup");
    if (phys == 0)
        return cg == SIZE_MAX ? 0 : cg;
    return cg < phys ? cg : phys;
}
