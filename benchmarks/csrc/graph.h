/*
 * graph.h -- what the C benchmark programs share: the graph generator (the
 * same one as benchmarks/_graphs.py, so every peer builds the same edges),
 * a monotonic clock, the process's peak RSS, sorting for medians, and a
 * tiny JSON writer on stdout.
 *
 * Graphs (n nodes, four reference slots a b c d each):
 *   tree    node i >= 1 is stored in slot (i - 1) % 4 of node (i - 1) / 4;
 *           node 0 is the root.
 *   random  node i >= 1: a = node i - 1 (a chain keeping everything
 *           reachable from the last node, the root), then b, c, d = nodes
 *           graph_pick(&state, i) drawn in that order, state starting at
 *           GRAPH_SEED. Dropping half: the root moves to node n/2 - 1, and
 *           nodes n/2 .. n-1 become unreachable (edges only point back).
 */
#ifndef BENCH_GRAPH_H
#define BENCH_GRAPH_H

#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GRAPH_SEED 20240611u

/* 64-bit LCG (Knuth's MMIX constants); the high 32 bits are the output. */
static inline uint32_t graph_next(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*state >> 32);
}

/* A uniform-enough index below `below` (multiply-shift range reduction). */
static inline uint32_t graph_pick(uint64_t *state, uint32_t below) {
    return (uint32_t)(((uint64_t)graph_next(state) * below) >> 32);
}

/* Fold an edge into the checksum that both languages compute. */
static inline uint64_t graph_fold(uint64_t sum, uint64_t value) {
    return (sum ^ value) * 1099511628211ULL; /* FNV-1a style */
}

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread (preemption by other processes excluded). */
static inline uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* CPU time of the whole process (all threads). */
static inline uint64_t process_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A /proc/self/status field in kB (VmHWM: peak RSS, VmRSS: current). */
static inline long proc_status_kb(const char *field) {
    FILE *status = fopen("/proc/self/status", "r");
    if (status == NULL) return -1;
    char line[256];
    size_t length = strlen(field);
    long value = -1;
    while (fgets(line, sizeof line, status) != NULL) {
        if (strncmp(line, field, length) == 0 && line[length] == ':') {
            value = strtol(line + length + 1, NULL, 10);
            break;
        }
    }
    fclose(status);
    return value;
}

static inline int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- JSON on stdout: one object per program run ---------------------- */

static int json_fields;

static inline void json_begin(void) {
    printf("{");
    json_fields = 0;
}

static inline void json_key(const char *key) {
    printf("%s\"%s\": ", json_fields++ ? ", " : "", key);
}

static inline void json_u64(const char *key, uint64_t value) {
    json_key(key);
    printf("%llu", (unsigned long long)value);
}

static inline void json_f64(const char *key, double value) {
    json_key(key);
    printf("%.6f", value);
}

static inline void json_str(const char *key, const char *value) {
    json_key(key);
    printf("\"%s\"", value); /* values are fixed ASCII words */
}

static inline void json_u64_array(const char *key, const uint64_t *values, size_t count) {
    json_key(key);
    printf("[");
    for (size_t i = 0; i < count; i++)
        printf("%s%llu", i ? ", " : "", (unsigned long long)values[i]);
    printf("]");
}

static inline void json_end(void) {
    printf("}\n");
    fflush(stdout);
}

static inline void die(const char *what) {
    fprintf(stderr, "benchmark program failed: %s\n", what);
    exit(2);
}

#endif
