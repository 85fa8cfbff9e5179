/* Checkpoint files (see selsync/checkpoint.h). */
#include "selsync/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static const char trailer_magic[8] = {'S', 'S', 'C', 'K', 'P', 'T', '0', '1'};

typedef struct trailer {
    uint64_t length, hash;
    char magic[8];
} trailer;

static uint64_t fnv1a(const void *buf, size_t n)
{
    const uint8_t *p = buf;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
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
    trailer t = {len, fnv1a(state, len), {0}};
    memcpy(t.magic, trailer_magic, sizeof t.magic);
    FILE *f = fopen(tmp, "ab");
    const char *what = "open";
    if (f) {
        what = "write";
        if ((len && fwrite(state, 1, len, f) != len) || fwrite(&t, sizeof t, 1, f) != 1) goto failed;
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
                        "previous checkpoint is unchanged)", path, what, tmp, strerror(saved));
}

selsync_status selsync_checkpoint_read(const char *path, void **state, size_t *len, char *err,
                                       size_t errlen)
{
    trailer t;
    selsync_status st = SELSYNC_OK;
    *state = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return selsync_fail(err, errlen, SELSYNC_EIO, "[selsync] cannot open '%s': %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) goto io;
    long size = ftell(f);
    if (size < 0) goto io;
    if ((size_t)size < sizeof t) goto out; /* too short for a trailer: a plain file */
    if (fseek(f, size - (long)sizeof t, SEEK_SET) != 0 || fread(&t, sizeof t, 1, f) != 1) goto io;
    if (memcmp(t.magic, trailer_magic, sizeof t.magic) != 0) goto out; /* a plain model file */
    if (t.length > (uint64_t)size - sizeof t) {
        st = selsync_fail(err, errlen, SELSYNC_EMISMATCH, "[selsync] '%s': damaged checkpoint (its state "
                          "would be %llu bytes, longer than the file)", path, (unsigned long long)t.length);
        goto out;
    }
    void *buf = malloc(t.length ? (size_t)t.length : 1);
    if (!buf) {
        st = selsync_fail(err, errlen, SELSYNC_ENOMEM, "[selsync] '%s': out of memory for its state", path);
        goto out;
    }
    if (fseek(f, size - (long)sizeof t - (long)t.length, SEEK_SET) != 0 ||
        (t.length && fread(buf, 1, (size_t)t.length, f) != t.length)) {
        free(buf);
        goto io;
    }
    if (fnv1a(buf, (size_t)t.length) != t.hash) {
        free(buf);
        st = selsync_fail(err, errlen, SELSYNC_EMISMATCH, "[selsync] '%s': damaged checkpoint (its state "
                          "does not match its checksum)", path);
        goto out;
    }
    *state = buf;
    *len = (size_t)t.length;
    goto out;
io:
    st = selsync_fail(err, errlen, SELSYNC_EIO, "[selsync] cannot read '%s': %s", path,
                      errno ? strerror(errno) : "short read");
out:
    fclose(f);
    return st;
}
