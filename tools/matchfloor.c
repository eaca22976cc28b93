/*
 * matchfloor: the least a program can do to get one fingerprint match from
 * fprintd, for tools/bench.py: the floor that a PAM module's match is
 * measured against on the same rig, so that the module's own cost is the
 * difference and not the rig's noise.
 *
 *   matchfloor [--enrolled | --rules STATE_FILE] DEVICE_PATH USER
 *   matchfloor --ask                           (DBUS_SYSTEM_BUS_ADDRESS as usual)
 *
 * One sd-bus connection; the match on the device's VerifyStatus signal is
 * sent without waiting for its reply (the bus handles messages in order, so
 * it is in place before the claim); Claim(USER); VerifyStart("any"); wait
 * for VerifyStatus with done = true; VerifyStop and Release sent together
 * and both replies awaited. No account is kept, no policy, no session is
 * asked about: a module cannot do less and still find the reader free for
 * the next prompt. With --enrolled it first does what a module needs to
 * know which device holds the user's prints before it claims one
 * (GetDevices, then ListEnrolledFingers on the device), as pam_fprintd
 * and localauth both do: the floor for a module that checks the enrollment.
 *
 * --rules STATE_FILE does that and, besides, the least that the module's
 * rules ask of a match, in the module's order: logind asked about the
 * caller's session before the claim (the lid and the session, one round
 * trip, then the session's properties), the attempt charged on disk after
 * the claim and before VerifyStart (the file locked, read, written in
 * place and its data synced: the count is on disk before the verdict), and
 * logind asked again when the match arrives, after VerifyStop and Release
 * went out. The floor a module keeping an exact count on disk can reach.
 *
 * --ask only opens the bus and asks fprintd for its devices, whatever the
 * answer (fprintd not running is an error reply): what any module that
 * asks whether there is a reader pays on every prompt, a password's too.
 *
 * Prints "started_us: N" (CLOCK_MONOTONIC, in microseconds, just before the
 * bus is opened: the same clock as the rig's cue times and pamharness -L),
 * "elapsed_us: N" (from there to Release's reply) and "result: STATUS";
 * exits 0 only on verify-match.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <sys/file.h>
#include <systemd/sd-login.h>
#include <time.h>
#include <unistd.h>

#define FPRINT "net.reactivated.Fprint"
#define DEVICE FPRINT ".Device"
#define MANAGER FPRINT ".Manager"

struct outcome {
    char status[64];
    int done;
};

static long long monotonic_us(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

static int on_status(sd_bus_message *message, void *data, sd_bus_error *error) {
    (void)error;
    struct outcome *outcome = data;
    const char *status = NULL;
    int done = 0;
    if (sd_bus_message_read(message, "sb", &status, &done) < 0) return 0;
    snprintf(outcome->status, sizeof outcome->status, "%s", status);
    outcome->done = done;
    return 0;
}

static int on_reply(sd_bus_message *message, void *data, sd_bus_error *error) {
    (void)error;
    int *replies = data;
    const sd_bus_error *failed = sd_bus_message_get_error(message);
    if (failed) fprintf(stderr, "matchfloor: %s\n", failed->message ? failed->message : failed->name);
    *replies += 1;
    return 0;
}

static int call(sd_bus *bus, const char *path, const char *member, const char *signature, const char *argument) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    int rc = sd_bus_call_method(bus, FPRINT, path, DEVICE, member, &error, &reply, signature, argument);
    if (rc < 0) fprintf(stderr, "matchfloor: %s: %s\n", member, error.message ? error.message : strerror(-rc));
    sd_bus_error_free(&error);
    sd_bus_message_unref(reply);
    return rc;
}

/* GetDevices lists PATH, and ListEnrolledFingers(USER) on it answers. */
static int has_prints(sd_bus *bus, const char *path, const char *user) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    char **devices = NULL;
    int found = 0;
    if (sd_bus_call_method(bus, FPRINT, "/net/reactivated/Fprint/Manager", MANAGER, "GetDevices", &error, &reply, NULL) >= 0
        && sd_bus_message_read_strv(reply, &devices) >= 0)
        for (char **device = devices; device && *device; device++) found |= strcmp(*device, path) == 0;
    for (char **device = devices; device && *device; device++) free(*device);
    free(devices);
    sd_bus_message_unref(reply);
    sd_bus_error_free(&error);
    if (!found) {
        fprintf(stderr, "matchfloor: %s is not among fprintd's devices\n", path);
        return 0;
    }
    reply = NULL;
    int rc = sd_bus_call_method(bus, FPRINT, path, DEVICE, "ListEnrolledFingers", &error, &reply, "s", user);
    if (rc < 0) fprintf(stderr, "matchfloor: ListEnrolledFingers: %s\n", error.message ? error.message : strerror(-rc));
    sd_bus_message_unref(reply);
    sd_bus_error_free(&error);
    return rc >= 0;
}

#define LOGIN1 "org.freedesktop.login1"

#define LOGIN1 "org.freedesktop.login1"

/* A call's reply (a method return or an error), kept until it is read. */
struct answer {
    sd_bus_message *reply;
    int answered;
};

static int keep_reply(sd_bus_message *message, void *data, sd_bus_error *error) {
    (void)error;
    struct answer *answer = data;
    answer->reply = sd_bus_message_ref(message);
    answer->answered = 1;
    return 0;
}

/* One message handled, or a wait of at most `usec` for the next; 0 when
 * the bus failed or nothing came in time (the caller stops waiting). */
static int pump(sd_bus *bus, uint64_t usec) {
    int rc = sd_bus_process(bus, NULL);
    return rc > 0 || (rc == 0 && sd_bus_wait(bus, usec) > 0);
}

static void wait_for(sd_bus *bus, const struct answer *first, const struct answer *second) {
    while ((!first->answered || (second && !second->answered)) && pump(bus, 2 * 1000000ULL)) {}
}

/* What the module asks logind before it claims a reader and again when a
 * match arrives: the lid and the caller's session go out together, both
 * replies are read, then the session's properties if logind knows it. An
 * error (no logind on the bus) ends the round, as it does in the module. */
static void ask_logind(sd_bus *bus) {
    char *session = NULL;
    struct answer lid = { NULL, 0 }, found = { NULL, 0 };
    if (sd_pid_get_session(0, &session) < 0) session = NULL;
    if (sd_bus_call_method_async(bus, NULL, LOGIN1, "/org/freedesktop/login1", "org.freedesktop.DBus.Properties", "Get",
                                 keep_reply, &lid, "ss", LOGIN1 ".Manager", "LidClosed") < 0)
        lid.answered = 1;
    if (!session || sd_bus_call_method_async(bus, NULL, LOGIN1, "/org/freedesktop/login1", LOGIN1 ".Manager", "GetSession",
                                             keep_reply, &found, "s", session) < 0)
        found.answered = 1;
    wait_for(bus, &lid, &found);
    const char *path = NULL;
    if (found.reply && !sd_bus_message_is_method_error(found.reply, NULL)
        && sd_bus_message_read(found.reply, "o", &path) >= 0) {
        sd_bus_message *all = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        (void)sd_bus_call_method(bus, LOGIN1, path, "org.freedesktop.DBus.Properties", "GetAll", &error, &all, "s",
                                 LOGIN1 ".Session");
        sd_bus_error_free(&error);
        sd_bus_message_unref(all);
    }
    sd_bus_message_unref(lid.reply);
    sd_bus_message_unref(found.reply);
    free(session);
}

/* The attempt charged: the state file locked, read, one record written in
 * place and its data synced before the reader may match. The file is one
 * matchfloor made (it begins with MAGIC) or a new one: a path given by
 * mistake is refused, not overwritten. */
#define MAGIC "matchflr"
static int charge(const char *state_file) {
    unsigned char record[256];
    int fd = open(state_file, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) < 0) {
        perror("matchfloor: the state file");
        if (fd >= 0) close(fd);
        return -1;
    }
    ssize_t got = pread(fd, record, sizeof record, 0);
    if (got < 0 || (got > 0 && (got < (ssize_t)sizeof record || memcmp(record, MAGIC, strlen(MAGIC)) != 0))) {
        fprintf(stderr, "matchfloor: %s is not a state file of matchfloor's\n", state_file);
        close(fd);
        return -1;
    }
    if (got == 0) {
        memset(record, 0, sizeof record);
        memcpy(record, MAGIC, strlen(MAGIC));
    }
    record[strlen(MAGIC)]++;
    int rc = pwrite(fd, record, sizeof record, 0) == (ssize_t)sizeof record && fdatasync(fd) == 0 ? 0 : -1;
    if (rc < 0) perror("matchfloor: the charge");
    close(fd);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--ask") == 0) {
        sd_bus *bus = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        long long started = monotonic_us();
        if (sd_bus_open_system(&bus) < 0) return 1;
        int rc = sd_bus_call_method(bus, FPRINT, "/net/reactivated/Fprint/Manager", MANAGER, "GetDevices", &error, &reply, NULL);
        sd_bus_message_unref(reply);
        sd_bus_error_free(&error);
        sd_bus_flush_close_unref(bus);
        printf("started_us: %lld\nelapsed_us: %lld\nresult: %s\n", started, monotonic_us() - started, rc < 0 ? "error" : "devices");
        return 0;
    }
    int rules = argc == 5 && strcmp(argv[1], "--rules") == 0;
    int enrolled = rules || (argc == 4 && strcmp(argv[1], "--enrolled") == 0);
    int skipped = rules ? 2 : enrolled;
    if (argc != 3 + skipped) {
        fprintf(stderr, "usage: matchfloor [--enrolled | --rules STATE_FILE] DEVICE_PATH USER\n");
        return 2;
    }
    const char *path = argv[1 + skipped], *user = argv[2 + skipped];
    struct outcome outcome = { "", 0 };
    sd_bus *bus = NULL;
    long long started = monotonic_us();
    if (sd_bus_open_system(&bus) < 0) {
        fprintf(stderr, "matchfloor: no system bus\n");
        return 1;
    }
    if (enrolled && !has_prints(bus, path, user)) {
        sd_bus_unref(bus);
        return 1;
    }
    if (rules) ask_logind(bus);
    if (sd_bus_match_signal_async(bus, NULL, FPRINT, path, DEVICE, "VerifyStatus", on_status, NULL, &outcome) < 0
        || call(bus, path, "Claim", "s", user) < 0 || (rules && charge(argv[2]) < 0)
        || call(bus, path, "VerifyStart", "s", "any") < 0) {
        sd_bus_unref(bus);
        return 1;
    }
    while (!outcome.done && pump(bus, 30 * 1000000ULL)) {}
    /* The stop and the release go out together (and logind is asked
     * meanwhile under the rules); both replies are waited for. */
    int replies = 0;
    if (sd_bus_call_method_async(bus, NULL, FPRINT, path, DEVICE, "VerifyStop", on_reply, &replies, NULL) < 0
        || sd_bus_call_method_async(bus, NULL, FPRINT, path, DEVICE, "Release", on_reply, &replies, NULL) < 0)
        replies = -1;
    if (rules) ask_logind(bus);
    while (replies >= 0 && replies < 2 && pump(bus, 30 * 1000000ULL)) {}
    long long elapsed = monotonic_us() - started;
    sd_bus_flush_close_unref(bus);
    printf("started_us: %lld\nelapsed_us: %lld\nresult: %s\n", started, elapsed, outcome.status[0] ? outcome.status : "none");
    return strcmp(outcome.status, "verify-match") == 0 ? 0 : 1;
}
