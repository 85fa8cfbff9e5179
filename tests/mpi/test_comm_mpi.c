/* Multi-rank test of the MPI transport (plugin/mpi/comm_mpi.c).
 *
 * Usage:
 *   mpirun -np N test_comm_mpi        all checks; every check's verdict is
 *       combined over the ranks (MPI_Allreduce MIN), so a failure on one rank
 *       cannot leave another waiting; rank 0 prints "ok"/"FAIL" per check and
 *       "P passed, F failed"; every rank exits 1 if any check failed anywhere.
 *       A watchdog (SIGALRM, 120 s, or TEST_COMM_MPI_TIMEOUT seconds) ends a
 *       stuck rank with exit code 124, which makes mpirun end the job.
 *   test_comm_mpi --single             without a launcher: selsync_mpi_init
 *       must return the single-process communicator and leave MPI alone.
 *   mpirun -np N test_comm_mpi --exit-rank R
 *       rank R calls exit(3) while the others wait in sum_f32 (each tells
 *       it first, with a message); the job must end (mpirun non-zero)
 *       instead of hanging. No watchdog in this mode.
 *   mpirun -np N test_comm_mpi --abort-rank R
 *       rank R calls the communicator's abort(5, "test abort") while the
 *       others wait in sum_f32: mpirun must return 5 and stderr hold
 *       "selsync: rank R: test abort". No watchdog in this mode.
 *   mpirun -np N test_comm_mpi --abort-in-background R
 *       the same, but rank R first starts a background sum of 4 MB
 *       (sum_f32v_start) that no other rank joins, so that its background
 *       thread is inside MPI when abort is called (the others wait in a
 *       recv): the abort must still end the job with 5 (the thread makes
 *       the MPI_Abort call itself).
 *   mpirun -np N test_comm_mpi --stall-rank R --stall-in OP --pid-file F
 *       a loop of STALL_STEPS steps (selsync_mpi_set_step), each an `any`
 *       of one flag, a sum_f32 of 4096 floats, a sum_f32v_among of them
 *       over ranks 0 and N-1, a background sum of them (sum_f32v_start,
 *       wait_sums) and a bcast of them from rank 0, results checked. At step
 *       STALL_AT, just before OP (any, sum_f32, sum_f32v_among,
 *       sum_f32v_start or bcast), rank R writes its pid
 *       to F (complete when F appears) and waits for SIGCONT (at most 60 s):
 *       to be stopped meanwhile with SIGSTOP, so that the others stall in OP.
 *       Exit status 0 when every step's results were right. No watchdog. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "comm_mpi.h"

static int g_rank, g_size;
static int n_pass, n_fail;
static selsync_comm C;

/* --- helpers ------------------------------------------------------------- */

static void note(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rank %d: %s: ", g_rank, name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Combines the ranks' verdicts; every rank calls it for every check. */
static void check(const char *name, int ok_local)
{
    int ok_all = 0;
    ok_local = ok_local ? 1 : 0;
    MPI_Allreduce(&ok_local, &ok_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok_all) ++n_pass; else ++n_fail;
    if (g_rank == 0) {
        printf("%s %s\n", ok_all ? "ok  " : "FAIL", name);
        fflush(stdout);
    }
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Rank r's input i: uniform in [-1, 1) times 1..7, depends on r. */
static float input(int r, size_t i, uint64_t seed)
{
    uint64_t h = splitmix64(seed ^ ((uint64_t)r << 40) ^ (uint64_t)i);
    float u = (float)((double)(h >> 40) / 16777216.0 * 2.0 - 1.0);
    return u * (float)(1 + i % 7);
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_comm_mpi: watchdog expired, exiting with 124\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(124);
}

/* --- checks -------------------------------------------------------------- */

/* sum_f32 of n elements: accuracy against a double reference, and identical
 * bits on all ranks (hash min == max, and memcmp against rank 0's result). */
static void check_sum_f32(size_t n, uint64_t seed, const char *label)
{
    char name[160];
    snprintf(name, sizeof name, "sum_f32 n=%zu%s", n, label);
    float *buf = malloc((n ? n : 1) * sizeof(float));
    float *ref0 = malloc((n ? n : 1) * sizeof(float));
    if (!buf || !ref0) {
        note(name, "out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < n; ++i) buf[i] = input(g_rank, i, seed);
    selsync_status s = C.ops->sum_f32(C.ctx, buf, n);
    int ok = s == SELSYNC_OK;
    if (!ok) note(name, "status %s: %s", selsync_status_str(s), selsync_mpi_last_error());
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; ok && i < n; ++i) {
        double ref = 0, mag = 0;
        for (int r = 0; r < g_size; ++r) {
            double x = input(r, i, seed);
            ref += x;
            mag += fabs(x);
        }
        double e = fabs((double)buf[i] - ref);
        if (!(e <= 1e-6 * mag + 1e-30)) {
            if (!bad) note(name, "element %zu: got %.9g, want %.9g", i, buf[i], ref);
            ++bad;
        }
        if (mag > 0 && e / mag > worst) worst = e / mag;
    }
    if (bad) {
        note(name, "%zu elements off (worst relative error %.3g)", bad, worst);
        ok = 0;
    }
    check(name, ok);

    /* Identity: hash min/max over ranks, then rank 0's bits broadcast. */
    uint64_t h = fnv1a(buf, n * sizeof(float)), hmin = 0, hmax = 0;
    MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (n) memcpy(ref0, buf, n * sizeof(float));
    MPI_Bcast(ref0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    int same = memcmp(ref0, buf, n * sizeof(float)) == 0;
    if (!same) note(name, "result differs from rank 0's bits");
    snprintf(name, sizeof name, "sum_f32 n=%zu%s bitwise identical on all ranks", n, label);
    check(name, hmin == hmax && same);
    free(buf);
    free(ref0);
}

/* sum_f32v over n elements cut into separately allocated segments of odd
 * lengths (and some empty ones; with rank_split the cuts differ between
 * ranks): must equal sum_f32 of the packed array times scale, bit for bit. */
static void check_sum_f32v(size_t n, float scale, int rank_split, uint64_t seed, const char *label)
{
    char name[200];
    enum { MAX_SEG = 4096 };
    static selsync_segment seg[MAX_SEG];
    size_t nseg = 0, bad = 0;
    float *ref = malloc((n ? n : 1) * sizeof(float));
    snprintf(name, sizeof name, "sum_f32v n=%zu scale=%g%s%s == sum_f32 of the packed array * scale", n,
             (double)scale, rank_split ? ", cuts differ between ranks" : "", label);
    for (size_t pos = 0, k = 0; (pos < n || nseg < 2) && nseg < MAX_SEG; ++k) {
        uint64_t h = splitmix64(seed + k + (rank_split ? (uint64_t)g_rank << 32 : 0));
        size_t len = k % 5 == 3 ? 0 : 2 * (size_t)(h % 600) + 1;
        if (len > n - pos || nseg == MAX_SEG - 1) len = n - pos;
        seg[nseg].count = len;
        seg[nseg].data = len ? malloc(len * sizeof(float)) : NULL;
        if ((len && !seg[nseg].data) || !ref) {
            note(name, "out of memory");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (size_t i = 0; i < len; ++i) seg[nseg].data[i] = ref[pos + i] = input(g_rank, pos + i, seed);
        pos += len;
        ++nseg;
    }
    selsync_status s = C.ops->sum_f32(C.ctx, ref, n), sv = C.ops->sum_f32v(C.ctx, seg, nseg, scale);
    int ok = s == SELSYNC_OK && sv == SELSYNC_OK;
    if (!ok) note(name, "status %s / %s: %s", selsync_status_str(s), selsync_status_str(sv), selsync_mpi_last_error());
    for (size_t k = 0, pos = 0; k < nseg; pos += seg[k].count, free(seg[k].data), ++k)
        for (size_t i = 0; ok && i < seg[k].count; ++i) {
            float want = ref[pos + i] * scale;
            if (memcmp(&want, &seg[k].data[i], sizeof want) != 0 && !bad++)
                note(name, "element %zu: got %.9g, want %.9g", pos + i, seg[k].data[i], want);
        }
    if (bad) note(name, "%zu elements differ", bad);
    check(name, ok && !bad);
    free(ref);
}

/* Background sums: nb buckets of odd sizes started one after another
 * (sum_f32v_start), an `any` issued while they may still run (it must wait
 * for them), then wait_sums: each bucket must hold the bits sum_f32v gives
 * on a copy of it, and bytes_sent must count what sum_f32v counts. */
static void check_started_sums(int nb, float scale, const char *label)
{
    char name[200];
    enum { MAX_B = 8, SEGS = 3 };
    static selsync_segment seg[MAX_B][SEGS], ref[MAX_B][SEGS];
    size_t bad = 0;
    uint8_t flag = g_rank == g_size - 1;
    snprintf(name, sizeof name, "sum_f32v_start x%d scale=%g, an any in between, wait_sums == sum_f32v per bucket%s",
             nb, (double)scale, label);
    for (int b = 0; b < nb && b < MAX_B; ++b)
        for (int k = 0; k < SEGS; ++k) {
            size_t len = (size_t)(b * 70001 + k * 3001 + 17) % 250007;
            seg[b][k] = (selsync_segment){malloc(len * sizeof(float)), len};
            ref[b][k] = (selsync_segment){malloc(len * sizeof(float)), len};
            if (!seg[b][k].data || !ref[b][k].data) {
                note(name, "out of memory");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            for (size_t i = 0; i < len; ++i)
                seg[b][k].data[i] = ref[b][k].data[i] = input(g_rank, i + 1000u * (size_t)(b * SEGS + k), 500 + (uint64_t)b);
        }
    uint64_t b0 = C.ops->bytes_sent(C.ctx);
    selsync_status s = SELSYNC_OK;
    for (int b = 0; b < nb && s == SELSYNC_OK; ++b) s = C.ops->sum_f32v_start(C.ctx, seg[b], SEGS, scale);
    if (s == SELSYNC_OK) s = C.ops->any(C.ctx, &flag, 1);
    if (s == SELSYNC_OK) s = C.ops->wait_sums(C.ctx);
    uint64_t b1 = C.ops->bytes_sent(C.ctx);
    for (int b = 0; b < nb && s == SELSYNC_OK; ++b) s = C.ops->sum_f32v(C.ctx, ref[b], SEGS, scale);
    uint64_t b2 = C.ops->bytes_sent(C.ctx);
    int ok = s == SELSYNC_OK && flag == 1;
    if (!ok) note(name, "status %s, flag %d: %s", selsync_status_str(s), flag, selsync_mpi_last_error());
    for (int b = 0; b < nb; ++b)
        for (int k = 0; k < SEGS; free(seg[b][k].data), free(ref[b][k].data), ++k)
            if (ok && memcmp(seg[b][k].data, ref[b][k].data, seg[b][k].count * sizeof(float)) != 0 && !bad++)
                note(name, "bucket %d segment %d differs", b, k);
    uint64_t any_bytes = 2 * (uint64_t)(g_size - 1); /* the any of one flag: a ring all-reduce's estimate */
    if (ok && b1 - b0 != b2 - b1 + any_bytes && !bad++)
        note(name, "bytes_sent: %llu with the any, %llu for sum_f32v", (unsigned long long)(b1 - b0),
             (unsigned long long)(b2 - b1));
    check(name, ok && !bad);
}

/* sum_f32v_among over the ranks of bit set `mask` (n elements in segments
 * cut differently on each rank; a non-member's hold NaN): every rank must
 * end with the bits of the ring sum_f32v of the same data to which the
 * non-members contribute zeros (so the same bits everywhere), close to the
 * members' sum times scale; a non-member sends nothing, the job
 * (2 (k-1) + N - k) S. */
static void check_among(size_t n, unsigned mask, uint64_t seed, const char *label)
{
    char name[240], list[64] = "";
    enum { MAX_SEG = 4096 };
    static selsync_segment seg[MAX_SEG];
    int members[64], k = 0, member = (mask >> g_rank) & 1;
    size_t nseg = 0, bad = 0, len_list = 0;
    for (int r = 0; r < g_size; ++r)
        if ((mask >> r) & 1) {
            members[k++] = r;
            len_list += (size_t)snprintf(list + len_list, sizeof list - len_list, "%s%d", k > 1 ? "," : "", r);
        }
    float scale = 1.0f / (float)k;
    snprintf(name, sizeof name, "sum_f32v_among {%s} n=%zu%s == ring sum_f32v with zeros from non-members", list,
             n, label);
    float *ref = malloc((n ? n : 1) * sizeof(float));
    if (!ref) {
        note(name, "out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t pos = 0, j = 0; (pos < n || nseg < 2) && nseg < MAX_SEG; ++j) {
        uint64_t h = splitmix64(seed + j + ((uint64_t)g_rank << 32));
        size_t len = j % 5 == 3 ? 0 : 2 * (size_t)(h % 600) + 1;
        if (len > n - pos || nseg == MAX_SEG - 1) len = n - pos;
        seg[nseg].count = len;
        seg[nseg].data = len ? malloc(len * sizeof(float)) : NULL;
        if (len && !seg[nseg].data) {
            note(name, "out of memory");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (size_t i = 0; i < len; ++i) {
            ref[pos + i] = member ? input(g_rank, pos + i, seed) : 0.0f;
            seg[nseg].data[i] = member ? ref[pos + i] : NAN;
        }
        pos += len;
        ++nseg;
    }
    selsync_mpi_sum_algorithm alg = selsync_mpi_set_sum_algorithm(SELSYNC_MPI_SUM_RING);
    selsync_segment whole = {ref, n};
    selsync_status s = C.ops->sum_f32v(C.ctx, &whole, 1, scale);
    selsync_mpi_set_sum_algorithm(alg);
    uint64_t before = C.ops->bytes_sent(C.ctx);
    selsync_status sa = C.ops->sum_f32v_among(C.ctx, seg, nseg, scale, members, k);
    uint64_t d = C.ops->bytes_sent(C.ctx) - before, job = 0;
    int ok = s == SELSYNC_OK && sa == SELSYNC_OK;
    if (!ok) note(name, "status %s / %s: %s", selsync_status_str(s), selsync_status_str(sa), selsync_mpi_last_error());
    double worst = 0;
    for (size_t j = 0, pos = 0; j < nseg; pos += seg[j].count, free(seg[j].data), ++j)
        for (size_t i = 0; ok && i < seg[j].count; ++i) {
            double sum = 0, mag = 0;
            for (int c = 0; c < k; ++c) {
                sum += input(members[c], pos + i, seed);
                mag += fabs(input(members[c], pos + i, seed));
            }
            double e = fabs((double)seg[j].data[i] - sum * scale) / (mag * scale + 1e-30);
            if (!(e <= worst)) worst = e;
            if (memcmp(&ref[pos + i], &seg[j].data[i], sizeof(float)) != 0 && !bad++)
                note(name, "element %zu: got %.9g, want %.9g", pos + i, seg[j].data[i], ref[pos + i]);
        }
    if (bad) note(name, "%zu elements differ", bad);
    if (!(worst <= 1e-6)) note(name, "relative error %.3g from the members' sum", worst);
    check(name, ok && !bad && worst <= 1e-6);

    MPI_Allreduce(&d, &job, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    uint64_t want = (uint64_t)(2 * (k - 1) + g_size - k) * n * sizeof(float);
    if ((!member && d) || job != want)
        note(name, "bytes_sent: this rank %llu, job %llu (want %llu)", (unsigned long long)d,
             (unsigned long long)job, (unsigned long long)want);
    snprintf(name, sizeof name, "sum_f32v_among {%s} n=%zu%s: non-members send nothing, the job (2 (k-1) + N - k) S",
             list, n, label);
    check(name, ok && (member || d == 0) && job == want);
    free(ref);
}

/* Malformed member lists: SELSYNC_EINVAL on every rank, nothing sent. */
static void check_among_errors(void)
{
    float v[3] = {1, 2, 3};
    selsync_segment one = {v, 3};
    int desc[2] = {g_size - 1, 0}, twice[2] = {0, 0}, out[1] = {g_size}, neg[1] = {-1};
    uint64_t before = C.ops->bytes_sent(C.ctx);
    int ok = C.ops->sum_f32v_among(C.ctx, &one, 1, 1.0f, twice, 2) == SELSYNC_EINVAL &&
             C.ops->sum_f32v_among(C.ctx, &one, 1, 1.0f, out, 1) == SELSYNC_EINVAL &&
             C.ops->sum_f32v_among(C.ctx, &one, 1, 1.0f, neg, 1) == SELSYNC_EINVAL &&
             C.ops->sum_f32v_among(C.ctx, &one, 1, 1.0f, twice, 0) == SELSYNC_EINVAL &&
             C.ops->sum_f32v_among(C.ctx, &one, 1, 1.0f, NULL, 1) == SELSYNC_EINVAL &&
             (g_size < 2 || C.ops->sum_f32v_among(C.ctx, &one, 1, 1.0f, desc, 2) == SELSYNC_EINVAL) &&
             strstr(selsync_mpi_last_error(), "sum_f32v_among") != NULL;
    check("sum_f32v_among: malformed member lists are SELSYNC_EINVAL, nothing sent",
          ok && C.ops->bytes_sent(C.ctx) == before && v[0] == 1 && v[2] == 3);
}

static void check_any(void)
{
    /* Flag i is set on rank i % (size + 1) only, so on no rank when that is
     * size; one flag set on the last rank only. */
    enum { N = 37 };
    uint8_t f[N];
    for (int i = 0; i < N; ++i) f[i] = (i % (g_size + 1)) == g_rank;
    selsync_status s = C.ops->any(C.ctx, f, N);
    int ok = s == SELSYNC_OK;
    for (int i = 0; ok && i < N; ++i) {
        uint8_t want = (i % (g_size + 1)) != g_size;
        if (f[i] != want) {
            note("any", "flag %d: got %u, want %u", i, f[i], want);
            ok = 0;
        }
    }
    check("any: ORs flags set on single ranks", ok);

    uint8_t one = g_rank == g_size - 1;
    s = C.ops->any(C.ctx, &one, 1);
    check("any: a flag set on the last rank only reaches all", s == SELSYNC_OK && one == 1);

    uint8_t none = 0;
    s = C.ops->any(C.ctx, &none, 1);
    check("any: no flag set stays 0", s == SELSYNC_OK && none == 0);

    /* Chunked: 1000-byte calls over 10007 flags. */
    size_t n = 10007;
    uint8_t *g = malloc(n);
    ok = g != NULL;
    if (ok) {
        for (size_t i = 0; i < n; ++i) g[i] = (i % 1009) == (size_t)g_rank;
    }
    size_t prev = selsync_mpi_set_chunk_bytes(1000);
    s = ok ? C.ops->any(C.ctx, g, n) : SELSYNC_ENOMEM;
    selsync_mpi_set_chunk_bytes(prev);
    ok = ok && s == SELSYNC_OK;
    for (size_t i = 0; ok && i < n; ++i) {
        if (g[i] != ((i % 1009) < (size_t)g_size)) {
            note("any chunked", "flag %zu wrong", i);
            ok = 0;
        }
    }
    check("any: chunked (1000-byte calls, n=10007)", ok);
    free(g);
}

static void check_sum_f64(void)
{
    double v[5];
    for (int i = 0; i < 5; ++i) v[i] = (g_rank + 1.0) * (i + 1) + 0.5;
    selsync_status s = C.ops->sum_f64(C.ctx, v, 5);
    int ok = s == SELSYNC_OK;
    for (int i = 0; ok && i < 5; ++i) {
        double want = (i + 1) * g_size * (g_size + 1) / 2.0 + 0.5 * g_size;
        if (v[i] != want) {
            note("sum_f64", "element %d: got %g, want %g", i, v[i], want);
            ok = 0;
        }
    }
    check("sum_f64", ok);

    for (int i = 0; i < 5; ++i) v[i] = g_rank == 0 ? 1e300 : -1.0 * i;
    size_t prev = selsync_mpi_set_chunk_bytes(16);
    s = C.ops->sum_f64(C.ctx, v, 5);
    selsync_mpi_set_chunk_bytes(prev);
    ok = s == SELSYNC_OK;
    for (int i = 0; ok && i < 5; ++i) {
        double want = 1e300 + (g_size - 1) * (-1.0 * i);
        if (v[i] != want) ok = 0;
    }
    check("sum_f64: chunked (2 doubles per call)", ok);
}

/* sum_f64_start: three small sums in flight at once, a background sum and
 * a blocking collective between them; each wait_f64 completes the oldest,
 * with the sum of sum_f64; a wait with none in flight returns at once.
 * The last rank starts the third 50 ms late. */
static void check_small_sums(void)
{
    enum { K = 3, N = 4 };
    double v[K][N], want[K][N];
    float big[1000];
    selsync_segment seg = {big, 1000};
    uint8_t flag = g_rank == 0;
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < N; ++i) {
            v[k][i] = (g_rank + 1.0) * (k * N + i + 1);
            want[k][i] = (k * N + i + 1) * g_size * (g_size + 1) / 2.0;
        }
    for (int i = 0; i < 1000; ++i) big[i] = (float)g_rank;
    selsync_status s = C.ops->sum_f64_start(C.ctx, v[0], N);
    if (s == SELSYNC_OK) s = C.ops->sum_f32v_start(C.ctx, &seg, 1, 1.0f);
    if (s == SELSYNC_OK) s = C.ops->sum_f64_start(C.ctx, v[1], N);
    if (s == SELSYNC_OK) s = C.ops->any(C.ctx, &flag, 1);
    if (g_rank == g_size - 1) sleep_ms(50);
    if (s == SELSYNC_OK) s = C.ops->sum_f64_start(C.ctx, v[2], N);
    if (s == SELSYNC_OK) s = C.ops->wait_f64(C.ctx);
    int first_done = s == SELSYNC_OK && memcmp(v[0], want[0], sizeof v[0]) == 0;
    if (s == SELSYNC_OK) s = C.ops->wait_f64(C.ctx);
    if (s == SELSYNC_OK) s = C.ops->wait_f64(C.ctx);
    if (s == SELSYNC_OK) s = C.ops->wait_f64(C.ctx); /* none in flight */
    if (s == SELSYNC_OK) s = C.ops->wait_sums(C.ctx);
    int ok = s == SELSYNC_OK && first_done && flag == 1 && memcmp(v, want, sizeof v) == 0 &&
             big[0] == g_size * (g_size - 1) / 2.0f;
    if (!ok) note("sum_f64_start", "status %s, first %d, flag %d, v[2][0] %g (want %g): %s", selsync_status_str(s),
                  first_done, flag, v[2][0], want[2][0], selsync_mpi_last_error());
    check("sum_f64_start x3 with a background sum and an any between: each wait_f64 completes the oldest", ok);
}

/* A started small sum completes without the other ranks calling MPI again:
 * rank 0 starts it, then makes no MPI call until every other rank has
 * waited for it and said so in a file (a sum that advances only inside MPI
 * calls would leave them waiting for rank 0, which would give up after
 * 20 s); then rank 0 waits for it too. */
static void check_small_sum_alone(void)
{
    char dir[64] = "/tmp/selsync-small-XXXXXX", path[96];
    int ok = g_rank != 0 || mkdtemp(dir) != NULL;
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    double v[3] = {g_rank + 1.0, 1, -1.0 * g_rank}, want[3] = {g_size * (g_size + 1) / 2.0, g_size,
                                                               -g_size * (g_size - 1) / 2.0};
    selsync_status s = C.ops->sum_f64_start(C.ctx, v, 3);
    if (g_rank == 0) {
        int told = 0;
        for (int t = 0; t < 2000 && told < g_size - 1; ++t) { /* 20 s */
            told = 0;
            for (int r = 1; r < g_size; ++r) {
                snprintf(path, sizeof path, "%s/%d", dir, r);
                told += access(path, F_OK) == 0;
            }
            if (told < g_size - 1) sleep_ms(10);
        }
        ok = ok && told == g_size - 1;
        if (s == SELSYNC_OK) s = C.ops->wait_f64(C.ctx);
    } else {
        if (s == SELSYNC_OK) s = C.ops->wait_f64(C.ctx);
        snprintf(path, sizeof path, "%s/%d", dir, g_rank);
        FILE *f = fopen(path, "w");
        ok = f != NULL;
        if (f) fclose(f);
    }
    ok = ok && s == SELSYNC_OK && memcmp(v, want, sizeof v) == 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
        for (int r = 1; r < g_size; ++r) {
            snprintf(path, sizeof path, "%s/%d", dir, r);
            unlink(path);
        }
        rmdir(dir);
    }
    check("sum_f64_start: completes on every other rank while rank 0 makes no MPI call", ok);
}

static void check_bcast(size_t bytes, int root, size_t chunk, const char *label)
{
    char name[160];
    snprintf(name, sizeof name, "bcast %zu bytes from root %d%s", bytes, root, label);
    unsigned char *b = malloc(bytes);
    int ok = b != NULL;
    if (ok) {
        for (size_t i = 0; i < bytes; ++i)
            b[i] = g_rank == root ? (unsigned char)(i * 131u + (unsigned)root * 7u + 1u) : 0xEE;
    }
    size_t prev = selsync_mpi_set_chunk_bytes(chunk);
    selsync_status s = ok ? C.ops->bcast(C.ctx, b, bytes, root) : SELSYNC_ENOMEM;
    selsync_mpi_set_chunk_bytes(prev);
    if (s != SELSYNC_OK) note(name, "status %s: %s", selsync_status_str(s), selsync_mpi_last_error());
    ok = ok && s == SELSYNC_OK;
    for (size_t i = 0; ok && i < bytes; ++i) {
        if (b[i] != (unsigned char)(i * 131u + (unsigned)root * 7u + 1u)) {
            note(name, "byte %zu wrong", i);
            ok = 0;
        }
    }
    check(name, ok);
    free(b);
}

static unsigned ceil_log2(unsigned p)
{
    unsigned k = 0;
    while ((1u << k) < p) ++k;
    return k;
}

static void check_bytes_sent(void)
{
    uint64_t P = (uint64_t)g_size;
    uint64_t before, d;
    int ok;

    /* sum_f32, n divisible by size: 2 (N-1)/N * S. */
    size_t n = (size_t)g_size * 1000;
    float *f = calloc(n, sizeof(float));
    before = C.ops->bytes_sent(C.ctx);
    selsync_status s = f ? C.ops->sum_f32(C.ctx, f, n) : SELSYNC_ENOMEM;
    d = C.ops->bytes_sent(C.ctx) - before;
    ok = s == SELSYNC_OK && d == 2 * (P - 1) * 1000 * sizeof(float);
    if (!ok) note("bytes_sent sum_f32", "delta %llu", (unsigned long long)d);
    check("bytes_sent: ring sum_f32 of S bytes (N divides n) adds 2 (N-1)/N S", ok);

    /* Ring, n = size + 1: rank r sends 2n - len(r) - len(r+1) floats, where
     * block 0 has 2 elements and the others 1; the job 2 (N-1) n floats. */
    size_t m = (size_t)g_size + 1;
    before = C.ops->bytes_sent(C.ctx);
    s = f ? C.ops->sum_f32(C.ctx, f, m) : SELSYNC_ENOMEM;
    d = C.ops->bytes_sent(C.ctx) - before;
    uint64_t len_r = g_rank == 0 ? 2 : 1, len_next = (g_rank + 1) % g_size == 0 ? 2 : 1;
    uint64_t want = g_size == 1 ? 0 : (2 * m - len_r - len_next) * sizeof(float), job = 0;
    MPI_Allreduce(&d, &job, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    ok = s == SELSYNC_OK && d == want && job == 2 * (P - 1) * m * sizeof(float);
    if (!ok) note("bytes_sent ring uneven", "delta %llu (want %llu), job %llu",
                  (unsigned long long)d, (unsigned long long)want, (unsigned long long)job);
    check("bytes_sent: ring sum_f32 n=size+1 counts what each rank sends, job 2 (N-1) S", ok);

    /* reduce_scatter_block, n = size + 1: padded to 2 * size elements. */
    selsync_mpi_set_sum_algorithm(SELSYNC_MPI_SUM_RSB);
    before = C.ops->bytes_sent(C.ctx);
    s = f ? C.ops->sum_f32(C.ctx, f, m) : SELSYNC_ENOMEM;
    d = C.ops->bytes_sent(C.ctx) - before;
    selsync_mpi_set_sum_algorithm(SELSYNC_MPI_SUM_RING);
    ok = s == SELSYNC_OK && d == 2 * (P - 1) * 2 * sizeof(float);
    if (!ok) note("bytes_sent padded", "delta %llu", (unsigned long long)d);
    check("bytes_sent: reduce_scatter_block sum_f32 counts padding (n=size+1 -> 2 (N-1) 2 floats)",
          ok);

    before = C.ops->bytes_sent(C.ctx);
    s = C.ops->sum_f32(C.ctx, f, 0);
    d = C.ops->bytes_sent(C.ctx) - before;
    check("bytes_sent: sum_f32 n=0 adds nothing", s == SELSYNC_OK && d == 0);
    free(f);

    /* any of 10 * size flags: ring formula, 1-byte elements. */
    uint8_t flags[64] = {0};
    before = C.ops->bytes_sent(C.ctx);
    s = C.ops->any(C.ctx, flags, (size_t)g_size * 10);
    d = C.ops->bytes_sent(C.ctx) - before;
    check("bytes_sent: any adds 2 (N-1)/N S", s == SELSYNC_OK && d == 2 * (P - 1) * 10);

    /* bcast of 1 MiB from root 0: binomial tree; root sends ceil(log2 N) S,
     * the job (N-1) S. */
    size_t S = (size_t)1 << 20;
    unsigned char *b = calloc(S, 1);
    before = C.ops->bytes_sent(C.ctx);
    s = b ? C.ops->bcast(C.ctx, b, S, 0) : SELSYNC_ENOMEM;
    d = C.ops->bytes_sent(C.ctx) - before;
    uint64_t total = 0;
    MPI_Allreduce(&d, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    ok = s == SELSYNC_OK && total == (P - 1) * S &&
         (g_rank != 0 || d == ceil_log2((unsigned)g_size) * (uint64_t)S);
    if (!ok) note("bytes_sent bcast", "delta %llu, job total %llu", (unsigned long long)d,
                  (unsigned long long)total);
    check("bytes_sent: bcast root sends ceil(log2 N) S, job (N-1) S", ok);
    free(b);
}

static void check_errors(void)
{
    unsigned char b[4] = {0};
    selsync_status s = C.ops->bcast(C.ctx, b, sizeof b, g_size);
    int ok = s == SELSYNC_EINVAL && selsync_mpi_last_error()[0] != '\0';
    s = C.ops->bcast(C.ctx, b, sizeof b, -1);
    ok = ok && s == SELSYNC_EINVAL;
    check("bcast: root out of range is SELSYNC_EINVAL (no communication)", ok);
    s = C.ops->sum_f32(C.ctx, NULL, 3);
    ok = s == SELSYNC_EINVAL;
    s = C.ops->sum_f32(C.ctx, NULL, 0);
    ok = ok && s == SELSYNC_OK;
    check("sum_f32: NULL with n>0 is SELSYNC_EINVAL, NULL with n=0 is ok", ok);
}

/* --- modes --------------------------------------------------------------- */

static int launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE");
}

static int run_single(int *argc, char ***argv)
{
    int fails = 0, passes = 0;
#define SINGLE_CHECK(name, cond)                                         \
    do {                                                                 \
        if (cond) { ++passes; printf("ok   %s\n", name); }               \
        else { ++fails; printf("FAIL %s\n", name); }                     \
    } while (0)
    if (launched()) {
        fprintf(stderr, "test_comm_mpi --single must run without an MPI launcher\n");
        return 2;
    }
    char err[256] = "x";
    selsync_comm c = {0};
    selsync_status s = selsync_mpi_init(argc, argv, &c, err, sizeof err);
    SINGLE_CHECK("init returns ok", s == SELSYNC_OK && err[0] == '\0');
    selsync_comm single = selsync_comm_single();
    SINGLE_CHECK("init returns selsync_comm_single()", c.ops == single.ops && c.ctx == single.ctx);
    SINGLE_CHECK("selsync_mpi_active() == 0", selsync_mpi_active() == 0);
    int init = 1;
    MPI_Initialized(&init);
    SINGLE_CHECK("MPI not initialised", init == 0);
    if (c.ops) {
        SINGLE_CHECK("rank 0 of 1", c.ops->rank(c.ctx) == 0 && c.ops->size(c.ctx) == 1);
        float v[3] = {1.5f, -2.0f, 3.25f};
        s = c.ops->sum_f32(c.ctx, v, 3);
        SINGLE_CHECK("sum_f32 is the identity",
                     s == SELSYNC_OK && v[0] == 1.5f && v[1] == -2.0f && v[2] == 3.25f);
        selsync_segment segs[2] = {{v, 1}, {v + 1, 2}};
        s = c.ops->sum_f32v(c.ctx, segs, 2, 0.5f);
        SINGLE_CHECK("sum_f32v only scales",
                     s == SELSYNC_OK && v[0] == 0.75f && v[1] == -1.0f && v[2] == 1.625f);
        int zero = 0, one = 1;
        s = c.ops->sum_f32v_among(c.ctx, segs, 2, 2.0f, &zero, 1);
        SINGLE_CHECK("sum_f32v_among {0} only scales",
                     s == SELSYNC_OK && v[0] == 1.5f && v[1] == -2.0f && v[2] == 3.25f);
        SINGLE_CHECK("sum_f32v_among {1} is SELSYNC_EINVAL",
                     c.ops->sum_f32v_among(c.ctx, segs, 2, 2.0f, &one, 1) == SELSYNC_EINVAL && v[0] == 1.5f);
    }
    selsync_mpi_finalize();
    selsync_mpi_finalize();
    MPI_Initialized(&init);
    SINGLE_CHECK("finalize leaves MPI alone", init == 0);
    printf("%d passed, %d failed\n", passes, fails);
    return fails ? 1 : 0;
}

enum { STALL_STEPS = 6, STALL_AT = 3, STALL_FLOATS = 4096 };

/* Set by the SIGCONT handler, which may run on one of Open MPI's threads:
 * atomic, not only volatile. */
static int g_continued;

static void on_cont(int sig)
{
    (void)sig;
    __atomic_store_n(&g_continued, 1, __ATOMIC_RELEASE);
}

static int continued(void)
{
    return __atomic_load_n(&g_continued, __ATOMIC_ACQUIRE);
}

/* Writes this process's pid to path, complete when path appears. */
static int write_pid(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return 0;
    int ok = fprintf(f, "%ld\n", (long)getpid()) > 0;
    ok = (fclose(f) == 0) && ok;
    return ok && rename(tmp, path) == 0;
}

/* Rank victim stops (see the usage) at step STALL_AT before op. */
static void stall_point(int victim, const char *op, const char *here, int step, const char *pid_file)
{
    if (g_rank != victim || step != STALL_AT || strcmp(op, here) != 0) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_cont;
    sigaction(SIGCONT, &sa, NULL);
    if (!write_pid(pid_file)) {
        fprintf(stderr, "rank %d: cannot write %s\n", g_rank, pid_file);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fprintf(stderr, "rank %d: at step %d before %s, waiting for SIGCONT\n", g_rank, step, op);
    for (int i = 0; i < 6000 && !continued(); ++i) sleep_ms(10);
    fprintf(stderr, "rank %d: %s\n", g_rank, continued() ? "continued" : "not stopped within 60 s");
}

static int run_stall(int victim, const char *op, const char *pid_file, int *argc, char ***argv)
{
    char err[256];
    selsync_status s = selsync_mpi_init(argc, argv, &C, err, sizeof err);
    if (s != SELSYNC_OK) {
        fprintf(stderr, "selsync_mpi_init: %s: %s\n", selsync_status_str(s), err);
        return 1;
    }
    g_rank = C.ops->rank(C.ctx);
    g_size = C.ops->size(C.ctx);
    selsync_mpi_set_background_sums(1); /* sum_f32v_start's waiting on the background thread */
    if (g_rank == 0) fprintf(stderr, "# where the ranks run: %s\n", selsync_mpi_hosts());
    if (victim < 0 || victim >= g_size || !pid_file ||
        (strcmp(op, "any") && strcmp(op, "sum_f32") && strcmp(op, "sum_f32v_among") &&
         strcmp(op, "sum_f32v_start") && strcmp(op, "bcast"))) {
        if (g_rank == 0) fprintf(stderr, "--stall-rank %d --stall-in %s: bad arguments\n", victim, op);
        selsync_mpi_finalize();
        return 2;
    }
    static float buf[STALL_FLOATS];
    int bad = 0;
    for (int step = 0; step < STALL_STEPS; ++step) {
        selsync_mpi_set_step(step);
        uint8_t flag = g_rank == step % g_size;
        stall_point(victim, op, "any", step, pid_file);
        s = C.ops->any(C.ctx, &flag, 1);
        bad += s != SELSYNC_OK || flag != 1;
        for (int i = 0; i < STALL_FLOATS; ++i) buf[i] = (float)(g_rank + i % 7);
        stall_point(victim, op, "sum_f32", step, pid_file);
        s = s == SELSYNC_OK ? C.ops->sum_f32(C.ctx, buf, STALL_FLOATS) : s;
        for (int i = 0; s == SELSYNC_OK && i < STALL_FLOATS; ++i)
            bad += buf[i] != (float)(g_size * (g_size - 1) / 2 + g_size * (i % 7));
        int ends[2] = {0, g_size - 1};
        selsync_segment all = {buf, STALL_FLOATS};
        for (int i = 0; i < STALL_FLOATS; ++i) buf[i] = (float)(g_rank + i % 7);
        stall_point(victim, op, "sum_f32v_among", step, pid_file);
        s = s == SELSYNC_OK ? C.ops->sum_f32v_among(C.ctx, &all, 1, 1.0f, ends, g_size > 1 ? 2 : 1) : s;
        for (int i = 0; s == SELSYNC_OK && i < STALL_FLOATS; ++i)
            bad += buf[i] != (float)(g_size - 1 + (g_size > 1 ? 2 : 1) * (i % 7));
        for (int i = 0; i < STALL_FLOATS; ++i) buf[i] = (float)(g_rank + i % 7);
        stall_point(victim, op, "sum_f32v_start", step, pid_file); /* the others wait on the background thread */
        s = s == SELSYNC_OK ? C.ops->sum_f32v_start(C.ctx, &all, 1, 1.0f) : s;
        s = s == SELSYNC_OK ? C.ops->wait_sums(C.ctx) : s;
        for (int i = 0; s == SELSYNC_OK && i < STALL_FLOATS; ++i)
            bad += buf[i] != (float)(g_size * (g_size - 1) / 2 + g_size * (i % 7));
        for (int i = 0; i < STALL_FLOATS; ++i) buf[i] = (float)(g_rank + step + i % 5);
        stall_point(victim, op, "bcast", step, pid_file);
        s = s == SELSYNC_OK ? C.ops->bcast(C.ctx, buf, sizeof buf, 0) : s;
        for (int i = 0; s == SELSYNC_OK && i < STALL_FLOATS; ++i) bad += buf[i] != (float)(step + i % 5);
        if (s != SELSYNC_OK || bad) {
            fprintf(stderr, "rank %d: step %d: status %s, %d wrong results: %s\n", g_rank, step,
                    selsync_status_str(s), bad, selsync_mpi_last_error());
            break;
        }
    }
    fprintf(stderr, "rank %d: %d steps done, %s\n", g_rank, STALL_STEPS, bad ? "FAIL" : "results right");
    selsync_mpi_finalize();
    return bad ? 1 : 0;
}

static int run_exit_rank(int victim, int use_abort, int *argc, char ***argv)
{
    char err[256];
    if (selsync_mpi_init(argc, argv, &C, err, sizeof err) != SELSYNC_OK) {
        fprintf(stderr, "selsync_mpi_init: %s\n", err);
        return 1;
    }
    g_rank = C.ops->rank(C.ctx);
    g_size = C.ops->size(C.ctx);
    if (victim < 0 || victim >= g_size) {
        if (g_rank == 0) fprintf(stderr, "--exit-rank %d: no such rank (size %d)\n", victim, g_size);
        selsync_mpi_finalize();
        return 2;
    }
    size_t n = 1 << 20;
    float *buf = calloc(n, sizeof(float));
    if (!buf) return 1;
    C.ops->sum_f32(C.ctx, buf, n); /* everybody is up */
    if (g_rank == victim) {
        selsync_segment all = {buf, n};
        uint8_t go;
        /* every other rank says it is about to wait (no sleep to hope for it) */
        for (int r = 0; r < g_size - 1; r++)
            if (C.ops->recv(C.ctx, SELSYNC_ANY, 7, &go, 1, NULL) != SELSYNC_OK) return 1;
        if (use_abort == 2) {
            selsync_mpi_set_background_sums(1);
            if (C.ops->sum_f32v_start(C.ctx, &all, 1, 1.0f) != SELSYNC_OK) return 1;
            fprintf(stderr, "rank %d: background sum started\n", g_rank);
            sleep_ms(100); /* mostly finds its thread inside MPI; either way the job must end with 5 */
        }
        if (use_abort) {
            fprintf(stderr, "rank %d: calling abort(5) mid-way\n", g_rank);
            C.ops->abort(C.ctx, 5, "test abort");
            fprintf(stderr, "rank %d: abort returned\n", g_rank);
            return 1;
        }
        fprintf(stderr, "rank %d: calling exit(3) mid-way\n", g_rank);
        exit(3);
    }
    uint8_t go = 1;
    if (use_abort == 2) { /* out of the victim's sum's way: a message never sent */
        fprintf(stderr, "rank %d: waiting in recv\n", g_rank);
        if (C.ops->send(C.ctx, victim, 7, &go, 1) != SELSYNC_OK) return 1;
        selsync_status r = C.ops->recv(C.ctx, victim, 99, buf, sizeof(float), NULL);
        fprintf(stderr, "rank %d: recv returned %s\n", g_rank, selsync_status_str(r));
        return 1;
    }
    fprintf(stderr, "rank %d: waiting in sum_f32\n", g_rank);
    if (C.ops->send(C.ctx, victim, 7, &go, 1) != SELSYNC_OK) return 1;
    double t0 = now();
    selsync_status s = C.ops->sum_f32(C.ctx, buf, n);
    fprintf(stderr, "rank %d: sum_f32 returned %s after %.2f s (%s)\n", g_rank,
            selsync_status_str(s), now() - t0, selsync_mpi_last_error());
    free(buf);
    selsync_mpi_finalize();
    return 1;
}

int main(int argc, char **argv)
{
    int victim = -1, use_abort = 0, stall = -1;
    const char *stall_in = "any", *pid_file = NULL;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--single") == 0) return run_single(&argc, &argv);
        if (strcmp(argv[i], "--stall-rank") == 0 && i + 1 < argc) {
            stall = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--stall-in") == 0 && i + 1 < argc) {
            stall_in = argv[++i];
        } else if (strcmp(argv[i], "--pid-file") == 0 && i + 1 < argc) {
            pid_file = argv[++i];
        } else if (strcmp(argv[i], "--exit-rank") == 0 && i + 1 < argc) {
            victim = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--abort-rank") == 0 && i + 1 < argc) {
            victim = atoi(argv[++i]);
            use_abort = 1;
        } else if (strcmp(argv[i], "--abort-in-background") == 0 && i + 1 < argc) {
            victim = atoi(argv[++i]);
            use_abort = 2;
        } else {
            fprintf(stderr, "usage: %s [--single | --exit-rank R | --abort-rank R | --abort-in-background R |\n"
                            "    --stall-rank R --stall-in any|sum_f32|sum_f32v_among|sum_f32v_start|bcast --pid-file F]\n",
                    argv[0]);
            return 2;
        }
    }
    if (stall >= 0) return run_stall(stall, stall_in, pid_file, &argc, &argv);
    if (victim >= 0) return run_exit_rank(victim, use_abort, &argc, &argv);

    if (!launched()) {
        fprintf(stderr, "test_comm_mpi: run under mpirun (or use --single)\n");
        return 2;
    }
    const char *to = getenv("TEST_COMM_MPI_TIMEOUT");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    alarm(to ? (unsigned)atoi(to) : 120u);

    char err[256];
    selsync_status s = selsync_mpi_init(&argc, &argv, &C, err, sizeof err);
    if (s != SELSYNC_OK) {
        fprintf(stderr, "selsync_mpi_init: %s: %s\n", selsync_status_str(s), err);
        selsync_mpi_finalize();
        return 1; /* mpirun ends the job: this rank exits non-zero */
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);

    /* init */
    selsync_comm again = {0};
    int ok = selsync_mpi_active() == 1 && C.ops && strcmp(C.ops->name, "mpi") == 0 &&
             C.ops->rank(C.ctx) == g_rank && C.ops->size(C.ctx) == g_size &&
             C.ops->bytes_sent(C.ctx) == 0;
    ok = ok && selsync_mpi_init(&argc, &argv, &again, err, sizeof err) == SELSYNC_OK &&
         again.ops == C.ops && again.ctx == C.ctx;
    check("init: mpi communicator, rank/size of MPI_COMM_WORLD, active, repeatable", ok);
    if (g_rank == 0) printf("# %d ranks; %s\n", g_size, selsync_mpi_hosts());
    selsync_mpi_set_background_sums(1); /* the background thread also with every rank on one host */
    int hosts = 0;
    char tail = 0;
    check("where the ranks run: one host, or 2 to size hosts",
          !strcmp(selsync_mpi_hosts(), "ranks share a host") ||
              (sscanf(selsync_mpi_hosts(), "%d hosts%c", &hosts, &tail) == 1 && hosts >= 2 && hosts <= g_size));

    /* sum_f32, with each implementation */
    size_t sizes[] = {0, 1, (size_t)g_size - 1, (size_t)g_size, (size_t)g_size + 1,
                      2 * (size_t)g_size + 1, 16385, 16384 * (size_t)g_size + 1, 1000003};
    static const struct { selsync_mpi_sum_algorithm alg; const char *label; } algs[] = {
        {SELSYNC_MPI_SUM_RING, ", ring"},
        {SELSYNC_MPI_SUM_RSB, ", reduce_scatter_block"},
    };
    check("set_sum_algorithm: ring is the default",
          selsync_mpi_set_sum_algorithm(SELSYNC_MPI_SUM_RING) == SELSYNC_MPI_SUM_RING);
    size_t prev = 0;
    for (int a = 0; a < 2; ++a) {
        char label[96];
        selsync_mpi_set_sum_algorithm(algs[a].alg);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k)
            check_sum_f32(sizes[k], 1000 + k, algs[a].label);
        prev = selsync_mpi_set_chunk_bytes(4000);
        snprintf(label, sizeof label, "%s, chunked (4000-byte calls)", algs[a].label);
        check_sum_f32(1000003, 77, label);
        check_sum_f32(1001, 78, label);
        selsync_mpi_set_chunk_bytes(1);  /* one float per call */
        snprintf(label, sizeof label, "%s, chunked (1 float per call)", algs[a].label);
        check_sum_f32(2 * (size_t)g_size + 1, 79, label);
        selsync_mpi_set_chunk_bytes(prev);
    }
    selsync_mpi_set_sum_algorithm(SELSYNC_MPI_SUM_RING);
    for (int a = 0; a < 2; ++a) {
        char label[96];
        float third = 1.0f / 3.0f, mean = 1.0f / (float)g_size;
        selsync_mpi_set_sum_algorithm(algs[a].alg);
        check_sum_f32v(0, mean, 0, 90, algs[a].label);
        check_sum_f32v(1, mean, 0, 91, algs[a].label);
        check_sum_f32v(2 * (size_t)g_size + 1, third, 1, 92, algs[a].label);
        check_sum_f32v(100003, mean, 0, 93, algs[a].label);
        check_sum_f32v(100003, 1.0f, 1, 94, algs[a].label);
        check_sum_f32v(300007, third, 1, 95, algs[a].label);
        check_started_sums(1, mean, algs[a].label);
        check_started_sums(5, third, algs[a].label);
        prev = selsync_mpi_set_chunk_bytes(4000);
        snprintf(label, sizeof label, "%s, chunked (4000-byte calls)", algs[a].label);
        check_sum_f32v(100003, mean, 1, 96, label);
        selsync_mpi_set_chunk_bytes(4);
        snprintf(label, sizeof label, "%s, chunked (1 float per call)", algs[a].label);
        check_sum_f32v(1001, mean, 1, 97, label);
        selsync_mpi_set_chunk_bytes(prev);
    }
    selsync_mpi_set_sum_algorithm(SELSYNC_MPI_SUM_RING);
    check("set_chunk_bytes returns the previous cap (default 1 GiB)",
          prev == ((size_t)1 << 30) && selsync_mpi_set_chunk_bytes(0) == prev &&
              selsync_mpi_set_chunk_bytes(0) == prev);

    /* sum_f32v_among: every member set up to 6 ranks (non-contiguous ones,
     * one member, all ranks), under each algorithm (always the ring) and
     * chunked */
    for (unsigned mask = 1; g_size <= 6 && mask < (1u << g_size); ++mask) {
        check_among(1, mask, 200 + mask, "");
        check_among(2 * (size_t)g_size + 1, mask, 300 + mask, "");
        check_among(100003, mask, 400 + mask, "");
        selsync_mpi_set_sum_algorithm(SELSYNC_MPI_SUM_RSB);
        check_among(10007, mask, 500 + mask, " (algorithm reduce_scatter_block)");
        selsync_mpi_set_sum_algorithm(SELSYNC_MPI_SUM_RING);
        prev = selsync_mpi_set_chunk_bytes(4000);
        check_among(10007, mask, 600 + mask, ", chunked (4000-byte calls)");
        selsync_mpi_set_chunk_bytes(4);
        check_among(1001, mask, 700 + mask, ", chunked (1 float per call)");
        selsync_mpi_set_chunk_bytes(prev);
    }
    check_among(0, 1, 800, "");
    check_among_errors();

    check_any();
    check_sum_f64();
    check_small_sums();
    check_small_sum_alone();
    check_bcast(((size_t)5 << 20) + 3, 0, 0, "");
    check_bcast(((size_t)5 << 20) + 3, g_size - 1, 0, "");
    check_bcast(((size_t)5 << 20) + 3, g_size / 2, (size_t)1 << 20, " (chunked, 1 MiB calls)");
    check_bytes_sent();
    check_errors();

    if (g_rank == 0) {
        printf("%d passed, %d failed\n", n_pass, n_fail);
        fflush(stdout);
    }
    int failed = n_fail;

    /* After finalize: local checks only (no MPI left to combine verdicts). */
    selsync_mpi_finalize();
    float v = 1;
    if (selsync_mpi_active() != 0 || C.ops->sum_f32(C.ctx, &v, 1) != SELSYNC_ESTATE) {
        fprintf(stderr, "rank %d: FAIL communicator still usable after finalize\n", g_rank);
        failed = 1;
    }
    selsync_mpi_finalize(); /* idempotent */
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {
        fprintf(stderr, "rank %d: FAIL MPI not finalised\n", g_rank);
        failed = 1;
    }
    return failed ? 1 : 0;
}
