/* driver_impl.h — private to driver/: the state that `pock compile`'s stages hand on, one
 * named structure per stage (graph, memory plan, kernel list, schedules, source, bytes). */
#ifndef PK_DRIVER_IMPL_H
#define PK_DRIVER_IMPL_H

#include "pk_autotune.h"
#include "pk_backend.h"
#include "pk_driver.h"
#include "pk_gpu.h"
#include "pk_passes.h"
#include "pk_schedule.h"
#include "pk_search.h"

/* Where a graph tensor's elements live: in the storage of tensor `root` (never a view),
 * element (i0, ...) at elem_offset + sum(i_d * strides[d]). dense: strides are the tensor's
 * own row-major ones and elem_offset is 0 (no "strides" in the manifest, default lowering). */
typedef struct drv_layout {
  int root;
  int64_t elem_offset;
  int64_t strides[PK_TE_MAX_DIMS];
  bool dense;
} drv_layout;

/* Where a kernel's schedule came from (printed by the schedule stage). */
typedef enum drv_sched_source {
  DRV_SCHED_DEFAULT,   /* the default schedule (no steps) */
  DRV_SCHED_PRESET,    /* the task space's hand-schedule preset */
  DRV_SCHED_TUNED,     /* the best record for (workload, this device's fingerprint) */
  DRV_SCHED_GENERIC,   /* the best record of the same target string, another fingerprint */
  DRV_SCHED_EXTERN     /* the best record is an extern kernel: the artifact calls it */
} drv_sched_source;

/* One distinct kernel: a canonical TE program with the strides of its buffers. */
typedef struct drv_kernel {
  pk_te_program *prog;        /* the first node's program (all nodes share its text) */
  const int64_t **strides;    /* per program tensor: NULL (dense) or ndim strides */
  const char *workload;       /* hex SHA-256 of the canonical text */
  const char *key;            /* workload + strides: what makes kernels distinct */
  const char *name;           /* readable, from the first node: "matmul_grad1(fc)" */
  double calls;               /* nodes of the main plan that run it (per step; load nodes
                                 run once, and count 0) */
  int first_node;
  pk_task task;
  pk_schedule *sched;         /* NULL: the default */
  drv_sched_source source;
  const char *record_id;      /* the tuning record used, or NULL */
  double record_ns;           /* its measured median (ns), when record_id is set */
  const char *note;           /* why a database choice fell back (logged), or NULL */
  const char *why_default;    /* why the preset was not taken (--dump-after schedule) */
  pk_lfunc *func;             /* lowered as "k<i>" */
  /* Backend switching (source DRV_SCHED_EXTERN): the extern kernel the artifact calls
   * instead of func, with its call's shape; ext_sym NULL otherwise. func is still built:
   * its entry in the kernel object carries the buffer signature the runtime checks. */
  const char *ext_lib, *ext_sym, *ext_sig;
  pk_sgemm_shape sgemm;
  pkrt_gpu_kernel_desc gpu;   /* GPU targets: the launch (codegen), for the manifest */
} drv_kernel;

/* What the stages hand on. Everything is in ctx's arena. */
typedef struct drv_state {
  pk_ctx *ctx;
  const pk_compile_options *o;
  FILE *log;
  pk_graph *fwd;              /* load: the forward graph (sparse: with trainable marks) */
  pk_model_info info;
  pk_train_spec spec;         /* the model file's training object with the overrides */
  pk_graph *g;                /* train: the training graph (or the inference graph) */
  drv_layout *layout;         /* per tensor of g */
  const char *pass_report;    /* passes: one line per pass stage (NULL before any) */
  pk_frozen_prefix *frozen;   /* frozen: the prefix run first (cache_frozen), or NULL */
  pk_memplan *mp;             /* memplan */
  int nkernels;               /* tasks */
  drv_kernel *kernels;
  int *node_kernel;           /* per node of g: its kernel */
  int64_t workspace_bytes;    /* codegen: the largest kernel's */
  char *source;               /* codegen: the C of every kernel */
  const char *so_path;
  void *so;                   /* codegen: the built kernel object's bytes */
  pk_target *target;          /* o->target parsed once (for o->cc): every stage reads it */
  pk_backend *backend;        /* its backend: emits, builds (with the time limit) */
  pk_cgen_unit *unit;         /* schedule: each kernel emitted once, as it is chosen */
  size_t so_len;
  void *ptx;                  /* codegen, CUDA: the PTX beside the cubin (so), for newer archs */
  size_t ptx_len;
  void *clbin;                /* codegen, OpenCL: the program binary for clbin_for, or NULL */
  size_t clbin_len;
  pkrt_gpu_info clbin_for;    /* the device that built it (name, version, driver, platform) */
  char *manifest;             /* artifact */
  int64_t artifact_bytes;
} drv_state;

/* Runs pk_compile's checks and its stages up to and including `last` (a stage name) into
 * *S, printing no dump and no table: for callers inside driver/ that need the structures
 * themselves (search_cost.c). o must outlive S; S->unit is freed before returning. */
pk_status drv_compile_to(pk_ctx *ctx, const pk_compile_options *o, const char *last,
                         drv_state *S);

/* ---- stage_graph.c: load, sparse, train ---- */
pk_status drv_load(drv_state *S);
pk_status drv_sparse(drv_state *S);
pk_status drv_train(drv_state *S);
/* Fills S->layout from the tensors' bases and view strides. */
pk_status drv_layouts(drv_state *S);

/* ---- stage_passes.c: one stage per graph pass (pk_passes.h) ---- */
pk_status drv_pass_fold(drv_state *S);
pk_status drv_pass_share_stats(drv_state *S);
pk_status drv_pass_copy_elim(drv_state *S);
pk_status drv_pass_fuse(drv_state *S);
pk_status drv_pass_reorder(drv_state *S);
/* With o->cache_frozen: the frozen prefix first (pk_graph_frozen_prefix) into S->frozen. */
pk_status drv_frozen(drv_state *S);

/* The layout pass (stage_passes.c); its timer: a kernel's time from its best tuning record
 * in o->db, else drv_time_schedule of its preset with o->measurer. */
pk_status drv_pass_layout(drv_state *S);
/* One timing of a task's schedule (sched NULL: the default) by the measurer, in ms; NAN
 * when measurer is NULL or the measurement failed. The one kernel timer of the step-time
 * estimates (sparse-search's costs, the layout pass's choice): search_cost.c. */
double drv_time_schedule(pk_ctx *ctx, pk_measurer *measurer, const pk_task *task,
                         const pk_schedule *sched);

/* A GPU target (cuda, opencl): kernels run on the device, buffers live in device memory. */
bool drv_on_gpu(const drv_state *S);
/* The memory plan's alignment for GPU targets: OpenCL sub-buffers start at the device's
 * base alignment (128 bytes on PoCL, up to 4 KiB on phone GPUs); CUDA needs none, 256
 * keeps every buffer where cudaMalloc would put it. (C targets: 64.) */
#define DRV_OPENCL_ALIGN 4096
#define DRV_CUDA_ALIGN 256

/* ---- stage_tasks.c ---- */
pk_status drv_memplan(drv_state *S);
/* Sets the plan's workspace from each node's kernel (after the schedule stage lowered them). */
void drv_memplan_workspace(drv_state *S);
pk_status drv_tasks(drv_state *S);
char *drv_tasks_print(drv_state *S);
/* The graph tensor behind program tensor i of node n: placeholders are the node's inputs
 * in order, computes its outputs in order; -1 when the counts disagree. */
int drv_gtensor_of(const pk_gnode *n, const pk_te_program *p, int i);
/* The nodes of each plan: forward only (infer), forward + loss (eval), all but the load
 * nodes (train), the load nodes (load: run once when the weights are in place, before
 * any of the others). Returns the count; nodes[] gets node ids in order. */
typedef enum drv_plan { DRV_PLAN_TRAIN, DRV_PLAN_EVAL, DRV_PLAN_INFER, DRV_PLAN_LOAD } drv_plan;
int drv_plan_nodes(const drv_state *S, drv_plan p, int *nodes);
pk_status drv_plans_check(drv_state *S);

/* ---- stage_schedule.c ---- */
pk_status drv_schedule(drv_state *S);
char *drv_schedule_print(drv_state *S);
/* Lowers kernel i with its schedule and strides as "k<i>". */
pk_status drv_lower(drv_state *S, int i, const pk_schedule *sched, pk_lfunc **out);

/* ---- stage_codegen.c ---- */
pk_status drv_codegen(drv_state *S);

/* ---- manifest.c, artifact.c ---- */
pk_status drv_manifest(drv_state *S);
pk_status drv_artifact(drv_state *S);

#endif
