/*
 * gdmworker: runs one PAM conversation the way GDM 43's gdm-session-worker
 * does, for the GNOME tests (tests/desktop/test_gnome.py).
 *
 *   gdmworker SERVICE USER [ANSWER]
 *
 * As gdm-session-worker: pam_start(SERVICE, USER) with PAM_TTY "/dev/tty1"
 * (its initial VT, not the process's terminal) and no PAM_RHOST, PAM_RUSER or
 * PAM_XDISPLAY; pam_authenticate with no flags; a second thread alive (its
 * D-Bus thread); SIGTERM ends the process at once (_exit(0)), which is how
 * GDM ends a conversation that lost (it kills the worker).
 * The conversation: each message is printed as "info: TEXT" or "error:
 * TEXT", flushed, and returns at once (GDM relays them and does not wait). A
 * prompt is printed as "prompt: TEXT"; with ANSWER it is answered (the
 * password conversation, once); without one it waits until the process is
 * killed, as gnome-shell never answers the fingerprint conversation's
 * prompts. Then "result: CODE" and pam_end.
 */
#define _GNU_SOURCE
#include <security/pam_appl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *answer;

static void on_sigterm(int signo) {
    (void)signo;
    _exit(0);
}

static void *dbus_thread(void *unused) {
    (void)unused;
    for (;;) pause();
    return NULL;
}

static int converse(int count, const struct pam_message **messages, struct pam_response **responses, void *data) {
    (void)data;
    struct pam_response *replies = calloc((size_t)count, sizeof *replies);
    if (!replies) return PAM_BUF_ERR;
    for (int i = 0; i < count; i++) {
        const struct pam_message *message = messages[i];
        switch (message->msg_style) {
        case PAM_TEXT_INFO: printf("info: %s\n", message->msg); break;
        case PAM_ERROR_MSG: printf("error: %s\n", message->msg); break;
        default:
            printf("prompt: %s\n", message->msg);
            fflush(stdout);
            if (!answer) {
                for (;;) pause();   /* nobody answers: until GDM kills the worker */
            }
            replies[i].resp = strdup(answer);
            answer = NULL;          /* one answer, as a person types one */
            break;
        }
        fflush(stdout);
    }
    *responses = replies;
    return PAM_SUCCESS;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: gdmworker SERVICE USER [ANSWER]\n");
        return 2;
    }
    answer = argc == 4 ? argv[3] : NULL;
    signal(SIGTERM, on_sigterm);
    pthread_t thread;
    if (pthread_create(&thread, NULL, dbus_thread, NULL) != 0) return 2;
    struct pam_conv conversation = {converse, NULL};
    pam_handle_t *handle = NULL;
    int status = pam_start(argv[1], argv[2], &conversation, &handle);
    if (status == PAM_SUCCESS) status = pam_set_item(handle, PAM_TTY, "/dev/tty1");
    if (status == PAM_SUCCESS) status = pam_authenticate(handle, 0);
    printf("result: %d\n", status);
    fflush(stdout);
    if (handle) pam_end(handle, status);
    _exit(0);
}
