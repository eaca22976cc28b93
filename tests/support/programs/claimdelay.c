/*
 * Test instrumentation (LD_PRELOAD into the harness only): holds the
 * module's Claim call (sent waiting or not) until DIR/go exists,
 * announcing DIR/claim-entered.
 * It stands in for a user who SIGSTOPs their own sudo between the module's
 * signal subscription and its Claim, so that another session's fingerprint
 * verdict is broadcast in between.
 */
#define _GNU_SOURCE
#include <systemd/sd-bus.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void hold_claim(const char *member) {
    const char *dir = getenv("CLAIM_DELAY_DIR");
    if (dir && member && strcmp(member, "Claim") == 0) {
        char flag[512];
        snprintf(flag, sizeof flag, "%s/claim-entered", dir);
        close(open(flag, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
        snprintf(flag, sizeof flag, "%s/go", dir);
        for (int tries = 0; tries < 3000 && access(flag, F_OK) != 0; tries++) usleep(10000);
    }
}

int sd_bus_call_method(sd_bus *bus, const char *destination, const char *path, const char *interface,
                       const char *member, sd_bus_error *error, sd_bus_message **reply, const char *types, ...) {
    hold_claim(member);
    va_list arguments;
    va_start(arguments, types);
    int result = sd_bus_call_methodv(bus, destination, path, interface, member, error, reply, types, arguments);
    va_end(arguments);
    return result;
}

int sd_bus_call_method_async(sd_bus *bus, sd_bus_slot **slot, const char *destination, const char *path,
                             const char *interface, const char *member, sd_bus_message_handler_t callback,
                             void *userdata, const char *types, ...) {
    hold_claim(member);
    va_list arguments;
    va_start(arguments, types);
    int result = sd_bus_call_method_asyncv(bus, slot, destination, path, interface, member, callback, userdata, types,
                                           arguments);
    va_end(arguments);
    return result;
}
