// CCrypto: libcrypto's SHA-256 (Debian libssl-dev), through its EVP digest interface, as fixed-argument
// functions over an opaque context, so that Swift needs neither OpenSSL's headers nor its macros.
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

#endif
