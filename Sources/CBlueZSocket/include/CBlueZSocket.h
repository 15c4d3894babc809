// CBlueZSocket: the project's only door to the kernel. Every syscall, ioctl and libcap call the
// Swift code makes goes through a `cbz_` function here, over BlueZ's own headers (libbluetooth-dev),
// so that kernel structs such as `struct sockaddr_l2` keep C's layout (14 bytes) and never get
// redeclared in Swift. Each function returns -1 and leaves errno set on failure, like the syscall,
// unless its comment says otherwise. Bluetooth addresses cross this boundary as 6 bytes in the
// printed order (most significant first, "AA:BB:CC:DD:EE:FF" is {0xAA, ..., 0xFF}); the shim
// reverses them into the kernel's little-endian bdaddr_t.
#ifndef CBLUEZSOCKET_H
#define CBLUEZSOCKET_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/l2cap.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

// MARK: - Layouts (pinned by tests)

/// sizeof(struct sockaddr_l2): 14 on Linux.
size_t cbz_sizeof_sockaddr_l2(void);
/// sizeof(struct sockaddr_hci): 6.
size_t cbz_sizeof_sockaddr_hci(void);
/// sizeof(struct bt_security): 2.
size_t cbz_sizeof_bt_security(void);
/// sizeof(struct hci_dev_info): 92 on Linux.
size_t cbz_sizeof_hci_dev_info(void);
/// offsetof(struct hci_dev_info, FIELD) for "bdaddr", "flags", "type", "features", "acl_mtu", "acl_pkts";
/// (size_t)-1 for any other name.
size_t cbz_offsetof_hci_dev_info(const char *field);
/// offsetof(struct sockaddr_l2, FIELD) for "l2_psm", "l2_bdaddr", "l2_cid", "l2_bdaddr_type".
size_t cbz_offsetof_sockaddr_l2(const char *field);

// MARK: - Errors

/// errno's symbolic name ("ECONNREFUSED"), or NULL if glibc does not know it.
const char *cbz_errno_name(int err);
/// errno's description ("Connection refused"), never NULL.
const char *cbz_errno_description(int err);
/// The calling thread's errno.
int cbz_errno(void);

// MARK: - Generic descriptors

/// close(2). Retries nothing (Linux closes the fd even when close reports EINTR).
int cbz_close(int fd);
/// fcntl(fd, F_DUPFD_CLOEXEC, 0): a second descriptor of the same open socket, or -1 with errno.
int cbz_dup(int fd);
/// send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL): never blocks, never raises SIGPIPE.
ssize_t cbz_send(int fd, const void *buf, size_t len);
/// recvmsg(fd, MSG_DONTWAIT | MSG_TRUNC) of one datagram into buf. Returns the datagram's real length
/// (which may exceed len on sockets that report it), 0 at end of stream, -1 with errno.
/// *truncated is set to 1 when the kernel cut the datagram to fit (MSG_TRUNC in msg_flags).
ssize_t cbz_recv_datagram(int fd, void *buf, size_t len, int *truncated);
/// Whether the socket's peer has hung up (poll with POLLRDHUP and a zero timeout: never waits): 1 yes, 0 no, -1 error.
/// Tells end of file from an empty datagram after recvmsg returned 0.
int cbz_peer_hung_up(int fd);
/// getsockopt(SO_ERROR): stores the pending socket error (0 when none) in *err.
int cbz_socket_error(int fd, int *err);
/// getsockopt(SO_SNDBUF / SO_RCVBUF) and setsockopt; `which` is 0 for send, 1 for receive.
int cbz_get_buffer_size(int fd, int which, int *bytes);
int cbz_set_buffer_size(int fd, int which, int bytes);
/// fcntl(F_SETFL, O_NONBLOCK) added to the current flags.
int cbz_set_nonblocking(int fd);
/// fcntl(F_SETFL) without O_NONBLOCK (sends stay non-blocking: cbz_send passes MSG_DONTWAIT).
int cbz_set_blocking(int fd);
/// shutdown(fd, SHUT_RDWR).
int cbz_shutdown(int fd);
/// Number of bytes queued for receive (FIONREAD / SIOCINQ).
int cbz_pending_bytes(int fd, int *bytes);

// MARK: - AF_UNIX SOCK_SEQPACKET (one datagram = one ATT PDU)

/// socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC); fds[0], fds[1].
int cbz_unix_socketpair(int fds[2]);
/// socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC).
int cbz_unix_socket(void);
/// bind(fd, path). ENAMETOOLONG when path does not fit sun_path (107 bytes plus NUL).
int cbz_unix_bind(int fd, const char *path);
/// connect(fd, path); may fail with EINPROGRESS/EAGAIN on a non-blocking socket.
int cbz_unix_connect(int fd, const char *path);
/// The longest path sun_path takes (107).
size_t cbz_unix_path_max(void);
/// listen(fd, backlog).
int cbz_listen(int fd, int backlog);
/// accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC).
int cbz_accept(int fd);
/// 1 when lstat(path) says it is a socket, 0 when it is something else, -1 with errno when lstat fails.
int cbz_is_socket_file(const char *path);
/// unlink(path).
int cbz_unlink(const char *path);

// MARK: - L2CAP LE (fixed channel CID 4, the ATT bearer)

/// LE address types of sockaddr_l2.l2_bdaddr_type.
enum { CBZ_LE_PUBLIC = BDADDR_LE_PUBLIC, CBZ_LE_RANDOM = BDADDR_LE_RANDOM };
/// The ATT fixed channel.
enum { CBZ_ATT_CID = 4 };

/// socket(AF_BLUETOOTH, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, BTPROTO_L2CAP).
int cbz_l2cap_socket(void);
/// bind to the adapter address `addr` (printed order; NULL means BDADDR_ANY) with CID 4 and `addr_type`.
int cbz_l2cap_bind_le(int fd, const uint8_t *addr, uint8_t addr_type);
/// connect to `addr` (printed order) with PSM 0, CID 4 and `addr_type`. Non-blocking sockets give
/// -1/EINPROGRESS; the result comes later from cbz_socket_error once POLLOUT fires.
int cbz_l2cap_connect_le(int fd, const uint8_t *addr, uint8_t addr_type);
/// An ECRED channel (BT_MODE_EXT_FLOWCTL) on an LE SPSM: bind to `psm` (0: any), connect to the peer's `psm`.
int cbz_l2cap_bind_le_psm(int fd, const uint8_t *addr, uint8_t addr_type, uint16_t psm);
int cbz_l2cap_connect_le_psm(int fd, const uint8_t *addr, uint8_t addr_type, uint16_t psm);
/// setsockopt(SOL_BLUETOOTH, BT_MODE): CBZ_BT_MODE_EXT_FLOWCTL after bind, before connect or listen.
int cbz_bt_set_mode(int fd, uint8_t mode);
enum { CBZ_BT_MODE_EXT_FLOWCTL = 0x04, CBZ_EATT_PSM = 0x0027 };
/// accept4 on a listening CID 4 socket; the peer's address (printed order) and type are stored.
int cbz_l2cap_accept(int fd, uint8_t *peer_addr, uint8_t *peer_type);
/// getsockname / getpeername as address (printed order), type and CID.
int cbz_l2cap_local(int fd, uint8_t *addr, uint8_t *addr_type, uint16_t *cid);
int cbz_l2cap_peer(int fd, uint8_t *addr, uint8_t *addr_type, uint16_t *cid);
/// BT_SECURITY get (level and key size) and set (level 1 low .. 4 FIPS).
int cbz_bt_security_get(int fd, uint8_t *level, uint8_t *key_size);
int cbz_bt_security_set(int fd, uint8_t level);
/// BT_SNDMTU / BT_RCVMTU: the L2CAP MTUs (not the ATT MTU).
int cbz_bt_sndmtu(int fd, uint16_t *mtu);
int cbz_bt_rcvmtu(int fd, uint16_t *mtu);
int cbz_bt_set_rcvmtu(int fd, uint16_t mtu);

/// Converts `printed` ("00:AA:..." order, most significant byte first) to a bdaddr_t as the socket calls do
/// (least significant byte first); the tests print it back with BlueZ's own ba2str.
void cbz_to_bdaddr(const uint8_t *printed, bdaddr_t *out);

// MARK: - HCI devices

/// What the shim reports about one controller (filled from struct hci_dev_info, HCIGETDEVINFO).
typedef struct {
    uint16_t dev_id;
    char name[9];            ///< "hci0", NUL-terminated
    uint8_t addr[6];         ///< printed order
    uint32_t flags;          ///< HCI_UP etc. as bits (1 << HCI_UP)
    uint8_t bus;             ///< HCI_VIRTUAL 0, HCI_USB 1, ... (low nibble of type)
    uint8_t dev_type;        ///< HCI_PRIMARY 0, HCI_AMP 1 (bits 4-5 of type)
    uint8_t features[8];     ///< LMP features page 0
    uint16_t acl_mtu;        ///< ACL data length (for LE-only controllers the kernel reports the LE buffers)
    uint16_t acl_pkts;       ///< ACL buffers
    bool up;                 ///< HCI_UP
    bool running;            ///< HCI_RUNNING
    bool raw;                ///< HCI_RAW
    bool le;                 ///< LMP feature "LE supported (controller)" (features[4] bit 6)
    bool bredr;              ///< not "BR/EDR not supported" (features[4] bit 5)
} cbz_hci_info;

/// socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI), unbound: the control socket the device
/// ioctls below take (opening it needs no capability).
int cbz_hci_control_socket(void);
/// Lists controller ids with HCIGETDEVLIST: stores at most `max` in ids, returns how many exist.
int cbz_hci_device_list(int ctl, uint16_t *ids, int max);
/// HCIGETDEVINFO for dev_id (ENODEV when there is none).
int cbz_hci_device_info(int ctl, int dev_id, cbz_hci_info *info);
/// HCIDEVUP / HCIDEVDOWN (need CAP_NET_ADMIN; EALREADY when already up).
int cbz_hci_device_up(int ctl, int dev_id);
int cbz_hci_device_down(int ctl, int dev_id);
/// How many connections (ACL and LE) dev_id has, by HCIGETCONNLIST (no capability needed); -1 with errno.
int cbz_hci_connection_count(int ctl, int dev_id);
/// A raw HCI socket bound to dev_id (HCI_CHANNEL_RAW), non-blocking, with a filter that passes every
/// HCI event packet. Binding needs no capability; without CAP_NET_RAW the filter keeps only the kernel's security
/// filter's events and LE commands fail with EPERM (net/bluetooth/hci_sock.c).
int cbz_hci_open_raw(int dev_id);
/// A raw HCI socket bound to dev_id that passes ACL data in both directions and Disconnection Complete and LE Meta
/// events, with HCI_DATA_DIR on so each datagram says its direction (hci_sock.c hci_sock_cmsg). The kernel copies
/// every ACL packet, sent or received, to a bound raw socket (hci_send_to_sock); ACL needs CAP_NET_RAW at the filter
/// (hci_sock_setsockopt_old keeps only events otherwise): 1 in *acl when ACL passes the filter.
int cbz_hci_open_acl_watch(int dev_id, int *acl);
/// One datagram of a cbz_hci_open_acl_watch socket into buf: its length, or -1 with errno (EAGAIN when none);
/// *incoming is 1 for a packet from the controller, 0 for one the host sent.
ssize_t cbz_hci_recv_directed(int fd, void *buf, size_t len, int *incoming);
/// A socket on the kernel's Bluetooth Management channel (HCI_CHANNEL_CONTROL, bound to HCI_DEV_NONE; BlueZ
/// doc/mgmt-api.txt), non-blocking. The kernel marks it trusted when the binding thread holds CAP_NET_ADMIN
/// (hci_sock_bind), and only a trusted socket may start discovery: bind on the thread that keeps the capabilities.
int cbz_mgmt_open(void);
/// Writes one HCI command packet (type 0x01, opcode ogf/ocf, params) to a raw HCI socket.
int cbz_hci_send_command(int fd, uint16_t ogf, uint16_t ocf, const uint8_t *params, uint8_t len);

// MARK: - The LE link: what the kernel tells about one connection (see docs in Sources/LinuxBluetooth/LinkState.swift)

/// getsockopt(SOL_L2CAP, L2CAP_CONNINFO): the HCI connection handle of a connected L2CAP socket. No capability
/// (net/bluetooth/l2cap_sock.c l2cap_sock_getsockopt_old); ENOTCONN before the link is up.
int cbz_l2cap_conninfo(int fd, uint16_t *handle);
/// getsockopt(SOL_BLUETOOTH, BT_PHY): the BT_PHY_* bits. No capability (l2cap_sock.c -> hci_conn.c hci_conn_get_phy,
/// which for an LE link tests conn->le_tx_phy/le_rx_phy, set only by LE PHY Update Complete, hci_event.c).
int cbz_bt_phy(int fd, uint32_t *phys);
/// The LE_* bits of BT_PHY.
enum { CBZ_BT_PHY_LE_1M_TX = BT_PHY_LE_1M_TX, CBZ_BT_PHY_LE_1M_RX = BT_PHY_LE_1M_RX, CBZ_BT_PHY_LE_2M_TX = BT_PHY_LE_2M_TX,
       CBZ_BT_PHY_LE_2M_RX = BT_PHY_LE_2M_RX, CBZ_BT_PHY_LE_CODED_TX = BT_PHY_LE_CODED_TX,
       CBZ_BT_PHY_LE_CODED_RX = BT_PHY_LE_CODED_RX };

/// What HCIGETCONNINFO reports about one connection (struct hci_conn_info without the address).
typedef struct {
    uint16_t handle;
    uint8_t type;        ///< 0x80 LE_LINK (the kernel's include/net/bluetooth/hci.h; BlueZ's hci.h has no name for it)
    uint8_t out;         ///< 1 when this host initiated the connection
    uint16_t state;      ///< BT_CONNECTED 1, ...
    uint32_t link_mode;  ///< HCI_LM_MASTER (this host is central), HCI_LM_AUTH, HCI_LM_ENCRYPT, ...
} cbz_conn_info;
enum { CBZ_LE_LINK = 0x80, CBZ_HCI_LM_MASTER = HCI_LM_MASTER, CBZ_HCI_LM_AUTH = HCI_LM_AUTH,
       CBZ_HCI_LM_ENCRYPT = HCI_LM_ENCRYPT };
/// HCIGETCONNINFO for the LE connection to `peer` (printed order) on dev_id: binds a raw HCI socket to dev_id (the
/// raw channel binds without a capability, net/bluetooth/hci_sock.c hci_sock_bind), asks, closes. ENOENT: no such link.
int cbz_hci_conn_info(int dev_id, const uint8_t *peer, cbz_conn_info *out);
/// Sets a raw HCI socket's filter (HCI_FILTER) to HCI event packets with exactly these `count` event codes. Without
/// CAP_NET_RAW the kernel silently keeps only its security filter's events (hci_sock.c hci_sock_setsockopt_old):
/// no LE Meta (0x3E), no Number Of Completed Packets (0x13); read the filter back with cbz_hci_filter_passes.
int cbz_hci_set_event_filter(int fd, const uint8_t *events, int count);
/// Reads the filter back (getsockopt HCI_FILTER): 1 when `event` passes it, 0 when not, -1 with errno.
int cbz_hci_filter_passes(int fd, uint8_t event);

// MARK: - poll / epoll / eventfd

/// poll(2) on one fd: stores revents; returns 0 on timeout, 1 when ready, -1 with errno.
int cbz_poll_one(int fd, short events, int timeout_ms, short *revents);
/// poll(2) on two fds (the second is usually a wake-up eventfd); revents for each.
int cbz_poll_two(int fd1, short events1, int fd2, short events2, int timeout_ms, short *revents1, short *revents2);
/// epoll_create1(EPOLL_CLOEXEC).
int cbz_epoll_create(void);
/// EPOLL_CTL_ADD / EPOLL_CTL_MOD / EPOLL_CTL_DEL with `data` as the event's u64.
int cbz_epoll_add(int epfd, int fd, uint32_t events, uint64_t data);
int cbz_epoll_mod(int epfd, int fd, uint32_t events, uint64_t data);
int cbz_epoll_del(int epfd, int fd);
/// One ready event (epoll_event is packed on x86_64; this is not).
typedef struct { uint32_t events; uint64_t data; } cbz_epoll_event;
/// epoll_wait into `out` (at most max); retries EINTR itself.
int cbz_epoll_wait(int epfd, cbz_epoll_event *out, int max, int timeout_ms);
/// Event bits, exported as plain constants.
extern const uint32_t CBZ_EPOLLIN, CBZ_EPOLLOUT, CBZ_EPOLLERR, CBZ_EPOLLHUP, CBZ_EPOLLRDHUP, CBZ_EPOLLONESHOT;
extern const short CBZ_POLLIN, CBZ_POLLOUT, CBZ_POLLERR, CBZ_POLLHUP;
/// eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); signal adds 1; drain reads the counter to zero.
int cbz_eventfd(void);
int cbz_eventfd_signal(int fd);
int cbz_eventfd_drain(int fd);
/// signalfd for SIGINT and SIGTERM (SFD_NONBLOCK | SFD_CLOEXEC, signalfd(2)): the two must be blocked in every
/// thread (pthread_sigmask) for it to see them. -1 with errno on failure.
int cbz_signalfd_interrupts(void);
/// Reads one signal from that signalfd: its number, 0 when none is pending, -1 with errno on failure.
int cbz_signalfd_take(int fd);
/// timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC): an event loop's one timer.
int cbz_timerfd(void);
/// Arms the timer at `deadline_ns` on CLOCK_MONOTONIC (TFD_TIMER_ABSTIME; 0 disarms; one shot).
int cbz_timerfd_set(int fd, uint64_t deadline_ns);
/// Reads the expiry count (0 when none: EAGAIN).
int cbz_timerfd_drain(int fd);

// MARK: - Files

/// open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644).
int cbz_create_file(const char *path);
/// open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644): -1 with EEXIST when the path exists, so the caller
/// knows the file is its own (and may remove it) rather than the user's (a device, a FIFO, an older file).
int cbz_create_new_file(const char *path);
/// open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600): a private file that is surely new (a
/// symlink or any file already at `path` is -1 with EEXIST or ELOOP, never followed or truncated).
int cbz_create_private_new_file(const char *path);
/// open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK): a FIFO opens at once, for the caller to refuse.
int cbz_open_read_nofollow(const char *path);
/// pread(2) of up to len bytes at offset, retrying EINTR: the count (0 at the end), or -1 with errno.
ssize_t cbz_pread(int fd, void *buf, size_t len, int64_t offset);
/// renameat2(from, to, RENAME_NOREPLACE), or link(2) then unlink(2) where the file system lacks the flag (EINVAL):
/// -1 with EEXIST when `to` exists (a file or a symlink: never replaced).
int cbz_rename_noreplace(const char *from, const char *to);
/// lstat(2)'s owner, mode (type and permission bits) of `path`. 0, or -1 with errno.
int cbz_lstat_owner_mode(const char *path, uint32_t *uid, uint32_t *mode);
/// The effective user ID (geteuid).
uint32_t cbz_euid(void);
/// len bytes from the kernel's random source (getrandom(2), blocking until it is seeded; loops on short reads
/// and EINTR). 0, or -1 with errno.
int cbz_random_bytes(void *buf, size_t len);
/// write(2) of the whole buffer (loops on short writes and EINTR). Returns 0 or -1 with errno.
int cbz_write_all(int fd, const void *buf, size_t len);
/// readlink("/proc/self/exe") into buf (NUL-terminated). Returns the length or -1.
ssize_t cbz_self_exe(char *buf, size_t len);
/// snprintf(buf, len, "%*.*f", width, decimals, value) in the C locale's notation ("3.14", no grouping): what
/// Foundation's String(format:) gave, without Foundation. Returns snprintf's count.
int cbz_format_fixed(char *buf, size_t len, double value, int width, int decimals);
/// This machine's IPv4 addresses on interfaces that are not loopback (getifaddrs, in its order), numeric and
/// separated by '\n', into buf (NUL-terminated; addresses that do not fit are left out). 0, or -1 with errno.
int cbz_ipv4_addresses(char *buf, size_t len);

// MARK: - Threads

/// Names the calling thread (PR_SET_NAME; cut to 15 bytes).
int cbz_set_thread_name(const char *name);
/// The event loop whose thread this is (LinkCore's EventLoop sets it on its thread; NULL on every other thread), so
/// that EventLoop.inEventLoop is one thread-local load with no call (pthread_self and pthread_equal are two).
extern __thread uintptr_t cbz_thread_loop;
static inline uintptr_t cbz_current_loop(void) { return cbz_thread_loop; }
static inline void cbz_set_current_loop(uintptr_t loop) { cbz_thread_loop = loop; }
/// Pins the calling thread, and so every thread it starts afterwards, to the CPU it runs on now
/// (sched_getcpu, sched_setaffinity): a benchmark's loops then wake each other on one core, not across idle
/// cores. Returns the CPU, or -1 with errno.
int cbz_pin_to_current_cpu(void);
/// Starts a detached thread (pthread_create with default attributes, then pthread_detach) that calls
/// body(context) once. Returns 0 or the errno pthread_create returned (it does not set errno).
int cbz_thread_start(void (*body)(void *context), void *context);

// MARK: - Capabilities (libcap)

/// Capability numbers used by the project.
enum { CBZ_CAP_NET_ADMIN = 12, CBZ_CAP_NET_RAW = 13 };
/// The highest capability number this kernel knows (cap_max_bits() - 1).
int cbz_cap_last(void);
/// The calling process's effective, permitted and inheritable sets as bit masks (bit n = capability n).
int cbz_cap_process(uint64_t *effective, uint64_t *permitted, uint64_t *inheritable);
/// The file capabilities of `path` (security.capability). Returns 0 with all masks 0 and *present = 0
/// when the file carries none; -1 with errno when the file cannot be read.
int cbz_cap_file(const char *path, uint64_t *effective, uint64_t *permitted, uint64_t *inheritable, int *present);
/// Drops every capability: clears the ambient set, empties the bounding set (when CAP_SETPCAP allows),
/// then sets effective, permitted and inheritable to empty.
int cbz_cap_drop_all(void);
/// Keeps, on the calling thread, only the capabilities in the mask `keep` (bit n = capability n) of those it holds:
/// clears the ambient set, cuts the bounding set to `keep` (when CAP_SETPCAP allows), sets permitted and effective
/// to what is kept, inheritable to empty. 0, or -1 with errno.
int cbz_cap_keep_only(uint64_t keep);
/// prctl(PR_SET_NO_NEW_PRIVS, 1): an exec from here on gains no privilege (no file capabilities, no setuid).
int cbz_set_no_new_privs(void);
/// The capability's name ("cap_net_raw") into buf, from libcap.
int cbz_cap_name(int cap, char *buf, size_t len);

// MARK: - Terminal and private files (LineEditor)

/// The terminal's width in columns (ioctl TIOCGWINSZ), or -1 with errno.
int cbz_terminal_columns(int fd);
/// isatty(3): 1 when fd is a terminal, 0 when not.
int cbz_isatty(int fd);
/// read(2), retrying EINTR: the count (0 at the end), or -1 with errno.
ssize_t cbz_read(int fd, void *buf, size_t len);
/// mkdir(path, 0700): 0, or -1 with errno (EEXIST when it is there already).
int cbz_mkdir_private(const char *path);
/// open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600): an existing file is kept as it is.
int cbz_open_private_file(const char *path);

// MARK: - Leak tests (TestSupport)

/// Bytes the program has allocated and not freed: the sanitizer allocator's count when one is linked
/// (its shadow and thread records are not the program's), else glibc's mallinfo2 (arena plus mmapped chunks).
size_t cbz_heap_in_use(void);
/// 1 when an ASan or TSan runtime is in this process, else 0.
int cbz_under_sanitizer(void);

#endif
