/* exec: a worker whose jobs another program trains.
 *
 *   bifocal-worker --server HOST:PORT --token-file F --exec 'CMD ARGS...'
 *                  --trainer NAME [--gpus LIST] [--work-dir DIR] [...]
 *
 * The worker stays the only program that speaks the wire protocol (the
 * link, link.h, with its outbox, acks and resends).  It leases only the
 * jobs whose config names `trainer: NAME` and runs CMD for each (its argv
 * split without a shell) in a directory of the attempt, the config in a
 * JSON file, paths in the environment; it tails the JSON-lines records the
 * program appends, checks each against common/records and sends it on;
 * it maps how the program ended to the attempt's outcome, and stops the
 * program's whole process tree on a cancel, a lost lease or SIGTERM.
 * docs/trainers.md is the contract a trainer keeps. */
#ifndef BF_EXEC_H
#define BF_EXEC_H

/* Whether argv asks for this mode (it has --exec). */
int bf_exec_requested(int argc, char **argv);

/* The whole program in that mode.  Exit status: 0 when told to stop
 * (--max-jobs, --exit-when-idle, SIGTERM/SIGINT), 1 when the coordinator
 * refused us, 2 on bad usage. */
int bf_exec_main(int argc, char **argv);

#endif
