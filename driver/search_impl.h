/* search_impl.h — private to driver/search*.c (`pock sparse-search`): the candidates, the
 * schemes built from them, their costs, the cache file and the fine-tuning runs. */
#ifndef PK_SEARCH_IMPL_H
#define PK_SEARCH_IMPL_H

#include <cjson/cJSON.h>

#include "driver_impl.h"

#define SRCH_NRATIOS 4        /* weight options besides frozen: 1/8, 1/4, 1/2, 1 */
#define SRCH_EXACT_MAX 4096   /* spaces up to this many schemes are searched exhaustively */

/* One candidate of the contribution analysis: a layer's bias, a normalization's params
 * (scale and shift together), or a layer's weight's first `channels` input channels. */
typedef struct srch_item {
  const char *param;
  const char *param2;         /* a norm's second param (its shift), or NULL */
  int layer;                  /* index in srch_space.layers */
  bool bias;                  /* an on/off item: a bias or a norm's params (no channels) */
  bool norm;
  int64_t channels;           /* weights: trained input channels (the layer's C: whole) */
  double val_acc;             /* head + this item alone (NAN until run) */
  double gain;                /* val_acc minus head-only's */
} srch_item;

/* A layer below the head: its weight options (0: frozen, k: item wopt[k]) and its bias.
 * A normalization below the head is an entry of its own: no weight options, and its
 * params as the on/off item in bias_item. */
typedef struct srch_layer {
  const char *name;           /* the layer (or normalization) node */
  int64_t in_channels;
  int nw;                     /* weight options, frozen included (1 when the weight cannot
                                 be selected) */
  int wopt[SRCH_NRATIOS + 1];
  int bias_item;              /* -1: no bias */
} srch_layer;

typedef struct srch_space {
  int nlayers;
  srch_layer *layers;
  int nitems;
  srch_item *items;
  int nhead;
  const char **head;          /* the head's params: always trained */
  pk_train_spec train;        /* the model's training object with the overrides applied */
} srch_space;

/* A scheme: per layer a weight option and bias on/off. */
typedef struct srch_cost {
  int64_t bp_bytes, peak_bytes;
  double step_ms;             /* NAN: unknown (a kernel without a record or a timing) */
  int ntuned, ntimed, nkernels; /* where the step time came from */
} srch_cost;

typedef struct srch_scheme {
  unsigned char *w, *b;       /* per layer */
  const char *key;            /* canonical text: "conv3.weight[:8] conv3.bias" */
  double predicted;           /* head-only accuracy + the summed gains */
  srch_cost cost;
  bool fits;
  double measured;            /* verified validation accuracy (NAN: not verified) */
  double measured_ms;         /* verified run's median ms/step */
  double measured_lr;         /* the learning rate of the best verified run (0: default) */
} srch_scheme;

/* ---- search_space.c ---- */
/* Candidates from the model's layers (the last layer is the head). */
pk_status srch_space_build(pk_ctx *ctx, const pk_compile_options *co, srch_space *sp);
srch_scheme *srch_scheme_new(pk_ctx *ctx, const srch_space *sp);
/* Fills key and predicted (head_acc + the chosen items' gains). */
void srch_scheme_finish(pk_ctx *ctx, const srch_space *sp, srch_scheme *s, double head_acc);
/* The scheme with only item i on (i < 0: head only). */
srch_scheme *srch_scheme_of_item(pk_ctx *ctx, const srch_space *sp, int item);
/* The sparse-update spec (docs/sparse-update.md) of a scheme. */
char *srch_scheme_spec(pk_ctx *ctx, const srch_space *sp, const srch_scheme *s,
                       const char *description);

/* ---- search_cache.c: the cache file ---- */
typedef struct srch_cache {
  const char *path;
  cJSON *root;                /* {"version": 1, "entries": {KEY: {"runs": {...}}},
                                 "kernels": {TARGET KERNEL-KEY: ms}} */
  cJSON *runs;                /* this search's entry's runs */
  cJSON *kernels;
  const char *key;
} srch_cache;
/* Reads path when it exists (a malformed file is an error naming it, never overwritten
 * silently); the entry key hashes the model, weights, data and settings (the optimizer's
 * as they take effect: an option that repeats the model's value changes nothing). */
pk_status srch_cache_open(pk_ctx *ctx, const pk_search_options *o, const pk_train_spec *train,
                          srch_cache *c);
/* A run's validation accuracy and median ms/step by "E@scheme key"; false if absent. */
bool srch_cache_run(const srch_cache *c, const char *run_key, double *val_acc, double *ms);
void srch_cache_put_run(srch_cache *c, const char *run_key, double val_acc, double ms,
                        double seconds);
bool srch_cache_kernel(const srch_cache *c, const char *key, double *ms);
void srch_cache_put_kernel(srch_cache *c, const char *key, double ms);
/* Atomic rewrite (temp file + rename). */
pk_status srch_cache_save(pk_ctx *ctx, srch_cache *c);
void srch_cache_close(srch_cache *c);

/* ---- search_cost.c ---- */
typedef struct srch_run_env {
  pk_ctx *ctx;
  const pk_search_options *o;
  const srch_space *sp;
  srch_cache *cache;
  const char *workdir;        /* temp specs and artifacts */
  int nfiles;
} srch_run_env;
/* Compiles the scheme up to the schedule stage: BP memory, the planned peak, step time. */
pk_status srch_cost_of(srch_run_env *E, srch_scheme *s);

/* ---- search_train.c ---- */
/* Compiles the scheme and fine-tunes it `epochs` epochs at learning rate lr (0: the
 * compiled one); *val_acc and *ms (median ms/step) from the run (or the cache: *cached).
 * PK_ERR_RUNTIME "interrupted" when stopped. */
pk_status srch_finetune(srch_run_env *E, const srch_scheme *s, int epochs, double lr,
                        double *val_acc, double *ms, bool *cached);
/* The cache's name of that run: "E@KEY", or "E@lrX@KEY". */
const char *srch_run_key(pk_ctx *ctx, const srch_scheme *s, int epochs, double lr);
/* A temp file in the work dir for this scheme ("spec.json", "pock"). */
const char *srch_work_file(srch_run_env *E, const char *ext);
/* The scheme's spec written to a new temp file (*path); PK_ERR_IO when it cannot be. */
pk_status srch_write_spec(srch_run_env *E, const srch_scheme *s, const char **path);

/* ---- search_report.c ---- */
typedef struct srch_report {
  const pk_search_options *o;
  const srch_space *sp;
  double head_acc;
  srch_scheme **tried;        /* every scheme costed */
  int ntried;
  srch_scheme **verified;
  int nverified;
  const srch_scheme *chosen;
  int64_t full_bp_bytes;      /* every candidate on */
  double seconds;
  const char *step_source;    /* "tuning records", "timed kernels", ... */
} srch_report;
char *srch_report_text(pk_ctx *ctx, const srch_report *r);
char *srch_report_html(pk_ctx *ctx, const srch_report *r);

#endif
