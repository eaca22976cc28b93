/* libsodium, for the secrets only (the helper's store; never the PAM
 * module): its AEAD, its random source and its password hash, called as
 * they are; the constants below are macros Swift cannot import. */
#ifndef LOCALAUTH_SODIUM_SHIM_H
#define LOCALAUTH_SODIUM_SHIM_H
#include <sodium.h>

static inline size_t la_aead_key_bytes(void) { return crypto_aead_xchacha20poly1305_ietf_KEYBYTES; }
static inline size_t la_aead_nonce_bytes(void) { return crypto_aead_xchacha20poly1305_ietf_NPUBBYTES; }
static inline size_t la_aead_tag_bytes(void) { return crypto_aead_xchacha20poly1305_ietf_ABYTES; }
/* Argon2id (the algorithm's id is a macro). */
static inline int la_argon2id(unsigned char *out, unsigned long long out_length, const char *password, unsigned long long password_length, const unsigned char *salt, unsigned long long passes, size_t memory) { return crypto_pwhash(out, out_length, password, password_length, salt, passes, memory, crypto_pwhash_ALG_ARGON2ID13); }

#endif
