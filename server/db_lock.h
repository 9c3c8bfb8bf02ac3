/* db_lock: one bifocald per database.  Two daemons on one database both
 * expire leases and re-queue each other's jobs, so the second one must
 * refuse to start, naming the first. */
#ifndef BF_DB_LOCK_H
#define BF_DB_LOCK_H

#include "bf_error.h"

/* Takes DB.lock (an exclusive flock held until the process exits) and
 * writes "pid N, starting" into it.  When another process holds it, fails
 * with err naming the lock file and what the holder wrote.  Returns the
 * lock's descriptor (kept open) or -1. */
int bf_db_lock_acquire(const char *db_path, bf_error *err);

/* Writes "pid N, listening on HOST:PORT" into the lock: HOST from listen
 * (HOST:PORT as given), port as bound (--listen HOST:0 picks one). */
void bf_db_lock_describe(int fd, const char *listen, int port);

#endif
