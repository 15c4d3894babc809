// The CRC-32 wrapper of CZlib.h over zlib's crc32_z.
#include "CZlib.h"

#include <zlib.h>

uint32_t czl_crc32(uint32_t crc, const void *bytes, size_t count) {
    // crc32_z(crc, NULL, 0) returns zlib's initial value, not `crc`: nothing fed keeps `crc`.
    if (count == 0) return crc;
    return (uint32_t)crc32_z(crc, (const Bytef *)bytes, count);
}
