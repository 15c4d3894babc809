#include "CBlueZSocket.h"

size_t cbz_sizeof_sockaddr_l2(void) { return sizeof(struct sockaddr_l2); }
