/* canon_ids.c — the canonical numbering of reduce axes ("k<n>"), for code that must name
 * axes as the canonical text does (schedules) without printing the program. */
#include <string.h>

#include "pk_te.h"

/* Mirrors printer.c's traversal: pre-order over args, a reduction's axes after its body. */
static void number_uses(const pk_expr *e, int *ids, int *next) {
  if (e->kind == PK_EXPR_AXIS && e->axis->reduce && ids[e->axis->id] < 0) ids[e->axis->id] = (*next)++;
  for (int i = 0; i < e->nargs; i++) number_uses(e->args[i], ids, next);
  if (e->kind == PK_EXPR_REDUCE)
    for (int i = 0; i < e->naxes; i++)
      if (ids[e->axes[i]->id] < 0) ids[e->axes[i]->id] = (*next)++;
}

void pk_te_reduce_axis_canon_ids(const pk_te_program *p, int *ids) {
  int next = 0;
  for (int i = 0; i < p->nreduce; i++) ids[i] = -1;
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind == PK_TE_COMPUTE && t->body) number_uses(t->body, ids, &next);
  }
  for (int i = 0; i < p->nreduce; i++)
    if (ids[i] < 0) ids[i] = next++;
}
