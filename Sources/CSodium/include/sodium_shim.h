/* libsodium, for the secrets only (the helper's store; never the PAM
 * module): its AEAD, its random source and its password hash, called as
 * they are; the constants below are macros Swift cannot import. */
#ifndef LOCALAUTH_SODIUM_SHIM_H
#define LOCALAUTH_SODIUM_SHIM_H
#include <sodium.h>

static inline size_t la_aead_key_bytes(void) { return crypto_aead_xchacha20poly1305_ietf_KEYBYTES; }
static inline size_t la_aead_nonce_bytes(void) { return crypto_aead_xchacha20poly1305_ietf_NPUBBYTES; }
static inline size_t la_aead_tag_bytes(void) { return crypto_aead_xchacha20poly1305_ietf_ABYTES; }

#endif
