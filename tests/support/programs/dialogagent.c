/*
 * A polkit agent on libpolkit-agent-1 that behaves as GNOME Shell's
 * administrator dialog does (js/ui/components/polkitAgent.js, GNOME 43):
 *
 *  - a request only shows the password entry; the agent keeps running its
 *    main loop (the session's verdict is read while the prompt is up);
 *  - OK is insensitive while the entry is empty: an empty answer is never
 *    sent;
 *  - a message from the helper (show-info, show-error) clears the entry;
 *  - completed(TRUE) closes the dialog; completed(FALSE) says "Sorry, that
 *    didn't work" and starts a new session (a new helper), without limit;
 *  - Cancel dismisses the dialog: polkitd then refuses.
 *
 * GNOME Shell itself cannot run in the test suite; this stand-in is built
 * under the name gnome-shell, which is what the module sees of its agent.
 *
 * It registers, as pkttyagent does, for one process (--process PID) and
 * reads its person from standard input, one line at a time:
 *   type TEXT   appends TEXT to the entry
 *   ok          presses OK (ignored while the entry is empty)
 *   cancel      presses Cancel
 * and prints what the dialog shows, one line each, on standard output.
 */
#define POLKIT_AGENT_I_KNOW_API_IS_SUBJECT_TO_CHANGE
#include <polkitagent/polkitagent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    PolkitAgentListener parent;
} DialogAgent;
typedef struct {
    PolkitAgentListenerClass parent_class;
} DialogAgentClass;

G_DEFINE_TYPE(DialogAgent, dialog_agent, POLKIT_AGENT_TYPE_LISTENER)

/* The one dialog up (the stand-in shows one at a time). */
static struct {
    GTask *task;
    PolkitIdentity *identity;
    gchar *cookie;
    PolkitAgentSession *session;
    GString *entry;
    gboolean prompting;
} dialog;

static void say(const char *what, const char *text) {
    printf("%s%s%s\n", what, text ? " " : "", text ? text : "");
    fflush(stdout);
}

static void start_session(void);

static void close_dialog(GError *error) {
    GTask *task = dialog.task;
    if (dialog.session) g_object_unref(dialog.session);
    dialog.session = NULL;
    g_clear_object(&dialog.identity);
    g_clear_pointer(&dialog.cookie, g_free);
    g_string_truncate(dialog.entry, 0);
    dialog.prompting = FALSE;
    dialog.task = NULL;
    say("DIALOG-CLOSED", NULL);
    if (error) g_task_return_error(task, error);
    else g_task_return_boolean(task, TRUE);
    g_object_unref(task);
}

static void on_request(PolkitAgentSession *session, const gchar *request, gboolean echo_on, gpointer data) {
    (void)session; (void)echo_on; (void)data;
    dialog.prompting = TRUE;
    say("REQUEST", request);
}

static void on_message(PolkitAgentSession *session, const gchar *text, gpointer data) {
    (void)session;
    say(data ? "ERROR" : "INFO", text);
    /* GNOME Shell clears the entry on every message. */
    if (dialog.entry->len) say("ENTRY-CLEARED", NULL);
    g_string_truncate(dialog.entry, 0);
}

static void on_completed(PolkitAgentSession *session, gboolean gained, gpointer data) {
    (void)session; (void)data;
    say("COMPLETED", gained ? "TRUE" : "FALSE");
    if (gained) {
        close_dialog(NULL);
        return;
    }
    say("SORRY", "Sorry, that didn't work. Please try again.");
    g_object_unref(dialog.session);
    dialog.session = NULL;
    dialog.prompting = FALSE;
    g_string_truncate(dialog.entry, 0);
    start_session();
}

static void start_session(void) {
    dialog.session = polkit_agent_session_new(dialog.identity, dialog.cookie);
    g_signal_connect(dialog.session, "request", G_CALLBACK(on_request), NULL);
    g_signal_connect(dialog.session, "show-info", G_CALLBACK(on_message), NULL);
    g_signal_connect(dialog.session, "show-error", G_CALLBACK(on_message), (gpointer)1);
    g_signal_connect(dialog.session, "completed", G_CALLBACK(on_completed), NULL);
    polkit_agent_session_initiate(dialog.session);
}

static void initiate(PolkitAgentListener *listener, const gchar *action_id, const gchar *message, const gchar *icon_name,
                     PolkitDetails *details, const gchar *cookie, GList *identities, GCancellable *cancellable,
                     GAsyncReadyCallback callback, gpointer user_data) {
    (void)icon_name; (void)details; (void)cancellable;
    GTask *task = g_task_new(listener, NULL, callback, user_data);
    if (dialog.task || identities == NULL) {
        g_task_return_new_error(task, POLKIT_ERROR, POLKIT_ERROR_FAILED, "a dialog is already up");
        g_object_unref(task);
        return;
    }
    dialog.task = task;
    dialog.identity = g_object_ref(identities->data);
    dialog.cookie = g_strdup(cookie);
    say("DIALOG", action_id);
    say("MESSAGE", message);
    start_session();
}

static gboolean initiate_finish(PolkitAgentListener *listener, GAsyncResult *result, GError **error) {
    (void)listener;
    return g_task_propagate_boolean(G_TASK(result), error);
}

static void dialog_agent_init(DialogAgent *agent) { (void)agent; }

static void dialog_agent_class_init(DialogAgentClass *klass) {
    PolkitAgentListenerClass *listener = POLKIT_AGENT_LISTENER_CLASS(klass);
    listener->initiate_authentication = initiate;
    listener->initiate_authentication_finish = initiate_finish;
}

static gboolean on_input(GIOChannel *channel, GIOCondition condition, gpointer data) {
    (void)condition; (void)data;
    gchar *line = NULL;
    gsize length = 0;
    GIOStatus status = g_io_channel_read_line(channel, &line, &length, NULL, NULL);
    if (status == G_IO_STATUS_EOF || status == G_IO_STATUS_ERROR) exit(0);
    if (line == NULL) return TRUE;
    g_strchomp(line);
    if (g_str_has_prefix(line, "type ")) {
        g_string_append(dialog.entry, line + 5);
    } else if (strcmp(line, "ok") == 0) {
        if (!dialog.session || !dialog.prompting) say("OK-IGNORED", "no prompt");
        else if (dialog.entry->len == 0) say("OK-IGNORED", "the entry is empty");
        else {
            dialog.prompting = FALSE;
            polkit_agent_session_response(dialog.session, dialog.entry->str);
            memset(dialog.entry->str, 0, dialog.entry->len);
            g_string_truncate(dialog.entry, 0);
            say("ANSWERED", NULL);
        }
    } else if (strcmp(line, "cancel") == 0 && dialog.task) {
        PolkitAgentSession *session = dialog.session;
        dialog.session = NULL;
        if (session) {
            g_signal_handlers_disconnect_by_func(session, on_completed, NULL);
            polkit_agent_session_cancel(session);
            g_object_unref(session);
        }
        close_dialog(g_error_new(POLKIT_ERROR, POLKIT_ERROR_CANCELLED, "Request dismissed"));
    }
    g_free(line);
    return TRUE;
}

int main(int argc, char **argv) {
    if (argc != 3 || strcmp(argv[1], "--process") != 0) {
        fprintf(stderr, "usage: %s --process PID\n", argv[0]);
        return 2;
    }
    dialog.entry = g_string_new(NULL);
    PolkitSubject *subject = polkit_unix_process_new_for_owner(atoi(argv[2]), 0, getuid());
    PolkitAgentListener *listener = g_object_new(dialog_agent_get_type(), NULL);
    GError *error = NULL;
    gpointer registration = polkit_agent_listener_register(listener, POLKIT_AGENT_REGISTER_FLAGS_NONE, subject, NULL, NULL, &error);
    if (!registration) {
        fprintf(stderr, "cannot register: %s\n", error->message);
        return 1;
    }
    say("REGISTERED", NULL);
    GIOChannel *input = g_io_channel_unix_new(0);
    g_io_add_watch(input, G_IO_IN | G_IO_HUP | G_IO_ERR, on_input, NULL);
    g_main_loop_run(g_main_loop_new(NULL, FALSE));
    return 0;
}
