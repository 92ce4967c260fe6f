/* pk_verify.h — checking kernels against the reference interpreter: reproducible random
 * inputs drawn from each placeholder's valid domain, the inputs in a kernel's dtype, and
 * the element-by-element comparison of a kernel's output with the reference.
 *
 * Usage:
 *   pk_te_ref *ref = pk_te_ref_new(ctx, p);
 *   pk_te_ref_fill_random(p, ref, seed);                  // every placeholder
 *   for each placeholder t: pk_te_ref_to_buffer(t, &ref->tensors[t->id], kernel_input[t->id]);
 *   pk_te_interp_run(ctx, p, ref);
 *   ... run the kernel ...
 *   pk_verify_result r;
 *   if (pk_te_verify_output(ctx, t, &ref->tensors[t->id], kernel_output, &r) != PK_OK)
 *     fprintf(stderr, "%s\n", pk_ctx_error(ctx));          // names tensor, index, values
 *
 * Tolerance per element, with S the reference's error magnitude (pk_te.h):
 *   f32 |kernel - ref| <= 1e-5 * S + 1e-30;  f64 <= 1e-12 * S + 1e-300;  integers exact.
 * NaN must sit in the same places; an infinite reference (or one beyond the output type's
 * range, which the kernel's type rounds to inf) must be matched exactly, sign included.
 */
#ifndef PK_VERIFY_H
#define PK_VERIFY_H

#include <stdint.h>

#include "pk_te.h"

#define PK_VERIFY_F32_REL 1e-5
#define PK_VERIFY_F32_ABS 1e-30
#define PK_VERIFY_F64_REL 1e-12
#define PK_VERIFY_F64_ABS 1e-300

/* Fills every placeholder of p with values from a splitmix64 stream seeded by seed and the
 * placeholder's id (so one placeholder's values do not depend on the others). Domains:
 *   floats   [-1, 1]; [0.25, 2] for placeholders whose values reach the argument of log,
 *            sqrt, rsqrt or the base of pow through + - * / abs min max select-branches,
 *            casts, reductions or reads of computes built that way;
 *   integers [-8, 8]; [0, 8) for placeholders read inside an index expression; [1, 8] for
 *            those reaching log/sqrt/rsqrt/pow as above; {0, 1} for masks: placeholders
 *            whose only use is being compared == or != with 0 (where, masked_fill), so
 *            both branches of the select are taken.
 * Floats are rounded to the placeholder's dtype, so the reference sees exactly what the
 * kernel will; S of each value is |value|. */
void pk_te_ref_fill_random(const pk_te_program *p, pk_te_ref *ref, uint64_t seed); /* NULL: no-op */

/* Writes the reference values of t (a placeholder, or any tensor) as a dense row-major
 * array of t->dtype (float, double, int32_t, int64_t) at data. */
void pk_te_ref_to_buffer(const pk_te_tensor *t, const pk_te_ref_tensor *ref, void *data);

typedef struct pk_verify_result {
  int64_t checked;     /* elements compared */
  int64_t nbad;        /* elements outside the bound */
  int64_t worst_index; /* flat row-major index of the largest err/bound (-1: none checked) */
  double worst_err;    /* |kernel - reference| there (inf for a NaN/inf mismatch) */
  double worst_bound;  /* the bound there (0 for integers) */
  double worst_ratio;  /* worst_err / worst_bound; inf for any mismatch of integers/NaN/inf */
} pk_verify_result;

/* Compares data (t's dense row-major output, in t->dtype) with the reference. PK_OK when
 * every element is within the bound; otherwise PK_ERR_MISMATCH with a message naming the
 * tensor, the first bad element's multi-index, the kernel value, the reference value and
 * the bound. res may be NULL. */
pk_status pk_te_verify_output(pk_ctx *ctx, const pk_te_tensor *t, const pk_te_ref_tensor *ref,
                              const void *data, pk_verify_result *res);

#endif
