/* What the engine's parts share besides the state itself (engine_state.h):
 * the failure of a collective, the check that an operation may run now,
 * the kept statistics, the training time and the decisions' names. */
#include <inttypes.h>
#include <string.h>

#include "engine_state.h"
#include "internal.h"

selsync_status engine_comm_failed(selsync_engine *e, selsync_status st, const char *what, size_t n)
{
    e->broken = 1;
    return EFAIL(e, SELSYNC_ECOMM, "[selsync] step %" PRIu64 ": %s over %zu elements failed on rank %d: %s",
                 e->step, what, n, e->rank, selsync_comm_error(&e->comm, st));
}

/* Copies the STAT tensors (e.g. batch-norm running statistics) into the
 * kept copy (save) or back from it. */
void engine_keep_stats(selsync_engine *e, int save)
{
    size_t off = 0;
    if (!e->stats) return;
    for (size_t i = 0; i < e->nt; i++)
        if (e->t[i].kind == SELSYNC_TENSOR_STAT) {
            float *kept = e->stats + off, *host = e->t[i].param;
            memcpy(save ? kept : host, save ? host : kept, e->t[i].count * sizeof(float));
            off += e->t[i].count;
        }
}

selsync_status engine_check(selsync_engine *e, int in_step)
{
    if (e->broken) return SELSYNC_ECOMM; /* keep the first failure's message */
    if (e->in_step != in_step)
        return EFAIL(e, SELSYNC_ESTATE, "[selsync] step %" PRIu64 ": %s", e->step,
                     in_step ? "selsync_engine_after_update without a preceding selsync_engine_before_update"
                             : "selsync_engine_before_update or selsync_engine_finish in the middle of a step");
    return SELSYNC_OK;
}

double selsync_engine_train_seconds(const selsync_engine *e)
{
    return e ? e->t_mark - e->t_start - e->tot.t_excluded : 0.0;
}

const char *selsync_decision_name(selsync_decision d)
{
    return d == SELSYNC_SYNC_STEP ? "sync" : d == SELSYNC_SKIP_STEP ? "skip" : "local";
}
