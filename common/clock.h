/* clock: the monotonic time and sleeps every part of Bifocal measures with,
 * so that durations survive wall-clock jumps (NTP, a suspended laptop), and
 * the one wall clock for timestamps that outlive the process. */
#ifndef BF_CLOCK_H
#define BF_CLOCK_H

#include <stdint.h>

/* Seconds / milliseconds on CLOCK_MONOTONIC (arbitrary origin). */
double bf_now_seconds(void);
int64_t bf_monotonic_ms(void);
/* Microseconds on CLOCK_MONOTONIC: the deadlines of time-bounded work. */
int64_t bf_monotonic_us(void);

/* Milliseconds since the Unix epoch (CLOCK_REALTIME): the coordinator's
 * timestamps in the database and its lease deadlines, which a restarted
 * daemon must read on the same scale. */
int64_t bf_wall_ms(void);

/* Sleeps ms milliseconds (a signal may end it early). */
void bf_sleep_ms(int ms);

#endif
