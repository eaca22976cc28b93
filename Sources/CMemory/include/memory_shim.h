/* The one C call of the policy library: overwriting a secret in a way the
 * compiler may not drop. */
#ifndef LOCALAUTH_MEMORY_SHIM_H
#define LOCALAUTH_MEMORY_SHIM_H
#include <stddef.h>
#include <string.h>

static inline void la_wipe(void *pointer, size_t count) { explicit_bzero(pointer, count); }

#endif
