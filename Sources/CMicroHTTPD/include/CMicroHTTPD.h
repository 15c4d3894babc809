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

/// Starts a daemon with its own polling thread, listening on `bind_host` (a numeric IPv4 or IPv6
/// address) and `port` (0: any free port). Returns NULL on failure with errno set (EINVAL for an
/// address that is not numeric, ELIBACC when libmicrohttpd cannot be loaded: see cmhd_unavailable).
struct MHD_Daemon *cmhd_start(const char *bind_host, uint16_t port, unsigned int connection_timeout_s,
                              cmhd_access_handler handler, cmhd_completed_handler completed, void *cls);

/// The port the daemon listens on (0 when unknown).
uint16_t cmhd_bound_port(struct MHD_Daemon *daemon);

/// Queues a response with `body` (copied) and a Content-Type; returns MHD_YES or MHD_NO.
enum MHD_Result cmhd_respond(struct MHD_Connection *connection, unsigned int status,
                             const char *content_type, const char *body, size_t body_length);

/// MHD_stop_daemon: stops the daemon and waits for its thread.
void cmhd_stop(struct MHD_Daemon *daemon);

/// MHD_lookup_connection_value for a request header: its value, or NULL when the request has none.
const char *cmhd_header(struct MHD_Connection *connection, const char *name);

#endif
