/* json_impl.h — internals of the JSON graph frontend: the reader state shared by its
 * files, and checked accessors that turn every wrong type or range into a message naming
 * the file and the key at fault. Not a public header. */
#ifndef PK_JSON_IMPL_H
#define PK_JSON_IMPL_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "pk_frontend.h"
#include "pkrt.h"

/* Longest name a graph accepts: the .pkw format stores names with a u16 length, but the
 * runtime caps them at 255 bytes, and a param must be savable. */
#define PK_FE_MAX_NAME 255

typedef struct pk_fe {
  pk_ctx *ctx;
  const char *file;         /* for messages */
  const char *dir;          /* directory of file ("" = current), for relative paths */
  int64_t batch;
  pkrt_dtype dtype;
  int64_t version;          /* the file's format version: 1, or 2 (outputs, input dtypes) */
  pk_graph *g;
  /* The node names seen so far: node names live apart from tensor names. */
  const char **node_names;
  int nnode_names;
  /* weights_file, read on first use by a param without "init" */
  const char *weights_path; /* NULL: the model has none */
  bool weights_loaded;
  pkrt_ctx *rt;
  pkrt_arena *warena;
  pkrt_wtensor *w;
  int nw;
} pk_fe;

/* "FILE: WHERE: message" (WHERE may be NULL) as PK_ERR_CHECK; returns PK_ERR_CHECK. */
pk_status pk_fe_fail(pk_fe *f, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A user string fit for a message: quoted, control bytes escaped, long ones cut. */
const char *pk_fe_quote(pk_fe *f, const char *s);
const char *pk_fe_cquote(pk_ctx *ctx, const char *s);
/* Every key of obj is in allowed (NULL-terminated); else names the first stranger. */
pk_status pk_fe_keys(pk_fe *f, const char *where, const cJSON *obj,
                     const char *const *allowed);
/* The member `key` of obj, or NULL. Case-sensitive, unlike cJSON_GetObjectItem. */
const cJSON *pk_fe_get(const cJSON *obj, const char *key);
/* Duplicate keys are refused: cJSON would silently keep the first. */
pk_status pk_fe_no_duplicate_keys(pk_fe *f, const char *where, const cJSON *obj);

/* Typed reads of member `key`; a missing optional member leaves *out unchanged. */
pk_status pk_fe_string(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                       bool required, const char **out);
pk_status pk_fe_bool(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                     bool *out);
pk_status pk_fe_int(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                    bool required, int64_t lo, int64_t hi, int64_t *out);
/* A finite number in [lo, hi] (lo excluded when lo_open). */
pk_status pk_fe_double(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                       bool required, double lo, bool lo_open, double hi, double *out);
/* The value v (named `what` in messages) as an integer in [lo, hi]. */
pk_status pk_fe_int_value(pk_fe *f, const char *where, const char *what, const cJSON *v,
                          int64_t lo, int64_t hi, int64_t *out);
/* An array member of obj (required) with 1..max elements; *n its length. */
pk_status pk_fe_array(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                      int max, const cJSON **out, int *n);

/* A shape: 1..PK_TE_MAX_DIMS dims of 1..PK_OP_MAX_EXTENT; when batch_first, dim 0 may be
 * a string (any, conventionally "N") and becomes f->batch either way. numel * 8 bytes
 * must fit int64. */
pk_status pk_fe_shape(pk_fe *f, const char *where, const cJSON *arr, bool batch_first,
                      int *ndim, int64_t *shape);
char *pk_fe_shape_str(pk_fe *f, int ndim, const int64_t *shape); /* "(10, 64)" */
char *pk_fe_cshape(pk_ctx *ctx, int ndim, const int64_t *shape);

/* A tensor or node name: 1..PK_FE_MAX_NAME bytes, no control bytes, no parentheses
 * (reserved for the names Pock makes, "grad(fc.weight)"). */
pk_status pk_fe_check_name(pk_fe *f, const char *where, const char *name);

/* ---- the parts of a graph file ---- */
pk_status pk_fe_attrs(pk_fe *f, const char *where, pk_op_kind op, const cJSON *attrs,
                      const int *inputs, int ninputs, pk_op_attrs *out);
pk_status pk_fe_training(pk_fe *f, const cJSON *training, pk_model_info *info);
/* The tensor `name` of the model's weights file (read on first use), or NULL. */
pk_status pk_fe_weights_find(pk_fe *f, const char *where, const char *name,
                             const pkrt_wtensor **out);
void pk_fe_weights_close(pk_fe *f);

#endif
