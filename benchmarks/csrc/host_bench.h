/*
 * host_bench.h -- the C++ class that nb_host.cpp and pb_host.cpp bind: the
 * same members as host_bench.c's BenchHost (a host class zsharp_py binds
 * from its C description), for the host_classes family.
 */
#ifndef BENCH_HOST_BENCH_H
#define BENCH_HOST_BENCH_H

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

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

/* host_bench.c's BenchActor: a reference, an array of references (not
   owning: the kids that spawn() made are owned by `spawned`, those a Python
   list holds are Python's) and an event. */
struct BenchActor {
    BenchActor *ref = nullptr;
    std::vector<BenchActor *> kids;
    std::vector<std::unique_ptr<BenchActor>> spawned;
    int64_t ticks = 0; /* native default runs of tick */

    BenchActor() = default;
    BenchActor(const BenchActor &) = delete; /* owns `spawned` */
    BenchActor &operator=(const BenchActor &) = delete;
    virtual ~BenchActor() = default;
    virtual void tick(double dt) {
        (void)dt;
        ticks++;
    }
};

/* Create n actors in C++ (no Python object is made for them), as
   host_bench_spawn does: appended to the holder's kids, ref the last one. */
inline void bench_spawn(BenchActor &holder, int n) {
    for (int i = 0; i < n; i++) {
        holder.spawned.push_back(std::make_unique<BenchActor>());
        holder.kids.push_back(holder.spawned.back().get());
    }
    if (n > 0) holder.ref = holder.kids.back();
}

/* One native frame calling tick once on each of the holder's kids, as an
   engine ticks its actors. */
BENCH_NOINLINE inline void bench_tick_all(BenchActor &holder, double dt) {
    for (BenchActor *kid : holder.kids) kid->tick(dt);
}

/* host_bench.c's BenchEmitter: an event whose listeners are Python
   callables, each held as a std::function (the callback each library
   documents: nanobind/stl/function.h, pybind11/functional.h), called from a
   C++ loop as an engine broadcasts an event. */
struct BenchEmitter {
    std::vector<std::function<void(double)>> listeners;
    void add(std::function<void(double)> listener) { listeners.push_back(std::move(listener)); }
};

/* Broadcast n times: every listener, in order, each time. */
BENCH_NOINLINE inline void bench_broadcast(BenchEmitter &emitter, double x, int n) {
    for (int i = 0; i < n; i++)
        for (auto &listener : emitter.listeners) listener(x);
}

#endif
