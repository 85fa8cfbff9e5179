/* The MPI transport of the communicator seam (selsync/comm.h): the one
 * part of the plugin that talks to MPI (this header does not include
 * mpi.h). docs/transport.md describes it in full: threads (MPI is
 * initialised with MPI_THREAD_SERIALIZED; every call here and every op of
 * the communicator comes from the thread that called selsync_mpi_init;
 * started sums run on one background thread), each collective's algorithm
 * and the bits it gives, what bytes_sent counts, and the stall watch
 * (SELSYNC_STALL_WARN, SELSYNC_STALL_TIMEOUT). */
#ifndef SELSYNC_COMM_MPI_H
#define SELSYNC_COMM_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "selsync/comm.h"
#include "selsync/status.h"

/* When the process was started by an MPI launcher (the environment holds
 * OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_SIZE), initialises MPI with
 * MPI_THREAD_SERIALIZED (unless it already is initialised), registers an
 * atexit handler (see below) and fills *out with a communicator over a
 * duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN. Otherwise fills *out
 * with selsync_comm_single() and does not touch MPI. A second call while
 * active returns the same communicator.
 * Returns SELSYNC_ECOMM (message in err) when MPI_Init_thread fails or
 * provides less than MPI_THREAD_FUNNELED; SELSYNC_ECONFIG when
 * SELSYNC_MPI_SUM holds neither "ring" nor "reduce_scatter_block",
 * SELSYNC_STALL_WARN or SELSYNC_STALL_TIMEOUT anything but whole seconds,
 * or SELSYNC_RING_LINKS or SELSYNC_RING_IFNAME is set (the settings of the
 * ring's own TCP links, which are retired; checked before MPI is
 * initialised); SELSYNC_EINVAL on NULL out.
 *
 * The atexit handler: if the process exits while the communicator is active
 * (selsync_mpi_finalize not called, MPI not finalised), e.g. exit(1) on one
 * rank's error path, it prints "selsync: rank R: exited without finishing;
 * aborting the job" and calls MPI_Abort(MPI_COMM_WORLD, 1), so the other
 * ranks do not hang. The job's exit code is then 1, whatever exit() got.
 * Both this handler and the communicator's abort wait 1 s before
 * MPI_Abort when there are several ranks, so that an error every rank meets
 * (a bad cfg value) is printed by every rank. */
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

/* The caller's current step, shown in stall messages; negative: unknown
 * (the state after selsync_mpi_init). */
void selsync_mpi_set_step(int64_t step);

/* Where the ranks run, for a start-up line: "ranks share a host" or
 * "N hosts" ("" when not active). */
const char *selsync_mpi_hosts(void);

/* The message of the last failure of this module ("" when none): the MPI
 * call and MPI_Error_string of its error code. Static storage; valid until
 * the next call of this module. */
const char *selsync_mpi_last_error(void);

typedef enum selsync_mpi_sum_algorithm {
    SELSYNC_MPI_SUM_RING = 0,   /* default */
    SELSYNC_MPI_SUM_RSB         /* MPI_Reduce_scatter_block + MPI_Allgather */
} selsync_mpi_sum_algorithm;

/* Selects the sum_f32 implementation (see above); returns the previous one.
 * Must be the same on all ranks at every sum_f32 call. */
selsync_mpi_sum_algorithm selsync_mpi_set_sum_algorithm(selsync_mpi_sum_algorithm alg);

/* For tests: whether sum_f32v_start hands its sums to the background
 * thread: -1 (the default) unless every rank runs on one host, 0 never
 * (they wait for wait_sums), 1 always, also on one host. Returns the
 * previous mode. */
int selsync_mpi_set_background_sums(int mode);

/* For tests: caps the bytes per MPI call of each collective (so chunk loops
 * can be exercised with small buffers); 0 restores the default (1 GiB).
 * Returns the previous cap. Must be the same on all ranks. */
size_t selsync_mpi_set_chunk_bytes(size_t bytes);

#endif
