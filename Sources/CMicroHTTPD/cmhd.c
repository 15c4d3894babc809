// Fixed-argument wrappers around libmicrohttpd's calls (see include/CMicroHTTPD.h). libmicrohttpd is loaded with
// dlopen when the first receiver starts, not at process start: `mirror` needs it only for `scan`, and loading it
// (GnuTLS and five more libraries under it) cost every command about 3 MiB of memory and 3 ms of CPU.
#include "CMicroHTTPD.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

// Debian's libmicrohttpd12 soname (what libmicrohttpd-dev's libmicrohttpd.so points to).
#define CMHD_LIBRARY "libmicrohttpd.so.12"

static struct {
    __typeof__(&MHD_start_daemon) start_daemon;
    __typeof__(&MHD_stop_daemon) stop_daemon;
    __typeof__(&MHD_run_wait) run_wait;
    __typeof__(&MHD_get_daemon_info) get_daemon_info;
    __typeof__(&MHD_get_connection_info) get_connection_info;
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
    mhd.run_wait = (__typeof__(mhd.run_wait))dlsym(lib, "MHD_run_wait");
    mhd.get_daemon_info = (__typeof__(mhd.get_daemon_info))dlsym(lib, "MHD_get_daemon_info");
    mhd.get_connection_info = (__typeof__(mhd.get_connection_info))dlsym(lib, "MHD_get_connection_info");
    mhd.lookup_connection_value = (__typeof__(mhd.lookup_connection_value))dlsym(lib, "MHD_lookup_connection_value");
    mhd.create_response_from_buffer = (__typeof__(mhd.create_response_from_buffer))dlsym(lib, "MHD_create_response_from_buffer");
    mhd.add_response_header = (__typeof__(mhd.add_response_header))dlsym(lib, "MHD_add_response_header");
    mhd.queue_response = (__typeof__(mhd.queue_response))dlsym(lib, "MHD_queue_response");
    mhd.destroy_response = (__typeof__(mhd.destroy_response))dlsym(lib, "MHD_destroy_response");
    if (!mhd.start_daemon || !mhd.stop_daemon || !mhd.run_wait || !mhd.get_daemon_info || !mhd.get_connection_info ||
        !mhd.lookup_connection_value || !mhd.create_response_from_buffer || !mhd.add_response_header ||
        !mhd.queue_response || !mhd.destroy_response)
        load_error = CMHD_LIBRARY " lacks a function the receiver calls";
}

const char *cmhd_unavailable(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load);
    return load_error;
}

// One open connection: when it was accepted, whether its headers are complete, whether the deadline cut it.
struct tracked {
    struct MHD_Connection *connection;  // NULL: a free slot
    struct timespec accepted;
    int headers_done;
    int cut;
};

struct cmhd_server {
    struct MHD_Daemon *daemon;
    pthread_t thread;
    atomic_int stopping;
    cmhd_limits limits;
    cmhd_access_handler handler;
    void *cls;
    struct tracked *connections;  // limits.connections slots; touched only by the polling thread
};

static double seconds_since(const struct timespec *t) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

// Whether a connection has outlived its absolute deadline: headers_deadline_s until the access handler first
// ran, request_deadline_s from the accept for the whole request (MHD's own timeout is an idle one, which a peer
// sending a byte every few seconds never trips).
static int past_deadline(const struct cmhd_server *s, const struct tracked *t) {
    double age = seconds_since(&t->accepted);
    return (!t->headers_done && age >= s->limits.headers_deadline_s) || age >= s->limits.request_deadline_s;
}

// MHD_OPTION_NOTIFY_CONNECTION: a slot per connection from its accept to its close (the polling thread).
static void notify_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                              enum MHD_ConnectionNotificationCode code) {
    struct cmhd_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = NULL;
        for (unsigned i = 0; i < s->limits.connections; i++) {
            if (s->connections[i].connection != NULL) continue;
            struct tracked *t = &s->connections[i];
            memset(t, 0, sizeof *t);
            t->connection = connection;
            clock_gettime(CLOCK_MONOTONIC, &t->accepted);
            *socket_context = t;
            break;
        }
    } else if (*socket_context != NULL) {
        ((struct tracked *)*socket_context)->connection = NULL;
        *socket_context = NULL;
    }
}

// Cuts every connection past its deadline: shutdown(2) of its socket, so MHD sees the end and closes it on this
// same thread (the descriptor is still MHD's: it is closed only after NOTIFY_CLOSED, which frees the slot).
static void cut_expired(struct cmhd_server *s) {
    for (unsigned i = 0; i < s->limits.connections; i++) {
        struct tracked *t = &s->connections[i];
        if (t->connection == NULL || t->cut || !past_deadline(s, t)) continue;
        const union MHD_ConnectionInfo *info = mhd.get_connection_info(t->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (info != NULL) shutdown(info->connect_fd, SHUT_RDWR);
        t->cut = 1;
    }
}

static enum MHD_Result access_trampoline(void *cls, struct MHD_Connection *connection, const char *url,
                                         const char *method, const char *version, const char *upload_data,
                                         size_t *upload_data_size, void **req_cls) {
    struct cmhd_server *s = cls;
    const union MHD_ConnectionInfo *info = mhd.get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct tracked *t = info == NULL ? NULL : info->socket_context;
    if (t != NULL) {
        t->headers_done = 1;
        if (past_deadline(s, t)) return MHD_NO;  // a body still arriving after the deadline: close the connection
    }
    return s->handler(s->cls, connection, url, method, version, upload_data, upload_data_size, req_cls);
}

// MHD_OPTION_UNESCAPE_CALLBACK: the path is left as sent (no %-decoding), so "%00" cannot cut it short.
static size_t keep_escaped(void *cls, struct MHD_Connection *connection, char *s) {
    (void)cls; (void)connection;
    return strlen(s);
}

// The polling thread: MHD_run_wait (every callback runs here), then the deadline sweep, until stopped.
static void *poll_loop(void *arg) {
    struct cmhd_server *s = arg;
    while (!atomic_load(&s->stopping)) {
        mhd.run_wait(s->daemon, CMHD_POLL_MS);
        cut_expired(s);
    }
    return NULL;
}

struct cmhd_server *cmhd_start(const char *bind_host, uint16_t port, const cmhd_limits *limits,
                               cmhd_access_handler handler, cmhd_completed_handler completed, void *cls) {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    memset(&v4, 0, sizeof v4);
    memset(&v6, 0, sizeof v6);
    const struct sockaddr *addr;
    // No MHD_USE_ERROR_LOG: failures are reported by the caller, from errno, in the tool's own words. No internal
    // thread: poll_loop drives the daemon so that the deadline sweep runs on the thread that owns the connections.
    // MHD_USE_EPOLL (MHD's one external-loop mode beside select): with select(2) MHD refuses, errno 0, a listening
    // socket numbered FD_SETSIZE (1024) or more, as in any process that has that many descriptors open.
    unsigned int flags = MHD_USE_EPOLL;
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
    if (limits->connections == 0 || limits->per_ip == 0) {
        errno = EINVAL;
        return NULL;
    }
    if (cmhd_unavailable() != NULL) {
        errno = ELIBACC;
        return NULL;
    }
    struct cmhd_server *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->connections = calloc(limits->connections, sizeof *s->connections);
    if (s->connections == NULL) { free(s); errno = ENOMEM; return NULL; }
    s->limits = *limits;
    s->handler = handler;
    s->cls = cls;
    errno = 0;
    s->daemon = mhd.start_daemon(flags, port, NULL, NULL, access_trampoline, s,
                                 MHD_OPTION_SOCK_ADDR, addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, completed, cls,
                                 MHD_OPTION_NOTIFY_CONNECTION, notify_connection, s,
                                 MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL,
                                 MHD_OPTION_CONNECTION_LIMIT, limits->connections,
                                 MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits->per_ip,
                                 MHD_OPTION_CONNECTION_TIMEOUT, limits->idle_timeout_s,
                                 MHD_OPTION_END);
    if (s->daemon == NULL) {
        int e = errno;
        free(s->connections);
        free(s);
        errno = e;
        return NULL;
    }
    int e = pthread_create(&s->thread, NULL, poll_loop, s);
    if (e != 0) {
        mhd.stop_daemon(s->daemon);
        free(s->connections);
        free(s);
        errno = e;
        return NULL;
    }
    return s;
}

uint16_t cmhd_bound_port(struct cmhd_server *server) {
    const union MHD_DaemonInfo *info = mhd.get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
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

// A server or a connection exists only after cmhd_start loaded the library, so these need no check.
void cmhd_stop(struct cmhd_server *server) {
    atomic_store(&server->stopping, 1);
    pthread_join(server->thread, NULL);
    mhd.stop_daemon(server->daemon);  // closes what is still open (NOTIFY_CLOSED on this thread)
    free(server->connections);
    free(server);
}

const char *cmhd_header(struct MHD_Connection *connection, const char *name) {
    return mhd.lookup_connection_value(connection, MHD_HEADER_KIND, name);
}
