/*
 * pam_localauth.so entry points. Each forwards to the Swift implementation;
 * the version script (pam_localauth.map) exports these three and nothing else.
 */
#define PAM_SM_AUTH
#define PAM_SM_ACCOUNT
#include <security/pam_modules.h>
#include <sys/random.h>
#include <errno.h>
#include <stddef.h>

int localauth_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv);
int localauth_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv);
int localauth_acct_mgmt(pam_handle_t *pamh, int flags, int argc, const char **argv);

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    return localauth_authenticate(pamh, flags, argc, argv);
}

PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    return localauth_setcred(pamh, flags, argc, argv);
}

PAM_EXTERN int pam_sm_acct_mgmt(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    return localauth_acct_mgmt(pamh, flags, argc, argv);
}

/*
 * Embedded Swift's hashing seeds itself with arc4random_buf, which glibc has
 * only from 2.36 on; this local definition over getrandom(2) removes that
 * requirement. Not exported (version script).
 */
void arc4random_buf(void *buffer, size_t size) {
    unsigned char *bytes = buffer;
    while (size > 0) {
        ssize_t got = getrandom(bytes, size, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            __builtin_trap();
        }
        bytes += got;
        size -= (size_t)got;
    }
}
