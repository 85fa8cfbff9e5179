/* Included before every Darknet source of the fuzz build (clang -include):
 * routes Darknet's allocations, its fopen/fclose and its exit() through the
 * harness's bookkeeping (darknet_shim.c). A cfg that Darknet refuses with
 * exit() then returns to the harness, which frees what Darknet left behind,
 * and Darknet opens no file but the one the harness names. rand() is a
 * cheap generator, and rand_normal() and rand_uniform() outside utils.c
 * (which defines them) return a constant: drawing the initial weights, with
 * glibc's locked rand() and libm's log, sin and cos per weight, was most of
 * the time of a parse, and no harness uses the values. */
#ifndef DARKNET_SHIM_H
#define DARKNET_SHIM_H

#include <stdio.h>
#include <stdlib.h>

void *shim_malloc(size_t size);
void *shim_calloc(size_t n, size_t size);
void *shim_realloc(void *p, size_t size);
void shim_free(void *p);
FILE *shim_fopen(const char *path, const char *mode);
int shim_fclose(FILE *f);
_Noreturn void shim_exit(int status);
int shim_rand(void);
float shim_rand_normal(void);
float shim_rand_uniform(float min, float max);

#define malloc(size) shim_malloc(size)
#define calloc(n, size) shim_calloc(n, size)
#define realloc(p, size) shim_realloc(p, size)
#define free(p) shim_free(p)
#define fopen(path, mode) shim_fopen(path, mode)
#define fclose(f) shim_fclose(f)
#define exit(status) shim_exit(status)
#define rand() shim_rand()
#ifndef DARKNET_SHIM_UTILS
#define rand_normal() shim_rand_normal()
#define rand_uniform(min, max) shim_rand_uniform(min, max)
#endif

#endif
