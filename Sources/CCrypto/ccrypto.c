// The SHA-256 wrappers of CCrypto.h over libcrypto's EVP interface (OpenSSL 3).
#include "CCrypto.h"

#include <openssl/evp.h>

ccr_sha256 *ccr_sha256_new(void) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) return NULL;
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return NULL;
    }
    return (ccr_sha256 *)ctx;
}

ccr_sha256 *ccr_sha256_copy(const ccr_sha256 *c) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) return NULL;
    if (EVP_MD_CTX_copy_ex(ctx, (const EVP_MD_CTX *)c) != 1) {
        EVP_MD_CTX_free(ctx);
        return NULL;
    }
    return (ccr_sha256 *)ctx;
}

int ccr_sha256_update(ccr_sha256 *c, const void *bytes, size_t count) {
    if (count == 0) return 1;
    return EVP_DigestUpdate((EVP_MD_CTX *)c, bytes, count);
}

int ccr_sha256_digest(const ccr_sha256 *c, uint8_t out[32]) {
    ccr_sha256 *copy = ccr_sha256_copy(c);
    if (copy == NULL) return 0;
    unsigned int length = 0;
    int ok = EVP_DigestFinal_ex((EVP_MD_CTX *)copy, out, &length);
    ccr_sha256_free(copy);
    return ok == 1 && length == 32;
}

void ccr_sha256_free(ccr_sha256 *c) { EVP_MD_CTX_free((EVP_MD_CTX *)c); }
