/*
 * pamharness: drives one PAM service through real libpam for the tests.
 * Run under pam_wrapper (LD_PRELOAD=libpam_wrapper.so PAM_WRAPPER=1
 * PAM_WRAPPER_SERVICE_DIR=DIR) so service files come from a test directory.
 *
 *   pamharness -s SERVICE -u USER [-a ANSWER | -x HEX]... [-r RUSER] [-H RHOST]
 *              [-t TTY] [-S] [-A] [-M] [-I] [-L] [-m] [-K keep|free]
 *              [-n CYCLES] [-T THREADS] [-q]
 *
 * Prints each conversation message as "<style>: <text>", the requested fail
 * delay as "faildelay: <usec>", then "result: <code> <name>". -A prints
 * whether PAM_AUTHTOK (as exported by pam_get_items.so) equals the first answer.
 * -I counts SIGINTs delivered to the process ("sigint-delivered:"), as an
 * application's handler would see a Ctrl-C the module left pending.
 * -M also runs pam_setcred and pam_acct_mgmt after a success ("setcred:", "acct:").
 * -L prints "elapsed_us: <usec>", the CLOCK_MONOTONIC time from just before
 * pam_authenticate to its return (conversation time included; pam_start's
 * module loading excluded), "started_us: <usec>", that start itself on
 * CLOCK_MONOTONIC (the clock of Python's time.monotonic(), so a rig can time
 * what it sees against it), and "first_prompt_us: <usec>", the time from the
 * same start to the first prompt the conversation receives, for tools/bench.py
 * and the timing tests. Answers are given in order to
 * prompts; with none left the conversation fails (as at end of input).
 * -n/-T run CYCLES transactions on each of THREADS threads quietly and print
 * VmRSS after the first tenth and at the end, and how many did not succeed.
 * Every transaction gets the same answers, from the first, in the same order.
 *
 * The secret scan, for the tests that no copy of a password is left behind:
 * -x HEX is an answer given obfuscated, as the hex of each byte XOR 0x5c, so
 * that the harness never holds it in the clear: it is decoded only into the
 * freshly malloc'd reply handed to libpam (whose receiver is to wipe and
 * free it), a block of at least 936 bytes, a size little else asks malloc
 * for, so that once freed it is not reused before the scan and shows
 * whether it was wiped. The first -x is "the secret" (-A compares with the
 * first answer as given, so it says "other" for an -x answer). -m (one
 * transaction, not with -n) reads every readable mapping of the process
 * through /proc/self/maps and /proc/self/mem right after pam_authenticate
 * returns and again after pam_end, and prints for each stage
 *   secret-copies: <stage> <count>
 *   secret-copy: <stage> <full|tail> <address> <perms> <mapping>+<offset> <owner>
 * with <stage> after-authenticate or after-end. A hit is any place holding
 * the last 16 bytes of the secret (all of it when shorter than 32 bytes):
 * "full" when the whole secret is there, "tail" when only its end survives
 * (as in a block freed without wiping, whose first 16 bytes malloc reuses).
 * <owner> names what the harness knows of the place: pam-authtok (libpam's
 * PAM_AUTHTOK item of this handle, read from the first field of Linux-PAM's
 * struct pam_handle once the layout is confirmed through pam_get_item; it
 * is printed as "pam-authtok-item: set|unset|unknown"), was-pam-authtok
 * (that item's address, after pam_end), harness-reply (a reply this
 * harness handed to libpam), harness-kept / harness-freed (the controls
 * below), or "-". Anonymous mappings are named after the file mapping they
 * follow (a library's .bss). The scanner compares against the obfuscated
 * bytes, reads into a buffer of its own mapping that it skips and wipes,
 * and runs on a thread of its own, so that its frames do not overwrite
 * what the prompt left on the main thread's stack before it is read.
 * -K keep decodes one more copy of the secret before pam_authenticate and
 * keeps it; -K free decodes one after pam_end and frees it without wiping:
 * controls that the scan finds what is left.
 */
#define _GNU_SOURCE
#include <security/pam_appl.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_ANSWERS 16

static const char *service, *user, *ruser, *rhost, *tty;
static const char *answers[MAX_ANSWERS];
static int answer_hidden[MAX_ANSWERS];  /* given with -x: hex of the bytes XOR SECRET_MASK */
static int answer_count, quiet, silent_flag, show_authtok, account_too, show_latency;
static volatile sig_atomic_t interrupts_seen;
static struct timespec authenticate_started;
static int first_prompt_seen;

/* ---- the secret scan (-x, -m, -K) ----------------------------------------- */

#define SECRET_MASK 0x5c
#define SECRET_MAX 1024
#define TAIL_BYTES 16
#define SCAN_CHUNK (1UL << 20)
#define MAX_REGIONS 4096
#define MAX_REPLIES 64

/* The secret as the harness holds it: each byte XOR SECRET_MASK, never
   the bytes themselves. */
static unsigned char secret_masked[SECRET_MAX];
static size_t secret_length;
static int scan_memory;
static enum { CONTROL_NONE, CONTROL_KEEP, CONTROL_FREE } control;
static char *kept_copy;                       /* -K keep */
static unsigned long freed_copy;              /* -K free: an address, no longer a pointer */
static unsigned long reply_addresses[MAX_REPLIES];
static int reply_count;
static unsigned long authtok_address;         /* libpam's PAM_AUTHTOK item, when known */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Checks the hex of an -x answer; the first one becomes the secret (kept
   masked). Returns its length, or -1 when it is not even-length hex. */
static long masked_length(const char *hex, int remember) {
    size_t digits = strlen(hex);
    if (digits % 2 != 0 || digits / 2 > SECRET_MAX) return -1;
    for (size_t i = 0; i < digits; i += 2) {
        int high = hex_digit(hex[i]), low = hex_digit(hex[i + 1]);
        if (high < 0 || low < 0) return -1;
        if (remember) secret_masked[i / 2] = (unsigned char)(high << 4 | low);
    }
    if (remember) secret_length = digits / 2;
    return (long)(digits / 2);
}

/* A fresh malloc'd, NUL-terminated copy of the bytes an -x answer stands
   for: the only place the harness ever writes them. The block is of a size
   little else asks malloc for, so that once freed it stays where it was
   and shows whether its receiver wiped it. */
#define REPLY_BLOCK 936
static char *reveal(const char *hex) {
    size_t length = strlen(hex) / 2;
    char *out = malloc(length + 1 > REPLY_BLOCK ? length + 1 : REPLY_BLOCK);
    if (!out) return NULL;
    for (size_t i = 0; i < length; i++)
        out[i] = (char)((hex_digit(hex[2 * i]) << 4 | hex_digit(hex[2 * i + 1])) ^ SECRET_MASK);
    out[length] = '\0';
    return out;
}

static char *reveal_secret(void) {
    char *out = malloc(secret_length + 1 > REPLY_BLOCK ? secret_length + 1 : REPLY_BLOCK);
    if (!out) return NULL;
    for (size_t i = 0; i < secret_length; i++) out[i] = (char)(secret_masked[i] ^ SECRET_MASK);
    out[secret_length] = '\0';
    return out;
}

struct region {
    unsigned long start, end, offset;
    char perms[5];
    char name[300];
};
static struct region regions[MAX_REGIONS];
static unsigned char *scan_buffer;
static size_t scan_buffer_size;

/* /proc/self/maps, read whole before any memory is read (reading it
   allocates; the mappings must not move under the scan). */
static int load_regions(void) {
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) return -1;
    char line[512], previous_file[256] = "";
    unsigned long previous_end = 0;
    int count = 0;
    while (count < MAX_REGIONS && fgets(line, sizeof line, f)) {
        struct region *r = &regions[count];
        int name_at = 0;
        if (sscanf(line, "%lx-%lx %4s %lx %*s %*s %n", &r->start, &r->end, r->perms, &r->offset, &name_at) < 4)
            continue;
        char *name = line + name_at;
        name[strcspn(name, "\n")] = '\0';
        if (name[0] != '\0') {
            snprintf(r->name, sizeof r->name, "%s", name);
            if (name[0] == '/') snprintf(previous_file, sizeof previous_file, "%s", name);
            else previous_file[0] = '\0';
        } else if (previous_file[0] != '\0' && previous_end == r->start) {
            snprintf(r->name, sizeof r->name, "anonymous(after:%s)", previous_file);
        } else {
            snprintf(r->name, sizeof r->name, "anonymous");
            previous_file[0] = '\0';
        }
        previous_end = r->end;
        count++;
    }
    fclose(f);
    return count;
}

static int masked_equal(const unsigned char *memory, size_t from, size_t length) {
    for (size_t k = 0; k < length; k++)
        if ((unsigned char)(memory[k] ^ SECRET_MASK) != secret_masked[from + k]) return 0;
    return 1;
}

static const char *owner_of(unsigned long start) {
    if (authtok_address && start == authtok_address) return scan_memory == 2 ? "was-pam-authtok" : "pam-authtok";
    if (kept_copy && start == (unsigned long)kept_copy) return "harness-kept";
    if (freed_copy && start == freed_copy) return "harness-freed";
    for (int i = 0; i < reply_count; i++) if (reply_addresses[i] == start) return "harness-reply";
    return "-";
}

/* Finds the secret's tail in [from, to) of one mapping; returns the hits. */
static int scan_span(int mem, const struct region *r, unsigned long from, unsigned long to, const char *stage) {
    size_t tail = secret_length >= 2 * TAIL_BYTES ? TAIL_BYTES : secret_length;
    size_t lead = secret_length - tail;  /* bytes of a full copy before its tail */
    int hits = 0;
    for (unsigned long pos = from; pos + tail <= to; pos += SCAN_CHUNK) {
        unsigned long read_from = pos - from >= lead ? pos - lead : from;
        unsigned long read_to = pos + SCAN_CHUNK + tail - 1 < to ? pos + SCAN_CHUNK + tail - 1 : to;
        ssize_t got = pread(mem, scan_buffer, read_to - read_from, (off_t)read_from);
        if (got <= 0) continue;  /* not readable after all ([vvar] and the like) */
        unsigned long last = read_from + (unsigned long)got;
        for (unsigned long at = pos; at < pos + SCAN_CHUNK && at + tail <= last; at++) {
            const unsigned char *here = scan_buffer + (at - read_from);
            if ((unsigned char)(here[0] ^ SECRET_MASK) != secret_masked[lead] || !masked_equal(here, lead, tail))
                continue;
            /* Where a whole copy would begin (the tail itself when that is
               before the mapping). */
            int room = at - read_from >= lead;
            unsigned long start = room ? at - lead : at;
            int full = room && masked_equal(here - lead, 0, lead);
            hits++;
            printf("secret-copy: %s %s 0x%lx %s %s+0x%lx %s\n", stage, full ? "full" : "tail", start, r->perms, r->name,
                   start - r->start + r->offset, owner_of(start));
        }
        explicit_bzero(scan_buffer, (size_t)got);
    }
    return hits;
}

/* Every readable mapping but the scan buffer's own bytes. */
static void *scan_all(void *stage_name) {
    const char *stage = stage_name;
    if (!scan_buffer) {
        scan_buffer_size = SCAN_CHUNK + SECRET_MAX;
        scan_buffer = mmap(NULL, scan_buffer_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (scan_buffer == MAP_FAILED) { scan_buffer = NULL; printf("secret-copies: %s error\n", stage); return NULL; }
    }
    int count = load_regions();
    int mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (count < 0 || mem < 0) { printf("secret-copies: %s error\n", stage); if (mem >= 0) close(mem); return NULL; }
    unsigned long hole_start = (unsigned long)scan_buffer, hole_end = hole_start + scan_buffer_size;
    int hits = 0;
    for (int i = 0; i < count; i++) {
        const struct region *r = &regions[i];
        if (r->perms[0] != 'r') continue;
        if (r->end <= hole_start || r->start >= hole_end) {
            hits += scan_span(mem, r, r->start, r->end, stage);
        } else {
            if (r->start < hole_start) hits += scan_span(mem, r, r->start, hole_start, stage);
            if (r->end > hole_end) hits += scan_span(mem, r, hole_end, r->end, stage);
        }
    }
    close(mem);
    printf("secret-copies: %s %d\n", stage, hits);
    fflush(stdout);
    return NULL;
}

/* The scan runs on a thread of its own, so that its frames (and those of
   stdio) do not overwrite what the prompt left on the main thread's stack
   before that stack is read; the main thread only waits. */
static void scan_for_secret(const char *stage) {
    pthread_t scanner;
    if (pthread_create(&scanner, NULL, scan_all, (void *)stage) != 0) {
        printf("secret-copies: %s error\n", stage);
        return;
    }
    pthread_join(scanner, NULL);
}

/* The address of libpam's PAM_AUTHTOK item: an application may not ask
   for it, so it is read from the first field of Linux-PAM's struct
   pam_handle (char *authtok; unsigned caller_is; struct pam_conv
   *pam_conversation; char *oldauthtok; char *prompt; char *service_name;
   char *user; ...), used only when the fields that pam_get_item does
   return sit where that layout puts them. */
static const char *find_authtok_item(pam_handle_t *pamh) {
    const void *conv = NULL, *service_item = NULL, *user_item = NULL;
    struct layout { char *authtok; unsigned caller_is; const void *conversation; char *oldauthtok; char *prompt;
                    const void *service_name; const void *user; };
    const struct layout *fields = (const void *)pamh;
    authtok_address = 0;
    if (pam_get_item(pamh, PAM_CONV, &conv) != PAM_SUCCESS
        || pam_get_item(pamh, PAM_SERVICE, &service_item) != PAM_SUCCESS
        || pam_get_item(pamh, PAM_USER, &user_item) != PAM_SUCCESS || conv == NULL
        || fields->conversation != conv || fields->service_name != service_item || fields->user != user_item)
        return "unknown";
    authtok_address = (unsigned long)fields->authtok;
    return authtok_address ? "set" : "unset";
}

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
            int index = state->next++;
            replies[i].resp = answer_hidden[index] ? reveal(answers[index]) : strdup(answers[index]);
            if (scan_memory && answer_hidden[index] && reply_count < MAX_REPLIES)
                reply_addresses[reply_count++] = (unsigned long)replies[i].resp;
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
    if (control == CONTROL_KEEP && !kept_copy) kept_copy = reveal_secret();
    clock_gettime(CLOCK_MONOTONIC, &authenticate_started);
    rc = pam_authenticate(pamh, silent_flag ? PAM_SILENT : 0);
    long long elapsed = usec_since(&authenticate_started);
    if (scan_memory) {
        printf("pam-authtok-item: %s\n", find_authtok_item(pamh));
        scan_for_secret("after-authenticate");
    }
    if (!quiet) {
        if (show_latency)
            printf("elapsed_us: %lld\nstarted_us: %lld\n", elapsed,
                   (long long)authenticate_started.tv_sec * 1000000 + authenticate_started.tv_nsec / 1000);
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
    if (scan_memory) {
        scan_memory = 2;  /* the handle is gone: its item's address is history */
        if (control == CONTROL_FREE) {
            char *copy = reveal_secret();
            freed_copy = (unsigned long)copy;
            free(copy);  /* deliberately not wiped */
        }
        scan_for_secret("after-end");
    }
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
    while ((opt = getopt(argc, argv, "s:u:a:x:r:H:t:SAMILmK:n:T:qR:")) != -1) {
        switch (opt) {
        case 's': service = optarg; break;
        case 'u': user = optarg; break;
        case 'a': if (answer_count < MAX_ANSWERS) answers[answer_count++] = optarg; break;
        case 'x':
            if (masked_length(optarg, secret_length == 0) < 0) {
                fprintf(stderr, "-x: expected hex of at most %d bytes\n", SECRET_MAX);
                return 2;
            }
            if (answer_count < MAX_ANSWERS) { answer_hidden[answer_count] = 1; answers[answer_count++] = optarg; }
            break;
        case 'm': scan_memory = 1; break;
        case 'K':
            if (strcmp(optarg, "keep") == 0) control = CONTROL_KEEP;
            else if (strcmp(optarg, "free") == 0) control = CONTROL_FREE;
            else { fprintf(stderr, "-K: keep or free\n"); return 2; }
            break;
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
        case 'R':
            /* As sudo runs PAM: this real uid, root's effective one (set here,
               after the wrappers were preloaded, which a process started so
               would refuse). */
            if (setresuid((uid_t)atol(optarg), 0, 0) != 0) { perror("setresuid"); return 2; }
            break;
        default: return 2;
        }
    }
    if (!service || !user) { fprintf(stderr, "usage: pamharness -s SERVICE -u USER ...\n"); return 2; }
    if ((scan_memory || control != CONTROL_NONE) && (secret_length == 0 || cycles > 0)) {
        fprintf(stderr, "-m and -K need a secret (-x) and one transaction (no -n)\n");
        return 2;
    }
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
