/*
 * matchfloor: the least a program can do to get one fingerprint match from
 * fprintd, for tools/bench.py: the floor that a PAM module's match is
 * measured against on the same rig, so that the module's own cost is the
 * difference and not the rig's noise.
 *
 *   matchfloor [--enrolled] DEVICE_PATH USER   (DBUS_SYSTEM_BUS_ADDRESS as usual)
 *   matchfloor --ask
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>

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
    int enrolled = argc == 4 && strcmp(argv[1], "--enrolled") == 0;
    if (argc != 3 + enrolled) {
        fprintf(stderr, "usage: matchfloor [--enrolled] DEVICE_PATH USER\n");
        return 2;
    }
    const char *path = argv[1 + enrolled], *user = argv[2 + enrolled];
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
    if (sd_bus_match_signal_async(bus, NULL, FPRINT, path, DEVICE, "VerifyStatus", on_status, NULL, &outcome) < 0
        || call(bus, path, "Claim", "s", user) < 0 || call(bus, path, "VerifyStart", "s", "any") < 0) {
        sd_bus_unref(bus);
        return 1;
    }
    while (!outcome.done) {
        int rc = sd_bus_process(bus, NULL);
        if (rc < 0) break;
        if (rc == 0 && sd_bus_wait(bus, 30 * 1000000ULL) <= 0) break;
    }
    /* The stop and the release go out together; both replies are waited for. */
    int replies = 0;
    if (sd_bus_call_method_async(bus, NULL, FPRINT, path, DEVICE, "VerifyStop", on_reply, &replies, NULL) < 0
        || sd_bus_call_method_async(bus, NULL, FPRINT, path, DEVICE, "Release", on_reply, &replies, NULL) < 0)
        replies = -1;
    while (replies >= 0 && replies < 2) {
        int rc = sd_bus_process(bus, NULL);
        if (rc < 0) break;
        if (rc == 0 && sd_bus_wait(bus, 30 * 1000000ULL) <= 0) break;
    }
    long long elapsed = monotonic_us() - started;
    sd_bus_flush_close_unref(bus);
    printf("started_us: %lld\nelapsed_us: %lld\nresult: %s\n", started, elapsed, outcome.status[0] ? outcome.status : "none");
    return strcmp(outcome.status, "verify-match") == 0 ? 0 : 1;
}
