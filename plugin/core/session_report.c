/* How the session and its parts (session_checkpoint.c, session_speed.c)
 * report: a line to stderr, a failed collective or engine call as the
 * session's error, training time resumed after a pause. The parts call
 * these, never session.c, which calls them. */
#include <stdarg.h>
#include <stdio.h>

#include "selsync/vclock.h"

#include "session_state.h"

void session_say(const selsync_session *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    selsync_vsay(s->rank, s->world, fmt, ap);
    va_end(ap);
}

/* A failed collective: the transport's message, naming what was done. */
selsync_status session_comm_failed(selsync_session *s, selsync_status st, const char *what)
{
    return FAIL(s, st ? st : SELSYNC_ECOMM, "%s: %s", what, selsync_comm_error(&s->comm, st));
}

/* The engine failed with st: its message is the session's, and so is its
 * status (a failed collective, a metrics file that cannot be written, a
 * state that does not fit...). */
selsync_status session_engine_failed(selsync_session *s, selsync_status st)
{
    snprintf(s->err, sizeof s->err, "%s", selsync_engine_error(s->engine));
    return st != SELSYNC_OK ? st : SELSYNC_ECOMM;
}

/* After an evaluation or a checkpoint (which held the virtual clock from its
 * start): neither training time nor the virtual clock counts it. */
void session_training_resumes(selsync_session *s)
{
    selsync_engine_exclude_time(s->engine);
    selsync_virtual_hold(&s->comm, 0);
}
