/* errno is a macro over a thread-local: Swift reads it through this. The
   res*id calls are declared only with _GNU_SOURCE, set here alone. */
#define _GNU_SOURCE
#include "libc_shim.h"
#include <dlfcn.h>

int la_errno(void) { return errno; }
int la_setresuid(unsigned real, unsigned effective, unsigned saved) { return setresuid(real, effective, saved); }
int la_setresgid(unsigned real, unsigned effective, unsigned saved) { return setresgid(real, effective, saved); }
int la_getresuid(unsigned *real, unsigned *effective, unsigned *saved) { return getresuid(real, effective, saved); }
int la_getresgid(unsigned *real, unsigned *effective, unsigned *saved) { return getresgid(real, effective, saved); }
int la_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }
/* statx's mount id (STATX_MNT_ID, the first field of /proc/self/mountinfo) of `path`. */
int la_mount_id(const char *path, unsigned long long *id) {
    struct statx info;
    if (statx(AT_FDCWD, path, 0, STATX_MNT_ID, &info) != 0) return -1;
    if (!(info.stx_mask & STATX_MNT_ID)) { errno = ENOSYS; return -1; }
    *id = info.stx_mnt_id;
    return 0;
}
/* Marks the shared object holding this function as never to be unloaded
   (dladdr needs _GNU_SOURCE); 0 on success. In a program, a no-op. */
int la_keep_this_object_loaded(void) {
    Dl_info info;
    if (dladdr((void *)la_keep_this_object_loaded, &info) == 0 || info.dli_fname == NULL) return -1;
    return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) == NULL ? -1 : 0;
}
/* SO_PEERCRED of a connected socket: the peer's pid and effective uid when
   it connected (struct ucred needs _GNU_SOURCE); 0 on success. */
int la_peer_credentials(int fd, int *pid, unsigned *uid) {
    struct ucred peer;
    socklen_t size = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) return -1;
    *pid = peer.pid;
    *uid = peer.uid;
    return 0;
}
