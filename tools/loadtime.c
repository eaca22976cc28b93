/*
 * loadtime: how long a PAM module takes to load in a fresh process, and the
 * memory it adds, for tools/bench.py.
 *
 *   loadtime MODULE.so
 *
 * Linked against libpam, as every PAM application is, so libpam itself is
 * already mapped. Prints "load_us: N" (CLOCK_MONOTONIC around
 * dlopen(RTLD_NOW), as libpam opens modules: every symbol bound, every
 * library it needs loaded and relocated) and "rss_kb_added: N" (VmRSS
 * after minus before).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <security/pam_appl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) sscanf(line + 6, "%ld", &kb);
    fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: loadtime MODULE.so\n");
        return 2;
    }
    /* Keep libpam referenced so the linker does not drop it. */
    volatile void *keep = (void *)pam_strerror;
    (void)keep;
    long before = rss_kb();
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    void *handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    clock_gettime(CLOCK_MONOTONIC, &end);
    if (!handle) {
        fprintf(stderr, "loadtime: %s\n", dlerror());
        return 1;
    }
    long after = rss_kb();
    long us = (end.tv_sec - start.tv_sec) * 1000000L + (end.tv_nsec - start.tv_nsec) / 1000L;
    printf("load_us: %ld\nrss_kb_added: %ld\n", us, after - before);
    return 0;
}
