// CCrypto: libcrypto's SHA-256, AES-CMAC and one-block AES-128 (Debian libssl-dev), through its EVP digest and EVP MAC interfaces, as
// fixed-argument functions over an opaque context, so that Swift needs neither OpenSSL's headers nor its macros.
#ifndef CCRYPTO_H
#define CCRYPTO_H

#include <stddef.h>
#include <stdint.h>

/// A SHA-256 computation in progress (an EVP_MD_CTX).
typedef struct ccr_sha256 ccr_sha256;

/// NULL when libcrypto is loaded (dlopen, on the first call), else why it cannot be: dlerror's text.
const char *ccr_unavailable(void);

/// A new context with nothing fed yet; NULL when out of memory or libcrypto cannot be loaded (ccr_unavailable).
ccr_sha256 *ccr_sha256_new(void);

/// A new context in the same state as `c`; NULL when out of memory.
ccr_sha256 *ccr_sha256_copy(const ccr_sha256 *c);

/// Feeds `count` bytes; returns 1 on success, 0 on failure.
int ccr_sha256_update(ccr_sha256 *c, const void *bytes, size_t count);

/// Writes the 32-byte digest of everything fed so far to `out`, finalizing a copy so that `c` stays usable;
/// returns 1 on success, 0 on failure.
int ccr_sha256_digest(const ccr_sha256 *c, uint8_t out[32]);

void ccr_sha256_free(ccr_sha256 *c);

/// AES-128-CMAC (RFC 4493) of `count` bytes under the 16-byte `key`, written to `out` in the order CMAC produces
/// it (the GATT Database Hash, Core Spec 5.4 Vol 3 Part G §7.3); returns 1 on success, 0 on failure
/// (ccr_unavailable says when libcrypto cannot be loaded).
int ccr_aes_cmac(const uint8_t key[16], const void *bytes, size_t count, uint8_t out[16]);

/// AES-128 of one 16-byte block under the 16-byte `key` (ECB, no padding): the security function e (Core Spec 5.4
/// Vol 3 Part H §2.2.1), bytes in the order given; returns 1 on success, 0 on failure (ccr_unavailable says why).
int ccr_aes128_encrypt_block(const uint8_t key[16], const uint8_t in[16], uint8_t out[16]);

#endif
