/*
 * The libc declarations the policy library needs, for the Embedded build
 * (which has no Glibc module) and the ordinary one alike. Only one-line
 * wrappers live here, for what Swift cannot call directly (variadic
 * functions, macros). No logic; libc only.
 */
#ifndef LOCALAUTH_LIBC_SHIM_H
#define LOCALAUTH_LIBC_SHIM_H

#include <sys/types.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <fcntl.h>
#include <errno.h>
#include <pwd.h>
#include <unistd.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <signal.h>
#include <syslog.h>
#include <poll.h>
#include <dirent.h>
#include <termios.h>
#include <pthread.h>

static inline int la_openat(int dirfd, const char *path, int flags, unsigned mode) {
    return openat(dirfd, path, flags, (mode_t)mode);
}
int la_errno(void);
static inline int la_s_isreg(unsigned mode) { return S_ISREG(mode); }
static inline int la_s_isdir(unsigned mode) { return S_ISDIR(mode); }
static inline int la_s_ischr(unsigned mode) { return S_ISCHR(mode); }

#endif
