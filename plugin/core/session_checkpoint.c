/* Checkpoints of a session (see session_state.h): rank 0 reads one and
 * every rank receives its state; each rank resumes its part, or, written
 * by a job of another rank count, the mean of every rank's; rank 0 gathers
 * the states and a child process writes each checkpoint beside training.
 * Collectives: bcast(state length), bcast(state) at load; send/recv to
 * rank 0 and bcast(done) at each checkpoint. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "selsync/checkpoint.h"
#include "selsync/vclock.h"

#include "session_state.h"

/* The state in a checkpoint: this head, then per rank its position in its
 * data (u64) and its engine snapshot, all of the same length. */
typedef struct checkpoint_head {
    char magic[8];
    int32_t world, batch; /* batch: samples each rank trained per step (0 in older checkpoints) */
    uint64_t per_rank, batches;
} checkpoint_head;

static const char checkpoint_magic[8] = "SSDKNT1";

/* The state length rank 0 shares when it refused the checkpoint. */
#define CHECKPOINT_REFUSED UINT64_MAX

selsync_status session_checkpoint_share(selsync_session *s, const char *weights, int required)
{
    const selsync_comm_ops *ops = s->comm.ops;
    selsync_status st;
    uint64_t len = 0;
    /* rank 0 reads the checkpoint; a refusal (len = REFUSED, then the
     * message) is every rank's */
    selsync_status refused = SELSYNC_OK;
    if (s->rank == 0 && weights && *weights) {
        refused = selsync_checkpoint_read(weights, required, s->model.file_bytes, &s->resume, &s->resume_len, s->err,
                                          sizeof s->err);
        len = refused ? CHECKPOINT_REFUSED : s->resume_len;
    }
    if (s->world > 1 && (st = ops->bcast(s->comm.ctx, &len, sizeof len, 0)))
        return session_comm_failed(s, st, "sharing the checkpoint state");
    if (len == CHECKPOINT_REFUSED) {
        uint32_t why = (uint32_t)refused;
        if (s->world > 1 && ((st = ops->bcast(s->comm.ctx, &why, sizeof why, 0)) ||
                             (st = ops->bcast(s->comm.ctx, s->err, sizeof s->err, 0))))
            return session_comm_failed(s, st, "sharing why the checkpoint was refused");
        s->err[sizeof s->err - 1] = '\0';
        return (selsync_status)why;
    }
    if (len == 0) return SELSYNC_OK;
    if (s->rank != 0 && !(s->resume = malloc(len))) return FAIL(s, SELSYNC_ENOMEM, "out of memory for the checkpoint");
    s->resume_len = len;
    if (s->world > 1 && (st = ops->bcast(s->comm.ctx, s->resume, len, 0)))
        return session_comm_failed(s, st, "sharing the checkpoint state");
    snprintf(s->resume_from, sizeof s->resume_from, "%s", weights ? weights : "");
    if (s->rank == 0) session_say(s, "%s is a checkpoint: every rank resumes from its state", weights);
    return SELSYNC_OK;
}

/* A checkpoint of h->world ranks resumed by this job's other count: every
 * rank takes the mean of the old ranks' states (selsync_engine_restore_mean)
 * and starts its new shard from the beginning. */
static selsync_status resume_resized(selsync_session *s, const checkpoint_head *h, size_t per_rank)
{
    const uint8_t *p = (const uint8_t *)s->resume + sizeof *h + sizeof(uint64_t);
    const void **states = malloc((size_t)h->world * sizeof *states);
    if (!states) return FAIL(s, SELSYNC_ENOMEM, "out of memory for the checkpoint");
    for (int r = 0; r < h->world; ++r) states[r] = p + (size_t)r * per_rank;
    selsync_status st = selsync_engine_restore_mean(s->engine, states, (size_t)h->world, per_rank - sizeof(uint64_t));
    free(states);
    if (st) return FAIL(s, SELSYNC_EMISMATCH, "%s: %s", s->resume_from, selsync_engine_error(s->engine));
    s->next_sample = s->trained_sample = 0;
    if (s->rank == 0)
        session_say(s, "resumed at step %llu from a checkpoint of %d rank%s on %d: every rank starts from the %s "
            "model%s (the step, the learning rate's schedule and delta go on); restarted, as they belonged to one "
            "rank of the old job: momentum, the smoothing history, the run of local steps; the data is partitioned "
            "again for %d ranks, each rank from the start of its shard", (unsigned long long)selsync_engine_steps(s->engine),
            h->world, h->world == 1 ? "" : "s", s->world, h->world == 1 ? "old rank's" : "old ranks' mean",
            h->world == 1 ? "" : ", its BatchNorm variances those of the ranks' data pooled", s->world);
    return SELSYNC_OK;
}

/* With the engine created: takes this rank's part of the checkpoint state
 * (of a job of another rank count: resume_resized). */
selsync_status session_resume(selsync_session *s)
{
    checkpoint_head h;
    const uint8_t *p = s->resume;
    uint64_t next;
    selsync_status st = SELSYNC_OK;
    if (!p) return SELSYNC_OK;
    size_t per_rank = sizeof next + selsync_engine_snapshot_size(s->engine);
    if (s->resume_len < sizeof h) goto mismatch;
    memcpy(&h, p, sizeof h);
    if (memcmp(h.magic, checkpoint_magic, sizeof h.magic) != 0 || h.world < 1 || h.per_rank != per_rank ||
        (s->resume_len - sizeof h) / per_rank != (size_t)h.world || (s->resume_len - sizeof h) % per_rank)
        goto mismatch;
    s->batches = h.batches;
    s->resumed_world = h.world;
    s->resumed_batch = h.batch;
    if (h.world != s->world) {
        st = resume_resized(s, &h, per_rank);
    } else {
        p += sizeof h + (size_t)s->rank * per_rank;
        memcpy(&next, p, sizeof next);
        if (selsync_engine_restore(s->engine, p + sizeof next, per_rank - sizeof next))
            return FAIL(s, SELSYNC_EMISMATCH, "%s: %s", s->resume_from, selsync_engine_error(s->engine));
        s->next_sample = s->trained_sample = (size_t)next;
        if (s->rank == 0) session_say(s, "resumed at step %llu", (unsigned long long)selsync_engine_steps(s->engine));
    }
    free(s->resume);
    s->resume = NULL;
    if (st == SELSYNC_OK) {
        char note[4200];
        snprintf(note, sizeof note, "resumed at step %llu from %s, a checkpoint of %d rank%s, on %d",
                 (unsigned long long)selsync_engine_steps(s->engine), s->resume_from, h.world, h.world == 1 ? "" : "s",
                 s->world);
        if ((st = selsync_engine_log_note(s->engine, note))) st = session_engine_failed(s, st);
    }
    return st;
mismatch:
    return FAIL(s, SELSYNC_EMISMATCH, "%s: the checkpoint's state does not fit this network and the [selsync] "
                "section of %s (written for another cfg?)", s->resume_from, s->cfg.file);
}

/* Rank 0: the model to a temporary file beside the checkpoint, then the
 * state sealed onto it and renamed over the checkpoint (checkpoint.h). */
static selsync_status write_checkpoint(selsync_session *s, const void *state, size_t len)
{
    char tmp[4200];
    if (selsync_checkpoint_temp(s->checkpoint, tmp, sizeof tmp))
        return FAIL(s, SELSYNC_EINVAL, "checkpoint path too long: %s", s->checkpoint);
    if (s->host.save_model(s->host.user, tmp))
        return FAIL(s, SELSYNC_EIO, "checkpoint %s: cannot write %s: %s", s->checkpoint, tmp, strerror(errno));
    return selsync_checkpoint_seal(tmp, s->checkpoint, state, len, s->err, sizeof s->err);
}

/* Rank 0: waits for the process writing the last checkpoint, if any; its
 * failure (reported by itself) becomes the session's. */
selsync_status session_writer_done(selsync_session *s)
{
    int status = 0;
    pid_t pid = s->writer;
    if (pid <= 0) return SELSYNC_OK;
    s->writer = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return FAIL(s, SELSYNC_EIO, "checkpoint %s of step %" PRIu64 ": cannot wait for its writer: %s",
                        s->checkpoint, s->writer_step, strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return SELSYNC_OK;
    if (WIFSIGNALED(status))
        return FAIL(s, SELSYNC_EIO, "checkpoint %s of step %" PRIu64 ": its writer was killed by signal %d; the "
                    "previous checkpoint is intact", s->checkpoint, s->writer_step, WTERMSIG(status));
    return FAIL(s, SELSYNC_EIO, "checkpoint %s of step %" PRIu64 " was not written (its writer's message is "
                "above); the previous checkpoint is intact", s->checkpoint, s->writer_step);
}

/* Rank 0: writes the checkpoint in a child process, a copy-on-write image
 * of this one at this moment, while training goes on; the child calls no
 * collective and leaves with _exit (no exit handlers: they belong to this
 * process). Where fork fails, here and now. */
static selsync_status write_behind(selsync_session *s, const void *state, size_t len, uint64_t steps, double t0)
{
    fflush(stdout); /* not written twice: the child's buffers start empty */
    fflush(stderr);
    double forked = selsync_now();
    pid_t pid = fork();
    if (pid == 0) {
        selsync_status st = write_checkpoint(s, state, len);
        if (st) session_say(s, "%s", s->err);
        else
            session_say(s, "step %" PRIu64 ": checkpoint %s (%.1f MB, written in %.2f s beside training)", steps, s->checkpoint,
                (double)len / 1e6, selsync_now() - forked);
        fflush(stderr);
        _exit(st ? 1 : 0);
    }
    if (pid > 0) {
        s->writer = pid;
        s->writer_step = steps;
        return SELSYNC_OK;
    }
    selsync_status st = write_checkpoint(s, state, len);
    if (!st)
        session_say(s, "step %" PRIu64 ": checkpoint %s (%.1f MB, %.2f s; written while training waited: fork failed: %s)",
            steps, s->checkpoint, (double)len / 1e6, selsync_now() - t0, strerror(errno));
    return st;
}

/* Every checkpoint_every steps (all ranks): rank 0 gathers every rank's
 * state, waits for the previous checkpoint's writer and starts the next
 * (write_behind); every rank goes on training while it writes. */
selsync_status session_checkpoint(selsync_session *s, uint64_t steps)
{
    const selsync_comm_ops *ops = s->comm.ops;
    double t0 = selsync_now();
    size_t per_rank = sizeof(uint64_t) + selsync_engine_snapshot_size(s->engine);
    size_t len = sizeof(checkpoint_head) + (s->rank == 0 ? (size_t)s->world : 1) * per_rank;
    uint8_t *buf = malloc(len), *mine = buf + sizeof(checkpoint_head), done = 1;
    uint64_t next = s->trained_sample;
    selsync_status st = SELSYNC_OK;
    if (!buf) return FAIL(s, SELSYNC_ENOMEM, "out of memory for a checkpoint");
    selsync_virtual_hold(&s->comm, 1);
    memcpy(mine, &next, sizeof next);
    if ((st = selsync_engine_snapshot(s->engine, mine + sizeof next, per_rank - sizeof next))) {
        st = session_engine_failed(s, st);
    } else if (s->rank != 0) {
        if ((st = ops->send(s->comm.ctx, 0, 0, mine, per_rank))) st = session_comm_failed(s, st, "checkpoint");
    } else {
        for (int r = 1; r < s->world && !st; ++r)
            if ((st = ops->recv(s->comm.ctx, r, 0, mine + (size_t)r * per_rank, per_rank, NULL)))
                st = session_comm_failed(s, st, "checkpoint");
        checkpoint_head h = {{0}, s->world, s->batch, per_rank, s->batches};
        memcpy(h.magic, checkpoint_magic, sizeof h.magic);
        memcpy(buf, &h, sizeof h);
        if (!st) st = session_writer_done(s);
        if (!st) st = write_behind(s, buf, len, steps, t0);
    }
    free(buf);
    if (st) return st;
    /* every rank waits until rank 0 has the states: no one's training */
    if ((st = ops->bcast(s->comm.ctx, &done, 1, 0))) return session_comm_failed(s, st, "checkpoint");
    s->checkpoints++;
    s->checkpoint_wait += selsync_now() - t0;
    session_training_resumes(s);
    return SELSYNC_OK;
}

