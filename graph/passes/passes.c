/* passes.c — the pass table (one source of truth for names, order and summaries), the
 * --passes list parser, and the helpers every pass shares. */
#include <string.h>

#include "graph_impl.h"
#include "pk_passes.h"

static const pk_pass_info table[PK_PASS_COUNT_] = {
    [PK_PASS_FOLD] = {"fold",
                      "nodes that read only frozen weights and constants run once at load "
                      "(FOLDED results); a frozen batch norm folds into its conv/linear weight",
                      pk_pass_fold},
    [PK_PASS_SHARE_STATS] = {"share_stats",
                             "a training-mode batch norm's statistics and sums made once: "
                             "its running-stats update reads the forward's mean and "
                             "variance, its gamma and beta gradients dX's sums",
                             pk_pass_share_stats},
    [PK_PASS_COPY_ELIM] = {"copy_elim",
                           "gradients that are copies, reshapes or contiguous slices of "
                           "another tensor alias it (no kernel, no buffer)",
                           pk_pass_copy_elim},
    [PK_PASS_LAYOUT] = {"layout",
                        "conv chains stored channels last (NHWC) when their measured kernel "
                        "times are lower so (--layout), transposes at the chains' ends",
                        pk_pass_layout},
    [PK_PASS_FUSE] = {"fuse",
                      "chains of elementwise nodes (bias, activation, residual add, their "
                      "gradients) become one kernel; the matmul or conv before one takes it "
                      "as its epilogue, an SGD update its weight gradient's kernel, a matmul "
                      "an elementwise producer of an operand it packs (prologue); the "
                      "intermediates take no memory",
                      pk_pass_fuse},
    [PK_PASS_REORDER] = {"reorder",
                         "a topological order with a lower planned arena peak (kept only "
                         "when lower)",
                         pk_pass_reorder},
};

const pk_pass_info *pk_passes_table(void) { return table; }

/* Sets on[p] = value for each name of the comma list; `what` names the option. */
static pk_status mark_list(pk_ctx *ctx, const char *list, const char *what, bool value, bool *on) {
  bool seen[PK_PASS_COUNT_] = {false};
  for (const char *s = list;;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    int found = -1;
    for (int p = 0; p < PK_PASS_COUNT_; p++)
      if (strlen(table[p].name) == len && !strncmp(table[p].name, s, len)) found = p;
    if (found < 0)
      return pk_ctx_fail(ctx, PK_ERR_USAGE, "compile: %s: unknown pass '%.*s' (%s%s)", what,
                         (int)len, s, value ? "all, none, or a comma list of: " : "", PK_PASS_NAMES);
    if (seen[found])
      return pk_ctx_fail(ctx, PK_ERR_USAGE, "compile: %s: '%s' is listed twice", what,
                         table[found].name);
    seen[found] = true;
    on[found] = value;
    if (!end) return PK_OK;
    s = end + 1;
  }
}

pk_status pk_passes_select(pk_ctx *ctx, const char *list, const char *disable, bool *on) {
  bool all = !list || !strcmp(list, "all");
  for (int p = 0; p < PK_PASS_COUNT_; p++) on[p] = all;
  pk_status s = PK_OK;
  if (!all && strcmp(list, "none")) s = mark_list(ctx, list, "--passes", true, on);
  if (s == PK_OK && disable) s = mark_list(ctx, disable, "--disable-pass", false, on);
  return s;
}

int pk_pass_root(const pk_graph *g, int t) {
  return g->tensors[t]->base >= 0 ? g->tensors[t]->base : t;
}

pk_status pk_pass_arena_bytes(pk_graph *g, int64_t *bytes) {
  pk_memplan *mp;
  pk_status s = pk_memplan_build(g, NULL, &mp);
  *bytes = s == PK_OK ? mp->region_bytes[PK_REGION_ARENA] : 0;
  return s;
}
