/* The ranks' agreement on what they run (agree.h). */
#include "agree.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void agree_copy_text(char *dst, size_t len, const char *src)
{
    size_t n = src ? strnlen(src, len - 1) : 0;
    memset(dst, 0, len);
    if (n) memcpy(dst, src, n);
}

/* Appends the ranks of `all` whose value of item equals rank first's, from
 * first on, and marks them done: "ranks 0, 2 (hostA; a.cfg): VALUE". */
static size_t describe_group(const agree_record *all, int world, int first, int item, uint8_t *done, char *buf,
                             size_t len)
{
    const char *value = all[first].value[item];
    size_t used = 0;
    int shown = 0, count = 0;
    for (int r = first; r < world; ++r)
        count += !done[r] && strcmp(all[r].value[item], value) == 0;
    used += (size_t)snprintf(buf + used, len - used, "%s", count > 1 ? "ranks" : "rank");
    for (int r = first; r < world && used < len; ++r) {
        if (done[r] || strcmp(all[r].value[item], value) != 0) continue;
        done[r] = 1;
        if (shown++ < 8) used += (size_t)snprintf(buf + used, len - used, "%s %d", shown > 1 ? "," : "", r);
    }
    if (shown > 8 && used < len) used += (size_t)snprintf(buf + used, len - used, " and %d more", shown - 8);
    if (used < len)
        used += (size_t)snprintf(buf + used, len - used, " (%s%s; %s): %s", count > 1 ? "first on " : "",
                                 all[first].host, all[first].file, value);
    return used < len ? used : len;
}

selsync_status selsync_agree(const selsync_comm *comm, const char *cfg_file, const char *const *what, int n,
                             const agree_record *mine, const char *advice, char *err, size_t errlen)
{
    const selsync_comm_ops *ops = comm->ops;
    int rank = selsync_comm_rank(comm), world = selsync_comm_size(comm);
    agree_record *all;
    uint8_t differs[AGREE_ITEMS] = {0}, any = 0;
    selsync_status st;
    if (world == 1) return SELSYNC_OK;
    if (!(all = malloc((size_t)world * sizeof *all))) return selsync_fail(err, errlen, SELSYNC_ENOMEM, "out of memory");
    all[rank] = *mine;
    if ((st = ops->bcast(comm->ctx, &all[0], sizeof all[0], 0))) goto comm;
    for (int i = 0; i < n; ++i) differs[i] = memcmp(all[0].value[i], mine->value[i], AGREE_VALUE) != 0;
    if ((st = ops->any(comm->ctx, differs, (size_t)n))) goto comm;
    for (int i = 0; i < n; ++i) any |= differs[i];
    if (!any) {
        free(all);
        return SELSYNC_OK;
    }
    for (int r = 1; r < world; ++r)
        if ((st = ops->bcast(comm->ctx, &all[r], sizeof all[r], r))) goto comm;
    for (int r = 0; r < world; ++r) { /* what came from elsewhere is text */
        all[r].host[AGREE_HOST - 1] = all[r].file[AGREE_FILE - 1] = '\0';
        for (int i = 0; i < n; ++i) all[r].value[i][AGREE_VALUE - 1] = '\0';
    }
    uint8_t *done = calloc((size_t)world, 1);
    if (!done) {
        free(all);
        return selsync_fail(err, errlen, SELSYNC_ENOMEM, "out of memory");
    }
    size_t used = (size_t)snprintf(err, errlen, "%s: the ranks do not run the same thing:", cfg_file);
    for (int i = 0; i < n && used < errlen; ++i) {
        if (!differs[i]) continue;
        memset(done, 0, (size_t)world);
        used += (size_t)snprintf(err + used, errlen - used, " %s differs:", what[i]);
        for (int r = 0; r < world && used < errlen; ++r) {
            if (done[r]) continue;
            used += (size_t)snprintf(err + used, errlen - used, " ");
            if (used < errlen) used += describe_group(all, world, r, i, done, err + used,
                                                             errlen - used);
            if (used < errlen) used += (size_t)snprintf(err + used, errlen - used, ";");
        }
    }
    if (used < errlen) snprintf(err + used, errlen - used, " %s", advice);
    free(done);
    free(all);
    return SELSYNC_EMISMATCH;
comm:
    free(all);
    return selsync_fail(err, errlen, st ? st : SELSYNC_ECOMM, "comparing what the ranks run: %s",
                        selsync_comm_error(comm, st));
}

void agree_where(agree_record *rec, const char *host, const char *file)
{
    agree_copy_text(rec->host, sizeof rec->host, host && *host ? host : "?");
    agree_copy_text(rec->file, sizeof rec->file, file);
}
