/*
 * Test password module: pam_matrix's check (a passdb of user:password:service
 * lines) without pam_matrix's wipe of PAM_AUTHTOK, as pam_unix leaves it.
 * The authsucc line checks the token again through the passcode service,
 * which a wiped token cannot pass; this module lets the tests show both a
 * reset after the right password and none after a wrong one. Test use only.
 */
#define _GNU_SOURCE
#include <security/pam_modules.h>
#include <security/pam_ext.h>
#include <stdio.h>
#include <string.h>

static int password_matches(const char *passdb, const char *user, const char *password) {
    FILE *file = fopen(passdb, "re");
    if (!file) return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, file)) {
        char *name = strtok(line, ":\n");
        char *secret = strtok(NULL, ":\n");
        found = name && secret && strcmp(name, user) == 0 && strcmp(secret, password) == 0;
    }
    fclose(file);
    return found;
}

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void) flags;
    const char *passdb = NULL;
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], "passdb=", 7) == 0) passdb = argv[i] + 7;
    const char *user = NULL, *token = NULL;
    if (!passdb || pam_get_user(pamh, &user, NULL) != PAM_SUCCESS || !user) return PAM_AUTHINFO_UNAVAIL;
    if (pam_get_authtok(pamh, PAM_AUTHTOK, &token, NULL) != PAM_SUCCESS || !token) return PAM_AUTHINFO_UNAVAIL;
    return password_matches(passdb, user, token) ? PAM_SUCCESS : PAM_AUTH_ERR;
}

PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void) pamh; (void) flags; (void) argc; (void) argv;
    return PAM_SUCCESS;
}
