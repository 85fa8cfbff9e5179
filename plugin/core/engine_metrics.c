/* The metrics file: one tab-separated row per step, "# " notes and
 * "# eval" rows (see engine_state.h).
 *
 * The header line is written just before the first step's
 * line (or at finish/destroy if no step ran), so that selsync_engine_log_note's
 * "# " lines can precede it. Injection bytes the host notes wait in
 * inject_next for the coming step's record. */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "selsync/vclock.h"

#include "engine_state.h"
#include "metrics_columns.h"

#define FLUSH_EVERY 100 /* rows between two flushes */

const char *const metrics_column_name[METRICS_COLUMNS] = {
#define METRICS_COLUMN_NAME(id, name) name,
    SELSYNC_METRICS_COLUMNS(METRICS_COLUMN_NAME)
#undef METRICS_COLUMN_NAME
};

/* Opens cfg->log with every "%r" replaced by the rank. */
selsync_status metrics_open(selsync_engine *e, char *err, size_t len)
{
    char *o = e->log_path;
    for (const char *p = e->cfg.log; *p; p++) {
        if (p[0] == '%' && p[1] == 'r') o += sprintf(o, "%d", e->rank), p++;
        else *o++ = *p;
    }
    *o = '\0';
    FILE *probe = fopen(e->log_path, "a"); /* fail early; truncated on first write */
    if (!probe || fclose(probe))
        return selsync_fail(err, len, SELSYNC_EIO, "[selsync] cannot open metrics file '%s': %s", e->log_path,
                    strerror(errno));
    return SELSYNC_OK;
}

/* A file whose writer died in the middle of a line (a killed job's last
 * row): the part after its last newline is cut, so that what is appended
 * starts a line of its own. f is open for reading and appending. */
static void cut_torn_line(FILE *f)
{
    long end, pos;
    if (fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) <= 0) return;
    for (pos = end; pos > 0; pos--)
        if (fseek(f, pos - 1, SEEK_SET) != 0 || fgetc(f) == '\n') break;
    if (pos < end && ftruncate(fileno(f), pos) != 0) return;
    fseek(f, 0, SEEK_END);
}

/* The metrics file, opened on the first write: anew, or appended to after a
 * restore (its header is already there; a torn last row is cut); NULL when
 * there is none or it cannot be opened (errno set). */
static FILE *log_file(selsync_engine *e)
{
    if (e->log || !e->cfg.log[0]) return e->log;
    e->log = fopen(e->log_path, e->resumed ? "a+" : "w");
    if (e->log && e->resumed) {
        cut_torn_line(e->log);
        e->header_done = ftell(e->log) > 0;
    }
    return e->log;
}

/* delta changes during the run (target_sync): the metrics log it */
static int adaptive(const selsync_engine *e)
{
    return e->cfg.method == SELSYNC_METHOD_SELSYNC && e->cfg.target_sync > 0;
}

/* Whether column k is in this run's file: delta with target_sync, virtual_s
 * under virtual time, drift with the drift rule. */
static int written(const selsync_engine *e, metrics_column k)
{
    if (k == METRICS_DELTA) return adaptive(e);
    if (k == METRICS_DRIFT) return selsync_config_drift(&e->cfg);
    if (k == METRICS_VIRTUAL_S) return selsync_virtual_clock(&e->comm, NULL);
    return 1;
}

/* The header line, written lazily so that notes can come first; -1 on error. */
int metrics_header(selsync_engine *e)
{
    if (!e->cfg.log[0] || e->header_done) return 0;
    if (!log_file(e)) return -1;
    if (e->header_done) return 0;
    e->header_done = 1;
    for (int k = 0; k < METRICS_COLUMNS; k++)
        if (written(e, k) && fprintf(e->log, "%s%s", k ? "\t" : "", metrics_column_name[k]) < 0) return -1;
    return fputc('\n', e->log) == EOF ? -1 : 0;
}

/* Column k of step s. */
static int put_column(FILE *f, const selsync_step *s, metrics_column k)
{
    switch (k) {
    case METRICS_STEP: return fprintf(f, "%" PRIu64, s->step);
    case METRICS_LOSS: return fprintf(f, "%.9g", s->loss);
    case METRICS_LR: return fprintf(f, "%.9g", s->learning_rate);
    case METRICS_GRAD_NORM: return fprintf(f, "%.9g", s->grad_norm);
    case METRICS_SMOOTHED: return fprintf(f, "%.9g", s->smoothed);
    case METRICS_CHANGE: return isinf(s->change) ? fprintf(f, "inf") : fprintf(f, "%.9g", s->change);
    case METRICS_LOCAL_FLAG: return fprintf(f, "%d", s->local_flag);
    case METRICS_DECISION: return fprintf(f, "%s", selsync_decision_name(s->decision));
    case METRICS_LAYERS_SYNCED: return fprintf(f, "%zu", s->layers_synced);
    case METRICS_BYTES_SENT: return fprintf(f, "%" PRIu64, s->bytes_sent);
    case METRICS_INJECT_BYTES: return fprintf(f, "%" PRIu64, s->inject_bytes);
    case METRICS_T_COMPUTE: return fprintf(f, "%.9g", s->t_compute);
    case METRICS_T_MEASURE: return fprintf(f, "%.9g", s->t_measure);
    case METRICS_T_AGREE: return fprintf(f, "%.9g", s->t_agree);
    case METRICS_T_TRANSFER: return fprintf(f, "%.9g", s->t_transfer);
    case METRICS_DELTA: return fprintf(f, "%.9g", s->delta);
    case METRICS_VIRTUAL_S: return fprintf(f, "%.6f", s->t_virtual);
    case METRICS_DRIFT: return fprintf(f, "%.9g", s->drift);
    case METRICS_COLUMNS: break;
    }
    return -1;
}

int metrics_line(const selsync_engine *e)
{
    FILE *f = e->log;
    const selsync_step *s = &e->cur;
    for (int k = 0; k < METRICS_COLUMNS; k++)
        if (written(e, k) && ((k && fputc('\t', f) == EOF) || put_column(f, s, k) < 0)) return -1;
    return fputc('\n', f) == EOF || ((s->step + 1) % FLUSH_EVERY == 0 && fflush(f) != 0) ? -1 : 0;
}

selsync_status metrics_failed(selsync_engine *e)
{
    return EFAIL(e, SELSYNC_EIO, "[selsync] writing metrics file '%s' failed: %s", e->log_path, strerror(errno));
}

/* One "# " line per line of text; a final newline ends the last line. */
selsync_status selsync_engine_log_note(selsync_engine *e, const char *text)
{
    if (!e || !text) return SELSYNC_EINVAL;
    if (!e->cfg.log[0]) return SELSYNC_OK;
    if (e->in_step)
        return EFAIL(e, SELSYNC_ESTATE, "[selsync] step %" PRIu64 ": selsync_engine_log_note in the middle of a step",
                     e->step);
    if (!log_file(e)) return metrics_failed(e);
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        if (fputs("# ", e->log) == EOF || fwrite(p, 1, n, e->log) != n || fputc('\n', e->log) == EOF)
            return metrics_failed(e);
        p += n + (p[n] == '\n');
    }
    return SELSYNC_OK;
}

selsync_status selsync_engine_log_eval(selsync_engine *e, const char *metric, double score, double eval_s)
{
    if (!e || !metric) return SELSYNC_EINVAL;
    if (!e->cfg.log[0]) return SELSYNC_OK;
    double wall = e->t_mark - e->t_start;
    selsync_vclock vc;
    char virt[48] = "";
    if (selsync_virtual_clock(&e->comm, &vc)) snprintf(virt, sizeof virt, "\tvirtual_s=%.3f", vc.now);
    if (metrics_header(e) != 0 ||
        fprintf(e->log, "# eval\tstep=%" PRIu64 "\twall_s=%.3f\ttrain_s=%.3f%s\t%s=%.6f\teval_s=%.3f\n", e->step,
                wall, selsync_engine_train_seconds(e), virt, metric, score, eval_s) < 0 ||
        fflush(e->log) != 0)
        return metrics_failed(e);
    return SELSYNC_OK;
}
