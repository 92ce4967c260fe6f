/* pk_passes.h — the training-graph passes (graph/passes/, one file each): rewrites of a
 * built training graph, between pk_train_build and pk_memplan_build, that keep every
 * result (within f32 rounding where arithmetic is regrouped: docs/passes.md) and cost less
 * (fewer kernels, fewer bytes, a lower planned peak).
 *
 * Usage (what `pock compile` does; each pass is one of the driver's named stages):
 *   bool on[PK_PASS_COUNT_];
 *   pk_passes_select(ctx, "all", on);          // or "none", or "copy_elim,reorder"
 *   for (int p = 0; p < PK_PASS_COUNT_; p++)
 *     if (on[p]) {
 *       const char *note;
 *       pk_passes_table()[p].run(g, &note);    // note: what it changed, one line
 *     }
 *
 * Every pass keeps node order topological (data, and storage written in place) and
 * keeps forward + loss nodes runnable as their own plan (the eval and infer plans are
 * subsets of the training order). docs/passes.md says what each pass does.
 */
#ifndef PK_PASSES_H
#define PK_PASSES_H

#include "pk_graph.h"

/* The passes, in the order the driver runs them. */
typedef enum pk_pass_kind {
  PK_PASS_FOLD, PK_PASS_SHARE_STATS, PK_PASS_COPY_ELIM, PK_PASS_LAYOUT, PK_PASS_FUSE, PK_PASS_REORDER, PK_PASS_COUNT_
} pk_pass_kind;

typedef struct pk_pass_info {
  const char *name;         /* "copy_elim": the stage name (--dump-after, --passes) */
  const char *summary;      /* one line for help and docs */
  /* Rewrites g in place; *note gets one line (arena string) saying what changed. */
  pk_status (*run)(pk_graph *g, const char **note);
} pk_pass_info;

/* PK_PASS_COUNT_ entries, indexed by pk_pass_kind. */
const pk_pass_info *pk_passes_table(void);
/* "all" (or NULL), "none", or a comma list of pass names -> on[PK_PASS_COUNT_], then
 * the comma list `disable` (NULL: none) turned off. PK_ERR_USAGE naming an unknown or
 * repeated name and listing the passes. */
pk_status pk_passes_select(pk_ctx *ctx, const char *list, const char *disable, bool *on);
/* The pass names, comma separated (for messages and help). */
#define PK_PASS_NAMES "fold, share_stats, copy_elim, layout, fuse, reorder"

/* Each pass (graph/passes/<name>.c). */
pk_status pk_pass_fold(pk_graph *g, const char **note);
pk_status pk_pass_share_stats(pk_graph *g, const char **note);
pk_status pk_pass_copy_elim(pk_graph *g, const char **note);
pk_status pk_pass_fuse(pk_graph *g, const char **note);
/* What the fuse pass fuses besides elementwise chains (pk_pass_fuse: everything). */
typedef struct pk_fuse_options {
  bool epilogues;         /* elementwise epilogues into the matmul or conv before them, SGD
                             updates into their weight gradient's kernel, and prologues into
                             a matmul's packed operand; false on GPU targets, whose templates
                             store the product (which a fused epilogue leaves without
                             storage) and pack nothing */
  bool forward_epilogues; /* epilogues and prologues in the forward pass too; false with
                             --cache-frozen, so that a frozen layer's product stays in the
                             frozen prefix when a trained bias reads it */
} pk_fuse_options;
pk_status pk_pass_fuse_with(pk_graph *g, const pk_fuse_options *o, const char **note);
/* The layout pass (layout.c): conv chains stored NHWC, transposes at their ends. */
typedef enum pk_layout_mode {
  PK_LAYOUT_AUTO, /* each chain NHWC when the step's kernels take over 2% less time so
                     (its conversions included, fused as they will be); NCHW when a kernel
                     has no time */
  PK_LAYOUT_NCHW, /* every chain as the model has it */
  PK_LAYOUT_NHWC  /* every chain NHWC (tests; measuring) */
} pk_layout_mode;
typedef struct pk_layout_options {
  pk_layout_mode mode;
  /* AUTO: milliseconds one run of a kernel of this program takes (a tuning record's, or a
   * timing), NAN when unknown; NULL: nothing is timed (every chain stays NCHW) */
  double (*kernel_ms)(void *user, const pk_te_program *prog);
  void *user;
  /* AUTO: the fuse pass's options when it runs after this one (the step's kernels are
   * costed as fused); NULL: costed unfused */
  const pk_fuse_options *fuse;
} pk_layout_options;
/* "auto" (or NULL), "nchw", "nhwc" -> *mode; PK_ERR_USAGE naming the value otherwise. */
pk_status pk_layout_mode_parse(pk_ctx *ctx, const char *s, pk_layout_mode *mode);
pk_status pk_pass_layout_with(pk_graph *g, const pk_layout_options *o, const char **note);
pk_status pk_pass_layout(pk_graph *g, const char **note); /* AUTO, nothing timed */
pk_status pk_pass_reorder(pk_graph *g, const char **note);

/* ---- shared by the passes (passes.c) ---- */
/* The tensor owning t's storage: t itself, or its base. */
int pk_pass_root(const pk_graph *g, int t);
/* The planned ARENA bytes of g in its current order (the memory planner's figure). */
pk_status pk_pass_arena_bytes(pk_graph *g, int64_t *bytes);

#endif
