/*
 * loadharness: many PAM transactions on many threads of one process, like
 * tests/support/programs/pamharness.c's -n/-T mode, but saying what happened in every
 * transaction that did not succeed: for the load test's diagnosis of a
 * failure that only shows when transactions run on threads side by side.
 *
 *   loadharness -s SERVICE -u USER [-a ANSWER]... -n CYCLES [-T THREADS]
 *
 * Every thread runs CYCLES transactions at once with the others (no
 * warm-up), each pam_start, pam_authenticate, pam_end, answering prompts
 * in order with the answers (none left: the conversation fails). For each
 * transaction whose result is not PAM_SUCCESS it prints, as one block,
 *   fail: <thread> <cycle> <code> <name> <microseconds>
 *   msg: <style>: <text>          (each conversation message, in order)
 *   errno-at-end: <errno>
 * and at the end "transactions: N", "code_<n>: <count>" per result and
 * "pam_start_failures: N". The fail delay is recorded, not slept.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <security/pam_appl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ANSWERS 16
#define LOG_SIZE 8192

static const char *service, *user;
static const char *answers[MAX_ANSWERS];
static int answer_count, cycles = 1;
static long code_counts[64];
static long start_failures;
static pthread_mutex_t output = PTHREAD_MUTEX_INITIALIZER;

struct transaction {
    int next;
    size_t used;
    char log[LOG_SIZE];
};

static void note(struct transaction *t, const char *style, const char *text) {
    int n = snprintf(t->log + t->used, LOG_SIZE - t->used, "msg: %s: %s\n", style, text ? text : "");
    if (n > 0) t->used += (size_t)n < LOG_SIZE - t->used ? (size_t)n : LOG_SIZE - t->used - 1;
}

static int converse(int n, const struct pam_message **msg, struct pam_response **resp, void *appdata) {
    struct transaction *t = appdata;
    struct pam_response *replies = calloc((size_t)n, sizeof *replies);
    if (!replies) return PAM_BUF_ERR;
    for (int i = 0; i < n; i++) {
        const char *style = "?";
        switch (msg[i]->msg_style) {
        case PAM_PROMPT_ECHO_OFF: style = "prompt-off"; break;
        case PAM_PROMPT_ECHO_ON: style = "prompt-on"; break;
        case PAM_ERROR_MSG: style = "error"; break;
        case PAM_TEXT_INFO: style = "info"; break;
        }
        note(t, style, msg[i]->msg);
        if (msg[i]->msg_style == PAM_PROMPT_ECHO_OFF || msg[i]->msg_style == PAM_PROMPT_ECHO_ON) {
            if (t->next >= answer_count) {
                for (int j = 0; j < i; j++) free(replies[j].resp);
                free(replies);
                note(t, "conv", "eof");
                return PAM_CONV_ERR;
            }
            replies[i].resp = strdup(answers[t->next++]);
        }
    }
    *resp = replies;
    return PAM_SUCCESS;
}

static void record_delay(int retval, unsigned usec, void *appdata) {
    (void)retval; (void)usec; (void)appdata;
}

static long long usec_since(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)(now.tv_sec - start->tv_sec) * 1000000LL + (now.tv_nsec - start->tv_nsec) / 1000;
}

static void *run_thread(void *arg) {
    long thread = (long)arg;
    struct transaction *t = malloc(sizeof *t);
    if (!t) return NULL;
    for (int cycle = 0; cycle < cycles; cycle++) {
        memset(t, 0, sizeof *t);
        struct pam_conv conv = { converse, t };
        pam_handle_t *pamh = NULL;
        struct timespec started;
        clock_gettime(CLOCK_MONOTONIC, &started);
        int rc = pam_start(service, user, &conv, &pamh);
        if (rc != PAM_SUCCESS) {
            __atomic_fetch_add(&start_failures, 1, __ATOMIC_SEQ_CST);
            pthread_mutex_lock(&output);
            printf("fail: %ld %d pam_start %d %s\n", thread, cycle, rc, pam_strerror(NULL, rc));
            pthread_mutex_unlock(&output);
            continue;
        }
        pam_set_item(pamh, PAM_FAIL_DELAY, (const void *)record_delay);
        errno = 0;
        rc = pam_authenticate(pamh, 0);
        int saved = errno;
        long long elapsed = usec_since(&started);
        if (rc >= 0 && rc < 64) __atomic_fetch_add(&code_counts[rc], 1, __ATOMIC_SEQ_CST);
        if (rc != PAM_SUCCESS) {
            pthread_mutex_lock(&output);
            printf("fail: %ld %d %d %s %lld\n%serrno-at-end: %d\n", thread, cycle, rc, pam_strerror(pamh, rc), elapsed,
                   t->log, saved);
            fflush(stdout);
            pthread_mutex_unlock(&output);
        }
        pam_end(pamh, rc);
    }
    free(t);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = 1, opt;
    while ((opt = getopt(argc, argv, "s:u:a:n:T:")) != -1) {
        switch (opt) {
        case 's': service = optarg; break;
        case 'u': user = optarg; break;
        case 'a': if (answer_count < MAX_ANSWERS) answers[answer_count++] = optarg; break;
        case 'n': cycles = atoi(optarg); break;
        case 'T': threads = atoi(optarg); break;
        default: return 2;
        }
    }
    if (!service || !user || cycles <= 0 || threads <= 0 || threads > 64) {
        fprintf(stderr, "usage: loadharness -s SERVICE -u USER [-a ANSWER]... -n CYCLES [-T THREADS]\n");
        return 2;
    }
    pthread_t ids[64];
    for (long i = 0; i < threads; i++) pthread_create(&ids[i], NULL, run_thread, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    printf("transactions: %ld\n", (long)cycles * threads);
    for (int code = 0; code < 64; code++) if (code_counts[code]) printf("code_%d: %ld\n", code, code_counts[code]);
    printf("pam_start_failures: %ld\n", start_failures);
    return 0;
}
