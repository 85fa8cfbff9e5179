/* The MPI transport of the communicator seam (selsync/comm.h).
 *
 * This header deliberately does not include mpi.h: callers see only the
 * selsync_comm seam. Only plugin/mpi/comm_mpi.c talks to MPI.
 *
 * Threading: MPI is initialised with MPI_THREAD_SERIALIZED; every function
 * here and every op of the returned communicator must be called from the
 * thread that called selsync_mpi_init. sum_f32v_start hands its sum to one
 * background thread, started on first use and joined by
 * selsync_mpi_finalize, which runs the queued sums one after another with
 * the ring of sum_f32v; its waits poll with naps of 5-100 us instead of
 * spinning, so it takes little CPU from the computation beside it. Every
 * other op (and wait_sums) first waits until that queue is empty, so MPI
 * is called by one thread at a time, and a failure of a background sum is
 * returned by every op after it. Where MPI provides less than
 * MPI_THREAD_SERIALIZED (initialised elsewhere), with one rank, or when
 * every rank runs on one host (its sums are copies and adds in shared
 * memory: CPU work that a second thread would take from the computation),
 * there is no thread: the sums wait in the queue and run, in order, on the
 * caller's thread at wait_sums or the next op.
 *
 * Collectives (all ranks call the same ops in the same order, with the same
 * counts and root):
 *   sum_f32   a reduce-scatter followed by an allgather, so each element is
 *             summed on exactly one rank and then copied: every rank receives
 *             the same bits, whatever the rank count or the MPI library, and
 *             each rank sends 2 (N-1)/N of the array (bandwidth-optimal).
 *             Two implementations, chosen with selsync_mpi_set_sum_algorithm
 *             or SELSYNC_MPI_SUM=ring|reduce_scatter_block at init:
 *     ring (default): a ring reduce-scatter and a ring allgather over
 *             MPI_Irecv + MPI_Isend pairs, in place in the caller's array, blocks of
 *             n/N or n/N + 1 elements (no padding), two exchanges in
 *             flight (the next is posted before the current one is waited
 *             for). The reduce-scatter moves 1 MiB segments into two 1 MiB
 *             scratch slots kept between calls and adds them with
 *             MPI_Reduce_local; the allgather receives straight into the
 *             array. Block b is summed in the fixed order
 *             b+1, b+2, ..., b (mod N). No temporary is allocated per call.
 *             The ring's links (SELSYNC_RING_LINKS at init: auto, the
 *             default; mpi; tcp): MPI, or TCP sockets of its own (tcp_link.h)
 *             to the right neighbour and from the left one, made at init
 *             on the first interface that is up and not loopback (or
 *             SELSYNC_RING_IFNAME), with the addresses traded over MPI.
 *             auto takes the sockets when every rank has a host of its
 *             own and a trial sum of 4 MiB, timed both ways at init, is
 *             faster over them; tcp takes them or fails init on every
 *             rank. Over TCP a step sends its whole block and receives the
 *             other in 1 MiB pieces, each added in as it arrives (a whole
 *             block of scratch); the same blocks, order and bits as over
 *             MPI. The world ring only: sum_f32v_among stays on MPI.
 *     reduce_scatter_block: MPI_Reduce_scatter_block(MPI_SUM) into a
 *             scratch block, then MPI_Allgather, in pairs of at most 4 MiB;
 *             counts not divisible by N are zero-padded (small arrays:
 *             copied into a padded scratch; large ones: divisible head in
 *             place, the last n % N elements in a padded scratch).
 *             Slower with Open MPI 4.1, whose default reduce_scatter_block
 *             is a linear reduce to rank 0 plus a scatterv.
 *   sum_f32v  ring: the same ring in place over the caller's segments as
 *             one array (the same blocks, order and bits as sum_f32 of the
 *             packed array); a message whose elements span segments travels
 *             as an MPI hindexed type over them; each rank multiplies the
 *             block it owns by scale after the reduce-scatter, so the
 *             allgather spreads scaled sums. reduce_scatter_block: sum_f32
 *             of a packed copy (kept between calls), scaled while unpacked.
 *             Counted in bytes_sent as sum_f32 of the total count.
 *   sum_f32v_among  the ring (whatever the algorithm) over the k members
 *             alone, position c being members[c]: its block is the world
 *             ring's blocks members[c] .. members[c+1] - 1 (the last one
 *             wraps round to block members[0] - 1), so each element is
 *             summed in the world ring's order with the non-members left
 *             out. A non-member's zero adds exactly, so the bits are those
 *             of the ring sum_f32v to which the non-members contribute
 *             zeros (save that -0 + +0 is +0); the blocks are as uneven as
 *             the gaps between members. Then member c sends part c of k
 *             near-equal parts of the result to every non-member, which
 *             receives the k parts at once (MPI_Isend/MPI_Irecv, another
 *             tag than the ring's, in rounds of at most the chunk size).
 *   any       MPI_Iallreduce(MPI_BOR) on MPI_UINT8_T.
 *   sum_f64   MPI_Iallreduce(MPI_SUM) on MPI_DOUBLE (no bitwise guarantee).
 *   bcast     MPI_Ibcast of MPI_BYTE.
 * Each is issued in chunks (at most 1 GiB, and never more than INT_MAX
 * elements per MPI call), so counts above INT_MAX work.
 * Point-to-point: send/recv are MPI_Isend/MPI_Irecv of MPI_BYTE on a second
 * duplicate of MPI_COMM_WORLD (so they never match the ring's messages). A
 * message travels as pieces of the chunk size, ended by a shorter (possibly
 * empty) piece; recv takes the later pieces from the first one's sender
 * and tag. send counts its bytes in bytes_sent.
 *
 * bytes_sent is the payload this rank sent, by algorithm, for N ranks and a
 * call of `count` elements of `esize` bytes (S = count * esize):
 *   sum_f32 ring: exactly what it sends, 2 S - (len(r) + len(r+1)) esize for
 *       rank r, i.e. 2 (N-1)/N S when N divides count; 2 (N-1) S over the job.
 *   sum_f32v_among, k members: exactly what it sends: member c its ring's
 *       2 S - (len(c) + len(c+1)) esize for its uneven blocks, plus N - k
 *       times its part, S/k; a non-member nothing; the job
 *       (2 (k-1) + N - k) S, against 2 (N-1) S for sum_f32v.
 *   sum_f32 reduce_scatter_block, any, sum_f64 (estimate as for a ring
 *       allreduce): 2 (N-1) ceil(count / N) esize per chunk (padding counts).
 *   bcast of S bytes from root (estimate as for a binomial tree): S times
 *       the number of children of this rank in the binomial tree rooted at
 *       root; the root sends ceil(log2 N) S, leaves 0, the job (N-1) S.
 *   Nothing is counted with N == 1.
 *
 * Stall watch. Every wait above (the non-blocking calls are waited for
 * with MPI_Testall) is watched; reduce_scatter_block keeps the blocking
 * calls, whose summation order differs from the non-blocking ones', and
 * watches an MPI_Ibarrier before each pair instead (a rank that stalls
 * inside the pair is not reported). Set at init by two environment
 * variables of whole seconds (anything else is refused with
 * SELSYNC_ECONFIG):
 *   SELSYNC_STALL_WARN (default 60; 0: off): after each such period in one
 *     wait, one line on stderr:
 *       selsync: rank R: waiting N s in OP (step S) for rank(s) X,Y
 *     OP is the op (any, sum_f32, sum_f32v, sum_f32v_among, sum_f64, bcast,
 *     send, recv);
 *     "(step S)" only after selsync_mpi_set_step. The ranks named: in a
 *     collective, those not known to have entered it; when all have (one
 *     stalled inside it), the ring's neighbours whose message is missing,
 *     else "unknown"; in send/recv the peer ("any rank" for SELSYNC_ANY).
 *   SELSYNC_STALL_TIMEOUT (default 0: off): after that long in one wait,
 *     the communicator's abort with exit code 1 and the message
 *       waited N s in OP (step S) for rank(s) X,Y: SELSYNC_STALL_TIMEOUT=T
 *       reached; aborting the job
 *   With both 0, waits are MPI_Waitall. Otherwise a wait polls, busy for
 *   its first second (at most a quarter of the shorter period), then with
 *   1 ms naps. Half-way through the shorter period a rank waiting in a
 *   collective sends every other rank a small notice (on a third duplicate
 *   of MPI_COMM_WORLD); a rank answers the notices it has received, with
 *   how many collectives it has entered, whenever one of its own waits is
 *   past its busy part: this is how the missing ranks are known. A rank
 *   with both settings 0 never answers, and is named as missing. Nothing
 *   is sent while every wait is shorter than half the period. */
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
 * SELSYNC_RING_LINKS none of auto, mpi, tcp, or SELSYNC_STALL_WARN or
 * SELSYNC_STALL_TIMEOUT anything but whole seconds (checked before MPI is
 * initialised);
 * SELSYNC_ECOMM when SELSYNC_RING_LINKS=tcp and the links cannot be made
 * (then call selsync_mpi_finalize after reporting it);
 * SELSYNC_EINVAL on NULL out.
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
 * it; also after an init that failed with MPI started (the ring's TCP links
 * could not be made, on every rank), where the caller reports the error
 * first and then calls this: being collective, it lets every rank report
 * before any exits. Idempotent; a no-op when MPI was not used. Collective over all ranks
 * (MPI_Finalize). The communicator from selsync_mpi_init must not be used
 * afterwards (its ops then return SELSYNC_ESTATE). */
void selsync_mpi_finalize(void);

/* 1 while the MPI communicator of selsync_mpi_init is live (MPI initialised
 * and not finalised by this module), else 0. */
int selsync_mpi_active(void);

/* The caller's current step, shown in stall messages; negative: unknown
 * (the state after selsync_mpi_init). */
void selsync_mpi_set_step(int64_t step);

/* What the world ring (sum_f32, sum_f32v) runs over, for a start-up line:
 * "MPI", "MPI (ranks share a host)", "TCP on eth0 (4 MiB sums: ...)", ...
 * ("" when not active). */
const char *selsync_mpi_ring_links(void);

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
