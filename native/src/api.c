/*
 * api.c -- what the C API offers as a whole: its functions as one table
 * (zsharp_api.h), for host modules that cannot link against the library,
 * and the one table of status texts (zs_status_message).
 */
#include "zsharp_api.h"

const struct zs_api *zs_api_table(void) {
    /* Constant: one table for every runtime and thread. */
    static const zs_api table = {.version = ZS_API_VERSION,
                                 .size = sizeof(zs_api),
#define ZS_API_ENTRY(name) .name = name,
                                 ZS_API_FUNCTIONS(ZS_API_ENTRY)
#undef ZS_API_ENTRY
    };
    return &table;
}

/* The one table of status texts: zsharp.h documents the codes, and the
   Python package shows these texts after its own context ("insert: ..."),
   so each must read well to a Python user who never saw the C API. */
const char *zs_status_message(zs_status status) {
    switch (status) {
    case ZS_OK:
        return "ok";
    case ZS_E_NOMEM:
        return "native allocation failed (out of memory)";
    case ZS_E_CAPACITY:
        return "the object array is full (max_objects reached)";
    case ZS_E_STALE:
        return "the object was destroyed (its handle is stale)";
    case ZS_E_INVALID:
        return "invalid argument (null, out of range, or of the wrong class)";
    case ZS_E_BUSY:
        return "the heap cannot be changed now (inside a destroy hook or a collection)";
    case ZS_E_EXPIRY_PENDING:
        return "purge refused: dying objects still have conjugates to expire";
    case ZS_E_DYING:
        return "the object is unreachable and about to be destroyed";
    case ZS_E_CORRUPT:
        return "heap verification failed: the native heap is inconsistent";
    case ZS_E_CALL_FAILED:
        return "the Python (managed) function called from native code raised an exception";
    }
    return "unknown status";
}
