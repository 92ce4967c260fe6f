/* checkpoint.c — training checkpoints (format in docs/runtime.md): the model's params,
 * state and buffers regions, step count, base lr and, for the training loop, its position (epoch, step,
 * PRNG, visiting order), tied to one artifact by its manifest's SHA-256 and closed by a
 * SHA-256 of every byte before it. Written atomically; read fully verified before use. */
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_impl.h"
#include "data_impl.h"

/* Regions are stored as raw images, like the artifact's weights section. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints store little-endian region images and need a little-endian host"
#endif

#define CKPT_MAGIC "POCKCKP" /* 8 bytes with its NUL */
#define CKPT_VERSION 1u
#define CKPT_FLAG_LOOP 1u
#define CKPT_HDR 200
#define CKPT_MAX_FILE ((size_t)1 << 36)
_Static_assert(sizeof CKPT_MAGIC == 8, "magic is 8 bytes with its NUL");

/* Byte offsets of the fixed header's fields. */
enum {
  O_VERSION = 8, O_FLAGS = 12, O_MODEL = 16, O_STEPS = 48, O_LR = 56, O_PARAMS = 64,
  O_STATE = 72, O_EPOCHS = 80, O_IN_EPOCH = 88, O_POS = 96, O_RNG = 104, O_LOSS = 136,
  O_CORRECT = 144, O_SEEN = 152, O_ROWS = 160, O_DATA = 168
};
_Static_assert(O_DATA + PKRT_SHA256_BYTES == CKPT_HDR, "header layout");

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static void put_f64(unsigned char *p, double d) {
  uint64_t v;
  memcpy(&v, &d, 8);
  put_u64(p, v);
}
static double get_f64(const unsigned char *p) {
  uint64_t v = get_u64(p);
  double d;
  memcpy(&d, &v, 8);
  return d;
}

void rt_dataset_digest(const pkrt_dataset *d, uint8_t out[PKRT_SHA256_BYTES]) {
  crypto_hash_sha256_state h;
  int init = sodium_init();
  (void)init;
  crypto_hash_sha256_init(&h);
  size_t xbytes = (size_t)d->rows * (size_t)d->features * pkrt_dtype_size(d->dtype);
  crypto_hash_sha256_update(&h, d->x, xbytes);
  for (int k = 0; k < d->nextra; k++) /* the further inputs of a several-input model */
    crypto_hash_sha256_update(&h, d->extra[k].data, (size_t)(d->extra[k].batch ? d->rows : 1) *
                                                        (size_t)d->extra[k].per_row *
                                                        pkrt_dtype_size(d->extra[k].dtype));
  int64_t lw = d->label_width > 1 ? d->label_width : 1;
  crypto_hash_sha256_update(&h, (const unsigned char *)d->labels,
                            (size_t)d->rows * (size_t)lw * sizeof(int32_t));
  crypto_hash_sha256_final(&h, out);
}

/* The writer hashes what it writes, so the trailer costs no second pass. */
typedef struct hwriter {
  rt_wfile w;
  crypto_hash_sha256_state h;
} hwriter;

static pkrt_status hw_write(pkrt_ctx *rt, hwriter *hw, const void *p, size_t n) {
  crypto_hash_sha256_update(&hw->h, p, n);
  return rt_wfile_write(rt, &hw->w, p, n);
}

pkrt_status rt_checkpoint_write(pkrt_model *m, const char *path, const rt_loop_state *ls) {
  const rt_manifest *mf = &m->mf;
  unsigned char hdr[CKPT_HDR];
  memset(hdr, 0, sizeof hdr);
  memcpy(hdr, CKPT_MAGIC, 8);
  put_u64(hdr + O_VERSION, CKPT_VERSION | (uint64_t)(ls ? CKPT_FLAG_LOOP : 0) << 32);
  memcpy(hdr + O_MODEL, m->manifest_sha, PKRT_SHA256_BYTES);
  put_u64(hdr + O_STEPS, (uint64_t)m->steps);
  put_f64(hdr + O_LR, m->lr);
  put_u64(hdr + O_PARAMS, (uint64_t)mf->region_bytes[RT_REGION_PARAMS]);
  put_u64(hdr + O_STATE, (uint64_t)mf->region_bytes[RT_REGION_STATE]);
  if (ls) {
    put_u64(hdr + O_EPOCHS, (uint64_t)ls->epochs_done);
    put_u64(hdr + O_IN_EPOCH, (uint64_t)ls->in_epoch);
    put_u64(hdr + O_POS, (uint64_t)ls->pos);
    for (int i = 0; i < 4; i++) put_u64(hdr + O_RNG + 8 * i, ls->rng[i]);
    put_f64(hdr + O_LOSS, ls->loss_sum);
    put_u64(hdr + O_CORRECT, (uint64_t)ls->correct);
    put_u64(hdr + O_SEEN, (uint64_t)ls->seen);
    put_u64(hdr + O_ROWS, (uint64_t)ls->rows);
    memcpy(hdr + O_DATA, ls->data_sha, PKRT_SHA256_BYTES);
  }
  hwriter hw;
  int init = sodium_init();
  (void)init;
  crypto_hash_sha256_init(&hw.h);
  pkrt_status st = rt_wfile_open(m->rt, &hw.w, path);
  if (st == PKRT_OK) st = hw_write(m->rt, &hw, hdr, sizeof hdr);
  /* The order goes through a stack buffer: no allocation between training steps. */
  unsigned char buf[8 * 256];
  for (int64_t i = 0; ls && st == PKRT_OK && i < ls->rows; i += 256) {
    int64_t k = ls->rows - i < 256 ? ls->rows - i : 256;
    for (int64_t j = 0; j < k; j++) put_u64(buf + 8 * j, (uint64_t)ls->perm[i + j]);
    st = hw_write(m->rt, &hw, buf, (size_t)k * 8);
  }
  if (st == PKRT_OK && m->gpu) st = rt_gpu_sync_weights(m, false); /* GPU: the device's */
  if (st == PKRT_OK)
    st = hw_write(m->rt, &hw, m->region[RT_REGION_PARAMS],
                  (size_t)mf->region_bytes[RT_REGION_PARAMS]);
  if (st == PKRT_OK)
    st = hw_write(m->rt, &hw, m->region[RT_REGION_STATE],
                  (size_t)mf->region_bytes[RT_REGION_STATE]);
  /* buffers (running stats) follow; their size comes from the manifest the file is tied
   * to, so the header needs no field for it (0 for models without buffers) */
  if (st == PKRT_OK)
    st = hw_write(m->rt, &hw, m->region[RT_REGION_BUFFERS],
                  (size_t)mf->region_bytes[RT_REGION_BUFFERS]);
  if (st == PKRT_OK) {
    uint8_t sum[PKRT_SHA256_BYTES];
    crypto_hash_sha256_final(&hw.h, sum);
    st = rt_wfile_write(m->rt, &hw.w, sum, sizeof sum);
  }
  if (st == PKRT_OK) return rt_wfile_commit(m->rt, &hw.w);
  /* rt_wfile_* remove the temp file on their own failures; this covers the rest. */
  rt_wfile_abort(&hw.w);
  return st;
}

static void short_hex(const uint8_t *sha, char out[17]) {
  sodium_bin2hex(out, 17, sha, 8);
}

/* Everything the file says, checked against itself and the model; the model is not
 * touched. Returns the region images through *params / *state. */
static pkrt_status verify(pkrt_model *m, const char *path, const unsigned char *b, size_t len,
                          rt_loop_state *ls, const unsigned char **params,
                          const unsigned char **state) {
  pkrt_ctx *rt = m->rt;
  const rt_manifest *mf = &m->mf;
  if (len == 0) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: empty file (not a checkpoint)", path);
  if (len < 8 || memcmp(b, CKPT_MAGIC, 8) != 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: not a Pock checkpoint (bad magic)", path);
  if (len < CKPT_HDR + PKRT_SHA256_BYTES)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: truncated (%zu bytes, the header needs %d)",
                         path, len, CKPT_HDR + PKRT_SHA256_BYTES);
  uint64_t vf = get_u64(b + O_VERSION);
  uint32_t version = (uint32_t)vf, flags = (uint32_t)(vf >> 32);
  if (version != CKPT_VERSION)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: checkpoint version %u is not supported (this runtime reads %u)",
                         path, version, CKPT_VERSION);
  if (flags & ~CKPT_FLAG_LOOP)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: unknown flags 0x%x", path, flags);
  uint64_t pb = get_u64(b + O_PARAMS), sb = get_u64(b + O_STATE), rows = get_u64(b + O_ROWS);
  /* Each size is bounded by the file before they are added, so the sum cannot wrap. */
  if (pb > len || sb > len || rows > len / 8)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: truncated (sizes exceed the %zu-byte file)",
                         path, len);
  uint64_t bb = (uint64_t)mf->region_bytes[RT_REGION_BUFFERS]; /* bounded by the manifest */
  uint64_t need = CKPT_HDR + rows * 8 + pb + sb + bb + PKRT_SHA256_BYTES;
  if (need != len)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, need > len
                         ? "%s: truncated (%zu bytes, its header describes %llu)"
                         : "%s: %zu bytes, but its header describes %llu (trailing bytes)",
                         path, len, (unsigned long long)need);
  uint8_t sum[PKRT_SHA256_BYTES];
  pkrt_sha256(b, len - PKRT_SHA256_BYTES, sum);
  if (memcmp(sum, b + len - PKRT_SHA256_BYTES, PKRT_SHA256_BYTES) != 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: checksum mismatch (the file is damaged)",
                         path);
  if (memcmp(b + O_MODEL, m->manifest_sha, PKRT_SHA256_BYTES) != 0) {
    char theirs[17], ours[17];
    short_hex(b + O_MODEL, theirs);
    short_hex(m->manifest_sha, ours);
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: the checkpoint belongs to another model (manifest sha256 %s..., "
                         "this artifact's is %s...)", path, theirs, ours);
  }
  /* Same manifest means same regions; a mismatch is a damaged or forged file. */
  if (pb != (uint64_t)mf->region_bytes[RT_REGION_PARAMS] ||
      sb != (uint64_t)mf->region_bytes[RT_REGION_STATE])
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: region sizes params %llu / state %llu differ from the model's "
                         "%lld / %lld", path, (unsigned long long)pb, (unsigned long long)sb,
                         (long long)mf->region_bytes[RT_REGION_PARAMS],
                         (long long)mf->region_bytes[RT_REGION_STATE]);
  int64_t steps = (int64_t)get_u64(b + O_STEPS);
  double lr = get_f64(b + O_LR);
  if (steps < 0 || !isfinite(lr) || lr < 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: step count %lld or learning rate %g is invalid",
                         path, (long long)steps, lr);
  *params = b + CKPT_HDR + rows * 8;
  *state = *params + pb;
  if (!ls) return PKRT_OK;
  if (!(flags & CKPT_FLAG_LOOP))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: holds no training-loop position (saved by "
                         "pkrt_model_save_checkpoint); load it with pkrt_model_load_checkpoint "
                         "and start a new run instead", path);
  if ((int64_t)rows != ls->rows || memcmp(b + O_DATA, ls->data_sha, PKRT_SHA256_BYTES) != 0) {
    char theirs[17], ours[17];
    short_hex(b + O_DATA, theirs);
    short_hex(ls->data_sha, ours);
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: the checkpoint was taken on other training data (%llu rows, "
                         "sha256 %s...; this data has %lld rows, sha256 %s...)", path,
                         (unsigned long long)rows, theirs, (long long)ls->rows, ours);
  }
  int64_t epochs = (int64_t)get_u64(b + O_EPOCHS), in_epoch = (int64_t)get_u64(b + O_IN_EPOCH);
  int64_t pos = (int64_t)get_u64(b + O_POS), correct = (int64_t)get_u64(b + O_CORRECT);
  int64_t seen = (int64_t)get_u64(b + O_SEEN);
  int64_t nsteps = (ls->rows + mf->batch - 1) / mf->batch;
  double loss_sum = get_f64(b + O_LOSS);
  if (epochs < 0 || epochs > 1000000000 || (in_epoch != 0 && in_epoch != 1) || pos < 0 ||
      pos > nsteps || (!in_epoch && pos != 0) || seen < 0 ||
      seen > ls->rows * (mf->label_width > 1 ? mf->label_width : 1) || correct < 0 ||
      correct > seen || !isfinite(loss_sum))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: the training-loop position is invalid", path);
  /* The order must be a permutation, or a resumed epoch would skip or repeat rows. */
  unsigned char *seen_row = calloc((size_t)rows + 1, 1);
  if (!seen_row) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", path);
  pkrt_status st = PKRT_OK;
  for (uint64_t i = 0; i < rows; i++) {
    uint64_t r = get_u64(b + CKPT_HDR + 8 * i);
    if (r >= rows || seen_row[r]) {
      st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: the row order is not a permutation", path);
      break;
    }
    seen_row[r] = 1;
    ls->perm[i] = (int64_t)r;
  }
  free(seen_row);
  if (st != PKRT_OK) return st;
  ls->epochs_done = epochs;
  ls->in_epoch = in_epoch;
  ls->pos = pos;
  for (int i = 0; i < 4; i++) ls->rng[i] = get_u64(b + O_RNG + 8 * i);
  ls->loss_sum = loss_sum;
  ls->correct = correct;
  ls->seen = seen;
  return PKRT_OK;
}

pkrt_status rt_checkpoint_read(pkrt_model *m, const char *path, rt_loop_state *ls) {
  void *bytes;
  size_t len;
  pkrt_status st = rt_file_read(m->rt, path, CKPT_MAX_FILE, &bytes, &len);
  if (st != PKRT_OK) return st;
  const unsigned char *params = NULL, *state = NULL;
  st = verify(m, path, bytes, len, ls, &params, &state);
  if (st == PKRT_OK) {
    const rt_manifest *mf = &m->mf;
    memcpy(m->region[RT_REGION_PARAMS], params, (size_t)mf->region_bytes[RT_REGION_PARAMS]);
    memcpy(m->region[RT_REGION_STATE], state, (size_t)mf->region_bytes[RT_REGION_STATE]);
    if (mf->region_bytes[RT_REGION_BUFFERS])
      memcpy(m->region[RT_REGION_BUFFERS], state + mf->region_bytes[RT_REGION_STATE],
             (size_t)mf->region_bytes[RT_REGION_BUFFERS]);
    const unsigned char *b = bytes;
    m->steps = (int64_t)get_u64(b + O_STEPS);
    m->lr = get_f64(b + O_LR);
    rt_model_weights_changed(m);
    if (m->gpu) st = rt_gpu_sync_weights(m, true);
  }
  free(bytes);
  return st;
}

int pkrt_model_save_checkpoint(pkrt_model *m, const char *path) {
  if (!m) return PKRT_ERR_INPUT;
  return rt_checkpoint_write(m, path, NULL);
}

int pkrt_model_load_checkpoint(pkrt_model *m, const char *path) {
  if (!m) return PKRT_ERR_INPUT;
  return rt_checkpoint_read(m, path, NULL);
}

void pkrt_model_id(const pkrt_model *m, char hex[65]) {
  if (!m) {
    hex[0] = 0;
    return;
  }
  sodium_bin2hex(hex, 65, m->manifest_sha, PKRT_SHA256_BYTES);
}
