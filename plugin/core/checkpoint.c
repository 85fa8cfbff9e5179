/* Checkpoint files (see selsync/checkpoint.h). */
#include "selsync/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "selsync/hash.h"

#include "internal.h"

static const char trailer_magic[8] = {'S', 'S', 'C', 'K', 'P', 'T', '0', '2'};
static const char old_trailer_magic[8] = {'S', 'S', 'C', 'K', 'P', 'T', '0', '1'};

typedef struct trailer {
    uint64_t model_length, state_length, hash;
    char magic[8];
} trailer;


/* Hashes the first n bytes of f from its current position into *h; -1 on
 * a read error or a short file. */
static int hash_stream(FILE *f, uint64_t n, uint64_t *h)
{
    uint8_t buf[1 << 16];
    while (n > 0) {
        size_t want = n < sizeof buf ? (size_t)n : sizeof buf;
        if (fread(buf, 1, want, f) != want) return -1;
        *h = selsync_hash(*h, buf, want);
        n -= want;
    }
    return 0;
}

int selsync_checkpoint_temp(const char *path, char *out, size_t size)
{
    int n = snprintf(out, size, "%s.tmp", path);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Makes the rename durable: syncs the directory holding path. */
static int sync_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n >= sizeof dir) return -1;
    if (!slash) strcpy(dir, ".");
    else if (n == 0) strcpy(dir, "/");
    else memcpy(dir, path, n), dir[n] = '\0';
    int fd = open(dir, O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

selsync_status selsync_checkpoint_seal(const char *tmp, const char *path, const void *state,
                                       size_t len, char *err, size_t errlen)
{
    trailer t = {0, len, SELSYNC_HASH_START, {0}};
    memcpy(t.magic, trailer_magic, sizeof t.magic);
    FILE *f = fopen(tmp, "r+b");
    const char *what = "open";
    long model;
    if (f) {
        what = "read";
        if (fseek(f, 0, SEEK_END) != 0 || (model = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
            hash_stream(f, (uint64_t)model, &t.hash) != 0)
            goto failed;
        t.model_length = (uint64_t)model;
        t.hash = selsync_hash(t.hash, state, len);
        what = "write";
        if (fseek(f, 0, SEEK_END) != 0 || (len && fwrite(state, 1, len, f) != len) ||
            fwrite(&t, sizeof t, 1, f) != 1)
            goto failed;
        what = "flush";
        if (fflush(f) != 0 || fsync(fileno(f)) != 0) goto failed;
        what = "close";
        int rc = fclose(f);
        f = NULL;
        if (rc != 0) goto failed;
        what = "rename";
        if (rename(tmp, path) != 0) goto failed;
        if (sync_dir(path) != 0)
            return selsync_fail(err, errlen, SELSYNC_EIO, "[selsync] checkpoint '%s' written, but syncing its "
                                "directory failed: %s", path, strerror(errno));
        return SELSYNC_OK;
    }
failed:;
    int saved = errno;
    if (f) fclose(f);
    remove(tmp);
    return selsync_fail(err, errlen, SELSYNC_EIO, "[selsync] checkpoint '%s': %s of '%s' failed: %s (the "
                        "previous checkpoint is unchanged)", path, what, tmp, saved ? strerror(saved) : "short read");
}

selsync_status selsync_checkpoint_read(const char *path, int required, uint64_t model_bytes, void **state,
                                       size_t *len, char *err, size_t errlen)
{
    trailer t;
    selsync_status st = SELSYNC_OK;
    uint64_t h = SELSYNC_HASH_START;
    void *buf = NULL;
    *state = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return selsync_fail(err, errlen, SELSYNC_EIO, "[selsync] cannot open '%s': %s", path, strerror(errno));
    errno = 0;
    if (fseek(f, 0, SEEK_END) != 0) goto io;
    long size = ftell(f);
    if (size < 0) goto io;
    if ((size_t)size < sizeof t) {
        memset(t.magic, 0, sizeof t.magic);
    } else if (fseek(f, size - (long)sizeof t, SEEK_SET) != 0 || fread(&t, sizeof t, 1, f) != 1) {
        goto io;
    }
    if (memcmp(t.magic, old_trailer_magic, sizeof t.magic) == 0) {
        st = selsync_fail(err, errlen, SELSYNC_EMISMATCH, "[selsync] '%s': a checkpoint of an older format, "
                          "without a checksum of its weights; resume it with the version that wrote it", path);
        goto out;
    }
    if (memcmp(t.magic, trailer_magic, sizeof t.magic) != 0) {
        if (required)
            st = selsync_fail(err, errlen, SELSYNC_EMISMATCH, "[selsync] '%s': damaged checkpoint (%ld bytes, "
                              "its trailer is missing: the file was cut short or overwritten)", path, size);
        goto out; /* a plain model file */
    }
    uint64_t body = (uint64_t)size - sizeof t;
    if (t.state_length > body || t.model_length != body - t.state_length) {
        st = selsync_fail(err, errlen, SELSYNC_EMISMATCH, "[selsync] '%s': damaged checkpoint (%ld bytes; its "
                          "trailer says %llu bytes of weights and %llu of state)", path, size,
                          (unsigned long long)t.model_length, (unsigned long long)t.state_length);
        goto out;
    }
    if (model_bytes && t.model_length != model_bytes) {
        st = selsync_fail(err, errlen, SELSYNC_EMISMATCH, "[selsync] '%s': damaged checkpoint, or one of another "
                          "network (its weights take %llu bytes; this network's take %llu)", path,
                          (unsigned long long)t.model_length, (unsigned long long)model_bytes);
        goto out;
    }
    if (fseek(f, 0, SEEK_SET) != 0 || hash_stream(f, t.model_length, &h) != 0) goto io;
    if (!(buf = malloc(t.state_length ? (size_t)t.state_length : 1))) {
        st = selsync_fail(err, errlen, SELSYNC_ENOMEM, "[selsync] '%s': out of memory for its state", path);
        goto out;
    }
    if (t.state_length && fread(buf, 1, (size_t)t.state_length, f) != t.state_length) goto io;
    if (selsync_hash(h, buf, (size_t)t.state_length) != t.hash) {
        st = selsync_fail(err, errlen, SELSYNC_EMISMATCH, "[selsync] '%s': damaged checkpoint (its weights "
                          "and state do not match its checksum)", path);
        goto out;
    }
    *state = buf;
    *len = (size_t)t.state_length;
    buf = NULL;
    goto out;
io:
    st = selsync_fail(err, errlen, SELSYNC_EIO, "[selsync] cannot read '%s': %s", path,
                      errno ? strerror(errno) : "short read");
out:
    free(buf);
    fclose(f);
    return st;
}
