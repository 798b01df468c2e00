/* control.h — process-wide counters and settings of the tensor layer. */
#ifndef RLX_TS_CONTROL_H
#define RLX_TS_CONTROL_H

#include <stdint.h>

#include <stdbool.h>

/* The JIT runs realizations when RLX_BACKEND=jit or the "backend" option says so. */
bool ts_backend_is_jit(void);
void ts_stats_add_run(uint64_t nodes_run, uint64_t peak_bytes);
/* The JIT backend's compile and cache counters of one realization. */
void ts_stats_add_jit(uint64_t compiled, uint64_t hits, uint64_t misses, double seconds);
/* The arena of one JIT realization or program run: rlx_stats keeps the largest. */
void ts_stats_note_arena(uint64_t bytes);

#endif
