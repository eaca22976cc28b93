/* The recursion guard and the no-op fail delay (see system_shim.h). */
#include "system_shim.h"

static _Thread_local int la_passcode_depth;

void la_passcode_guard_enter(void) { la_passcode_depth++; }
void la_passcode_guard_leave(void) { if (la_passcode_depth > 0) la_passcode_depth--; }
int la_passcode_guard_active(void) { return la_passcode_depth > 0; }

static void la_noop_fail_delay(int retval, unsigned usec_delay, void *appdata_ptr) {
    (void)retval; (void)usec_delay; (void)appdata_ptr;
}

int la_set_noop_fail_delay(pam_handle_t *pamh) {
    return pam_set_item(pamh, PAM_FAIL_DELAY, (const void *)la_noop_fail_delay);
}
