// Fixed-argument wrappers around libmicrohttpd's calls (see include/CMicroHTTPD.h). libmicrohttpd is loaded with
// dlopen when the first receiver starts, not at process start: `mirror` needs it only for `scan`, and loading it
// (GnuTLS and five more libraries under it) cost every command about 3 MiB of memory and 3 ms of CPU.
#include "CMicroHTTPD.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

// Debian's libmicrohttpd12 soname (what libmicrohttpd-dev's libmicrohttpd.so points to).
#define CMHD_LIBRARY "libmicrohttpd.so.12"

static struct {
    __typeof__(&MHD_start_daemon) start_daemon;
    __typeof__(&MHD_stop_daemon) stop_daemon;
    __typeof__(&MHD_get_daemon_info) get_daemon_info;
    __typeof__(&MHD_lookup_connection_value) lookup_connection_value;
    __typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
    __typeof__(&MHD_add_response_header) add_response_header;
    __typeof__(&MHD_queue_response) queue_response;
    __typeof__(&MHD_destroy_response) destroy_response;
} mhd;
static const char *load_error;  // NULL once every symbol is resolved

static void load(void) {
    void *lib = dlopen(CMHD_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) { load_error = dlerror(); return; }
    mhd.start_daemon = (__typeof__(mhd.start_daemon))dlsym(lib, "MHD_start_daemon");
    mhd.stop_daemon = (__typeof__(mhd.stop_daemon))dlsym(lib, "MHD_stop_daemon");
    mhd.get_daemon_info = (__typeof__(mhd.get_daemon_info))dlsym(lib, "MHD_get_daemon_info");
    mhd.lookup_connection_value = (__typeof__(mhd.lookup_connection_value))dlsym(lib, "MHD_lookup_connection_value");
    mhd.create_response_from_buffer = (__typeof__(mhd.create_response_from_buffer))dlsym(lib, "MHD_create_response_from_buffer");
    mhd.add_response_header = (__typeof__(mhd.add_response_header))dlsym(lib, "MHD_add_response_header");
    mhd.queue_response = (__typeof__(mhd.queue_response))dlsym(lib, "MHD_queue_response");
    mhd.destroy_response = (__typeof__(mhd.destroy_response))dlsym(lib, "MHD_destroy_response");
    if (!mhd.start_daemon || !mhd.stop_daemon || !mhd.get_daemon_info || !mhd.lookup_connection_value ||
        !mhd.create_response_from_buffer || !mhd.add_response_header || !mhd.queue_response || !mhd.destroy_response)
        load_error = CMHD_LIBRARY " lacks a function the receiver calls";
}

const char *cmhd_unavailable(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load);
    return load_error;
}

struct MHD_Daemon *cmhd_start(const char *bind_host, uint16_t port, unsigned int connection_timeout_s,
                              cmhd_access_handler handler, cmhd_completed_handler completed, void *cls) {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    memset(&v4, 0, sizeof v4);
    memset(&v6, 0, sizeof v6);
    const struct sockaddr *addr;
    // No MHD_USE_ERROR_LOG: failures are reported by the caller, from errno, in the tool's own words.
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD;
    if (inet_pton(AF_INET, bind_host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(port);
        addr = (const struct sockaddr *)&v4;
    } else if (inet_pton(AF_INET6, bind_host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(port);
        addr = (const struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    } else {
        errno = EINVAL;
        return NULL;
    }
    if (cmhd_unavailable() != NULL) {
        errno = ELIBACC;
        return NULL;
    }
    errno = 0;
    return mhd.start_daemon(flags, port, NULL, NULL, handler, cls,
                            MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, cls,
                            MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_s,
                            MHD_OPTION_END);
}

uint16_t cmhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = mhd.get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

enum MHD_Result cmhd_respond(struct MHD_Connection *connection, unsigned int status,
                             const char *content_type, const char *body, size_t body_length) {
    struct MHD_Response *response =
        mhd.create_response_from_buffer(body_length, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return MHD_NO;
    mhd.add_response_header(response, "Content-Type", content_type);
    enum MHD_Result result = mhd.queue_response(connection, status, response);
    mhd.destroy_response(response);
    return result;
}

// A daemon or a connection exists only after cmhd_start loaded the library, so these need no check.
void cmhd_stop(struct MHD_Daemon *daemon) { mhd.stop_daemon(daemon); }

const char *cmhd_header(struct MHD_Connection *connection, const char *name) {
    return mhd.lookup_connection_value(connection, MHD_HEADER_KIND, name);
}
