/*
 * kr_clock.c - the clocks (kr_clock.h).
 */
#include "config.h"

#include <time.h>

#include "kr_clock.h"

#ifndef CLOCK_MONOTONIC_COARSE
#define CLOCK_MONOTONIC_COARSE CLOCK_MONOTONIC
#endif

static int64_t
read_us(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t
kr_clock_timer_ms(void)
{
    return read_us(CLOCK_MONOTONIC_COARSE) / 1000;
}

int64_t
kr_clock_mono_ms(void)
{
    return read_us(CLOCK_MONOTONIC) / 1000;
}

int64_t
kr_clock_mono_us(void)
{
    return read_us(CLOCK_MONOTONIC);
}

int64_t
kr_clock_wall_us(void)
{
    return read_us(CLOCK_REALTIME);
}
