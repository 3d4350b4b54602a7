/*
 * floors.c -- what touching every object once costs on this machine: the
 * floors a collector's per-object cost is compared with.
 *
 *   floors N ROUNDS
 *
 * N 64-byte objects in one contiguous, cache-line-aligned block (every
 * page touched before timing). Three walks, each reading one word of every
 * object and summing:
 *   address   in address order (hardware prefetchers stream it);
 *   random    in a random order (a permutation drawn with the graph
 *             generator, read from a separate array), the loads independent
 *             of each other so the core keeps many in flight;
 *   chase     in the same random order, but each object holds the index of
 *             the next (dependent loads, one miss at a time): for reference.
 * Prints one JSON object: the median ns of each walk and every sample.
 */
#include "graph.h"

typedef struct object {
    uint64_t next;
    uint64_t payload[7];
} object;
_Static_assert(sizeof(object) == 64, "a 64-byte object");

static volatile uint64_t sink;

static uint64_t median(uint64_t *values, uint32_t count) {
    qsort(values, count, sizeof *values, compare_u64);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

int main(int argc, char **argv) {
    if (argc != 3) die("usage: floors N ROUNDS");
    uint32_t n = (uint32_t)strtoul(argv[1], NULL, 10);
    uint32_t rounds = (uint32_t)strtoul(argv[2], NULL, 10);
    if (n < 2 || rounds < 1) die("n >= 2 and rounds >= 1");

    object *objects = aligned_alloc(64, (size_t)n * sizeof *objects);
    uint32_t *order = malloc((size_t)n * sizeof *order);
    uint64_t *samples = malloc(3 * (size_t)rounds * sizeof *samples);
    if (objects == NULL || order == NULL || samples == NULL) die("out of memory");
    memset(objects, 0, (size_t)n * sizeof *objects);
    uint64_t state = GRAPH_SEED;
    for (uint32_t i = 0; i < n; i++) order[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        uint32_t j = graph_pick(&state, i + 1);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (uint32_t i = 0; i < n; i++) objects[order[i]].next = order[(i + 1) % n];

    uint64_t *address = samples, *random = samples + rounds, *chase = samples + 2 * rounds;
    for (uint32_t r = 0; r <= rounds; r++) { /* round 0: warm-up */
        uint64_t sum = 0, start = now_ns();
        for (uint32_t i = 0; i < n; i++) sum += objects[i].next;
        uint64_t t1 = now_ns();
        for (uint32_t i = 0; i < n; i++) sum += objects[order[i]].next;
        uint64_t t2 = now_ns();
        uint64_t at = order[0];
        for (uint32_t i = 0; i < n; i++) at = objects[at].next;
        uint64_t t3 = now_ns();
        sink = sum + at;
        if (r > 0) {
            address[r - 1] = t1 - start;
            random[r - 1] = t2 - t1;
            chase[r - 1] = t3 - t2;
        }
    }
    json_begin();
    json_u64("n", n);
    json_u64_array("address_walls", address, rounds);
    json_u64_array("random_walls", random, rounds);
    json_u64_array("chase_walls", chase, rounds);
    json_u64("address", median(address, rounds));
    json_u64("random", median(random, rounds));
    json_u64("chase", median(chase, rounds));
    json_end();
    free(objects);
    free(order);
    free(samples);
    return 0;
}
