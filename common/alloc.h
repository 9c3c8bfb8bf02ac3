/* alloc: the one out-of-memory policy of every Bifocal program.
 *
 * Memory exhaustion is not an error a caller can handle usefully in a
 * training job, a coordinator or a CLI: half-built state is worse than a
 * clean exit that a supervisor (Slurm, systemd, a retrying lease) restarts.
 * So, as Redis's zmalloc does, every allocation goes through these wrappers,
 * which log one line naming the size and abort when the allocator says no.
 * A caller never checks their result.
 *
 * bf_alloc_init routes jansson's allocations through the same policy; the
 * programs that use libuv also hand it bf_xmalloc & co (stream/stream.h,
 * bf_stream_use_allocator),
 * SQLite keeps its own (it reports SQLITE_NOMEM, which the store turns into
 * an error with its cause). */
#ifndef BF_ALLOC_H
#define BF_ALLOC_H

#include <stddef.h>

void *bf_xmalloc(size_t n);
void *bf_xcalloc(size_t count, size_t size);
void *bf_xrealloc(void *p, size_t n);
char *bf_xstrdup(const char *s);
/* At most n bytes of s, always terminated. */
char *bf_xstrndup(const char *s, size_t n);

/* n bytes, zeroed, for a large array that a hot loop sweeps (the model's
 * parameters, gradients, moments, activations): aligned to a cache line
 * (BF_ARENA_LINE bytes), so that no vector load of a row starting on a
 * whole line straddles two lines (calloc's large blocks start 16 bytes
 * past a page, which splits every AVX-512 load of a row); from
 * BF_ARENA_HUGE up, aligned to that and its whole 2 MiB pages marked for
 * transparent huge pages (madvise, a hint the kernel may ignore: fewer
 * TLB misses).  bench/bench_train_pair.sh measures both on whole steps
 * (docs/training.md, "Arenas and alignment").  Freed with free(). */
#define BF_ARENA_LINE ((size_t)64)
#define BF_ARENA_HUGE ((size_t)2 << 20)
void *bf_xcalloc_arena(size_t n);

/* Routes jansson through bf_xmalloc.  Call once at the start of main. */
void bf_alloc_init(void);

#ifdef BF_ALLOC_INJECT
/* Allocation-failure injection, in test builds only (bifocald-allocfail,
 * tests/server/test_alloc_failures.c; the link's,
 * tests/worker/test_link_alloc_failures.c).  From bf_alloc_inject_arm on,
 * allocations are counted (atomically: pool threads allocate too), and the
 * N-th one fails, N from the environment variable BF_ALLOC_FAIL_AT (unset
 * or 0: none); with BF_ALLOC_FAIL_REPEAT=1, every one from the N-th on
 * fails (memory that stays short, as SQLite's faultsim repeats).  The
 * wrappers above then take their out-of-memory path;
 * other allocators routed here (SQLite's, in that build) get NULL. */
void bf_alloc_inject_arm(void);
/* Counts one allocation; 1 if it is the one to fail. */
int bf_alloc_inject_fails(void);
/* Allocations counted since armed. */
long bf_alloc_inject_count(void);
#endif

#endif
