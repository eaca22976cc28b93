/*
 * The libc declarations the system layer needs (LibcSystem and the
 * adapters; the policy library imports no C but the wipe), for the
 * Embedded build (which has no Glibc module) and the ordinary one alike.
 * Only one-line wrappers live here, for what Swift cannot call directly
 * (variadic functions, macros, enums). No logic; libc only.
 */
#ifndef LOCALAUTH_LIBC_SHIM_H
#define LOCALAUTH_LIBC_SHIM_H


#include <sys/types.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <spawn.h>
#include <grp.h>
#include <shadow.h>

static inline int la_openat(int dirfd, const char *path, int flags, unsigned mode) {
    return openat(dirfd, path, flags, (mode_t)mode);
}
int la_errno(void);
/* The res*id calls need _GNU_SOURCE, which this header must not set (every
   module that includes the system headers must see them alike): they are
   wrapped in libc_shim.c. */
int la_setresuid(unsigned real, unsigned effective, unsigned saved);
/* Keeps the shared object this code is in loaded until exit (libc_shim.c). */
int la_keep_this_object_loaded(void);
/* pipe2(fds, O_CLOEXEC). */
int la_pipe_cloexec(int fds[2]);
/* The name an ended setuid helper carries (at most 15 bytes): what the
   helper counts of the helpers a caller left unreaped. */
#define LA_ENDED_HELPER_NAME "localauth-ended"
/* The helper's end as its caller (la_end_as_caller_at_alarm: also when
   its SIGALRM deadline strikes). */
void la_end_as_caller(void);
int la_end_as_caller_at_alarm(unsigned uid, unsigned gid);
int la_setresgid(unsigned real, unsigned effective, unsigned saved);
int la_getresuid(unsigned *real, unsigned *effective, unsigned *saved);
int la_getresgid(unsigned *real, unsigned *effective, unsigned *saved);
static inline int la_s_isreg(unsigned mode) { return S_ISREG(mode); }
static inline int la_s_isdir(unsigned mode) { return S_ISDIR(mode); }
static inline int la_s_ischr(unsigned mode) { return S_ISCHR(mode); }
static inline unsigned la_major(unsigned long long device) { return major(device); }
static inline unsigned la_minor(unsigned long long device) { return minor(device); }
static inline int la_s_issock(unsigned mode) { return S_ISSOCK(mode); }
static inline int la_fd_flags(int fd) { return fcntl(fd, F_GETFD); }
static inline int la_set_fd_flags(int fd, int flags) { return fcntl(fd, F_SETFD, flags); }
static inline int la_fcntl_getfl(int fd) { return fcntl(fd, F_GETFL); }
static inline int la_fcntl_setfl(int fd, int flags) { return fcntl(fd, F_SETFL, flags); }
/* A terminal's control characters (c_cc is a C array). */
static inline unsigned char la_termios_cc(const struct termios *t, int index) { return t->c_cc[index]; }
static inline void la_termios_set_cc(struct termios *t, int index, unsigned char value) { t->c_cc[index] = value; }


/* Where the setuid helper is installed; the module and the command-line
   tool start it from here and nowhere else. */
static inline const char *la_helper_path(void) { return "/usr/libexec/localauth/localauth-helper"; }
#include <sched.h>
#include <sys/syscall.h>
/* close_range may be missing from older C libraries' headers: ask the kernel. */
static inline int la_close_range(unsigned first) { return (int)syscall(SYS_close_range, first, ~0U, 0); }
/* renameat2 with RENAME_NOREPLACE (1), asked of the kernel for the same reason. */
static inline int la_rename_noreplace(int dirfd, const char *from, const char *to) {
    return (int)syscall(SYS_renameat2, dirfd, from, dirfd, to, 1U);
}
static inline int la_normal_scheduling(void) {
    struct sched_param param = {0};
    return sched_setscheduler(0, SCHED_OTHER, &param);
}
/* The calling thread to the lowest real-time priority, unless it already
   runs real-time; returns its former policy (for la_restore_scheduling) or
   -1 when it was left as it was. */
static inline int la_urgent_scheduling(struct sched_param *former) {
    int policy = sched_getscheduler(0);
    if (policy < 0 || policy == SCHED_FIFO || policy == SCHED_RR || sched_getparam(0, former) != 0) return -1;
    struct sched_param urgent = { .sched_priority = 1 };
    return sched_setscheduler(0, SCHED_FIFO, &urgent) == 0 ? policy : -1;
}
static inline void la_restore_scheduling(int policy, const struct sched_param *former) {
    if (policy >= 0) (void)sched_setscheduler(0, policy, former);
}
/* syslog is variadic; the message is always data, never a format. */
static inline void la_syslog(int priority, const char *message) { syslog(priority, "%s", message); }
static inline void la_openlog(const char *ident) { openlog(ident, LOG_PID, LOG_AUTHPRIV); }
/* A directory entry's name where readdir put it (Swift would copy the whole d_name array, past a short entry's end). */
static inline const char *la_dirent_name(const struct dirent *entry) { return entry->d_name; }
/* SIG_DFL and SIG_IGN are casts Swift cannot import. */
#ifndef F_OFD_SETLK
#define F_OFD_SETLK 37
#endif
/* An open-file-description write lock on the one byte at `offset`, not waiting (fcntl is variadic). */
static inline int la_try_lock_byte(int fd, long long offset) { struct flock lock = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)offset, .l_len = 1, .l_pid = 0 }; return fcntl(fd, F_OFD_SETLK, &lock); }
/* What a process is and where its state directory lies, for deciding
   whether a failure to write there is one no unprivileged user caused. */
#include <sys/vfs.h>
#include <sys/ioctl.h>
#include <linux/nsfs.h>
/* The mount id of `path` (statx needs _GNU_SOURCE: in libc_shim.c). */
int la_mount_id(const char *path, unsigned long long *id);
/* Whether `fd` names a mount namespace: NS_GET_NSTYPE gives CLONE_NEWNS,
   0x00020000 (sched.h declares it only with _GNU_SOURCE). */
static inline int la_is_mount_namespace(int fd) { return ioctl(fd, NS_GET_NSTYPE) == 0x00020000; }
/* The f_type of the filesystem holding `fd`, or -1. */
static inline long long la_filesystem_type(int fd) { struct statfs info; return fstatfs(fd, &info) != 0 ? -1 : (long long)info.f_type; }
/* A descriptor of the user namespace that owns the namespace `fd` names (ioctl is variadic). */
static inline int la_namespace_owner(int fd) { return ioctl(fd, NS_GET_USERNS); }
/* syslog(2) SYSLOG_ACTION_SIZE_UNREAD: reads and changes nothing, and the
   kernel allows it only with CAP_SYSLOG (or CAP_SYS_ADMIN) in the initial
   user namespace, whatever the files under /proc say. */
static inline int la_kernel_log_size_unread(void) { return (int)syscall(SYS_syslog, 9, (char *)0, 0); }
/* SIGALRM once, `milliseconds` from now (setitimer's which is an enum Swift cannot pass). */
#include <sys/time.h>
static inline int la_alarm_after(long milliseconds) { struct itimerval timer = { .it_interval = {0, 0}, .it_value = { milliseconds / 1000, (milliseconds % 1000) * 1000 } }; return setitimer(ITIMER_REAL, &timer, 0); }
static inline int la_default_signal(int sig) { return signal(sig, SIG_DFL) == SIG_ERR ? -1 : 0; }
static inline int la_ignore_signal(int sig) { return signal(sig, SIG_IGN) == SIG_ERR ? -1 : 0; }
/* The process at the other end of a connected socket (polkit's
   socket-activated agent helper, whose standard input is the agent's
   connection). SO_PEERPIDFD is Linux 6.5's; its number is 77 on x86_64 and
   aarch64 (asm-generic's), and it is left undefined elsewhere, where the
   call then fails. */
#if !defined(SO_PEERPIDFD) && (defined(__x86_64__) || defined(__aarch64__))
#define SO_PEERPIDFD 77
#endif
#ifdef SO_PEERPIDFD
static inline int la_peer_pidfd(int fd) { int pidfd = -1; socklen_t size = sizeof pidfd; return getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &size) == 0 ? pidfd : -1; }
#else
static inline int la_peer_pidfd(int fd) { (void)fd; errno = ENOPROTOOPT; return -1; }
#endif
int la_peer_credentials(int fd, int *pid, unsigned *uid);
static inline int la_socket_domain(int fd) { int domain = -1; socklen_t size = sizeof domain; return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &size) == 0 ? domain : -1; }
/* Whether the process a pidfd holds still runs: its pidfd turns readable
   once it has exited, zombie or reaped (a pid, once its process is gone,
   may name another; a pidfd never does). */
static inline int la_pidfd_running(int pidfd) { struct pollfd watch = { .fd = pidfd, .events = POLLIN, .revents = 0 }; return poll(&watch, 1, 0) == 0; }

#endif
