/* control.h — process-wide counters and settings of the tensor layer
 * (control.c, options.c). */
#ifndef RLX_TS_CONTROL_H
#define RLX_TS_CONTROL_H

#include <stdint.h>

#include <stdbool.h>

#include "passes/knobs.h"

/* options.c. The JIT runs realizations unless RLX_BACKEND=ref or the
 * "backend" option says otherwise. */
bool ts_backend_is_jit(void);
/* How many specializations a compiled program keeps (option program_specs). */
enum { TS_PROGRAM_SPECS = 8, TS_PROGRAM_SPECS_MAX = 4096 };
int ts_program_specs(void);
/* The options of one realization or program run (threads, debug level,
 * verification, a retained knob snapshot; simplify and plan_cache on):
 * what every stage below receives. Drop releases the snapshot. */
void ts_options_take(knob_opts *o);
void ts_options_drop(knob_opts *o);
void ts_stats_add_run(uint64_t nodes_run, uint64_t peak_bytes);
/* The JIT backend's compile and cache counters of one realization. */
void ts_stats_add_jit(uint64_t compiled, uint64_t hits, uint64_t misses, double seconds);
/* The arena of one JIT realization or program run: rlx_stats keeps the largest. */
void ts_stats_note_arena(uint64_t bytes);

#endif
