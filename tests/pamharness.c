/*
 * pamharness: drives one PAM service through real libpam for the tests.
 * Run under pam_wrapper (LD_PRELOAD=libpam_wrapper.so PAM_WRAPPER=1
 * PAM_WRAPPER_SERVICE_DIR=DIR) so service files come from a test directory.
 *
 *   pamharness -s SERVICE -u USER [-a ANSWER]... [-r RUSER] [-H RHOST]
 *              [-t TTY] [-S] [-A] [-M] [-I] [-L] [-n CYCLES] [-T THREADS] [-q]
 *
 * Prints each conversation message as "<style>: <text>", the requested fail
 * delay as "faildelay: <usec>", then "result: <code> <name>". -A prints
 * whether PAM_AUTHTOK (as exported by pam_get_items.so) equals the first answer.
 * -I counts SIGINTs delivered to the process ("sigint-delivered:"), as an
 * application's handler would see a Ctrl-C the module left pending.
 * -M also runs pam_setcred and pam_acct_mgmt after a success ("setcred:", "acct:").
 * -L prints "elapsed_us: <usec>", the CLOCK_MONOTONIC time from just before
 * pam_authenticate to its return (conversation time included; pam_start's
 * module loading excluded), and "first_prompt_us: <usec>", the time from the
 * same start to the first prompt the conversation receives, for tools/bench.py
 * and the timing tests. Answers are given in order to
 * prompts; with none left the conversation fails (as at end of input).
 * -n/-T run CYCLES transactions on each of THREADS threads quietly and print
 * VmRSS after the first tenth and at the end, and how many did not succeed.
 */
#define _GNU_SOURCE
#include <security/pam_appl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ANSWERS 16

static const char *service, *user, *ruser, *rhost, *tty;
static const char *answers[MAX_ANSWERS];
static int answer_count, quiet, silent_flag, show_authtok, account_too, show_latency;
static volatile sig_atomic_t interrupts_seen;
static struct timespec authenticate_started;
static int first_prompt_seen;

static long long usec_since(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)(now.tv_sec - start->tv_sec) * 1000000LL + (now.tv_nsec - start->tv_nsec) / 1000;
}

static void on_interrupt(int signo) { (void)signo; interrupts_seen++; }

struct conv_state { int next; };

static int converse(int n, const struct pam_message **msg, struct pam_response **resp, void *appdata) {
    struct conv_state *state = appdata;
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
        if (!quiet) { printf("%s: %s\n", style, msg[i]->msg ? msg[i]->msg : ""); fflush(stdout); }
        if (msg[i]->msg_style == PAM_PROMPT_ECHO_OFF || msg[i]->msg_style == PAM_PROMPT_ECHO_ON) {
            if (show_latency && !quiet && !first_prompt_seen) {
                first_prompt_seen = 1;
                printf("first_prompt_us: %lld\n", usec_since(&authenticate_started));
                fflush(stdout);
            }
            if (state->next >= answer_count) {
                for (int j = 0; j < i; j++) free(replies[j].resp);
                free(replies);
                if (!quiet) { printf("conv: eof\n"); fflush(stdout); }
                return PAM_CONV_ERR;
            }
            replies[i].resp = strdup(answers[state->next++]);
        }
    }
    *resp = replies;
    return PAM_SUCCESS;
}

static void record_delay(int retval, unsigned usec, void *appdata) {
    (void)appdata;
    if (!quiet) { printf("faildelay: %u %d\n", usec, retval); fflush(stdout); }
}

static int run_once(void) {
    struct conv_state state = { 0 };
    struct pam_conv conv = { converse, &state };
    pam_handle_t *pamh = NULL;
    int rc = pam_start(service, user, &conv, &pamh);
    if (rc != PAM_SUCCESS) { fprintf(stderr, "pam_start: %d\n", rc); return rc; }
    if (ruser) pam_set_item(pamh, PAM_RUSER, ruser);
    if (rhost) pam_set_item(pamh, PAM_RHOST, rhost);
    if (tty) pam_set_item(pamh, PAM_TTY, tty);
    pam_set_item(pamh, PAM_FAIL_DELAY, (const void *)record_delay);
    first_prompt_seen = 0;
    clock_gettime(CLOCK_MONOTONIC, &authenticate_started);
    rc = pam_authenticate(pamh, silent_flag ? PAM_SILENT : 0);
    long long elapsed = usec_since(&authenticate_started);
    if (!quiet) {
        if (show_latency) printf("elapsed_us: %lld\n", elapsed);
        if (show_authtok) {
            /* Applications cannot read PAM_AUTHTOK; pam_get_items.so, placed
               after our module, exports it to the PAM environment. */
            const char *token = pam_getenv(pamh, "PAM_AUTHTOK");
            printf("authtok: %s\n", token == NULL ? "unset" : (answer_count > 0 && strcmp(token, answers[0]) == 0) ? "first-answer" : "other");
        }
        if (account_too && rc == PAM_SUCCESS) {
            printf("setcred: %d\n", pam_setcred(pamh, PAM_ESTABLISH_CRED));
            printf("acct: %d\n", pam_acct_mgmt(pamh, 0));
        }
        printf("result: %d %s\n", rc, pam_strerror(pamh, rc));
        fflush(stdout);
    }
    pam_end(pamh, rc);
    return rc;
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f)) if (sscanf(line, "VmRSS: %ld", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

static int cycles = 0;
static long code_counts[64];
static void *cycle_thread(void *arg) {
    long *failures = arg;
    for (int i = 0; i < cycles; i++) {
        int rc = run_once();
        if (rc != PAM_SUCCESS) __atomic_fetch_add(failures, 1, __ATOMIC_SEQ_CST);
        if (rc >= 0 && rc < 64) __atomic_fetch_add(&code_counts[rc], 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = 1, opt;
    while ((opt = getopt(argc, argv, "s:u:a:r:H:t:SAMILn:T:q")) != -1) {
        switch (opt) {
        case 's': service = optarg; break;
        case 'u': user = optarg; break;
        case 'a': if (answer_count < MAX_ANSWERS) answers[answer_count++] = optarg; break;
        case 'r': ruser = optarg; break;
        case 'H': rhost = optarg; break;
        case 't': tty = optarg; break;
        case 'S': silent_flag = 1; break;
        case 'A': show_authtok = 1; break;
        case 'M': account_too = 1; break;
        case 'I': signal(SIGINT, on_interrupt); break;
        case 'L': show_latency = 1; break;
        case 'n': cycles = atoi(optarg); break;
        case 'T': threads = atoi(optarg); break;
        case 'q': quiet = 1; break;
        default: return 2;
        }
    }
    if (!service || !user) { fprintf(stderr, "usage: pamharness -s SERVICE -u USER ...\n"); return 2; }
    if (cycles <= 0) {
        int rc = run_once();
        printf("sigint-delivered: %d\n", (int)interrupts_seen);
        return rc == PAM_SUCCESS ? 0 : 1;
    }

    quiet = 1;
    int warm = cycles / 10 > 0 ? cycles / 10 : 1;
    int total = cycles;
    cycles = warm;
    long failures = 0;
    cycle_thread(&failures);
    long before = rss_kb();
    cycles = total - warm;
    pthread_t ids[64];
    if (threads > 64) threads = 64;
    for (int t = 0; t < threads; t++) pthread_create(&ids[t], NULL, cycle_thread, &failures);
    for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL);
    printf("rss_kb_warm: %ld\nrss_kb_end: %ld\nfailures: %ld\n", before, rss_kb(), failures);
    for (int code = 0; code < 64; code++) if (code_counts[code]) printf("code_%d: %ld\n", code, code_counts[code]);
    return 0;
}
