/*
 * Test instrumentation (LD_PRELOAD into the harness only): a journal of
 * every write in place to a record file and every sync of it, from which
 * tests/faults/test_crash_consistency.py builds what a disk could hold after a
 * power cut at any moment (the last synced content plus any part of what
 * was written since).
 *
 *   CRASHLOG=FILE         the journal, appended to
 *   CRASHLOG_MATCH=TEXT   only files whose path contains TEXT and ends in .rec
 *   CRASHLOG_FAIL_SYNC=1  every sync of such a file fails with EIO (after
 *                         the real one: a disk that reports a lost write)
 *
 * Lines: "W <fd path> <offset> <hex bytes>" for pwrite, "S <fd path>" for
 * fsync/fdatasync. The calls themselves go through unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int record_path(int fd, char *path, size_t size) {
    const char *match = getenv("CRASHLOG_MATCH");
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, path, size - 1);
    if (length <= 4 || !match) return 0;
    path[length] = '\0';
    return strstr(path, match) != NULL && strcmp(path + length - 4, ".rec") == 0;
}

static void journal(const char *line, const unsigned char *bytes, size_t count) {
    const char *name = getenv("CRASHLOG");
    if (!name) return;
    FILE *file = fopen(name, "a");
    if (!file) return;
    fputs(line, file);
    for (size_t i = 0; i < count; i++) fprintf(file, "%02x", bytes[i]);
    fputc('\n', file);
    fclose(file);
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    char path[4096];
    if (record_path(fd, path, sizeof path)) {
        char line[4200];
        snprintf(line, sizeof line, "W %s %lld ", path, (long long)offset);
        journal(line, buffer, count);
    }
    return real(fd, buffer, count, offset);
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    return pwrite64(fd, buffer, count, offset);
}

static void synced(int fd) {
    char path[4096];
    if (record_path(fd, path, sizeof path)) {
        char line[4200];
        snprintf(line, sizeof line, "S %s", path);
        journal(line, NULL, 0);
    }
}

static int after_sync(int fd, int result) {
    char path[4096];
    if (result == 0 && getenv("CRASHLOG_FAIL_SYNC") && record_path(fd, path, sizeof path)) {
        errno = EIO;
        return -1;
    }
    if (result == 0) synced(fd);
    return result;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return after_sync(fd, real(fd));
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return after_sync(fd, real(fd));
}
