/*
 * host_bench.h -- the C++ class that nb_host.cpp and pb_host.cpp bind: the
 * same members as host_bench.c's BenchHost (a host class zsharp_py binds
 * from its C description), for the host_classes family.
 */
#ifndef BENCH_HOST_BENCH_H
#define BENCH_HOST_BENCH_H

#include <cstdint>

struct BenchVec3 {
    double x = 0.0, y = 0.0, z = 0.0;
};

/* Out of line, as the host's C entries are called through a pointer. */
#define BENCH_NOINLINE __attribute__((noinline))

struct BenchHost {
    int32_t count = 0;
    double speed = 0.0;
    int64_t defaults = 0; /* native default runs of the virtuals */

    virtual ~BenchHost() = default;
    BENCH_NOINLINE void nop() { __asm__ volatile(""); }
    BENCH_NOINLINE int32_t add3(int32_t a, int32_t b, int32_t c) { return a + b + c; }
    /* The events: virtuals with a native default, overridden in Python
       through each library's documented trampoline. */
    virtual void on_scalar(double x) {
        (void)x;
        defaults++;
    }
    virtual void on_struct(const BenchVec3 &v) {
        (void)v;
        defaults++;
    }
    virtual void on_object(BenchHost *o) {
        (void)o;
        defaults++;
    }
};

/* Native code calling an event n times, as an engine's loop does. */
BENCH_NOINLINE inline void bench_call_scalar(BenchHost &h, double x, int n) {
    for (int i = 0; i < n; i++) h.on_scalar(x);
}
BENCH_NOINLINE inline void bench_call_struct(BenchHost &h, const BenchVec3 &v, int n) {
    for (int i = 0; i < n; i++) h.on_struct(v);
}
BENCH_NOINLINE inline void bench_call_object(BenchHost &h, BenchHost *o, int n) {
    for (int i = 0; i < n; i++) h.on_object(o);
}

#endif
