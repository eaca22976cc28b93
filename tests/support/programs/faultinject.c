/*
 * Test instrumentation (LD_PRELOAD into the harness only): makes chosen
 * system calls on chosen paths fail, or swaps a directory for a symlink at
 * the moment the module opens it, for tests/faults/test_faults.py.
 *
 *   FAULT_CALL=open|write|sync|rename|read|fstat   which calls fail (a
 *                          list, "read,write", fails each kind named)
 *   FAULT_ERRNO=N          the errno they fail with (EIO 5, EACCES 13, ...)
 *   FAULT_MATCH=TEXT       only calls on a path containing TEXT (for write,
 *                          sync and read: the descriptor's path); TEXT$
 *                          only calls on a path ending in TEXT
 *   FAULT_SKIP=N           let the first N matching calls through
 *   FAULT_TIMES=N          fail only N matching calls (after those
 *                          skipped); then let them through (a transient
 *                          error)
 *   FAULT_SWAP=DIR         when the module opens DIR (an openat of its last
 *                          name), rename DIR to DIR.moved and put a symlink
 *                          to FAULT_SWAP_TARGET in its place: before the
 *                          real call (FAULT_SWAP_WHEN=before, the default)
 *                          or just after it returned (after)
 *   FAULT_LOG=FILE         one line appended per fault injected or swap made
 *                          (so a test can tell the fault was hit)
 *
 * Everything not matched goes through unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int skipped, failed;

static void note(const char *what, const char *path) {
    const char *name = getenv("FAULT_LOG");
    if (!name) return;
    FILE *file = fopen(name, "a");
    if (!file) return;
    fprintf(file, "%s %s\n", what, path);
    fclose(file);
}

static void descriptor_path(int fd, char *path, size_t size) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, path, size - 1);
    path[length > 0 ? length : 0] = '\0';
}

/* The path of `name` relative to `directory`, as far as it can be told. */
static void joined_path(int directory, const char *name, char *path, size_t size) {
    if (name[0] == '/' || directory == AT_FDCWD) {
        snprintf(path, size, "%s", name);
        return;
    }
    char base[4096];
    descriptor_path(directory, base, sizeof base);
    snprintf(path, size, "%s/%s", base, name);
}

/* Whether `path` contains `match`; a `match` ending in '$' must end the path. */
static int matches(const char *path, const char *match) {
    size_t length = strlen(match);
    if (length == 0 || match[length - 1] != '$') return strstr(path, match) != NULL;
    size_t path_length = strlen(path);
    return path_length >= length - 1 && strncmp(path + path_length - (length - 1), match, length - 1) == 0;
}

/* Whether the comma-separated `list` names `call`. */
static int names(const char *list, const char *call) {
    size_t length = strlen(call);
    for (const char *item = list; item; item = strchr(item, ',') ? strchr(item, ',') + 1 : NULL) {
        if (strncmp(item, call, length) == 0 && (item[length] == ',' || item[length] == '\0')) return 1;
    }
    return 0;
}

/* Whether this call should fail; sets errno when it should. */
static int inject(const char *call, const char *path) {
    const char *wanted = getenv("FAULT_CALL"), *match = getenv("FAULT_MATCH"), *code = getenv("FAULT_ERRNO");
    if (!wanted || !code || !names(wanted, call)) return 0;
    if (match && !matches(path, match)) return 0;
    const char *skip = getenv("FAULT_SKIP");
    if (skip && skipped < atoi(skip)) {
        skipped++;
        return 0;
    }
    const char *times = getenv("FAULT_TIMES");
    if (times && failed >= atoi(times)) return 0;
    failed++;
    note(call, path);
    errno = atoi(code);
    return 1;
}

static void maybe_swap(const char *path, const char *when) {
    const char *directory = getenv("FAULT_SWAP"), *target = getenv("FAULT_SWAP_TARGET");
    const char *chosen = getenv("FAULT_SWAP_WHEN");
    if (!directory || !target || strcmp(chosen ? chosen : "before", when) != 0 || strcmp(path, directory) != 0) return;
    char moved[4200];
    snprintf(moved, sizeof moved, "%s.moved", directory);
    int saved = errno;
    if (rename(directory, moved) == 0 && symlink(target, directory) == 0) note("swap", directory);
    errno = saved;
}

static int forward_openat(int directory, const char *name, int flags, mode_t mode) {
    static int (*real)(int, const char *, int, ...);
    if (!real) real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
    char path[4200];
    joined_path(directory, name, path, sizeof path);
    if (inject("open", path)) return -1;
    maybe_swap(path, "before");
    int fd = real(directory, name, flags, mode);
    maybe_swap(path, "after");
    return fd;
}

int openat(int directory, const char *name, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(arguments, mode_t) : 0;
    va_end(arguments);
    return forward_openat(directory, name, flags, mode);
}

int openat64(int directory, const char *name, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(arguments, mode_t) : 0;
    va_end(arguments);
    return forward_openat(directory, name, flags, mode);
}

static int descriptor_fails(const char *call, int fd) {
    char path[4096];
    descriptor_path(fd, path, sizeof path);
    return inject(call, path);
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    if (descriptor_fails("write", fd)) return -1;
    return real(fd, buffer, count, offset);
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) { return pwrite64(fd, buffer, count, offset); }

ssize_t write(int fd, const void *buffer, size_t count) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (fd > 2 && descriptor_fails("write", fd)) return -1;
    return real(fd, buffer, count);
}

ssize_t read(int fd, void *buffer, size_t count) {
    static ssize_t (*real)(int, void *, size_t);
    if (!real) real = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    if (fd > 2 && descriptor_fails("read", fd)) return -1;
    return real(fd, buffer, count);
}

ssize_t pread64(int fd, void *buffer, size_t count, off_t offset) {
    static ssize_t (*real)(int, void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread64");
    if (descriptor_fails("read", fd)) return -1;
    return real(fd, buffer, count, offset);
}

ssize_t pread(int fd, void *buffer, size_t count, off_t offset) { return pread64(fd, buffer, count, offset); }

int fstat(int fd, struct stat *info) {
    static int (*real)(int, struct stat *);
    if (!real) real = (int (*)(int, struct stat *))dlsym(RTLD_NEXT, "fstat");
    if (fd > 2 && descriptor_fails("fstat", fd)) return -1;
    return real(fd, info);
}

int fstat64(int fd, struct stat64 *info) {
    static int (*real)(int, struct stat64 *);
    if (!real) real = (int (*)(int, struct stat64 *))dlsym(RTLD_NEXT, "fstat64");
    if (fd > 2 && descriptor_fails("fstat", fd)) return -1;
    return real(fd, info);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (descriptor_fails("sync", fd)) return -1;
    return real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (descriptor_fails("sync", fd)) return -1;
    return real(fd);
}

int renameat(int from_directory, const char *from, int to_directory, const char *to) {
    static int (*real)(int, const char *, int, const char *);
    if (!real) real = (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
    char path[4200];
    joined_path(to_directory, to, path, sizeof path);
    if (inject("rename", path)) return -1;
    return real(from_directory, from, to_directory, to);
}

int rename(const char *from, const char *to) {
    static int (*real)(const char *, const char *);
    if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    if (inject("rename", to)) return -1;
    return real(from, to);
}
