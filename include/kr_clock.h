/*
 * kr_clock.h - the clocks krelay reads, one named function each.
 *
 *   kr_clock_timer_ms  monotonic, coarse (CLOCK_MONOTONIC_COARSE: the
 *                      kernel's tick, 1-4 ms, and about 20x cheaper to
 *                      read): timers, deadlines, idle and progress times
 *                      on the data path;
 *   kr_clock_mono_ms   monotonic, precise: rate limits and pauses off the
 *                      data path;
 *   kr_clock_mono_us   monotonic, precise, in µs: latencies (audit
 *                      upstream_us, total_us);
 *   kr_clock_wall_us   wall clock (CLOCK_REALTIME) in µs since the epoch:
 *                      timestamps people read (log and audit lines).
 *
 * Monotonic values only compare with values of the same function.  All
 * are thread-safe and never fail (clock_gettime on Linux cannot for these
 * clocks).
 */
#ifndef KR_CLOCK_H
#define KR_CLOCK_H

#include <stdint.h>

int64_t kr_clock_timer_ms(void);
int64_t kr_clock_mono_ms(void);
int64_t kr_clock_mono_us(void);
int64_t kr_clock_wall_us(void);

#endif /* KR_CLOCK_H */
