/*
 * bench_util.h — what the step benchmarks (rlx-bench-w6, rlx-bench-w10,
 * rlx-bench-threads) share: clocks, the median and the load average.
 */
#ifndef RLX_BENCH_UTIL_H
#define RLX_BENCH_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Wall time is a result; the process's CPU time (all threads) is printed
 * beside it because the machine may be shared. */
static inline double now(void) { return clock_s(CLOCK_MONOTONIC); }
static inline double cpu_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double median(const double *v, int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return v[0];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

/* /proc/loadavg's line, or "" */
static inline void loadavg(char *buf, size_t cap)
{
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) {
        if (!fgets(buf, (int)cap, f))
            buf[0] = 0;
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = 0;
}

#endif
