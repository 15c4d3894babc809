// CBlueZSocket: the project's only door to the kernel. Every syscall, ioctl and libcap call the
// Swift code makes goes through a `cbz_` function here, over BlueZ's own headers (libbluetooth-dev),
// so that kernel structs such as `struct sockaddr_l2` keep C's layout (14 bytes) and never get
// redeclared in Swift. Each function returns -1 and leaves errno set on failure, like the syscall.
#ifndef CBLUEZSOCKET_H
#define CBLUEZSOCKET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/l2cap.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

/// sizeof(struct sockaddr_l2): 14 on Linux.
size_t cbz_sizeof_sockaddr_l2(void);

#endif
