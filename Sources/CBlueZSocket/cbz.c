// The shim's implementation: thin wrappers that keep every kernel struct in C.
#define _GNU_SOURCE
#include "CBlueZSocket.h"

#include <stddef.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <locale.h>
#include <malloc.h>
#include <stdlib.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/capability.h>

// MARK: - Layouts

size_t cbz_sizeof_sockaddr_l2(void) { return sizeof(struct sockaddr_l2); }
size_t cbz_sizeof_sockaddr_hci(void) { return sizeof(struct sockaddr_hci); }
size_t cbz_sizeof_bt_security(void) { return sizeof(struct bt_security); }
size_t cbz_sizeof_hci_dev_info(void) { return sizeof(struct hci_dev_info); }

size_t cbz_offsetof_hci_dev_info(const char *field) {
    if (!strcmp(field, "bdaddr")) return offsetof(struct hci_dev_info, bdaddr);
    if (!strcmp(field, "flags")) return offsetof(struct hci_dev_info, flags);
    if (!strcmp(field, "type")) return offsetof(struct hci_dev_info, type);
    if (!strcmp(field, "features")) return offsetof(struct hci_dev_info, features);
    if (!strcmp(field, "acl_mtu")) return offsetof(struct hci_dev_info, acl_mtu);
    if (!strcmp(field, "acl_pkts")) return offsetof(struct hci_dev_info, acl_pkts);
    return (size_t)-1;
}

size_t cbz_offsetof_sockaddr_l2(const char *field) {
    if (!strcmp(field, "l2_psm")) return offsetof(struct sockaddr_l2, l2_psm);
    if (!strcmp(field, "l2_bdaddr")) return offsetof(struct sockaddr_l2, l2_bdaddr);
    if (!strcmp(field, "l2_cid")) return offsetof(struct sockaddr_l2, l2_cid);
    if (!strcmp(field, "l2_bdaddr_type")) return offsetof(struct sockaddr_l2, l2_bdaddr_type);
    return (size_t)-1;
}

// MARK: - Errors

const char *cbz_errno_name(int err) { return strerrorname_np(err); }
const char *cbz_errno_description(int err) {
    const char *d = strerrordesc_np(err);
    return d ? d : "Unknown error";
}
int cbz_errno(void) { return errno; }

// MARK: - Generic descriptors

int cbz_close(int fd) { return close(fd); }
int cbz_dup(int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 0); }

ssize_t cbz_send(int fd, const void *buf, size_t len) {
    return send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/// One recvmsg of one whole datagram with `flags` (plus MSG_TRUNC, so a datagram longer than `len` is reported in
/// `truncated`, never silently cut); retried on EINTR.
static ssize_t cbz_recvmsg_datagram(int fd, void *buf, size_t len, int *truncated, int flags) {
    struct iovec iov = { .iov_base = buf, .iov_len = len };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    ssize_t n;
    do {
        n = recvmsg(fd, &msg, flags | MSG_TRUNC);
    } while (n < 0 && errno == EINTR);
    *truncated = (n >= 0 && ((msg.msg_flags & MSG_TRUNC) || (size_t)n > len)) ? 1 : 0;
    return n;
}

ssize_t cbz_recv_datagram(int fd, void *buf, size_t len, int *truncated) {
    return cbz_recvmsg_datagram(fd, buf, len, truncated, MSG_DONTWAIT);
}

int cbz_peer_hung_up(int fd) {
    struct pollfd p = { .fd = fd, .events = POLLRDHUP, .revents = 0 };
    int r;
    do { r = poll(&p, 1, 0); } while (r < 0 && errno == EINTR);
    if (r < 0) return -1;
    return (p.revents & (POLLHUP | POLLRDHUP)) ? 1 : 0;
}

int cbz_socket_error(int fd, int *err) {
    socklen_t len = sizeof *err;
    return getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len);
}

int cbz_get_buffer_size(int fd, int which, int *bytes) {
    socklen_t len = sizeof *bytes;
    return getsockopt(fd, SOL_SOCKET, which ? SO_RCVBUF : SO_SNDBUF, bytes, &len);
}

int cbz_set_buffer_size(int fd, int which, int bytes) {
    return setsockopt(fd, SOL_SOCKET, which ? SO_RCVBUF : SO_SNDBUF, &bytes, sizeof bytes);
}

int cbz_shutdown(int fd) { return shutdown(fd, SHUT_RDWR); }

int cbz_set_nonblocking(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int cbz_set_blocking(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    return fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

int cbz_pending_bytes(int fd, int *bytes) { return ioctl(fd, FIONREAD, bytes); }

// MARK: - AF_UNIX

int cbz_unix_socketpair(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds);
}

int cbz_unix_socket(void) {
    return socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static int fill_sun(struct sockaddr_un *sun, const char *path) {
    memset(sun, 0, sizeof *sun);
    sun->sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n == 0) { errno = EINVAL; return -1; }
    if (n >= sizeof sun->sun_path) { errno = ENAMETOOLONG; return -1; }
    memcpy(sun->sun_path, path, n);
    return 0;
}

int cbz_unix_bind(int fd, const char *path) {
    struct sockaddr_un sun;
    if (fill_sun(&sun, path) < 0) return -1;
    return bind(fd, (struct sockaddr *)&sun, sizeof sun);
}

int cbz_unix_connect(int fd, const char *path) {
    struct sockaddr_un sun;
    if (fill_sun(&sun, path) < 0) return -1;
    int r;
    do { r = connect(fd, (struct sockaddr *)&sun, sizeof sun); } while (r < 0 && errno == EINTR);
    return r;
}

size_t cbz_unix_path_max(void) {
    struct sockaddr_un sun;
    return sizeof sun.sun_path - 1;
}

int cbz_listen(int fd, int backlog) { return listen(fd, backlog); }

int cbz_accept(int fd) {
    int r;
    do { r = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); } while (r < 0 && errno == EINTR);
    return r;
}

int cbz_unlink(const char *path) { return unlink(path); }

int cbz_is_socket_file(const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0) return -1;
    return S_ISSOCK(st.st_mode) ? 1 : 0;
}

// MARK: - L2CAP LE

static void to_bdaddr(bdaddr_t *out, const uint8_t *printed) {
    for (int i = 0; i < 6; i++) out->b[i] = printed[5 - i];
}

void cbz_to_bdaddr(const uint8_t *printed, bdaddr_t *out) { to_bdaddr(out, printed); }

static void from_bdaddr(uint8_t *printed, const bdaddr_t *in) {
    for (int i = 0; i < 6; i++) printed[i] = in->b[5 - i];
}

int cbz_l2cap_socket(void) {
    return socket(AF_BLUETOOTH, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, BTPROTO_L2CAP);
}

// An LE L2CAP address: the fixed channel `cid` (CID 4, ATT) when `psm` is 0, else the LE PSM; `addr` NULL is
// BDADDR_ANY (all zero).
static struct sockaddr_l2 le_sockaddr(const uint8_t *addr, uint8_t addr_type, uint16_t psm, uint16_t cid) {
    struct sockaddr_l2 a;
    memset(&a, 0, sizeof a);
    a.l2_family = AF_BLUETOOTH;
    if (addr) to_bdaddr(&a.l2_bdaddr, addr);
    a.l2_psm = htobs(psm);
    a.l2_cid = htobs(cid);
    a.l2_bdaddr_type = addr_type;
    return a;
}

static int connect_l2(int fd, const struct sockaddr_l2 *a) {
    int r;
    do { r = connect(fd, (const struct sockaddr *)a, sizeof *a); } while (r < 0 && errno == EINTR);
    return r;
}

int cbz_l2cap_bind_le(int fd, const uint8_t *addr, uint8_t addr_type) {
    struct sockaddr_l2 a = le_sockaddr(addr, addr_type, 0, CBZ_ATT_CID);
    return bind(fd, (struct sockaddr *)&a, sizeof a);
}

int cbz_l2cap_connect_le(int fd, const uint8_t *addr, uint8_t addr_type) {
    struct sockaddr_l2 a = le_sockaddr(addr, addr_type, 0, CBZ_ATT_CID);
    return connect_l2(fd, &a);
}

// Enhanced Credit Based Flow Control channels (Core Spec 5.4 Vol 3 Part A §4.25): the Enhanced ATT bearer's
// L2CAP mode, on the fixed SPSM 0x0027 (Vol 3 Part F §3.2.11). The kernel needs its enable_ecred parameter for
// BT_MODE; it reports the peer's L2CAP result as errno (ECONNREFUSED, EACCES...).
int cbz_l2cap_bind_le_psm(int fd, const uint8_t *addr, uint8_t addr_type, uint16_t psm) {
    struct sockaddr_l2 a = le_sockaddr(addr, addr_type, psm, 0);
    return bind(fd, (struct sockaddr *)&a, sizeof a);
}

int cbz_l2cap_connect_le_psm(int fd, const uint8_t *addr, uint8_t addr_type, uint16_t psm) {
    struct sockaddr_l2 a = le_sockaddr(addr, addr_type, psm, 0);
    return connect_l2(fd, &a);
}

int cbz_bt_set_mode(int fd, uint8_t mode) { return setsockopt(fd, SOL_BLUETOOTH, BT_MODE, &mode, sizeof mode); }

int cbz_l2cap_accept(int fd, uint8_t *peer_addr, uint8_t *peer_type) {
    struct sockaddr_l2 a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    int r;
    do { r = accept4(fd, (struct sockaddr *)&a, &len, SOCK_NONBLOCK | SOCK_CLOEXEC); } while (r < 0 && errno == EINTR);
    if (r >= 0) {
        from_bdaddr(peer_addr, &a.l2_bdaddr);
        *peer_type = a.l2_bdaddr_type;
    }
    return r;
}

static int l2_name(int fd, int peer, uint8_t *addr, uint8_t *addr_type, uint16_t *cid) {
    struct sockaddr_l2 a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    int r = peer ? getpeername(fd, (struct sockaddr *)&a, &len) : getsockname(fd, (struct sockaddr *)&a, &len);
    if (r < 0) return -1;
    from_bdaddr(addr, &a.l2_bdaddr);
    *addr_type = a.l2_bdaddr_type;
    *cid = btohs(a.l2_cid);
    return 0;
}

int cbz_l2cap_local(int fd, uint8_t *addr, uint8_t *addr_type, uint16_t *cid) { return l2_name(fd, 0, addr, addr_type, cid); }
int cbz_l2cap_peer(int fd, uint8_t *addr, uint8_t *addr_type, uint16_t *cid) { return l2_name(fd, 1, addr, addr_type, cid); }

int cbz_bt_security_get(int fd, uint8_t *level, uint8_t *key_size) {
    struct bt_security s;
    socklen_t len = sizeof s;
    memset(&s, 0, sizeof s);
    if (getsockopt(fd, SOL_BLUETOOTH, BT_SECURITY, &s, &len) < 0) return -1;
    *level = s.level;
    *key_size = s.key_size;
    return 0;
}

int cbz_bt_security_set(int fd, uint8_t level) {
    struct bt_security s;
    memset(&s, 0, sizeof s);
    s.level = level;
    return setsockopt(fd, SOL_BLUETOOTH, BT_SECURITY, &s, sizeof s);
}

static int get_u16(int fd, int opt, uint16_t *v) {
    socklen_t len = sizeof *v;
    return getsockopt(fd, SOL_BLUETOOTH, opt, v, &len);
}

int cbz_bt_sndmtu(int fd, uint16_t *mtu) { return get_u16(fd, BT_SNDMTU, mtu); }
int cbz_bt_rcvmtu(int fd, uint16_t *mtu) { return get_u16(fd, BT_RCVMTU, mtu); }
int cbz_bt_set_rcvmtu(int fd, uint16_t mtu) { return setsockopt(fd, SOL_BLUETOOTH, BT_RCVMTU, &mtu, sizeof mtu); }

// MARK: - The LE link

int cbz_l2cap_conninfo(int fd, uint16_t *handle) {
    struct l2cap_conninfo ci;
    socklen_t len = sizeof ci;
    memset(&ci, 0, sizeof ci);
    if (getsockopt(fd, SOL_L2CAP, L2CAP_CONNINFO, &ci, &len) < 0) return -1;
    *handle = ci.hci_handle;
    return 0;
}

int cbz_bt_phy(int fd, uint32_t *phys) {
    uint32_t v = 0;
    socklen_t len = sizeof v;
    if (getsockopt(fd, SOL_BLUETOOTH, BT_PHY, &v, &len) < 0) return -1;
    *phys = v;
    return 0;
}

int cbz_hci_conn_info(int dev_id, const uint8_t *peer, cbz_conn_info *out) {
    int s = socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI);
    if (s < 0) return -1;
    struct sockaddr_hci a;
    memset(&a, 0, sizeof a);
    a.hci_family = AF_BLUETOOTH;
    a.hci_dev = (unsigned short)dev_id;
    a.hci_channel = HCI_CHANNEL_RAW;
    // struct hci_conn_info_req ends in a flexible array: the answer is written right after its fixed part.
    union { struct hci_conn_info_req req; unsigned char bytes[sizeof(struct hci_conn_info_req) + sizeof(struct hci_conn_info)]; } q;
    memset(&q, 0, sizeof q);
    to_bdaddr(&q.req.bdaddr, peer);
    q.req.type = CBZ_LE_LINK;
    int r = bind(s, (struct sockaddr *)&a, sizeof a);
    if (r == 0) r = ioctl(s, HCIGETCONNINFO, &q);
    int e = errno;
    close(s);
    if (r < 0) { errno = e; return -1; }
    struct hci_conn_info info;
    memcpy(&info, q.bytes + offsetof(struct hci_conn_info_req, conn_info), sizeof info);
    out->handle = info.handle;
    out->type = info.type;
    out->out = info.out;
    out->state = info.state;
    out->link_mode = info.link_mode;
    return 0;
}

int cbz_hci_set_event_filter(int fd, const uint8_t *events, int count) {
    struct hci_filter f;
    hci_filter_clear(&f);
    hci_filter_set_ptype(HCI_EVENT_PKT, &f);
    for (int i = 0; i < count; i++) hci_filter_set_event(events[i], &f);
    return setsockopt(fd, SOL_HCI, HCI_FILTER, &f, sizeof f);
}

int cbz_hci_filter_passes(int fd, uint8_t event) {
    struct hci_filter f;
    socklen_t len = sizeof f;
    memset(&f, 0, sizeof f);
    if (getsockopt(fd, SOL_HCI, HCI_FILTER, &f, &len) < 0) return -1;
    return hci_filter_test_event(event, &f) ? 1 : 0;
}

// MARK: - HCI devices

int cbz_hci_control_socket(void) {
    return socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI);
}

int cbz_hci_device_list(int ctl, uint16_t *ids, int max) {
    size_t size = sizeof(struct hci_dev_list_req) + HCI_MAX_DEV * sizeof(struct hci_dev_req);
    struct hci_dev_list_req *req = calloc(1, size);
    if (!req) { errno = ENOMEM; return -1; }
    req->dev_num = HCI_MAX_DEV;
    if (ioctl(ctl, HCIGETDEVLIST, req) < 0) {
        int e = errno;
        free(req);
        errno = e;
        return -1;
    }
    int n = req->dev_num;
    for (int i = 0; i < n && i < max; i++) ids[i] = req->dev_req[i].dev_id;
    free(req);
    return n;
}

int cbz_hci_device_info(int ctl, int dev_id, cbz_hci_info *info) {
    struct hci_dev_info di;
    memset(&di, 0, sizeof di);
    di.dev_id = (uint16_t)dev_id;
    if (ioctl(ctl, HCIGETDEVINFO, &di) < 0) return -1;
    memset(info, 0, sizeof *info);
    info->dev_id = di.dev_id;
    memcpy(info->name, di.name, 8);
    info->name[8] = 0;
    from_bdaddr(info->addr, &di.bdaddr);
    info->flags = di.flags;
    info->bus = di.type & 0x0f;
    info->dev_type = (di.type & 0x30) >> 4;
    memcpy(info->features, di.features, 8);
    info->acl_mtu = di.acl_mtu;
    info->acl_pkts = di.acl_pkts;
    info->up = (di.flags & (1u << HCI_UP)) != 0;
    info->running = (di.flags & (1u << HCI_RUNNING)) != 0;
    info->raw = (di.flags & (1u << HCI_RAW)) != 0;
    info->le = (di.features[4] & LMP_LE) != 0;
    info->bredr = (di.features[4] & LMP_NO_BREDR) == 0;
    return 0;
}

int cbz_hci_device_up(int ctl, int dev_id) { return ioctl(ctl, HCIDEVUP, dev_id); }

int cbz_hci_connection_count(int ctl, int dev_id) {
    enum { max = 32 };
    struct hci_conn_list_req *req = calloc(1, sizeof *req + max * sizeof(struct hci_conn_info));
    if (!req) { errno = ENOMEM; return -1; }
    req->dev_id = (uint16_t)dev_id;
    req->conn_num = max;
    if (ioctl(ctl, HCIGETCONNLIST, req) < 0) {
        int e = errno;
        free(req);
        errno = e;
        return -1;
    }
    int n = req->conn_num;
    free(req);
    return n;
}
int cbz_hci_device_down(int ctl, int dev_id) { return ioctl(ctl, HCIDEVDOWN, dev_id); }

/* Binds a raw HCI socket `s` to `dev_id` (HCI_CHANNEL_RAW) and returns it; on failure closes it, keeping errno. */
/* Closes s after a failed call, keeping that call's errno for the caller; returns -1. */
static int cbz_close_failed(int s) {
    int e = errno;
    close(s);
    errno = e;
    return -1;
}

static int cbz_hci_bind_raw_or_close(int s, int dev_id) {
    struct sockaddr_hci a;
    memset(&a, 0, sizeof a);
    a.hci_family = AF_BLUETOOTH;
    a.hci_dev = (unsigned short)dev_id;
    a.hci_channel = HCI_CHANNEL_RAW;
    if (bind(s, (struct sockaddr *)&a, sizeof a) == 0) return s;
    return cbz_close_failed(s);
}

int cbz_hci_open_acl_watch(int dev_id, int *acl) {
    int s = socket(AF_BLUETOOTH, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, BTPROTO_HCI);
    if (s < 0) return -1;
    int on = 1;
    if (setsockopt(s, SOL_HCI, HCI_DATA_DIR, &on, sizeof on) < 0) goto fail;
    struct hci_filter f;
    hci_filter_clear(&f);
    hci_filter_set_ptype(HCI_ACLDATA_PKT, &f);
    hci_filter_set_ptype(HCI_EVENT_PKT, &f);
    hci_filter_set_event(EVT_DISCONN_COMPLETE, &f);
    hci_filter_set_event(EVT_LE_META_EVENT, &f);
    if (setsockopt(s, SOL_HCI, HCI_FILTER, &f, sizeof f) < 0) goto fail;
    socklen_t fl = sizeof f;
    if (getsockopt(s, SOL_HCI, HCI_FILTER, &f, &fl) < 0) goto fail;
    *acl = hci_test_bit(HCI_ACLDATA_PKT, &f.type_mask) ? 1 : 0;
    return cbz_hci_bind_raw_or_close(s, dev_id);
fail:
    return cbz_close_failed(s);
}

ssize_t cbz_hci_recv_directed(int fd, void *buf, size_t len, int *incoming) {
    struct iovec iov = { .iov_base = buf, .iov_len = len };
    char control[64];
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n;
    do {
        n = recvmsg(fd, &msg, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return n;
    *incoming = 1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_HCI && c->cmsg_type == HCI_CMSG_DIR) {
            int dir;
            memcpy(&dir, CMSG_DATA(c), sizeof dir);
            *incoming = dir;
        }
    }
    return n;
}

int cbz_hci_open_raw(int dev_id) {
    int s = socket(AF_BLUETOOTH, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, BTPROTO_HCI);
    if (s < 0) return -1;
    struct hci_filter f;
    hci_filter_clear(&f);
    hci_filter_set_ptype(HCI_EVENT_PKT, &f);
    hci_filter_all_events(&f);
    if (setsockopt(s, SOL_HCI, HCI_FILTER, &f, sizeof f) < 0) goto fail;
    return cbz_hci_bind_raw_or_close(s, dev_id);
fail:
    return cbz_close_failed(s);
}

int cbz_mgmt_open(void) {
    int s = socket(AF_BLUETOOTH, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, BTPROTO_HCI);
    if (s < 0) return -1;
    struct sockaddr_hci a;
    memset(&a, 0, sizeof a);
    a.hci_family = AF_BLUETOOTH;
    a.hci_dev = HCI_DEV_NONE;
    a.hci_channel = HCI_CHANNEL_CONTROL;
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) {
        return cbz_close_failed(s);
    }
    return s;
}

int cbz_hci_send_command(int fd, uint16_t ogf, uint16_t ocf, const uint8_t *params, uint8_t len) {
    uint8_t pkt[4 + 255];
    uint16_t opcode = (uint16_t)((ogf << 10) | (ocf & 0x03ff));
    pkt[0] = HCI_COMMAND_PKT;
    pkt[1] = opcode & 0xff;
    pkt[2] = opcode >> 8;
    pkt[3] = len;
    if (len) memcpy(pkt + 4, params, len);
    return cbz_write_all(fd, pkt, 4 + (size_t)len);
}

// MARK: - poll / epoll / eventfd

const uint32_t CBZ_EPOLLIN = EPOLLIN, CBZ_EPOLLOUT = EPOLLOUT, CBZ_EPOLLERR = EPOLLERR,
               CBZ_EPOLLHUP = EPOLLHUP, CBZ_EPOLLRDHUP = EPOLLRDHUP, CBZ_EPOLLONESHOT = EPOLLONESHOT;
const short CBZ_POLLIN = POLLIN, CBZ_POLLOUT = POLLOUT, CBZ_POLLERR = POLLERR, CBZ_POLLHUP = POLLHUP;

int cbz_poll_one(int fd, short events, int timeout_ms, short *revents) {
    struct pollfd p = { .fd = fd, .events = events, .revents = 0 };
    int r = poll(&p, 1, timeout_ms);
    *revents = p.revents;
    return r;
}

int cbz_poll_two(int fd1, short events1, int fd2, short events2, int timeout_ms, short *revents1, short *revents2) {
    struct pollfd p[2] = { { .fd = fd1, .events = events1 }, { .fd = fd2, .events = events2 } };
    int r = poll(p, 2, timeout_ms);
    *revents1 = p[0].revents;
    *revents2 = p[1].revents;
    return r;
}

int cbz_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static int ep_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event e;
    memset(&e, 0, sizeof e);
    e.events = events;
    e.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &e);
}

int cbz_epoll_add(int epfd, int fd, uint32_t events, uint64_t data) { return ep_ctl(epfd, EPOLL_CTL_ADD, fd, events, data); }
int cbz_epoll_mod(int epfd, int fd, uint32_t events, uint64_t data) { return ep_ctl(epfd, EPOLL_CTL_MOD, fd, events, data); }
int cbz_epoll_del(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

int cbz_epoll_wait(int epfd, cbz_epoll_event *out, int max, int timeout_ms) {
    struct epoll_event ev[16];
    if (max > 16) max = 16;
    int n;
    do { n = epoll_wait(epfd, ev, max, timeout_ms); } while (n < 0 && errno == EINTR);
    for (int i = 0; i < n; i++) {
        out[i].events = ev[i].events;
        out[i].data = ev[i].data.u64;
    }
    return n;
}

int cbz_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int cbz_eventfd_signal(int fd) {
    uint64_t one = 1;
    ssize_t r;
    do { r = write(fd, &one, sizeof one); } while (r < 0 && errno == EINTR);
    return r == sizeof one ? 0 : -1;
}

// An eventfd and a timerfd both hold one 64-bit counter, read whole and reset by one read: one reader for both.
static int drain_counter(int fd) {
    uint64_t v;
    ssize_t r;
    do { r = read(fd, &v, sizeof v); } while (r < 0 && errno == EINTR);
    if (r < 0 && errno == EAGAIN) return 0;
    return r == sizeof v ? 0 : -1;
}

int cbz_eventfd_drain(int fd) { return drain_counter(fd); }

int cbz_signalfd_interrupts(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int cbz_signalfd_take(int fd) {
    struct signalfd_siginfo info;
    ssize_t n;
    do { n = read(fd, &info, sizeof info); } while (n < 0 && errno == EINTR);
    if (n < 0) return errno == EAGAIN ? 0 : -1;
    if (n != (ssize_t)sizeof info) return 0;
    return (int)info.ssi_signo;
}

int cbz_timerfd(void) { return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); }

int cbz_timerfd_set(int fd, uint64_t deadline_ns) {
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    // A deadline of 0 disarms; an absolute deadline already past fires at once.
    if (deadline_ns != 0) {
        spec.it_value.tv_sec = (time_t)(deadline_ns / 1000000000ull);
        spec.it_value.tv_nsec = (long)(deadline_ns % 1000000000ull);
        if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
    }
    return timerfd_settime(fd, deadline_ns != 0 ? TFD_TIMER_ABSTIME : 0, &spec, NULL);
}

int cbz_timerfd_drain(int fd) { return drain_counter(fd); }

// MARK: - Files

int cbz_create_file(const char *path) {
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

int cbz_create_new_file(const char *path) {
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
}

int cbz_create_private_new_file(const char *path) {
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

// O_NONBLOCK: a FIFO planted where a file is expected opens at once (and is refused as not a regular file) instead
// of blocking the open until a writer comes.
int cbz_open_read_nofollow(const char *path) { return open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK); }

ssize_t cbz_pread(int fd, void *buf, size_t len, int64_t offset) {
    ssize_t r;
    do { r = pread(fd, buf, len, (off_t)offset); } while (r < 0 && errno == EINTR);
    return r;
}

int cbz_rename_noreplace(const char *from, const char *to) {
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    // File systems without RENAME_NOREPLACE (9p, some FUSE and network ones) answer EINVAL: link(2) gives the same
    // never-replace rule (EEXIST when `to` exists), then the old name goes.
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return -1;
    if (link(from, to) != 0) return -1;
    return unlink(from);
}

int cbz_lstat_owner_mode(const char *path, uint32_t *uid, uint32_t *mode) {
    struct stat st;
    if (lstat(path, &st) != 0) return -1;
    *uid = st.st_uid;
    *mode = st.st_mode;
    return 0;
}

uint32_t cbz_euid(void) { return geteuid(); }

int cbz_random_bytes(void *buf, size_t len) {
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t r = getrandom(p, len, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

int cbz_write_all(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

ssize_t cbz_self_exe(char *buf, size_t len) {
    if (len == 0) { errno = EINVAL; return -1; }
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n < 0) return -1;
    buf[n] = 0;
    return n;
}

// MARK: - Capabilities

int cbz_cap_last(void) {
    return (int)cap_max_bits() - 1;
}

static void masks(cap_t c, uint64_t *e, uint64_t *p, uint64_t *i) {
    *e = *p = *i = 0;
    int last = cbz_cap_last();
    for (int n = 0; n <= last && n < 64; n++) {
        cap_flag_value_t v;
        if (cap_get_flag(c, n, CAP_EFFECTIVE, &v) == 0 && v == CAP_SET) *e |= 1ull << n;
        if (cap_get_flag(c, n, CAP_PERMITTED, &v) == 0 && v == CAP_SET) *p |= 1ull << n;
        if (cap_get_flag(c, n, CAP_INHERITABLE, &v) == 0 && v == CAP_SET) *i |= 1ull << n;
    }
}

int cbz_cap_process(uint64_t *effective, uint64_t *permitted, uint64_t *inheritable) {
    cap_t c = cap_get_proc();
    if (!c) return -1;
    masks(c, effective, permitted, inheritable);
    cap_free(c);
    return 0;
}

int cbz_cap_file(const char *path, uint64_t *effective, uint64_t *permitted, uint64_t *inheritable, int *present) {
    *effective = *permitted = *inheritable = 0;
    *present = 0;
    cap_t c = cap_get_file(path);
    if (!c) {
        if (errno == ENODATA) return 0;
        return -1;
    }
    masks(c, effective, permitted, inheritable);
    *present = 1;
    cap_free(c);
    return 0;
}

int cbz_cap_keep_only(uint64_t keep) {
    // The calling thread keeps `keep` of what it holds and nothing else: ambient cleared, the bounding set cut
    // while CAP_SETPCAP is still effective, then effective and permitted set to what is kept (capset is per thread).
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) return -1;
    uint64_t eff = 0, perm = 0, inh = 0;
    if (cbz_cap_process(&eff, &perm, &inh) < 0) return -1;
    int last = cbz_cap_last();
    if (eff & (1ULL << CAP_SETPCAP)) {
        for (int n = 0; n <= last && n < 64; n++) {
            if ((keep & (1ULL << n)) == 0 && cap_drop_bound(n) < 0 && errno != EINVAL) return -1;
        }
    }
    cap_t c = cap_init();
    if (!c) return -1;
    for (int n = 0; n <= last && n < 64; n++) {
        if ((keep & perm & (1ULL << n)) == 0) continue;
        cap_value_t v = n;
        if (cap_set_flag(c, CAP_PERMITTED, 1, &v, CAP_SET) < 0 ||
            ((eff & (1ULL << n)) && cap_set_flag(c, CAP_EFFECTIVE, 1, &v, CAP_SET) < 0)) {
            int e = errno;
            cap_free(c);
            errno = e;
            return -1;
        }
    }
    int r = cap_set_proc(c);
    int e = errno;
    cap_free(c);
    errno = e;
    return r;
}

int cbz_cap_drop_all(void) {
    // Ambient first (needs no privilege), then the bounding set while CAP_SETPCAP is still effective.
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) return -1;
    if (CAP_IS_SUPPORTED(CAP_SETPCAP)) {
        cap_flag_value_t v = CAP_CLEAR;
        cap_t cur = cap_get_proc();
        if (cur) {
            cap_get_flag(cur, CAP_SETPCAP, CAP_EFFECTIVE, &v);
            cap_free(cur);
        }
        if (v == CAP_SET) {
            int last = cbz_cap_last();
            for (int n = 0; n <= last; n++) {
                if (cap_drop_bound(n) < 0 && errno != EINVAL) return -1;
            }
        }
    }
    cap_t empty = cap_init();
    if (!empty) return -1;
    int r = cap_set_proc(empty);
    int e = errno;
    cap_free(empty);
    errno = e;
    return r;
}

// PR_SET_NO_NEW_PRIVS: no execve from this thread (or those it starts) gains privileges, file capabilities included.
int cbz_set_no_new_privs(void) { return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); }

int cbz_cap_name(int cap, char *buf, size_t len) {
    char *n = cap_to_name(cap);
    if (!n) return -1;
    snprintf(buf, len, "%s", n);
    cap_free(n);
    return 0;
}

// MARK: - Threads

int cbz_pin_to_current_cpu(void) {
    int cpu = sched_getcpu();
    if (cpu < 0) return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) return -1;
    return cpu;
}

// The "C" locale for numbers, made once: this thread uses it around one snprintf, so a setlocale elsewhere in
// the process (a line editor's LC_ALL="") cannot turn the decimal point into a comma.
static locale_t cbz_c_numeric;
static void cbz_make_c_numeric(void) { cbz_c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

int cbz_format_fixed(char *buf, size_t len, double value, int width, int decimals) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, cbz_make_c_numeric);
    locale_t previous = cbz_c_numeric ? uselocale(cbz_c_numeric) : (locale_t)0;
    int n = snprintf(buf, len, "%*.*f", width, decimals, value);
    if (previous) uselocale(previous);
    return n;
}

int cbz_ipv4_addresses(char *buf, size_t len) {
    if (len == 0) { errno = EINVAL; return -1; }
    buf[0] = '\0';
    struct ifaddrs *all;
    if (getifaddrs(&all) != 0) return -1;
    size_t used = 0;
    for (struct ifaddrs *i = all; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK)) continue;
        char one[INET_ADDRSTRLEN];
        if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, one, sizeof one) == NULL) continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? "\n" : "", one);
        if (n < 0 || (size_t)n >= len - used) { buf[used] = '\0'; break; }
        used += (size_t)n;
    }
    freeifaddrs(all);
    return 0;
}

__thread uintptr_t cbz_thread_loop = 0;

int cbz_set_thread_name(const char *name) {
    char buf[16];
    snprintf(buf, sizeof buf, "%s", name);
    return prctl(PR_SET_NAME, buf, 0, 0, 0);
}

// pthread's start routine returns a value nobody joins for: this trampoline calls the caller's body and drops it.
struct cbz_thread_start_args { void (*body)(void *); void *context; };

static void *cbz_thread_trampoline(void *raw) {
    struct cbz_thread_start_args args = *(struct cbz_thread_start_args *)raw;
    free(raw);
    args.body(args.context);
    return NULL;
}

int cbz_thread_start(void (*body)(void *context), void *context) {
    struct cbz_thread_start_args *args = malloc(sizeof *args);
    if (args == NULL) return ENOMEM;
    args->body = body;
    args->context = context;
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, cbz_thread_trampoline, args);
    if (rc != 0) { free(args); return rc; }
    pthread_detach(thread);
    return 0;
}

int cbz_terminal_columns(int fd) {
    struct winsize w;
    return ioctl(fd, TIOCGWINSZ, &w) == 0 ? w.ws_col : -1;
}

int cbz_isatty(int fd) { return isatty(fd); }

ssize_t cbz_read(int fd, void *buf, size_t len) {
    ssize_t r;
    do { r = read(fd, buf, len); } while (r < 0 && errno == EINTR);
    return r;
}

int cbz_mkdir_private(const char *path) { return mkdir(path, 0700); }

int cbz_open_private_file(const char *path) {
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

// MARK: - Leak tests

// Defined by the ASan and TSan runtimes (sanitizer/allocator_interface.h); weak, so absent without one.
extern size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

size_t cbz_heap_in_use(void) {
    if (__sanitizer_get_current_allocated_bytes) return __sanitizer_get_current_allocated_bytes();
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

int cbz_under_sanitizer(void) { return __sanitizer_get_current_allocated_bytes != NULL; }
