/* gemm_cpu (OpenBLAS in the default build) against a double-precision
 * reference and against Darknet's stock loops, for all four transpose
 * combinations, odd sizes, padded leading dimensions and ALPHA/BETA != 1. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"

/* Darknet's stock loops (defined in gemm.c, not declared in gemm.h). */
void gemm_nn(int M, int N, int K, float ALPHA, float *A, int lda, float *B, int ldb, float *C, int ldc);
void gemm_nt(int M, int N, int K, float ALPHA, float *A, int lda, float *B, int ldb, float *C, int ldc);
void gemm_tn(int M, int N, int K, float ALPHA, float *A, int lda, float *B, int ldb, float *C, int ldc);
void gemm_tt(int M, int N, int K, float ALPHA, float *A, int lda, float *B, int ldb, float *C, int ldc);

static float *random_matrix_of(size_t n, unsigned *state)
{
    float *m = malloc(n * sizeof *m);
    for (size_t i = 0; i < n; ++i) {
        *state = *state * 1664525u + 1013904223u;
        m[i] = (float)((*state >> 8) / 16777216.0 * 2.0 - 1.0);
    }
    return m;
}

/* C = ALPHA op(A) op(B) + BETA C in double; op(X) = X^T when T is set. */
static void reference_gemm(int TA, int TB, int M, int N, int K, float ALPHA,
                           const float *A, int lda, const float *B, int ldb,
                           float BETA, double *C, int ldc)
{
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double sum = 0;
            for (int k = 0; k < K; ++k) {
                double a = TA ? A[k * lda + i] : A[i * lda + k];
                double b = TB ? B[j * ldb + k] : B[k * ldb + j];
                sum += a * b;
            }
            C[i * ldc + j] = ALPHA * sum + BETA * C[i * ldc + j];
        }
}

static void stock_gemm(int TA, int TB, int M, int N, int K, float ALPHA,
                       float *A, int lda, float *B, int ldb, float BETA,
                       float *C, int ldc)
{
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) C[i * ldc + j] *= BETA;
    if (!TA && !TB) gemm_nn(M, N, K, ALPHA, A, lda, B, ldb, C, ldc);
    else if (TA && !TB) gemm_tn(M, N, K, ALPHA, A, lda, B, ldb, C, ldc);
    else if (!TA && TB) gemm_nt(M, N, K, ALPHA, A, lda, B, ldb, C, ldc);
    else gemm_tt(M, N, K, ALPHA, A, lda, B, ldb, C, ldc);
}

static double max_relative_error(const float *got, const double *want, int M, int N, int ldc)
{
    double scale = 0, worst = 0;
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) scale = fmax(scale, fabs(want[i * ldc + j]));
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j)
            worst = fmax(worst, fabs(got[i * ldc + j] - want[i * ldc + j]) / scale);
    return worst;
}

static void check_case(int TA, int TB, int M, int N, int K, float ALPHA, float BETA)
{
    unsigned state = (unsigned)(M * 131 + N * 17 + K + TA * 7 + TB * 3);
    int pad = 3;
    int lda = (TA ? M : K) + pad, ldb = (TB ? K : N) + pad, ldc = N + pad;
    float *A = random_matrix_of((size_t)(TA ? K : M) * lda, &state);
    float *B = random_matrix_of((size_t)(TB ? N : K) * ldb, &state);
    float *C0 = random_matrix_of((size_t)M * ldc, &state);
    float *C_blas = malloc((size_t)M * ldc * sizeof(float));
    float *C_stock = malloc((size_t)M * ldc * sizeof(float));
    double *C_ref = malloc((size_t)M * ldc * sizeof(double));
    memcpy(C_blas, C0, (size_t)M * ldc * sizeof(float));
    memcpy(C_stock, C0, (size_t)M * ldc * sizeof(float));
    for (size_t i = 0; i < (size_t)M * ldc; ++i) C_ref[i] = C0[i];

    gemm_cpu(TA, TB, M, N, K, ALPHA, A, lda, B, ldb, BETA, C_blas, ldc);
    stock_gemm(TA, TB, M, N, K, ALPHA, A, lda, B, ldb, BETA, C_stock, ldc);
    reference_gemm(TA, TB, M, N, K, ALPHA, A, lda, B, ldb, BETA, C_ref, ldc);

    double e_blas = max_relative_error(C_blas, C_ref, M, N, ldc);
    double e_stock = max_relative_error(C_stock, C_ref, M, N, ldc);
    print_message("TA=%d TB=%d M=%d N=%d K=%d: gemm_cpu %.2e, stock %.2e\n",
                  TA, TB, M, N, K, e_blas, e_stock);
    assert_true(e_blas < 1e-4);
    assert_true(e_stock < 1e-4);
    free(A); free(B); free(C0); free(C_blas); free(C_stock); free(C_ref);
}

static void test_all_transposes_odd_sizes(void **state)
{
    (void)state;
    static const int sizes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 17, 129}, {64, 65, 63}, {3, 300, 11}};
    for (int TA = 0; TA < 2; ++TA)
        for (int TB = 0; TB < 2; ++TB)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s)
                check_case(TA, TB, sizes[s][0], sizes[s][1], sizes[s][2], 1.0f, 1.0f);
}

static void test_alpha_and_beta(void **state)
{
    (void)state;
    for (int TA = 0; TA < 2; ++TA)
        for (int TB = 0; TB < 2; ++TB) {
            check_case(TA, TB, 19, 23, 29, 0.5f, 0.0f);
            check_case(TA, TB, 19, 23, 29, -1.5f, 2.0f);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_transposes_odd_sizes),
        cmocka_unit_test(test_alpha_and_beta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
