/* A host's own frame loop, for tests/interop/test_callback_errors.py: each
 * frame runs the tick manager (zs_tick_frame) and then a sample engine
 * World's tick (zs_call_function), from plain C with no Python call into
 * the host around them, as an engine's main loop does. Built as a user's
 * host module is (tests/native_build.py), against the API table only; a
 * cffi call in ABI mode releases the GIL, so the scripting layer takes it
 * per call back into Python. */
#include <stdint.h>

#include "zsharp_api.h"

#define EXPORT __attribute__((visibility("default")))

/* World.tick(dt) -> Int32's parameter block (native/engine/sample_engine.h). */
typedef struct world_tick_params {
    double dt;
    int32_t return_value;
} world_tick_params;

/* What frame_loop_run saw: filled in by it. */
typedef struct frame_loop_report {
    int32_t frames;       /* frames run */
    int32_t failed_ticks; /* tick functions that failed, over every frame */
    int32_t failed_calls; /* World.tick calls that did not return ZS_OK */
    int32_t ticked;       /* actors the last World.tick ticked */
} frame_loop_report;

/* Run `frames` frames of `dt` seconds: the tick manager's due tick
   functions, then `world`'s tick unless it is ZS_NULL_REF. A failed tick
   function or World.tick is the script's problem, not the loop's: it goes
   on. Returns ZS_OK, or the first status zs_tick_frame itself refused a
   frame with (the loop stops there). */
EXPORT zs_status frame_loop_run(const zs_api *api, zs_runtime *rt, zs_ref world, int32_t frames,
                                double dt, frame_loop_report *report) {
    *report = (frame_loop_report){0};
    for (int32_t i = 0; i < frames; i++) {
        zs_frame_stats stats;
        zs_status status = api->zs_tick_frame(rt, dt, NULL, &stats);
        if (status != ZS_OK) return status;
        report->failed_ticks += (int32_t)stats.failed;
        if (world != ZS_NULL_REF) {
            world_tick_params params = {dt, 0};
            if (api->zs_call_function(rt, world, "tick", &params) != ZS_OK) report->failed_calls++;
            report->ticked = params.return_value;
        }
        report->frames++;
    }
    return ZS_OK;
}
