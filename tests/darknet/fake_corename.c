/* Loaded with LD_PRELOAD in front of OpenBLAS, this stands in for its
 * openblas_get_corename: it reports $FAKE_OPENBLAS_DETECTED, as OpenBLAS
 * would report an old kernel on a CPU it does not know, unless
 * OPENBLAS_CORETYPE is set (then that name, as OpenBLAS does). The kernel
 * OpenBLAS really loads is unchanged (OPENBLAS_VERBOSE=2 shows it). */
#include <stdlib.h>

char *openblas_get_corename(void)
{
    char *forced = getenv("OPENBLAS_CORETYPE");
    return forced ? forced : getenv("FAKE_OPENBLAS_DETECTED");
}
