/* pk_target.h — what Pock compiles for: one target grammar, parsed once into a target
 * description that every consumer (code generator, config spaces, presets, fingerprints,
 * the backend's compiler flags) reads instead of the host it happens to run on.
 *
 * Usage:
 *   pk_target *t;
 *   pk_target_parse(ctx, "c -march=haswell", NULL, &t);   // NULL: $CC, else cc
 *   t->vector_bytes;            // 32: what the emitter and the spaces use
 *   t->isa[0..nisa);            // "avx", "avx2", "fma", ...: must-match
 *   pk_target_native(ctx, &t);  // "c" for this machine (reads /proc/cpuinfo, runs nothing)
 *
 * Grammar (docs/targets.md):
 *   target := "c" [" -march=" CPU | " -mcpu=" CPU] | "cuda -arch=sm_" DIGITS | "opencl"
 * CPU "native" (or none) is this machine; any other CPU is asked of the compiler
 * (`CC -dumpmachine` for the architecture, `CC -march=CPU -dM -E` for the ISA), so a
 * cross compiler given with --cc describes the device it builds for. */
#ifndef PK_TARGET_H
#define PK_TARGET_H

#include <stdbool.h>
#include <stdint.h>

#include "pk_ctx.h"

typedef enum pk_target_kind { PK_TARGET_C, PK_TARGET_CUDA, PK_TARGET_OPENCL } pk_target_kind;

#define PK_TARGET_MAX_ISA 24

typedef struct pk_target {
  pk_target_kind kind;
  const char *text;      /* the target string as given ("c", "c -march=haswell") */
  const char *cc;        /* C targets: the compiler that builds for it */
  const char *cpu_flag;  /* "-march" or "-mcpu"; NULL for this machine */
  const char *cpu;       /* its value; NULL for this machine */
  bool native;           /* this machine: ISA from /proc/cpuinfo, -march=native to build */
  /* must-match: generated code relies on these (an artifact is refused where they differ) */
  const char *arch;      /* "x86_64", "aarch64" (CC -dumpmachine, or uname when native);
                            GPU: "sm_87", "opencl" */
  int nisa;
  const char *isa[PK_TARGET_MAX_ISA]; /* /proc/cpuinfo flag names the code may use, sorted */
  /* informative: what the code generator and the config spaces size things by */
  int vector_bytes;      /* widest vector register: 64 AVX-512F, 32 AVX, 16 SSE/NEON; 0 GPU */
  int vector_regs;       /* architectural vector registers: 32 (AVX-512, AArch64), 16 (x86) */
  int64_t l1d_bytes, l2_bytes, l3_bytes; /* per core (L3: shared); 0 where not known */
  int cores;             /* logical CPUs the kernels' thread pool may use (/proc/cpuinfo
                            when native); 0 where not known (cross targets) */
} pk_target;

/* Parses text (NULL: "c") for compiler cc (NULL: $CC, else "cc"; C targets only). Runs the
 * compiler when the target is not this machine. PK_ERR_USAGE for a malformed string,
 * PK_ERR_BUILD when the compiler rejects the CPU. */
pk_status pk_target_parse(pk_ctx *ctx, const char *text, const char *cc, pk_target **out);

/* "c" for this machine without running anything. */
pk_status pk_target_native(pk_ctx *ctx, pk_target **out);

/* Whether the description has the ISA feature (a /proc/cpuinfo flag name). */
bool pk_target_has(const pk_target *t, const char *feature);

/* The compiler flag that selects the target's CPU: "-march=native", "-march=haswell",
 * "-mcpu=cortex-a78ae"; NULL for a cross compiler's own default CPU (no flag). */
const char *pk_target_cpu_option(pk_ctx *ctx, const pk_target *t);

/* A small /proc or /sys file of this machine, or NULL (ctx left clear) when unreadable:
 * what informative fields are read from. */
char *pk_target_read_sysfile(pk_ctx *ctx, const char *path);

/* The register tile of an f32 GEMM C[M, N] += A·B with `lanes` f32 per vector and
 * `vector_regs` vector registers: *nr columns (two vectors, or one where N is a multiple
 * of one vector but not of two: a tile that overhangs N keeps its vector loop guarded, 20x
 * slower), *mr rows (as many as the mr x nr/lanes accumulators, the B vectors and a
 * broadcast leave room for: at most 6 two vectors wide, 8 one vector wide).
 * The matmul preset and bench/hand_schedules.c both take it (target_tiles.c). */
void pk_gemm_register_tile(int64_t lanes, int vector_regs, int64_t M, int64_t N, int64_t *mr,
                           int64_t *nr);

/* Which of a tile's two outer loop orders keeps what it re-reads in cache: order 0
 * re-reads reread0 bytes once per tile of its outer loop, order 1 reread1 bytes. 1 only
 * when the L2 is known (l2_bytes > 0), reread0 overflows half of it and reread1 fits (the
 * other half holds the panel reused inside and the output tile); else 0. For a GEMM,
 * order 0 (column tiles outermost) streams all of A past each packed B panel, order 1 all
 * of packed B past each row tile. The presets and bench/hand_schedules.c take it. */
int pk_tile_order_by_cache(int64_t l2_bytes, int64_t reread0, int64_t reread1);

/* One line naming every field (what `--dump-after tasks` and build caches key on). */
const char *pk_target_describe(pk_ctx *ctx, const pk_target *t);

#endif
