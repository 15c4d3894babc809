// CZlib: zlib's CRC-32 (Debian zlib1g-dev) as one fixed-width function.
#ifndef CZLIB_H
#define CZLIB_H

#include <stddef.h>
#include <stdint.h>

/// The CRC-32 (ISO 3309, as ZIP and gzip use it) of `count` bytes, continuing from `crc` (0 to start).
uint32_t czl_crc32(uint32_t crc, const void *bytes, size_t count);

#endif
