/*
 * fakehelper: stands in for localauth-helper in the tests of the module's
 * client side, misbehaving in the way named by the root-owned file
 * "fake-mode" beside it. Installed setuid root (so the module starts it);
 * it never uses the privilege. Each waits for the client to close the
 * socket before it exits, so none outlives its client.
 *
 *   exit0          exit 0 at once, saying nothing
 *   silent         say nothing (the client's HELLO deadline ends it)
 *   garbage        answer HELLO with random bytes
 *   forged         send a success RESULT before any HELLO
 *   hang           HELLO (1 s silence announced), read the request, then nothing
 *   oversized      HELLO, then a frame header claiming 1 MiB
 *   unknown        HELLO, then a frame of an unknown type
 *   nomethod       HELLO, then a "success" RESULT that does not say how
 *   truncated      HELLO, then half a RESULT and exit
 *   success-exit1  HELLO, a valid fingerprint success RESULT, then exit 1
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put(const void *bytes, size_t count) {
    if (write(0, bytes, count) != (ssize_t)count) _exit(9);
}

static void frame(uint8_t type, const uint8_t *payload, uint32_t length) {
    uint8_t header[5] = {type, (uint8_t)(length >> 24), (uint8_t)(length >> 16), (uint8_t)(length >> 8), (uint8_t)length};
    put(header, 5);
    if (length) put(payload, length);
}

static void skip_frame(void) {
    uint8_t header[5];
    if (read(0, header, 5) != 5) _exit(8);
    uint32_t length = (uint32_t)header[1] << 24 | (uint32_t)header[2] << 16 | (uint32_t)header[3] << 8 | header[4];
    uint8_t buffer[4096];
    while (length > 0) {
        ssize_t got = read(0, buffer, length < sizeof buffer ? length : sizeof buffer);
        if (got <= 0) _exit(8);
        length -= (uint32_t)got;
    }
}

/* Waits until the client closes the socket: a stand-in never outlives it. */
static int until_closed(void) {
    uint8_t buffer[256];
    while (read(0, buffer, sizeof buffer) > 0) {}
    return 0;
}

static void hello(void) {
    static const uint8_t payload[] = {'L', 'A', 'H', 1, 0, 0, 0x03, 0xE8};  /* 1000 ms */
    skip_frame();
    frame(0x01, payload, sizeof payload);
    skip_frame();  /* the request */
}

int main(int argc, char **argv) {
    (void)argc;
    char path[4096], mode[64] = "";
    snprintf(path, sizeof path, "%s", argv[0]);
    char *slash = strrchr(path, '/');
    if (!slash) return 7;
    snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "fake-mode");
    FILE *file = fopen(path, "r");
    if (!file || !fgets(mode, sizeof mode, file)) return 7;
    fclose(file);
    mode[strcspn(mode, "\n")] = 0;

    /* status evaluated, PAM 0, no error, method biometry, no delay */
    static const uint8_t success[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0};
    static const uint8_t no_method[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    /* status 4 (a secret action handled), PAM 0: well-formed, and no grant for a PAM prompt */
    static const uint8_t secret_handled[] = {4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    if (!strcmp(mode, "exit0")) return 0;
    if (!strcmp(mode, "silent")) return until_closed();
    if (!strcmp(mode, "forged")) { frame(0x30, success, sizeof success); return until_closed(); }
    if (!strcmp(mode, "garbage")) {
        skip_frame();
        uint8_t noise[64];
        for (size_t i = 0; i < sizeof noise; i++) noise[i] = (uint8_t)(i * 37 + 11);
        put(noise, sizeof noise);
        return until_closed();
    }
    hello();
    if (!strcmp(mode, "hang")) return until_closed();
    if (!strcmp(mode, "oversized")) { uint8_t header[5] = {0x10, 0, 0x10, 0, 0}; put(header, 5); return until_closed(); }
    if (!strcmp(mode, "unknown")) { frame(0x7E, success, sizeof success); return until_closed(); }
    if (!strcmp(mode, "nomethod")) { frame(0x30, no_method, sizeof no_method); return until_closed(); }
    if (!strcmp(mode, "secrethandled")) { frame(0x30, secret_handled, sizeof secret_handled); return until_closed(); }
    if (!strcmp(mode, "truncated")) { uint8_t header[5] = {0x30, 0, 0, 0, 11}; put(header, 5); put(success, 5); return 0; }
    if (!strcmp(mode, "success-exit1")) { frame(0x30, success, sizeof success); return 1; }
    return 7;
}
