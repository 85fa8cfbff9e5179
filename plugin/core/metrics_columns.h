/* The metrics file's step columns, in the order the header line names
 * them: the one table the writer (engine_metrics.c) and the chart's reader
 * (chart.c) use; scripts find a column by the header line's name. delta is
 * written with target_sync only, virtual_s under virtual time only, drift
 * with the drift rule only. */
#ifndef SELSYNC_METRICS_COLUMNS_H
#define SELSYNC_METRICS_COLUMNS_H

#define SELSYNC_METRICS_COLUMNS(X)                                                                        \
    X(STEP, "step") X(LOSS, "loss") X(LR, "lr") X(GRAD_NORM, "grad_norm") X(SMOOTHED, "smoothed")         \
    X(CHANGE, "change") X(LOCAL_FLAG, "local_flag") X(DECISION, "decision")                               \
    X(LAYERS_SYNCED, "layers_synced") X(BYTES_SENT, "bytes_sent") X(INJECT_BYTES, "inject_bytes")         \
    X(T_COMPUTE, "t_compute") X(T_MEASURE, "t_measure") X(T_AGREE, "t_agree") X(T_TRANSFER, "t_transfer") \
    X(DELTA, "delta") X(VIRTUAL_S, "virtual_s") X(DRIFT, "drift")

typedef enum metrics_column {
#define METRICS_COLUMN_ID(id, name) METRICS_##id,
    SELSYNC_METRICS_COLUMNS(METRICS_COLUMN_ID)
#undef METRICS_COLUMN_ID
    METRICS_COLUMNS
} metrics_column;

/* The header line's name of each column. */
extern const char *const metrics_column_name[METRICS_COLUMNS];

#endif
