// The SHA-256 wrappers of CCrypto.h over libcrypto's EVP interface (OpenSSL 3). libcrypto is loaded with dlopen
// when the first digest starts, not at process start: `mirror` needs it only for `scan`'s upload receiver, and
// loading it (and relocating it) cost every command about 2 MiB of memory and a millisecond of CPU.
#include "CCrypto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <openssl/evp.h>

// Debian's libssl3 soname for OpenSSL 3 (what libssl-dev's libcrypto.so points to).
#define CCR_LIBCRYPTO "libcrypto.so.3"

static struct {
    __typeof__(&EVP_MD_CTX_new) ctx_new;
    __typeof__(&EVP_MD_CTX_free) ctx_free;
    __typeof__(&EVP_MD_CTX_copy_ex) ctx_copy_ex;
    __typeof__(&EVP_sha256) sha256;
    __typeof__(&EVP_DigestInit_ex) init_ex;
    __typeof__(&EVP_DigestUpdate) update;
    __typeof__(&EVP_DigestFinal_ex) final_ex;
} evp;
static const char *load_error;  // NULL once every symbol is resolved

static void load(void) {
    void *lib = dlopen(CCR_LIBCRYPTO, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) { load_error = dlerror(); return; }
    evp.ctx_new = (__typeof__(evp.ctx_new))dlsym(lib, "EVP_MD_CTX_new");
    evp.ctx_free = (__typeof__(evp.ctx_free))dlsym(lib, "EVP_MD_CTX_free");
    evp.ctx_copy_ex = (__typeof__(evp.ctx_copy_ex))dlsym(lib, "EVP_MD_CTX_copy_ex");
    evp.sha256 = (__typeof__(evp.sha256))dlsym(lib, "EVP_sha256");
    evp.init_ex = (__typeof__(evp.init_ex))dlsym(lib, "EVP_DigestInit_ex");
    evp.update = (__typeof__(evp.update))dlsym(lib, "EVP_DigestUpdate");
    evp.final_ex = (__typeof__(evp.final_ex))dlsym(lib, "EVP_DigestFinal_ex");
    if (!evp.ctx_new || !evp.ctx_free || !evp.ctx_copy_ex || !evp.sha256 || !evp.init_ex || !evp.update || !evp.final_ex)
        load_error = CCR_LIBCRYPTO " lacks an EVP digest function";
}

const char *ccr_unavailable(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load);
    return load_error;
}

ccr_sha256 *ccr_sha256_new(void) {
    if (ccr_unavailable() != NULL) return NULL;
    EVP_MD_CTX *ctx = evp.ctx_new();
    if (ctx == NULL) return NULL;
    if (evp.init_ex(ctx, evp.sha256(), NULL) != 1) {
        evp.ctx_free(ctx);
        return NULL;
    }
    return (ccr_sha256 *)ctx;
}

// A context exists only after ccr_sha256_new loaded libcrypto, so the calls below need no check.
ccr_sha256 *ccr_sha256_copy(const ccr_sha256 *c) {
    EVP_MD_CTX *ctx = evp.ctx_new();
    if (ctx == NULL) return NULL;
    if (evp.ctx_copy_ex(ctx, (const EVP_MD_CTX *)c) != 1) {
        evp.ctx_free(ctx);
        return NULL;
    }
    return (ccr_sha256 *)ctx;
}

int ccr_sha256_update(ccr_sha256 *c, const void *bytes, size_t count) {
    if (count == 0) return 1;
    return evp.update((EVP_MD_CTX *)c, bytes, count);
}

int ccr_sha256_digest(const ccr_sha256 *c, uint8_t out[32]) {
    ccr_sha256 *copy = ccr_sha256_copy(c);
    if (copy == NULL) return 0;
    unsigned int length = 0;
    int ok = evp.final_ex((EVP_MD_CTX *)copy, out, &length);
    ccr_sha256_free(copy);
    return ok == 1 && length == 32;
}

void ccr_sha256_free(ccr_sha256 *c) { evp.ctx_free((EVP_MD_CTX *)c); }
