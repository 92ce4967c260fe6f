/* pkw_close.c — test helper: whether two .pkw weight files hold the same tensors (names,
 * dtypes, shapes) with f32 values within a tolerance, absolute or (--relative) relative to
 * each tensor's largest magnitude in B; prints the largest difference and where. Exit 0
 * within, 1 not (or unreadable), 2 usage.
 *   pkw_close A.pkw B.pkw TOL [--relative] */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkrt.h"

int main(int argc, char **argv) {
  char *end;
  bool relative = argc == 5 && !strcmp(argv[4], "--relative");
  double tol = argc == 4 || relative ? strtod(argv[3], &end) : 0;
  if ((argc != 4 && !relative) || *end || !(tol >= 0)) {
    fprintf(stderr, "usage: pkw_close A.pkw B.pkw TOL [--relative]\n");
    return 2;
  }
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_arena *a = pkrt_arena_new(0);
  pkrt_wtensor *x, *y;
  int nx, ny, rc = 1;
  if (pkrt_weights_read(rt, a, argv[1], &x, &nx) != PKRT_OK ||
      pkrt_weights_read(rt, a, argv[2], &y, &ny) != PKRT_OK) {
    fprintf(stderr, "pkw_close: %s\n", pkrt_ctx_error(rt));
    goto out;
  }
  if (nx != ny) {
    printf("pkw_close: %d tensors against %d\n", nx, ny);
    goto out;
  }
  double worst = 0;
  const char *where = "-";
  for (int i = 0; i < nx; i++) {
    bool same = !strcmp(x[i].name, y[i].name) && x[i].dtype == PKRT_DTYPE_F32 &&
                y[i].dtype == PKRT_DTYPE_F32 && x[i].ndim == y[i].ndim;
    int64_t n = 1;
    for (int d = 0; same && d < x[i].ndim; d++) {
      same = x[i].shape[d] == y[i].shape[d];
      n *= x[i].shape[d];
    }
    if (!same) {
      printf("pkw_close: tensor %d: '%s' and '%s' differ in name, dtype (f32 only) or shape\n",
             i, x[i].name, y[i].name);
      goto out;
    }
    const float *p = x[i].data, *q = y[i].data;
    double scale = 0;
    for (int64_t k = 0; relative && k < n; k++) scale = fmax(scale, fabs((double)q[k]));
    if (!(scale > 0)) scale = 1;
    for (int64_t k = 0; k < n; k++) {
      double d = fabs((double)p[k] - (double)q[k]) / scale;
      if (!(d <= worst)) { /* NaN counts as the worst */
        worst = isnan(d) ? INFINITY : d;
        where = x[i].name;
      }
    }
  }
  printf("pkw_close: %d tensors, max %s difference %.3g (in %s), tolerance %g\n", nx,
         relative ? "relative" : "abs", worst, where, tol);
  rc = worst <= tol ? 0 : 1;
out:
  pkrt_arena_free(a);
  pkrt_ctx_free(rt);
  return rc;
}
