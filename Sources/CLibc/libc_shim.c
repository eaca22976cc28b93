/* errno is a macro over a thread-local: Swift reads it through this. The
   res*id calls are declared only with _GNU_SOURCE, set here alone. */
#define _GNU_SOURCE
#include "libc_shim.h"
#include <dlfcn.h>
#include <sys/prctl.h>

int la_errno(void) { return errno; }
int la_setresuid(unsigned real, unsigned effective, unsigned saved) { return setresuid(real, effective, saved); }
int la_setresgid(unsigned real, unsigned effective, unsigned saved) { return setresgid(real, effective, saved); }
int la_getresuid(unsigned *real, unsigned *effective, unsigned *saved) { return getresuid(real, effective, saved); }
int la_getresgid(unsigned *real, unsigned *effective, unsigned *saved) { return getresgid(real, effective, saved); }
int la_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }
/* The setuid helper's end, also at its SIGALRM deadline: every descriptor
   closed, the name that marks an ended helper, the caller's ids taken back
   (the helper is single-threaded: the kernel's calls suffice), then exit.
   Only async-signal-safe calls. */
static unsigned la_caller_uid, la_caller_gid;
void la_end_as_caller(void) {
    syscall(SYS_close_range, 0U, ~0U, 0);
    prctl(PR_SET_NAME, LA_ENDED_HELPER_NAME, 0, 0, 0);
    syscall(SYS_setresgid, la_caller_gid, la_caller_gid, la_caller_gid);
    syscall(SYS_setgroups, 0, (void *)0);
    syscall(SYS_setresuid, la_caller_uid, la_caller_uid, la_caller_uid);
}
static void la_deadline_reached(int signal) { (void)signal; la_end_as_caller(); _exit(1); }
int la_end_as_caller_at_alarm(unsigned uid, unsigned gid) {
    la_caller_uid = uid;
    la_caller_gid = gid;
    struct sigaction action = {0};
    action.sa_handler = la_deadline_reached;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGALRM, &action, (void *)0);
}
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
