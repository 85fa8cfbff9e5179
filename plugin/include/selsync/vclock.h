/* Virtual time: N ranks that share a few cores report the times N machines
 * on a modelled network would see.
 *
 * A communicator wraps the transport. Each rank keeps a virtual clock:
 *  - computation advances it by the CPU time of the rank's thread between
 *    two collectives (times the rank's slow-down factor), so waiting for a
 *    core, sleeping and waiting inside the transport add nothing;
 *  - a collective sets every participant's clock to the latest of their
 *    clocks, plus the modelled cost of the collective on the network;
 *  - a point-to-point message leaves when its sender's clock says and
 *    occupies the sender's and then the receiver's link (a receiver that
 *    takes messages one by one, such as the SSP server, queues them);
 *  - a sum started in the background (sum_f32v_start) begins at the
 *    latest of its participants' clocks at its start, or when the sum
 *    started before it ends, and costs a ring sum; computation goes on
 *    meanwhile, and wait_sums moves the clock on to the end of the last
 *    one only if that is later (the communication not hidden);
 *  - a small sum started without blocking (sum_f64_start) ends at the
 *    latest of its participants' clocks at its start plus a small
 *    all-reduce, and its wait_f64 moves the clock on to that end only if
 *    that is later: a rank waits only for ranks that had not started it.
 * Held (selsync_virtual_hold), the clock stands still: evaluations and
 * checkpoints are no one's training.
 *
 * The clocks travel beside each collective in one sum of N doubles (for
 * the background sums, one of N doubles per sum at wait_sums; for the
 * small sums, at their start), which
 * neither the clock nor bytes_sent counts. */
#ifndef SELSYNC_VCLOCK_H
#define SELSYNC_VCLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "selsync/comm.h"
#include "selsync/status.h"

/* The modelled network, as one rank sees it. */
typedef struct selsync_vnet {
    double bandwidth; /* bytes per second of each rank's link, each way */
    double latency;   /* seconds per message */
    double slowdown;  /* this rank's compute time factor (1: as measured) */
    int wall;         /* 1: computation is wall time, 0: the thread's CPU time */
    double jitter_p;  /* probability that this rank pauses at the start of a step */
    double jitter_t;  /* seconds of each pause */
    uint64_t jitter_seed; /* the draws: a function of (seed, rank, step) alone */
} selsync_vnet;

/* Reads a SELSYNC_VIRTUAL value for rank `rank`:
 *   bandwidth=RATE,latency=TIME[,slow=R:F[+R:F...]][,jitter=P:TIME[:SEED]][,compute=cpu|wall]
 * RATE: a number with Gbit, Mbit or kbit (per second); TIME: a number with
 * s, ms or us; slow: rank R computes F times slower (F >= 1); jitter: every
 * rank pauses for TIME at the start of a step with probability P (0..1),
 * drawn from SEED (default 1), its rank and the step, so that a run and its
 * rerun (or resumption) pause at the same steps; compute: what
 * counts as computation, the CPU time of the rank's thread (cpu, the
 * default) or the wall time between its collectives (wall: the time its
 * host really took, for ranks on hosts of their own). On failure a message
 * naming the part at fault goes to err. */
selsync_status selsync_vnet_parse(const char *spec, int rank, selsync_vnet *out, char *err, size_t errlen);

/* "1 Gbit/s, latency 50 us" (and this rank's slow-down, the jitter and wall-time computation, if any). */
void selsync_vnet_describe(const selsync_vnet *net, char *buf, size_t len);

/* Modelled seconds of one operation moving `bytes` among `ranks`:
 *  ring:    the ring all-reduce of the large sums, 2(N-1)/N S/B + 2(N-1) L;
 *  tree:    a small all-reduce (recursive doubling) or a broadcast
 *           (binomial tree), ceil(log2 N) (L + S/B);
 *  among:   the ring of k members, then every non-member receives the
 *           whole sum, each member sending its part to each non-member;
 *  message: one point-to-point message, L + S/B.
 * One rank: 0. */
double selsync_vnet_ring(const selsync_vnet *net, int ranks, double bytes);
double selsync_vnet_tree(const selsync_vnet *net, int ranks, double bytes);
double selsync_vnet_among(const selsync_vnet *net, int ranks, int members, double bytes);
double selsync_vnet_message(const selsync_vnet *net, double bytes);

/* Seconds of CPU time the calling thread has used (the default clock);
 * seconds of a monotonic wall clock (compute=wall). */
double selsync_thread_cpu_seconds(void);
double selsync_wall_seconds(void);

/* *out: inner's collectives with the virtual clock of net; cpu: the clock
 * of computation (NULL: selsync_wall_seconds with net->wall, else
 * selsync_thread_cpu_seconds). The clock starts at 0
 * and held: the training session releases it when its engine starts. Call
 * on the thread that issues the collectives. Free with
 * selsync_comm_virtual_free, which leaves inner alone. */
selsync_status selsync_comm_virtual(selsync_comm inner, const selsync_vnet *net, double (*cpu)(void),
                                    selsync_comm *out, char *err, size_t errlen);
void selsync_comm_virtual_free(selsync_comm *c);

/* 1 when the jitter of net pauses `rank` at the start of `step`. */
int selsync_vnet_pauses(const selsync_vnet *net, int rank, uint64_t step);

/* A rank's virtual clock and what it is made of (seconds). */
typedef struct selsync_vclock {
    double now;     /* the clock: compute + paused + wait + network */
    double compute; /* computation, slow-down included */
    double paused;  /* the jitter's pauses */
    uint64_t pauses;
    double wait;    /* waiting for later ranks in collectives and messages */
    double network; /* modelled transfers */
} selsync_vclock;

/* 1 and *out when c is a virtual-time communicator (its computation
 * counted up to now), else 0. */
int selsync_virtual_clock(const selsync_comm *c, selsync_vclock *out);

/* hold 1: the clock stands still until hold 0 (collectives carry no clock
 * and cost nothing). Every rank must hold around the same collectives.
 * No effect on other communicators. */
void selsync_virtual_hold(const selsync_comm *c, int hold);

#endif
