/* tuner_grid.c — the grid tuner: every config in index order (knob 0 fastest), so a run
 * that stops early has covered the first knobs' values completely. */
#include <stdlib.h>

#include "search_impl.h"

typedef struct grid_state {
  uint64_t next;
} grid_state;

static bool grid_next(pk_tuner *t, pk_config *out) {
  if (!t->state) {
    t->state = pk_xcalloc(1, sizeof(grid_state));
  }
  grid_state *g = t->state;
  if (g->next >= pk_space_size(t->space)) return false;
  pk_space_config_at(t->space, g->next++, out);
  return true;
}

static void grid_free(pk_tuner *t) { free(t->state); }

/* No miss limit: the cursor itself ends the space. */
const tuner_strategy pk_tuner_grid_strategy = {"grid", 0, NULL, grid_next, grid_free};
