// The SHA-256 and AES-CMAC wrappers of CCrypto.h over libcrypto's EVP interfaces (OpenSSL 3). libcrypto is loaded with dlopen
// when the first digest starts, not at process start: `mirror` needs it only for `scan`'s upload receiver, and
// loading it (and relocating it) cost every command about 2 MiB of memory and a millisecond of CPU.
#include "CCrypto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

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
    __typeof__(&EVP_MAC_fetch) mac_fetch;
    __typeof__(&EVP_MAC_free) mac_free;
    __typeof__(&EVP_MAC_CTX_new) mac_ctx_new;
    __typeof__(&EVP_MAC_CTX_free) mac_ctx_free;
    __typeof__(&EVP_MAC_init) mac_init;
    __typeof__(&EVP_MAC_update) mac_update;
    __typeof__(&EVP_MAC_final) mac_final;
    __typeof__(&OSSL_PARAM_construct_utf8_string) param_utf8;
    __typeof__(&OSSL_PARAM_construct_end) param_end;
    __typeof__(&EVP_CIPHER_CTX_new) cipher_ctx_new;
    __typeof__(&EVP_CIPHER_CTX_free) cipher_ctx_free;
    __typeof__(&EVP_aes_128_ecb) aes_128_ecb;
    __typeof__(&EVP_EncryptInit_ex) encrypt_init;
    __typeof__(&EVP_CIPHER_CTX_set_padding) set_padding;
    __typeof__(&EVP_EncryptUpdate) encrypt_update;
} evp;
static const char *load_error;  // NULL once every symbol is resolved

static void load(void) {
    void *lib = dlopen(CCR_LIBCRYPTO, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) { load_error = dlerror(); return; }
    // No cleanup at exit: mirror exits from a task while its loop thread may still hold libcrypto's per-thread state,
    // and OPENSSL_cleanup (an atexit handler) racing that thread's own destructor freed it twice ("double free or
    // corruption", seen once in the VM). The process's end frees everything anyway (OPENSSL_init_crypto(3)).
    __typeof__(&OPENSSL_init_crypto) init = (__typeof__(init))dlsym(lib, "OPENSSL_init_crypto");
    if (init != NULL) init(OPENSSL_INIT_NO_ATEXIT, NULL);
    evp.ctx_new = (__typeof__(evp.ctx_new))dlsym(lib, "EVP_MD_CTX_new");
    evp.ctx_free = (__typeof__(evp.ctx_free))dlsym(lib, "EVP_MD_CTX_free");
    evp.ctx_copy_ex = (__typeof__(evp.ctx_copy_ex))dlsym(lib, "EVP_MD_CTX_copy_ex");
    evp.sha256 = (__typeof__(evp.sha256))dlsym(lib, "EVP_sha256");
    evp.init_ex = (__typeof__(evp.init_ex))dlsym(lib, "EVP_DigestInit_ex");
    evp.update = (__typeof__(evp.update))dlsym(lib, "EVP_DigestUpdate");
    evp.final_ex = (__typeof__(evp.final_ex))dlsym(lib, "EVP_DigestFinal_ex");
    evp.mac_fetch = (__typeof__(evp.mac_fetch))dlsym(lib, "EVP_MAC_fetch");
    evp.mac_free = (__typeof__(evp.mac_free))dlsym(lib, "EVP_MAC_free");
    evp.mac_ctx_new = (__typeof__(evp.mac_ctx_new))dlsym(lib, "EVP_MAC_CTX_new");
    evp.mac_ctx_free = (__typeof__(evp.mac_ctx_free))dlsym(lib, "EVP_MAC_CTX_free");
    evp.mac_init = (__typeof__(evp.mac_init))dlsym(lib, "EVP_MAC_init");
    evp.mac_update = (__typeof__(evp.mac_update))dlsym(lib, "EVP_MAC_update");
    evp.mac_final = (__typeof__(evp.mac_final))dlsym(lib, "EVP_MAC_final");
    evp.param_utf8 = (__typeof__(evp.param_utf8))dlsym(lib, "OSSL_PARAM_construct_utf8_string");
    evp.param_end = (__typeof__(evp.param_end))dlsym(lib, "OSSL_PARAM_construct_end");
    evp.cipher_ctx_new = (__typeof__(evp.cipher_ctx_new))dlsym(lib, "EVP_CIPHER_CTX_new");
    evp.cipher_ctx_free = (__typeof__(evp.cipher_ctx_free))dlsym(lib, "EVP_CIPHER_CTX_free");
    evp.aes_128_ecb = (__typeof__(evp.aes_128_ecb))dlsym(lib, "EVP_aes_128_ecb");
    evp.encrypt_init = (__typeof__(evp.encrypt_init))dlsym(lib, "EVP_EncryptInit_ex");
    evp.set_padding = (__typeof__(evp.set_padding))dlsym(lib, "EVP_CIPHER_CTX_set_padding");
    evp.encrypt_update = (__typeof__(evp.encrypt_update))dlsym(lib, "EVP_EncryptUpdate");
    if (!evp.ctx_new || !evp.ctx_free || !evp.ctx_copy_ex || !evp.sha256 || !evp.init_ex || !evp.update || !evp.final_ex)
        load_error = CCR_LIBCRYPTO " lacks an EVP digest function";
    else if (!evp.mac_fetch || !evp.mac_free || !evp.mac_ctx_new || !evp.mac_ctx_free || !evp.mac_init || !evp.mac_update
             || !evp.mac_final || !evp.param_utf8 || !evp.param_end)
        load_error = CCR_LIBCRYPTO " lacks an EVP MAC function";
    else if (!evp.cipher_ctx_new || !evp.cipher_ctx_free || !evp.aes_128_ecb || !evp.encrypt_init || !evp.set_padding
             || !evp.encrypt_update)
        load_error = CCR_LIBCRYPTO " lacks an EVP cipher function";
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

// One-shot CMAC through EVP_MAC with the AES-128-CBC cipher (OpenSSL 3's replacement for the CMAC_* calls).
int ccr_aes_cmac(const uint8_t key[16], const void *bytes, size_t count, uint8_t out[16]) {
    if (ccr_unavailable() != NULL) return 0;
    EVP_MAC *mac = evp.mac_fetch(NULL, "CMAC", NULL);
    if (mac == NULL) return 0;
    EVP_MAC_CTX *ctx = evp.mac_ctx_new(mac);
    int ok = 0;
    if (ctx != NULL) {
        char cipher[] = "AES-128-CBC";
        OSSL_PARAM params[2] = { evp.param_utf8(OSSL_MAC_PARAM_CIPHER, cipher, 0), evp.param_end() };
        size_t length = 0;
        ok = evp.mac_init(ctx, key, 16, params) == 1
            && (count == 0 || evp.mac_update(ctx, bytes, count) == 1)
            && evp.mac_final(ctx, out, &length, 16) == 1 && length == 16;
        evp.mac_ctx_free(ctx);
    }
    evp.mac_free(mac);
    return ok;
}

// One block through EVP's AES-128-ECB without padding: one EncryptUpdate gives the whole 16-byte block.
int ccr_aes128_encrypt_block(const uint8_t key[16], const uint8_t in[16], uint8_t out[16]) {
    if (ccr_unavailable() != NULL) return 0;
    EVP_CIPHER_CTX *ctx = evp.cipher_ctx_new();
    if (ctx == NULL) return 0;
    int length = 0;
    int ok = evp.encrypt_init(ctx, evp.aes_128_ecb(), NULL, key, NULL) == 1 && evp.set_padding(ctx, 0) == 1
        && evp.encrypt_update(ctx, out, &length, in, 16) == 1 && length == 16;
    evp.cipher_ctx_free(ctx);
    return ok;
}
