/* cli_input_shape.c — the `--input-shape NAME=D0,D1,...` option of `pock compile` and
 * `pock inspect`: one binding of an ONNX input's symbolic dims (pk_frontend_opts). */
#include <string.h>

#include "cli.h"

int pk_cli_input_shape(const char *cmd, char *arg, pk_input_shape *out) {
  /* the last '=': the dims never hold one, a tensor name might */
  char *eq = strrchr(arg, '=');
  if (!eq || eq == arg || !eq[1])
    return pk_cli_usage("%s: --input-shape needs NAME=D0,D1,... (D0 the batch), got '%s'", cmd,
                        arg);
  memset(out, 0, sizeof *out);
  const char *p = eq + 1;
  while (*p) {
    if (out->ndim == PK_TE_MAX_DIMS)
      return pk_cli_usage("%s: --input-shape %s: more than %d dims", cmd, arg, PK_TE_MAX_DIMS);
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    char dim[24];
    int64_t v;
    if (n == 0 || n >= sizeof dim)
      return pk_cli_usage("%s: --input-shape %s: dim %d is not an integer", cmd, arg, out->ndim);
    memcpy(dim, p, n);
    dim[n] = '\0';
    if (!pkrt_cli_parse_i64(dim, &v) || v < 1 || v > INT32_MAX)
      return pk_cli_usage("%s: --input-shape %s: dim %d must be an integer in 1..2147483647",
                          cmd, arg, out->ndim);
    out->shape[out->ndim++] = v;
    p += n;
    if (*p == ',') {
      p++;
      if (!*p) return pk_cli_usage("%s: --input-shape %s: a dim is missing after ','", cmd, arg);
    }
  }
  /* The name is the argument's own text, cut at the '=' (argv is the program's to change):
   * nothing to allocate or free. */
  *eq = '\0';
  out->name = arg;
  return PK_EXIT_OK;
}
