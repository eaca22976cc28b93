/* The machine key sealed to a TPM 2.0 (the secrets' helper only; never the
 * PAM module). tpm2-tss is loaded when first needed (dlopen), so that one
 * package runs on every release whatever its tpm2-tss, and a machine
 * without the libraries simply has no TPM. The connection is named by the
 * caller (the administrator's configuration): never the environment. */
#ifndef LOCALAUTH_TPM_SEAL_H
#define LOCALAUTH_TPM_SEAL_H
#include <stddef.h>

/* How a seal or an unseal ended. */
enum {
    LA_TPM_DONE = 0,
    /* No TPM to ask: the libraries are missing, the device cannot be opened,
       or the connection failed. Nothing was decided about the blob. */
    LA_TPM_UNREACHABLE = 1,
    /* The TPM answered that the blob is not one of its own (another TPM, or
       this one cleared since): it will never open here. */
    LA_TPM_NOT_ITS_OWN = 2,
    /* The blob is not a sealed key of ours (size, header). */
    LA_TPM_BAD_BLOB = 3,
    /* Anything else the TPM or the library refused (busy, locked out,
       out of memory): try again later; nothing is decided. */
    LA_TPM_FAILED = 4,
};

/* The most a sealed blob takes. */
#define LA_TPM_BLOB_MAX 1024

/* Seals `key` (at most 64 bytes) to the TPM that `tcti` ("device" or
 * "swtpm") with `config` (a device path, or "host=...,port=...") reaches:
 * an object under the owner hierarchy's storage key, whose sealed part
 * crosses the bus encrypted. The blob goes to `blob`. */
int la_tpm_seal(const char *tcti, const char *config, const unsigned char *key, size_t key_length,
                unsigned char *blob, size_t blob_capacity, size_t *blob_length);

/* Opens a blob `la_tpm_seal` made into `key`, wiping what it leaves. */
int la_tpm_unseal(const char *tcti, const char *config, const unsigned char *blob, size_t blob_length,
                  unsigned char *key, size_t key_capacity, size_t *key_length);

#endif
