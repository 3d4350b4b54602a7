/*
 * api.c -- the C API as one table (zsharp_api.h), for host modules that
 * cannot link against the library.
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
