/* clock: the monotonic time and sleeps every part of Bifocal measures with,
 * so that durations survive wall-clock jumps (NTP, a suspended laptop). */
#ifndef BF_CLOCK_H
#define BF_CLOCK_H

#include <stdint.h>

/* Seconds / milliseconds on CLOCK_MONOTONIC (arbitrary origin). */
double bf_now_seconds(void);
int64_t bf_monotonic_ms(void);

/* Sleeps ms milliseconds (a signal may end it early). */
void bf_sleep_ms(int ms);

#endif
