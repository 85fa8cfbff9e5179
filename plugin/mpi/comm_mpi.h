/* The MPI transport of the communicator seam (selsync/comm.h).
 *
 * This header deliberately does not include mpi.h: callers see only the
 * selsync_comm seam. Only plugin/mpi/comm_mpi.c talks to MPI.
 *
 * Threading: MPI is initialised with MPI_THREAD_FUNNELED; every function
 * here and every op of the returned communicator must be called from the
 * thread that called selsync_mpi_init.
 *
 * Collectives (all ranks call the same ops in the same order, with the same
 * counts and root):
 *   sum_f32   MPI_Reduce_scatter_block(MPI_SUM) into a scratch block, then
 *             MPI_Allgather of the blocks. Each element is reduced on exactly
 *             one rank and then copied, so all ranks receive the same bits,
 *             whatever the rank count or the MPI library's algorithms.
 *             Counts not divisible by the rank count are padded with zeros
 *             (small arrays: copied into a padded scratch; large ones: the
 *             divisible head runs in place, the last n % size elements in a
 *             padded scratch of size elements).
 *   any       MPI_Allreduce(MPI_BOR) on MPI_UINT8_T.
 *   sum_f64   MPI_Allreduce(MPI_SUM) on MPI_DOUBLE (no bitwise guarantee).
 *   bcast     MPI_Bcast of MPI_BYTE.
 * Each is issued in chunks (at most 1 GiB, and never more than INT_MAX
 * elements per MPI call), so counts above INT_MAX work.
 *
 * bytes_sent is an estimate of the payload this rank put on the wire, by
 * algorithm, for N ranks and a call of `count` elements of `esize` bytes:
 *   sum_f32, any, sum_f64 (reduce-scatter + allgather, or a ring allreduce):
 *       2 * (N - 1) * ceil(count / N) * esize      (= 2 (N-1)/N * S when
 *       N divides count; padding elements count as sent); per chunk.
 *   bcast of S bytes from root (binomial tree): S times the number of
 *       children of this rank in the binomial tree rooted at root; the root
 *       sends ceil(log2 N) * S, leaves 0, and the whole job (N - 1) * S.
 *   Nothing is counted with N == 1. */
#ifndef SELSYNC_COMM_MPI_H
#define SELSYNC_COMM_MPI_H

#include <stddef.h>

#include "selsync/comm.h"
#include "selsync/status.h"

/* When the process was started by an MPI launcher (the environment holds
 * OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_SIZE), initialises MPI with
 * MPI_THREAD_FUNNELED (unless it already is initialised), registers an
 * atexit handler (see below) and fills *out with a communicator over a
 * duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN. Otherwise fills *out
 * with selsync_comm_single() and does not touch MPI. A second call while
 * active returns the same communicator.
 * Returns SELSYNC_ECOMM (message in err) when MPI_Init_thread fails or
 * provides less than MPI_THREAD_FUNNELED; SELSYNC_EINVAL on NULL out.
 *
 * The atexit handler: if the process exits while MPI is initialised by this
 * module and not finalised (e.g. exit(1) on one rank's error path), it prints
 * "selsync: rank R exited without finishing; aborting the job" and calls
 * MPI_Abort(MPI_COMM_WORLD, 1), so the other ranks do not hang. */
selsync_status selsync_mpi_init(int *argc, char ***argv, selsync_comm *out,
                                char *err, size_t errlen);

/* Frees the communicator and finalises MPI if selsync_mpi_init initialised
 * it. Idempotent; a no-op when MPI was not used. Collective over all ranks
 * (MPI_Finalize). The communicator from selsync_mpi_init must not be used
 * afterwards (its ops then return SELSYNC_ESTATE). */
void selsync_mpi_finalize(void);

/* 1 while the MPI communicator of selsync_mpi_init is live (MPI initialised
 * and not finalised by this module), else 0. */
int selsync_mpi_active(void);

/* The message of the last failure of this module ("" when none): the MPI
 * call and MPI_Error_string of its error code. Static storage; valid until
 * the next call of this module. */
const char *selsync_mpi_last_error(void);

/* For tests: caps the bytes per MPI call of each collective (so chunk loops
 * can be exercised with small buffers); 0 restores the default (1 GiB).
 * Returns the previous cap. Must be the same on all ranks. */
size_t selsync_mpi_set_chunk_bytes(size_t bytes);

#endif
