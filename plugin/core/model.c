/* A model's parameters as one vector (selsync/model.h). */
#include "selsync/model.h"

#include <string.h>

int selsync_tensor_travels(const selsync_tensor *t, int with_stats)
{
    return t->kind == SELSYNC_TENSOR_TRAINED || with_stats;
}

size_t selsync_model_pack(const selsync_tensor *t, size_t n, int with_stats, float *buf)
{
    size_t k = 0;
    for (size_t i = 0; i < n; k += selsync_tensor_travels(&t[i], with_stats) ? t[i].count : 0, i++)
        if (selsync_tensor_travels(&t[i], with_stats) && t[i].count) memcpy(buf + k, t[i].param, t[i].count * sizeof(float));
    return k;
}

size_t selsync_model_unpack(const selsync_tensor *t, size_t n, int with_stats, const float *buf)
{
    size_t k = 0;
    for (size_t i = 0; i < n; k += selsync_tensor_travels(&t[i], with_stats) ? t[i].count : 0, i++)
        if (selsync_tensor_travels(&t[i], with_stats) && t[i].count) memcpy(t[i].param, buf + k, t[i].count * sizeof(float));
    return k;
}
