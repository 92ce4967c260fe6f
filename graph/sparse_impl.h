/* sparse_impl.h — the parsed sparse-update spec (docs/sparse-update.md), shared by the
 * parser (sparse_spec.c) and pk_sparse_apply (sparse_apply.c). */
#ifndef PK_SPARSE_IMPL_H
#define PK_SPARSE_IMPL_H

#include "pk_graph.h"

typedef enum sparse_sel {
  SPARSE_SEL_PARAMS,      /* "params": names or globs */
  SPARSE_SEL_BIASES,      /* "biases": true */
  SPARSE_SEL_LAST_LAYERS, /* "last_layers": n */
  SPARSE_SEL_ALL,         /* "all": true */
  SPARSE_SEL_NORMS,       /* "norms": true: params of ops flagged PK_OPF_NORM */
  SPARSE_SEL_BLOCKS       /* "blocks": {"prefix", "last"}: params named PREFIX.<i>.* */
} sparse_sel;

typedef struct sparse_rule {
  int index;              /* position in "train", for messages */
  sparse_sel sel;
  int nglobs;
  const char **globs;
  int64_t last_layers;
  const char *block_prefix; /* "blocks": the dotted path before the index; NULL = "auto" */
  int64_t last_blocks;      /* "blocks": how many of the highest indices */
  double fraction;        /* "channels": in (0, 1]; 0 = not given */
  int64_t count;          /* "channel_count" (or an integer "channels" >= 2); 0 = not given */
} sparse_rule;

struct pk_sparse_spec {
  const char *filename;
  int nrules;
  sparse_rule *rules;
};

#endif
