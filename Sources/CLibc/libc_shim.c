/* errno is a macro over a thread-local: Swift reads it through this. */
#include "libc_shim.h"

int la_errno(void) { return errno; }
