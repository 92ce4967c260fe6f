/* data_impl.h — libpockrt-private: the dataset layout shared by the CSV and .npy loaders
 * and the training loop. */
#ifndef PKRT_DATA_IMPL_H
#define PKRT_DATA_IMPL_H

#include <stdbool.h>

#include "pkrt.h"
#include "rt_file.h"
#include "pock/pockrt.h"

/* A model input after the first, as a dataset holds it (docs/runtime.md, "Several
 * inputs"): rows x per_row elements, or one array shared by every row. */
typedef struct rt_dinput {
  bool batch;        /* false: `per_row` elements fed as they are every step */
  int64_t per_row;   /* elements per row (batch-less: all of them) */
  pkrt_dtype dtype;  /* the input's: the model's float dtype (scaled), i32 or i64 */
  void *data;
} rt_dinput;

struct pkrt_dataset {
  int64_t rows, features;
  pkrt_dtype dtype;  /* of x: F32 or F64 (I32/I64 when the model's first input holds integers) */
  void *x;           /* rows x features, row-major, already scaled */
  int32_t *labels;   /* rows x label_width, row-major */
  int64_t label_width; /* labels per row: 1, or T (per-token labels of a (N, T, K) model) */
  /* graph I/O: the model's inputs 2.. (io.inputs[1..]), in order; x is the first */
  int nextra;
  rt_dinput extra[PKRT_MAX_INPUTS - 1];
};

/* Resolved options: what every loader checks against. */
typedef struct rt_data_opts {
  double scale;
  int label_column;
  pkrt_dtype dtype;
  int64_t classes;   /* > 0: labels must be below */
  int64_t features;  /* > 0: required */
  pkrt_dtype x_dtype; /* of the first input's values: 0 = dtype; I32/I64 read integers */
  const pkrt_model *model; /* when loading for a model: its inputs decide the files */
  int64_t label_width; /* >= 1: labels per row (the model's); Y.npy is (rows, T) when > 1 */
  bool has_ignore_index; /* a label value allowed besides class ids (the model's) */
  int64_t ignore_index;
} rt_data_opts;

/* A label the options accept: a class id (below classes when > 0), or ignore_index. */
RT_INTERNAL bool rt_label_ok(const rt_data_opts *o, int64_t v);

/* X.npy:Y.npy (paths given separately). On success *out is a new dataset. */
RT_INTERNAL pkrt_status rt_npy_load(pkrt_ctx *rt, const char *xpath, const char *ypath,
                        const rt_data_opts *o, pkrt_dataset **out);
RT_INTERNAL pkrt_status rt_csv_load(pkrt_ctx *rt, const char *path, const rt_data_opts *o,
                        pkrt_dataset **out);
/* The same over bytes already read (what the loaders do after reading; the fuzz targets
 * call these): the paths only name the inputs in messages. Never trust the bytes. */
RT_INTERNAL pkrt_status rt_npy_parse(pkrt_ctx *rt, const char *xpath, const void *xb, size_t xl,
                         const char *ypath, const void *yb, size_t yl, const rt_data_opts *o,
                         pkrt_dataset **out);
RT_INTERNAL pkrt_status rt_csv_parse(pkrt_ctx *rt, const char *path, const char *text, size_t len,
                         const rt_data_opts *o, pkrt_dataset **out);
/* "X1.npy,X2.npy:Y.npy" for a model with several inputs (data_inputs.c): X1 and Y through
 * rt_npy_load, every further file one input of o->model, in io.inputs order. */
RT_INTERNAL pkrt_status rt_inputs_load(pkrt_ctx *rt, const char *xpaths, const char *ypath,
                                       const rt_data_opts *o, pkrt_dataset **out);
/* One input after the first from an .npy file's bytes: converted to in->dtype (floats
 * scaled and checked as features are); with in->batch, shape (rows, ...) of in->per_row
 * elements a row, else exactly in->per_row elements. Fills in->data (malloc'd). */
RT_INTERNAL pkrt_status rt_npy_input(pkrt_ctx *rt, const char *path, const void *b, size_t len,
                                     const char *name, int64_t rows, double scale,
                                     rt_dinput *in);
/* A feature value (already scaled) stored in dtype: false when it is not finite or does
 * not fit (|v| above FLT_MAX for f32), so no value becomes inf or NaN in the model. */
RT_INTERNAL bool rt_data_fits(double v, pkrt_dtype dtype);
/* Checks a loaded dataset's feature count and labels against o (names the file). */
RT_INTERNAL pkrt_status rt_data_check(pkrt_ctx *rt, const char *path, const pkrt_dataset *d,
                          const rt_data_opts *o);

#endif
