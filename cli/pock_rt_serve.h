/* pock_rt_serve.h — what the two halves of `pock-rt-serve` share: the connection loop
 * (pock_rt_serve.c) hands each checked request to the measurer half (serve_measure.c),
 * which answers INFO from this device and runs a MEASURE in a child process. */
#ifndef PK_POCK_RT_SERVE_H
#define PK_POCK_RT_SERVE_H

#include <stddef.h>

#include "pkrt_remote.h"

/* The INFO answer: this device's fingerprint as the runtime sees it (JSON object text,
 * malloc'd; NULL when out of memory). */
char *serve_info_answer(void);

/* Measures rq in a child process killed at rq->timeout_s; returns the answer (malloc'd
 * JSON object text: ok, mismatch, crashed, timeout or error; NULL when out of memory).
 * fault (tests, POCK_SERVE_FAULT_EVERY): the child crashes or hangs instead of measuring,
 * so that a host's handling of a candidate that does either is tested through `pock tune`. */
enum { SERVE_FAULT_NONE, SERVE_FAULT_CRASH, SERVE_FAULT_HANG };
char *serve_measure_answer(const pkrt_remote_request *rq, int fault);

/* {"status":STATUS,"error":MESSAGE} with MESSAGE escaped; malloc'd. */
char *serve_error_answer(const char *status, const char *message);

#endif
