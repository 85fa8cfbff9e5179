/* Unit tests for checkpoint files (plugin/core/checkpoint.c). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "selsync/checkpoint.h"

typedef struct fx {
    char dir[64], path[128], tmp[160], err[512];
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/selsync-ckpt-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    snprintf(f->path, sizeof f->path, "%s/model.weights", f->dir);
    if (selsync_checkpoint_temp(f->path, f->tmp, sizeof f->tmp)) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    remove(f->path);
    remove(f->tmp);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *o = fopen(path, "wb");
    assert_non_null(o);
    assert_int_equal(fputs(text, o) >= 0, 1);
    assert_int_equal(fclose(o), 0);
}

static size_t file_size(const char *path)
{
    FILE *i = fopen(path, "rb");
    assert_non_null(i);
    fseek(i, 0, SEEK_END);
    long n = ftell(i);
    fclose(i);
    return (size_t)n;
}

static void test_round_trip(void **state)
{
    fx *f = *state;
    const char state_bytes[] = "step=42 and more state";
    void *got;
    size_t len;
    write_file(f->tmp, "MODEL");
    assert_int_equal(selsync_checkpoint_seal(f->tmp, f->path, state_bytes, sizeof state_bytes, f->err,
                                             sizeof f->err), SELSYNC_OK);
    assert_int_equal(access(f->tmp, F_OK), -1); /* renamed */
    assert_int_equal(file_size(f->path), 5 + sizeof state_bytes + 32);
    assert_int_equal(selsync_checkpoint_read(f->path, 1, 0, &got, &len, f->err, sizeof f->err), SELSYNC_OK);
    assert_int_equal(len, sizeof state_bytes);
    assert_memory_equal(got, state_bytes, len);
    free(got);
    /* the model bytes come first, untouched */
    char head[6] = {0};
    FILE *i = fopen(f->path, "rb");
    assert_int_equal(fread(head, 1, 5, i), 5);
    fclose(i);
    assert_string_equal(head, "MODEL");
    /* the host's model takes another number of bytes: refused, the sizes named */
    assert_int_equal(selsync_checkpoint_read(f->path, 1, 6, &got, &len, f->err, sizeof f->err), SELSYNC_EMISMATCH);
    assert_non_null(strstr(f->err, "its weights take 5 bytes; this network's take 6"));
    assert_int_equal(selsync_checkpoint_read(f->path, 1, 5, &got, &len, f->err, sizeof f->err), SELSYNC_OK);
    free(got);
}

static void test_plain_file_has_no_state(void **state)
{
    fx *f = *state;
    void *got = (void *)1;
    size_t len = 9;
    write_file(f->path, "a plain weights file, longer than a trailer");
    assert_int_equal(selsync_checkpoint_read(f->path, 0, 0, &got, &len, f->err, sizeof f->err), SELSYNC_OK);
    assert_null(got);
    assert_int_equal(len, 0);
    write_file(f->path, "short");
    assert_int_equal(selsync_checkpoint_read(f->path, 0, 0, &got, &len, f->err, sizeof f->err), SELSYNC_OK);
    assert_null(got);
    /* the host knows it as a checkpoint: without a trailer it is damaged */
    assert_int_equal(selsync_checkpoint_read(f->path, 1, 0, &got, &len, f->err, sizeof f->err), SELSYNC_EMISMATCH);
    assert_non_null(strstr(f->err, "trailer is missing"));
    assert_null(got);
}

/* Seals MODEL (a model of model_len bytes 'm') with a 10-byte state. */
static void seal_sample(fx *f, size_t model_len)
{
    FILE *o = fopen(f->tmp, "wb");
    assert_non_null(o);
    for (size_t i = 0; i < model_len; i++) fputc('m', o);
    assert_int_equal(fclose(o), 0);
    assert_int_equal(selsync_checkpoint_seal(f->tmp, f->path, "0123456789", 10, f->err, sizeof f->err),
                     SELSYNC_OK);
}

/* Rewrites the file without bytes [from, from + n). */
static void cut_bytes(const char *path, size_t from, size_t n)
{
    size_t size = file_size(path);
    char *buf = malloc(size);
    FILE *io = fopen(path, "rb");
    assert_true(buf && io && fread(buf, 1, size, io) == size);
    fclose(io);
    memmove(buf + from, buf + from + n, size - from - n);
    io = fopen(path, "wb");
    assert_true(io && fwrite(buf, 1, size - n, io) == size - n);
    fclose(io);
    free(buf);
}

/* A file cut anywhere, or a flipped byte of its weights, is refused. */
static void test_cut_or_damaged_weights_detected(void **state)
{
    fx *f = *state;
    void *got;
    size_t len;
    const size_t model = 100000;
    seal_sample(f, model);
    cut_bytes(f->path, file_size(f->path) - 100, 100); /* the last 100 bytes */
    assert_int_equal(selsync_checkpoint_read(f->path, 1, 0, &got, &len, f->err, sizeof f->err), SELSYNC_EMISMATCH);
    assert_non_null(strstr(f->err, "damaged checkpoint"));
    seal_sample(f, model);
    cut_bytes(f->path, 5000, 100); /* inside the weights, trailer intact */
    assert_int_equal(selsync_checkpoint_read(f->path, 1, 0, &got, &len, f->err, sizeof f->err), SELSYNC_EMISMATCH);
    assert_non_null(strstr(f->err, "trailer says 100000 bytes of weights"));
    seal_sample(f, model);
    FILE *io = fopen(f->path, "r+b");
    fseek(io, 77777, SEEK_SET); /* a byte of the weights */
    fputc('X', io);
    fclose(io);
    assert_int_equal(selsync_checkpoint_read(f->path, 1, 0, &got, &len, f->err, sizeof f->err), SELSYNC_EMISMATCH);
    assert_non_null(strstr(f->err, "do not match its checksum"));
    assert_null(got);
}

static void test_damage_detected(void **state)
{
    fx *f = *state;
    const char state_bytes[] = "0123456789";
    void *got;
    size_t len;
    write_file(f->tmp, "MODEL");
    assert_int_equal(selsync_checkpoint_seal(f->tmp, f->path, state_bytes, sizeof state_bytes, f->err,
                                             sizeof f->err), SELSYNC_OK);
    FILE *io = fopen(f->path, "r+b");
    fseek(io, 7, SEEK_SET); /* a byte of the state */
    fputc('X', io);
    fclose(io);
    assert_int_equal(selsync_checkpoint_read(f->path, 1, 0, &got, &len, f->err, sizeof f->err), SELSYNC_EMISMATCH);
    assert_non_null(strstr(f->err, "damaged checkpoint"));
    assert_non_null(strstr(f->err, f->path));
    assert_null(got);
}

static void test_missing_file(void **state)
{
    fx *f = *state;
    void *got;
    size_t len;
    assert_int_equal(selsync_checkpoint_read(f->path, 1, 0, &got, &len, f->err, sizeof f->err), SELSYNC_EIO);
    assert_non_null(strstr(f->err, "cannot open"));
}

static void test_failed_seal_keeps_previous(void **state)
{
    fx *f = *state;
    char bad[256];
    void *got;
    size_t len;
    write_file(f->tmp, "OLD");
    assert_int_equal(selsync_checkpoint_seal(f->tmp, f->path, "s1", 2, f->err, sizeof f->err), SELSYNC_OK);
    /* the target is a path whose directory does not exist */
    snprintf(bad, sizeof bad, "%s/none/model.weights", f->dir);
    write_file(f->tmp, "NEW");
    assert_int_equal(selsync_checkpoint_seal(f->tmp, bad, "s2", 2, f->err, sizeof f->err), SELSYNC_EIO);
    assert_non_null(strstr(f->err, "the previous checkpoint is unchanged"));
    assert_int_equal(access(f->tmp, F_OK), -1); /* removed */
    assert_int_equal(selsync_checkpoint_read(f->path, 1, 0, &got, &len, f->err, sizeof f->err), SELSYNC_OK);
    assert_memory_equal(got, "s1", 2);
    free(got);
}

static void test_temp_name(void **state)
{
    (void)state;
    char out[16];
    assert_int_equal(selsync_checkpoint_temp("a/b.weights", out, sizeof out), 0);
    assert_string_equal(out, "a/b.weights.tmp");
    assert_int_equal(selsync_checkpoint_temp("a/much-too-long.weights", out, sizeof out), -1);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_round_trip),
        T(test_plain_file_has_no_state),
        T(test_damage_detected),
        T(test_cut_or_damaged_weights_detected),
        T(test_missing_file),
        T(test_failed_seal_keeps_previous),
        T(test_temp_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
