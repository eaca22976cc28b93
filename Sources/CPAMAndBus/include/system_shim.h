/*
 * The libpam, sd-bus and sd-login declarations the adapters need. Only
 * one-line wrappers live here, for variadic functions that Swift cannot
 * call, plus the two things Swift cannot write itself: a thread-local
 * recursion guard and a C callback for PAM_FAIL_DELAY. Linking (-lpam,
 * -lsystemd) is declared by the targets that call these, not here.
 */
#ifndef LOCALAUTH_SYSTEM_SHIM_H
#define LOCALAUTH_SYSTEM_SHIM_H

#include <security/pam_appl.h>
#include <security/pam_modules.h>
#include <security/pam_ext.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-login.h>
#include <syslog.h>

/* sd-bus method calls and reads are variadic: one wrapper per signature used. */
static inline int la_bus_call(sd_bus *bus, const char *destination, const char *path, const char *interface,
                              const char *member, sd_bus_error *error, sd_bus_message **reply) {
    return sd_bus_call_method(bus, destination, path, interface, member, error, reply, "");
}
static inline int la_bus_call_s(sd_bus *bus, const char *destination, const char *path, const char *interface,
                                const char *member, const char *argument, sd_bus_error *error, sd_bus_message **reply) {
    return sd_bus_call_method(bus, destination, path, interface, member, error, reply, "s", argument);
}
static inline int la_bus_call_ss(sd_bus *bus, const char *destination, const char *path, const char *interface,
                                 const char *member, const char *first, const char *second, sd_bus_error *error,
                                 sd_bus_message **reply) {
    return sd_bus_call_method(bus, destination, path, interface, member, error, reply, "ss", first, second);
}
static inline int la_bus_call_async(sd_bus *bus, sd_bus_slot **slot, const char *destination, const char *path,
                                    const char *interface, const char *member, sd_bus_message_handler_t callback,
                                    void *userdata) {
    return sd_bus_call_method_async(bus, slot, destination, path, interface, member, callback, userdata, "");
}
static inline int la_bus_call_async_s(sd_bus *bus, sd_bus_slot **slot, const char *destination, const char *path,
                                      const char *interface, const char *member, sd_bus_message_handler_t callback,
                                      void *userdata, const char *argument) {
    return sd_bus_call_method_async(bus, slot, destination, path, interface, member, callback, userdata, "s", argument);
}
static inline int la_bus_call_async_ss(sd_bus *bus, sd_bus_slot **slot, const char *destination, const char *path,
                                       const char *interface, const char *member, sd_bus_message_handler_t callback,
                                       void *userdata, const char *first, const char *second) {
    return sd_bus_call_method_async(bus, slot, destination, path, interface, member, callback, userdata, "ss", first, second);
}
static inline int la_bus_read_variant_s(sd_bus_message *message, const char **value) {
    return sd_bus_message_read(message, "v", "s", value);
}
static inline int la_bus_read_s(sd_bus_message *message, const char **value) {
    return sd_bus_message_read(message, "s", value);
}
static inline int la_bus_read_o(sd_bus_message *message, const char **value) {
    return sd_bus_message_read(message, "o", value);
}
static inline int la_bus_read_variant_b(sd_bus_message *message, int *value) {
    return sd_bus_message_read(message, "v", "b", value);
}
static inline int la_bus_read_variant_so(sd_bus_message *message, const char **name, const char **path) {
    return sd_bus_message_read(message, "v", "(so)", name, path);
}
static inline int la_bus_read_variant_uo(sd_bus_message *message, uint32_t *number, const char **path) {
    return sd_bus_message_read(message, "v", "(uo)", number, path);
}
static inline int la_bus_read_sb(sd_bus_message *message, const char **text, int *flag) {
    return sd_bus_message_read(message, "sb", text, flag);
}
static inline int la_bus_read_sss(sd_bus_message *message, const char **a, const char **b, const char **c) {
    return sd_bus_message_read(message, "sss", a, b, c);
}
/* One entry of logind's ListSessions: (id, uid, user, seat, path). */
static inline int la_bus_read_session_entry(sd_bus_message *message, const char **id, uint32_t *uid,
                                            const char **user, const char **seat, const char **path) {
    return sd_bus_message_read(message, "(susso)", id, uid, user, seat, path);
}

/* pam_syslog is variadic; the message is always passed as data, never as a format. */
static inline void la_pam_syslog(const pam_handle_t *pamh, int priority, const char *message) {
    pam_syslog(pamh, priority, "%s", message);
}

/*
 * Recursion guard for the nested password transaction. A thread-local
 * counter: Swift cannot declare thread-locals, and PAM calls on one thread
 * are synchronous, so an instance of the module reached inside the inner
 * transaction runs on the thread that started it.
 */
void la_passcode_guard_enter(void);
void la_passcode_guard_leave(void);
int la_passcode_guard_active(void);

/* Gives a PAM handle a PAM_FAIL_DELAY callback that does nothing. */
int la_set_noop_fail_delay(pam_handle_t *pamh);

#endif
