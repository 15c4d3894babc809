// CMicroHTTPD: a fixed-argument door to libmicrohttpd (Debian libmicrohttpd-dev) for Swift, which cannot call
// the variadic MHD_start_daemon / MHD_get_daemon_info. The library is loaded on the first cmhd_start (dlopen), so
// Swift calls it only through these functions; <microhttpd.h> gives the types.
#ifndef CMICROHTTPD_H
#define CMICROHTTPD_H

#include <stddef.h>
#include <stdint.h>
#include <microhttpd.h>

/// The access handler MHD calls for every request (and for every chunk of its body).
typedef enum MHD_Result (*cmhd_access_handler)(void *cls, struct MHD_Connection *connection,
                                               const char *url, const char *method,
                                               const char *version, const char *upload_data,
                                               size_t *upload_data_size, void **req_cls);
/// Called once when a request is finished (answered, or its connection failed): frees *req_cls.
typedef void (*cmhd_completed_handler)(void *cls, struct MHD_Connection *connection,
                                       void **req_cls, enum MHD_RequestTerminationCode toe);

/// NULL when libmicrohttpd is loaded (dlopen, on the first call), else why it cannot be: dlerror's text.
const char *cmhd_unavailable(void);

/// A running receiver: the daemon, its polling thread and the connections it tracks (opaque to Swift).
struct cmhd_server;

/// How long the polling thread waits in MHD_run_wait before it looks at the deadlines again (ms).
#define CMHD_POLL_MS 200

/// What one receiver allows: libmicrohttpd's MHD_OPTION_CONNECTION_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT and
/// MHD_OPTION_CONNECTION_TIMEOUT (idle), and two absolute deadlines counted from the accept: for the headers,
/// and for the whole request. A connection past one is shut down by the polling thread.
typedef struct {
    unsigned int connections;
    unsigned int per_ip;
    unsigned int idle_timeout_s;
    double headers_deadline_s;
    double request_deadline_s;
} cmhd_limits;

/// Starts a daemon driven by its own polling thread, listening on `bind_host` (a numeric IPv4 or IPv6
/// address) and `port` (0: any free port), with `limits`. The path reaches `handler` as sent (not %-decoded).
/// Returns NULL on failure with errno set (EINVAL for an address that is not numeric or a zero limit, ELIBACC
/// when libmicrohttpd cannot be loaded: see cmhd_unavailable).
struct cmhd_server *cmhd_start(const char *bind_host, uint16_t port, const cmhd_limits *limits,
                               cmhd_access_handler handler, cmhd_completed_handler completed, void *cls);

/// The port the daemon listens on (0 when unknown).
uint16_t cmhd_bound_port(struct cmhd_server *server);

/// Queues a response with `body` (copied) and a Content-Type; returns MHD_YES or MHD_NO.
enum MHD_Result cmhd_respond(struct MHD_Connection *connection, unsigned int status,
                             const char *content_type, const char *body, size_t body_length);

/// Stops the polling thread (waits for it), then MHD_stop_daemon, and frees the server.
void cmhd_stop(struct cmhd_server *server);

/// MHD_lookup_connection_value for a request header: its value, or NULL when the request has none.
const char *cmhd_header(struct MHD_Connection *connection, const char *name);

#endif
