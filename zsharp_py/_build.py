"""cffi build script: compiles native/src/*.c into ``zsharp_py._native_lib``.

API (out-of-line) mode: the C compiler checks every declaration below
against ``native/include/zsharp.h``. Environment switches:

``ZSHARP_SANITIZE=1``
    build with ``-fsanitize=address,undefined`` (run Python with libasan
    preloaded; see README "Sanitizers").
``ZSHARP_ASSERTS=1``
    keep the C ``assert`` invariant checks (on by default with SANITIZE).
"""
from __future__ import annotations

import os
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "native"

CDEF = """
typedef uint64_t zs_ref;
typedef struct zs_runtime zs_runtime;
typedef struct zs_class zs_class;
typedef struct zs_type zs_type;

typedef struct zs_object {
    const zs_class *cls;
    zs_ref outer;
    uint32_t index;
    uint32_t name_index;
    uint32_t name_number;
    uint32_t hash_next;
} zs_object;

typedef enum zs_status {
    ZS_OK = 0, ZS_E_NOMEM = 1, ZS_E_CAPACITY = 2, ZS_E_STALE = 3, ZS_E_INVALID = 4,
    ZS_E_BUSY = 5, ZS_E_EXPIRY_PENDING = 6, ZS_E_DYING = 7, ZS_E_CORRUPT = 8
} zs_status;

const char *zs_status_message(zs_status status);

typedef struct zs_runtime_options {
    uint32_t max_objects;
    uint32_t min_cluster_size;
    uint32_t flags;
    uint32_t mark_threads;
} zs_runtime_options;

#define ZS_DEFAULT_MAX_OBJECTS ...
#define ZS_MAX_OBJECTS_LIMIT ...
#define ZS_RUNTIME_DISREGARD_WINDOW ...
#define ZS_RUNTIME_BLACK_NOT_ROOTS ...
#define ZS_NAME_AUTO ...
#define ZS_CLASS_CLUSTER_ROOT ...
#define ZS_CLASS_IN_CLUSTER ...
#define ZS_DEBUG_DISABLE_BARRIER ...
#define ZS_DEBUG_PARALLEL_THRESHOLD ...
#define ZS_DEBUG_CHECK_MARKS ...
#define ZS_DEBUG_STEP_OBJECTS ...
#define ZS_DEBUG_POISON_FREED ...
#define ZS_DEBUG_MARK_STACK_LIMIT ...
#define ZS_DEBUG_ALLOC_LIMIT ...
uint64_t zs_debug_check_failures(zs_runtime *rt);

void zs_runtime_default_options(zs_runtime_options *out);
zs_status zs_runtime_new(const zs_runtime_options *options, zs_runtime **out);
void zs_runtime_free(zs_runtime *rt);

typedef struct zs_memory_stats {
    uint64_t live_blocks;
    uint64_t live_bytes;
    uint64_t peak_bytes;
    uint64_t item_bytes_per_object;
} zs_memory_stats;
void zs_runtime_memory(zs_runtime *rt, zs_memory_stats *out);
zs_status zs_close_disregard_for_gc(zs_runtime *rt);

zs_status zs_name_intern(zs_runtime *rt, const char *utf8, size_t length,
                         uint32_t *out_index, uint32_t *out_number);
const char *zs_name_base(zs_runtime *rt, uint32_t index);
uint32_t zs_name_count(zs_runtime *rt);

typedef enum zs_member_kind {
    ZS_MEMBER_OBJECT = 1, ZS_MEMBER_WEAK_OBJECT = 2, ZS_MEMBER_OBJECT_ARRAY = 3, ZS_MEMBER_VALUE = 4
} zs_member_kind;
typedef struct zs_member { uint32_t kind; uint32_t offset; const zs_type *type; } zs_member;

typedef enum zs_type_kind {
    ZS_TYPE_PLAIN = 1, ZS_TYPE_OBJECT = 2, ZS_TYPE_WEAK_OBJECT = 3, ZS_TYPE_STRING = 4,
    ZS_TYPE_STRUCT = 5, ZS_TYPE_ARRAY = 6, ZS_TYPE_SET = 7, ZS_TYPE_MAP = 8,
    ZS_TYPE_OPTIONAL = 9, ZS_TYPE_DELEGATE = 10, ZS_TYPE_MULTICAST = 11, ZS_TYPE_SPARSE = 12
} zs_type_kind;
#define ZS_TYPE_HAS_REFS ...
#define ZS_TYPE_NEEDS_DTOR ...
#define ZS_TYPE_BITWISE ...
#define ZS_TYPE_HASHABLE ...
typedef struct zs_string { void *data; uint32_t length; uint32_t capacity; } zs_string;
typedef struct zs_array { void *data; uint32_t count; uint32_t capacity; } zs_array;
typedef struct zs_hash {
    zs_array entries; uint32_t *buckets; uint32_t bucket_count; uint32_t reserved;
} zs_hash;
typedef struct zs_binding { zs_ref object; uint32_t function_name; uint32_t callable; } zs_binding;
typedef struct zs_type_member { const zs_type *type; uint32_t offset; } zs_type_member;

zs_status zs_type_basic(zs_runtime *rt, zs_type_kind kind, uint32_t size, uint32_t align,
                        const zs_type **out);
zs_status zs_type_struct(zs_runtime *rt, const char *name, uint32_t size, uint32_t align,
                         const zs_type_member *members, uint32_t member_count,
                         const zs_type **out);
zs_status zs_type_container(zs_runtime *rt, zs_type_kind kind, const zs_type *element,
                            const zs_type *value, const zs_type **out);
uint32_t zs_type_size(const zs_type *type);
uint32_t zs_type_align(const zs_type *type);
uint32_t zs_type_flags(const zs_type *type);
uint32_t zs_type_kind_of(const zs_type *type);
uint32_t zs_type_id(const zs_type *type);
uint32_t zs_type_value_offset(const zs_type *type);
uint32_t zs_type_entry_size(const zs_type *type);
zs_status zs_value_assign(zs_runtime *rt, zs_ref owner, const zs_type *type, void *dst,
                          const void *src);
zs_status zs_value_clear(zs_runtime *rt, zs_ref owner, const zs_type *type, void *value);
zs_status zs_value_store_ref(zs_runtime *rt, zs_ref owner, const zs_type *slot_type, zs_ref *slot,
                             zs_ref target);
int zs_value_equal(zs_runtime *rt, const zs_type *type, const void *a, const void *b);
uint64_t zs_value_hash(zs_runtime *rt, const zs_type *type, const void *value);
zs_status zs_string_assign(zs_runtime *rt, const zs_type *type, zs_string *string,
                           const void *units, uint32_t length);
zs_status zs_array_insert(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                          uint32_t index, const void *value, uint32_t count);
zs_status zs_array_remove(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                          uint32_t index, uint32_t count);
zs_status zs_array_reserve(zs_runtime *rt, const zs_type *type, zs_array *array, uint32_t capacity);
zs_status zs_hash_find(zs_runtime *rt, const zs_type *type, const zs_hash *hash, const void *key,
                       int64_t *out_index);
zs_status zs_hash_add(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_hash *hash,
                      const void *key, uint32_t *out_index, int *out_added);
zs_status zs_hash_remove(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_hash *hash,
                         const void *key, int *out_removed);
zs_status zs_optional_set(zs_runtime *rt, zs_ref owner, const zs_type *type, void *optional,
                          const void *value);
zs_status zs_binding_set(zs_runtime *rt, zs_binding *binding, zs_ref object,
                         uint32_t function_name, uint32_t callable);
zs_status zs_sparse_bindings(zs_runtime *rt, void *sparse, int create, zs_array **out);
zs_status zs_multicast_add(zs_runtime *rt, zs_array *bindings, zs_ref object,
                           uint32_t function_name, uint32_t callable);
zs_status zs_multicast_remove(zs_runtime *rt, zs_array *bindings, uint32_t index, uint32_t count);
zs_status zs_take_released_callables(zs_runtime *rt, uint32_t *buffer, uint32_t capacity,
                                     uint32_t *out_count);
zs_status zs_callable_retain(zs_runtime *rt, uint32_t callable);
zs_status zs_callable_release(zs_runtime *rt, uint32_t callable);
zs_status zs_value_new(zs_runtime *rt, const zs_type *type, zs_ref *out_handle, void **out_value);
zs_status zs_value_free(zs_runtime *rt, zs_ref handle);
void *zs_value_resolve(zs_runtime *rt, zs_ref handle);
uint32_t zs_value_count(zs_runtime *rt);
typedef struct zs_class_desc {
    const char *name;
    const zs_class *parent;
    uint32_t instance_size;
    uint32_t flags;
    const zs_member *members;
    uint32_t member_count;
} zs_class_desc;
zs_status zs_class_register(zs_runtime *rt, const zs_class_desc *desc, const zs_class **out);
uint32_t zs_class_id(const zs_class *cls);
uint32_t zs_class_schema_words(const zs_class *cls);

zs_status zs_object_new(zs_runtime *rt, const zs_class *cls, zs_ref outer,
                        uint32_t name_index, uint32_t name_number,
                        zs_ref *out_ref, zs_object **out_object);
zs_object *zs_resolve(zs_runtime *rt, zs_ref ref);
zs_status zs_find_object(zs_runtime *rt, zs_ref outer, uint32_t name_index, uint32_t name_number,
                         zs_ref *out);
zs_status zs_resolve_for_conjugate(zs_runtime *rt, zs_ref ref, zs_object **out);
zs_status zs_forget_conjugate(zs_runtime *rt, zs_ref ref);
zs_status zs_store_ref(zs_runtime *rt, zs_ref holder, uint32_t offset, zs_ref target);
zs_status zs_add_to_root(zs_runtime *rt, zs_ref ref);
zs_status zs_remove_from_root(zs_runtime *rt, zs_ref ref);
zs_status zs_is_rooted(zs_runtime *rt, zs_ref ref, int *out);
zs_status zs_add_strong_ref(zs_runtime *rt, zs_ref ref);
zs_status zs_release_strong_ref(zs_runtime *rt, zs_ref ref);
zs_status zs_strong_ref_count(zs_runtime *rt, zs_ref ref, uint32_t *out);
zs_status zs_mark_as_garbage(zs_runtime *rt, zs_ref ref);
zs_status zs_is_garbage(zs_runtime *rt, zs_ref ref, int *out);
zs_status zs_is_permanent(zs_runtime *rt, zs_ref ref, int *out);
uint32_t zs_live_objects(zs_runtime *rt);

typedef struct zs_gc_stats {
    uint64_t cycle;
    uint64_t objects_scanned;
    uint64_t objects_marked;
    uint64_t objects_unreachable;
    uint64_t objects_freed;
    uint64_t references_killed;
    uint64_t roots;
    uint64_t permanent_objects;
    uint64_t clusters;
    uint64_t clusters_marked;
    uint64_t clusters_dissolved;
    uint64_t live_objects;
    uint64_t mark_ns;
    uint64_t gather_ns;
    uint64_t purge_ns;
    uint64_t mark_steps;
    uint64_t barrier_marks;
    uint64_t mark_threads;
} zs_gc_stats;

typedef enum zs_gc_phase {
    ZS_GC_IDLE = 0, ZS_GC_MARKING = 1, ZS_GC_PURGE_PENDING = 2, ZS_GC_GATHERING = 3
} zs_gc_phase;
zs_gc_phase zs_gc_phase_of(zs_runtime *rt);
zs_status zs_gc_start_incremental(zs_runtime *rt);
zs_status zs_gc_step(zs_runtime *rt, uint64_t budget_ns, int *out_done);

zs_status zs_create_cluster(zs_runtime *rt, zs_ref root, uint32_t *out_size);
zs_status zs_dissolve_cluster(zs_runtime *rt, zs_ref member);
zs_status zs_object_cluster(zs_runtime *rt, zs_ref ref, int32_t *out_cluster);
typedef struct zs_cluster_info {
    zs_ref root;
    uint32_t objects;
    uint32_t referenced_clusters;
    uint32_t mutable_objects;
    uint32_t referenced_by;
} zs_cluster_info;
zs_status zs_cluster_get_info(zs_runtime *rt, int32_t cluster, zs_cluster_info *out);
uint32_t zs_cluster_count(zs_runtime *rt);
zs_status zs_debug_set(zs_runtime *rt, uint32_t what, uint64_t value);

zs_status zs_collect_garbage(zs_runtime *rt);
zs_status zs_gc_mark_and_gather(zs_runtime *rt);
zs_status zs_gc_take_expiring(zs_runtime *rt, zs_ref *buffer, uint32_t capacity,
                              uint32_t *out_count);
zs_status zs_gc_take_expiring_ex(zs_runtime *rt, zs_ref *buffer, uint64_t *names,
                                 uint8_t *garbage, uint32_t capacity, uint32_t *out_count);
uint32_t zs_gc_expiring_count(zs_runtime *rt);
zs_status zs_gc_purge(zs_runtime *rt, uint64_t budget_ns, int *out_done);
uint32_t zs_gc_pending_purge(zs_runtime *rt);
void zs_gc_get_stats(zs_runtime *rt, zs_gc_stats *out);
zs_status zs_heap_verify(zs_runtime *rt, char *message, size_t message_capacity);
zs_status zs_debug_corrupt(zs_runtime *rt, zs_ref ref, uint32_t what);
"""


def _compile_args() -> tuple[list[str], list[str]]:
    cflags = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"]
    ldflags: list[str] = []
    if os.environ.get("ZSHARP_SANITIZE") == "1":
        cflags += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                   "-fno-sanitize-recover=all", "-O1", "-g", "-UNDEBUG"]
        ldflags += ["-fsanitize=address,undefined"]
    elif os.environ.get("ZSHARP_ASSERTS") == "1":
        cflags += ["-UNDEBUG"]
    return cflags, ldflags


def make_ffibuilder() -> FFI:
    """Return the FFI builder for the native library."""
    builder = FFI()
    builder.cdef(CDEF)
    cflags, ldflags = _compile_args()
    sources = sorted(str(p.relative_to(ROOT)) for p in (NATIVE / "src").glob("*.c"))
    builder.set_source(
        "zsharp_py._native_lib",
        '#include "zsharp.h"\n',
        sources=sources,
        include_dirs=[str(NATIVE / "include"), str(NATIVE / "src")],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
    )
    return builder


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
