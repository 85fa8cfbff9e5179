/* The harness side of darknet_shim.h: runs Darknet code so that its exit()
 * comes back to the harness and what it allocated or opened is released.
 *
 *   shim_begin(path);
 *   if (!setjmp(shim_refusal)) { ...Darknet calls... }
 *   shim_end();
 *
 * Between shim_begin and shim_end, Darknet may open only `path` (any other
 * name fails as a missing file would), exit() jumps to shim_refusal, and so
 * does an allocation that would take Darknet's live memory over
 * SHIM_BUDGET: a network that needs more counts as refused, as on a machine
 * without that memory. An allocation over SHIM_ABSURD aborts. shim_end
 * closes the files Darknet left open and frees what it left allocated (a
 * refused cfg leaves everything, and free_network does not free all a
 * network holds). */
#ifndef SHIM_H
#define SHIM_H

#include <setjmp.h>

#define SHIM_BUDGET ((size_t)32 << 20)
/* More than 2^31 values of 32 bytes: only a negative or wrapped count asks
 * for that much. */
#define SHIM_ABSURD ((size_t)1 << 36)

extern jmp_buf shim_refusal;

void shim_begin(const char *path);
void shim_end(void);

#endif
