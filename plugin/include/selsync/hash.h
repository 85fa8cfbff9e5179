/* FNV-1a, 64 bit: a fast fingerprint of bytes (not cryptographic), for
 * checksums and for comparing what ranks hold. */
#ifndef SELSYNC_HASH_H
#define SELSYNC_HASH_H

#include <stddef.h>
#include <stdint.h>

#define SELSYNC_HASH_START 1469598103934665603ULL

/* h continued over the n bytes at buf. */
static inline uint64_t selsync_hash(uint64_t h, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

#endif
