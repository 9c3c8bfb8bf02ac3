/* stop_signals: the SIGINT/SIGTERM handler of the programs that finish
 * their current step before exiting (the standalone trainer and the worker
 * group).  The daemon, on a libuv loop, uses uv_signal instead. */
#ifndef BF_STOP_SIGNALS_H
#define BF_STOP_SIGNALS_H

/* Installs handler for SIGINT and SIGTERM, without SA_RESTART: a blocking
 * call a signal interrupts returns EINTR instead of resuming. */
void bf_catch_stop_signals(void (*handler)(int));

#endif
