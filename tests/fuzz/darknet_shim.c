/* Bookkeeping behind darknet_shim.h and shim.h: a table of the blocks
 * Darknet allocated while armed, the files it opened, and the jump for its
 * exit(). Compiled without darknet_shim.h, so the calls below are libc's. */
#include "shim.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

jmp_buf shim_refusal;

enum { BUCKETS = 4096, MAX_FILES = 16 };

/* A live block: in its bucket's chain (next) and in the list of all (prev,
 * after), so that shim_end visits only the blocks there are. */
typedef struct block {
    void *p;
    size_t size;
    struct block *next, *prev, *after;
} block;

static block *table[BUCKETS], *all;
static size_t live;
static int armed;
static const char *allowed;
static FILE *files[MAX_FILES];

static block **bucket(const void *p)
{
    return &table[((uintptr_t)p >> 4) % BUCKETS];
}

static void track(void *p, size_t size)
{
    block *b = malloc(sizeof *b);
    if (!b) abort();
    *b = (block){p, size, *bucket(p), NULL, all};
    *bucket(p) = b;
    if (all) all->prev = b;
    all = b;
    live += size;
}

/* Removes p from the table; 0 when it is not there (allocated unarmed). */
static int untrack(void *p)
{
    for (block **at = bucket(p); *at; at = &(*at)->next) {
        if ((*at)->p == p) {
            block *b = *at;
            *at = b->next;
            if (b->prev) b->prev->after = b->after;
            else all = b->after;
            if (b->after) b->after->prev = b->prev;
            live -= b->size;
            free(b);
            return 1;
        }
    }
    return 0;
}

/* Refuses (jumps) when size more bytes would exceed the budget; aborts on
 * a size no network has, which only a negative or wrapped count gives. */
static void charge(size_t size)
{
    if (size > SHIM_ABSURD) {
        fprintf(stderr, "darknet_shim: an allocation of %zu bytes: a negative or overflowed size\n", size);
        abort();
    }
    if (size > SHIM_BUDGET - live) {
        armed = 0;
        longjmp(shim_refusal, 1);
    }
}

void *shim_malloc(size_t size)
{
    if (!armed) return malloc(size);
    charge(size);
    void *p = malloc(size);
    if (p) track(p, size);
    return p;
}

void *shim_calloc(size_t n, size_t size)
{
    if (!armed) return calloc(n, size);
    charge(size && n > SIZE_MAX / size ? SIZE_MAX : n * size);
    void *p = calloc(n, size);
    if (p) track(p, n * size);
    return p;
}

void *shim_realloc(void *p, size_t size)
{
    if (!armed) return realloc(p, size);
    charge(size);
    void *q = realloc(p, size);
    if (q || size == 0) {
        if (p) untrack(p);
        if (q) track(q, size);
    }
    return q;
}

void shim_free(void *p)
{
    if (p) untrack(p);
    free(p);
}

FILE *shim_fopen(const char *path, const char *mode)
{
    if (!armed) return fopen(path, mode);
    int slot = 0;
    while (slot < MAX_FILES && files[slot]) slot++;
    if (!allowed || strcmp(path, allowed) != 0 || slot == MAX_FILES) {
        errno = ENOENT;
        return NULL;
    }
    return files[slot] = fopen(path, mode);
}

int shim_fclose(FILE *f)
{
    for (int i = 0; i < MAX_FILES; i++)
        if (files[i] == f) files[i] = NULL;
    return fclose(f);
}

_Noreturn void shim_exit(int code)
{
    if (!armed) exit(code);
    armed = 0;
    longjmp(shim_refusal, 1);
}

int shim_rand(void)
{
    static uint32_t x = 2463534242u; /* xorshift32 */
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return (int)(x & RAND_MAX);
}

float shim_rand_normal(void)
{
    return 0.0f;
}

float shim_rand_uniform(float min, float max)
{
    return min < max ? min : max;
}

void shim_begin(const char *path)
{
    allowed = path;
    armed = 1;
}

void shim_end(void)
{
    armed = 0;
    allowed = NULL;
    for (int i = 0; i < MAX_FILES; i++)
        if (files[i]) fclose(files[i]), files[i] = NULL;
    while (all) {
        block *b = all;
        all = b->after;
        *bucket(b->p) = NULL;
        free(b->p);
        free(b);
    }
    live = 0;
}
