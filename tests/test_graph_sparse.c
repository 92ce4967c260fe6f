/* test_graph_sparse.c — the sparse-update spec: what each demo scheme marks trainable,
 * every parse and apply error with its message, and a fuzz loop over mutated spec texts
 * (no crash: each text is either accepted with sane marks or rejected with a message). */
#include "test_graph_models.h"

#define N 4

static bool has(const char *hay, const char *needle) { return hay && strstr(hay, needle); }

/* Trainable marks of the CNN's params, in the order conv1.w conv1.b conv2.w conv2.b conv3.w
 * conv3.b fc.w fc.b; a value > 0 is train_channels for weights (or 1 for a trained bias),
 * 0 frozen. */
static const char *const cnn_params[8] = {"conv1.weight", "conv1.bias", "conv2.weight",
                                          "conv2.bias",   "conv3.weight", "conv3.bias",
                                          "fc.weight",    "fc.bias"};

static void check_marks(pk_graph *g, const char *what, const int64_t want[8]) {
  for (int i = 0; i < 8; i++) {
    const pk_gtensor *t = g->tensors[pk_graph_find(g, cnn_params[i])];
    int64_t got = !t->trainable ? 0 : t->is_bias ? 1 : t->train_channels;
    TG_CHECK(got == want[i], "%s: %s marked %lld, want %lld", what, cnn_params[i],
             (long long)got, (long long)want[i]);
  }
}

static void test_schemes(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = tg_cnn(ctx, N);
  /* input channels: conv1 1, conv2 16, conv3 32, fc 64; 25% of conv3's 32 is 8 */
  const int64_t want[TG_NSCHEMES][8] = {
      [TG_HEAD] = {0, 0, 0, 0, 0, 0, 64, 1},
      [TG_BIAS_HEAD] = {0, 1, 0, 1, 0, 1, 64, 1},
      [TG_LAST2] = {0, 0, 0, 0, 32, 1, 64, 1},
      [TG_PART_ALLBIAS] = {0, 1, 0, 1, 8, 1, 64, 1},
      [TG_PART_HEAD] = {0, 0, 0, 0, 8, 1, 64, 1},
      [TG_FULL] = {1, 1, 16, 1, 32, 1, 64, 1},
  };
  for (int s = 0; s < TG_NSCHEMES; s++) {
    TG_OK(ctx, tg_apply_text(g, tg_scheme_text[s]));
    check_marks(g, tg_scheme_name[s], want[s]);
  }
  /* NULL spec: everything trains, whole. */
  TG_OK(ctx, pk_sparse_apply(g, NULL));
  check_marks(g, "null spec", want[TG_FULL]);
  /* Rules are a union: a whole selection beats a partial one; the larger partial wins. */
  TG_OK(ctx, tg_apply_text(g, "{\"version\":1,\"train\":[{\"params\":\"conv3.weight\","
                              "\"channels\":0.25},{\"params\":\"conv3.*\"}]}"));
  check_marks(g, "union whole", (int64_t[]){0, 0, 0, 0, 32, 1, 0, 0});
  TG_OK(ctx, tg_apply_text(g, "{\"version\":1,\"train\":[{\"params\":\"conv3.weight\","
                              "\"channels\":0.25},{\"params\":\"conv3.weight\",\"channels\":12}]}"));
  check_marks(g, "union partial", (int64_t[]){0, 0, 0, 0, 12, 0, 0, 0});
  /* 1 is the fraction "all"; one channel is channel_count 1; 0.5 of 16 is 8; 0.51 of 16 rounds to 8 */
  TG_OK(ctx, tg_apply_text(g, "{\"version\":1,\"train\":[{\"params\":\"conv3.weight\",\"channels\":1},"
                              "{\"params\":\"conv2.weight\",\"channel_count\":1},"
                              "{\"params\":\"fc.weight\",\"channels\":0.51}]}"));
  check_marks(g, "count forms", (int64_t[]){0, 0, 1, 0, 32, 0, 33, 0});
  TG_OK(ctx, tg_apply_text(g, "{\"version\":1,\"train\":[{\"params\":[\"conv?.weight\"],"
                              "\"channels\":0.5}, {\"last_layers\":1}]}"));
  /* conv1 has 1 input channel: 0.5 rounds (half away from zero) to 1, i.e. whole */
  check_marks(g, "glob partial", (int64_t[]){1, 0, 8, 0, 16, 0, 64, 1});
  TG_OK(ctx, tg_apply_text(g, "{\"version\":1,\"train\":[]}"));
  check_marks(g, "nothing", (int64_t[]){0, 0, 0, 0, 0, 0, 0, 0});
  pk_ctx_free(ctx);
}

typedef struct err_case {
  const char *text;
  const char *needle;
} err_case;

static void run_errors(pk_ctx *ctx, pk_graph *g, const err_case *cases, int n) {
  for (int i = 0; i < n; i++) {
    pk_status s = tg_apply_text(g, cases[i].text);
    TG_CHECK(s != PK_OK, "accepted: %s", cases[i].text);
    TG_CHECK(has(pk_ctx_error(ctx), cases[i].needle), "spec %s: message '%s' lacks '%s'",
             cases[i].text, pk_ctx_error(ctx), cases[i].needle);
    TG_CHECK(has(pk_ctx_error(ctx), "spec.json"), "message names the file: %s",
             pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
  }
}

#define V "{\"version\":1,\"train\":"
static const err_case parse_errors[] = {
    {"{", "not valid JSON"},
    {"", "not valid JSON"},
    {"[]", "must be a JSON object"},
    {"{\"version\":1,\"train\":[],\"trian\":1}", "unknown key \"trian\""},
    {"{\"train\":[]}", "missing \"version\""},
    {"{\"version\":2,\"train\":[]}", "unsupported \"version\""},
    {"{\"version\":\"1\",\"train\":[]}", "unsupported \"version\""},
    {"{\"version\":1}", "missing \"train\""},
    {V "{}}", "\"train\" must be an array"},
    {"{\"version\":1,\"description\":3,\"train\":[]}", "\"description\" must be a string"},
    {V "[1]}", "train[0] must be an object"},
    {V "[{\"all\":true},{\"parms\":\"fc.*\"}]}", "train[1]: unknown key \"parms\""},
    /* Finding 11: duplicates were accepted (the last copy won); a NUL cut a glob short. */
    {"{\"version\":1,\"train\":[],\"version\":1}", "key 'version' appears twice"},
    {V "[{\"params\":\"fc.*\",\"params\":\"conv1.*\"}]}", "train[0]: key 'params' appears twice"},
    {V "[{\"params\":\"fc\\u0000.weight\"}]}", "a NUL character"},
    {V "[{\"channels\":0.5}]}", "train[0]: needs exactly one of"},
    {V "[{\"all\":true,\"biases\":true}]}", "(found 2)"},
    {V "[{\"params\":[]}]}", "\"params\" is an empty array"},
    {V "[{\"params\":\"\"}]}", "\"params\" is an empty string"},
    {V "[{\"params\":3}]}", "\"params\" must be a name/glob or an array"},
    {V "[{\"params\":[\"fc.*\",4]}]}", "\"params\"[1] must be a non-empty string"},
    {V "[{\"biases\":false}]}", "\"biases\" must be true"},
    {V "[{\"all\":1}]}", "\"all\" must be true"},
    {V "[{\"last_layers\":0}]}", "\"last_layers\" must be an integer >= 1"},
    {V "[{\"last_layers\":1.5}]}", "\"last_layers\" must be an integer >= 1"},
    {V "[{\"params\":\"fc.weight\",\"channels\":0}]}", "\"channels\" 0 is neither a fraction"},
    {V "[{\"params\":\"fc.weight\",\"channels\":-0.25}]}", "neither a fraction in (0, 1]"},
    {V "[{\"params\":\"fc.weight\",\"channels\":1.5}]}", "\"channels\" 1.5 is neither"},
    {V "[{\"params\":\"fc.weight\",\"channels\":\"half\"}]}", "\"channels\" must be a number"},
    {V "[{\"params\":\"fc.weight\",\"channel_count\":0}]}", "\"channel_count\" must be an integer >= 1"},
    {V "[{\"params\":\"fc.weight\",\"channel_count\":2.5}]}", "\"channel_count\" must be an integer"},
    {V "[{\"params\":\"fc.weight\",\"channels\":0.5,\"channel_count\":3}]}", "not both"},
    {V "[{\"biases\":true,\"channels\":0.5}]}", "\"channels\" applies to a \"params\""},
    /* transformer selectors */
    {V "[{\"norms\":true,\"channel_count\":2}]}", "\"channel_count\" applies to a"},
    {V "[{\"norms\":false}]}", "\"norms\" must be true"},
    {V "[{\"blocks\":2}]}", "\"blocks\" must be an object"},
    {V "[{\"blocks\":{}}]}", "blocks: missing \"last\""},
    {V "[{\"blocks\":{\"last\":0}}]}", "blocks.last must be an integer >= 1"},
    {V "[{\"blocks\":{\"last\":1,\"prefx\":\"layer\"}}]}", "blocks: unknown key \"prefx\""},
    {V "[{\"blocks\":{\"last\":1,\"prefix\":\"layer.\"}}]}", "must not start or end with '.'"},
    {V "[{\"blocks\":{\"last\":1,\"prefix\":3}}]}", "blocks.prefix must be"},
    {V "[{\"blocks\":{\"last\":1},\"norms\":true}]}", "(found 2)"},
};

static const err_case apply_errors[] = {
    {V "[{\"params\":\"conv9.*\"}]}", "train[0]: \"conv9.*\" matches no param"},
    {V "[{\"all\":true},{\"params\":[\"conv3.weight\",\"conv3.wieght\"]}]}",
     "train[1]: \"conv3.wieght\" matches no param"},
    {V "[{\"params\":\"x\"}]}", "\"x\" matches no param"}, /* an input, not a param */
    {V "[{\"params\":\"conv3.weight\",\"channels\":33}]}",
     "channel count 33 is out of range for 'conv3.weight' (1..32 input channels)"},
    {V "[{\"params\":\"conv3.weight\",\"channel_count\":40}]}", "channel count 40 is out of range"},
    {V "[{\"params\":\"fc.bias\",\"channels\":0.5}]}", "partial channels on 'fc.bias', which has rank 1"},
    {V "[{\"params\":\"conv3.bias\",\"channels\":0.5}]}",
     "partial channels on 'conv3.bias', which is not the weight (second input) of layer 'conv3'"},
    {V "[{\"params\":\"conv1.weight\",\"channels\":0.25}]}",
     "channels fraction 0.25 of 'conv1.weight' (1 input channels) rounds to 0"},
    {V "[{\"last_layers\":5}]}", "last_layers 5 but the model has 4 layers"},
};

/* Partial channels on params that are not a plain conv/matmul weight. */
static void test_layer_kind_errors(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = pk_graph_new(ctx, 2);
  int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 4, (int64_t[]){2, 8, 5, 5});
  int scale = pk_graph_add_param(g, "scale", PKRT_DTYPE_F32, 4, (int64_t[]){1, 8, 1, 1}, NULL);
  int gw = pk_graph_add_param(g, "gconv.weight", PKRT_DTYPE_F32, 4, (int64_t[]){8, 4, 3, 3}, NULL);
  int mw = pk_graph_add_param(g, "mm.weight", PKRT_DTYPE_F32, 2, (int64_t[]){8, 6}, NULL);
  int y, z, f, m;
  TG_OK(ctx, pk_graph_add_op(g, "scale", PK_OP_MUL, NULL, 2, (int[]){x, scale}, "y", &y));
  TG_OK(ctx, pk_graph_add_op(g, "gconv", PK_OP_CONV2D, &(pk_op_attrs){.groups = 2}, 2,
                             (int[]){y, gw}, "z", &z));
  TG_OK(ctx, pk_graph_add_op(g, "flat", PK_OP_MEAN, &(pk_op_attrs){.naxes = 2, .axes = {2, 3}},
                             1, &z, "f", &f));
  /* f (2, 8) x mm.weight (8, 6) without trans_b: the weight's axis 1 is the output */
  TG_OK(ctx, pk_graph_add_op(g, "mm", PK_OP_MATMUL, NULL, 2, (int[]){f, mw}, "m", &m));
  g->output = m;
  TG_OK(ctx, pk_graph_validate(g));
  const err_case cases[] = {
      {V "[{\"params\":\"scale\",\"channels\":0.5}]}",
       "partial channels on 'scale', which is not the weight of a conv2d/matmul layer"},
      {V "[{\"params\":\"gconv.weight\",\"channels\":0.5}]}",
       "layer 'gconv' is a grouped conv2d (groups 2"},
      {V "[{\"params\":\"mm.weight\",\"channels\":0.5}]}",
       "layer 'mm' must be a matmul with trans_b"},
  };
  run_errors(ctx, g, cases, (int)(sizeof cases / sizeof cases[0]));
  TG_OK(ctx, tg_apply_text(g, V "[{\"params\":\"*.weight\"}]}"));
  TG_CHECK(!g->tensors[scale]->trainable && g->tensors[gw]->trainable, "whole weights ok");
  pk_ctx_free(ctx);
}

/* graph I/O and transformer specs: blocks by name prefix, partial channels on linear layers
 * with a rank-3 input (batch_matmul), "channels" on a non-params rule, and their errors. */
static int64_t mark(pk_graph *g, const char *name) {
  const pk_gtensor *t = g->tensors[pk_graph_find(g, name)];
  return !t->trainable ? 0 : t->ndim < 2 ? 1 : t->train_channels;
}

static void test_transformer_specs(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = tg_blocks(ctx, N, "layer", 3, 3, 4, 3);
  TG_CHECK(g != NULL, "tg_blocks: %s", pk_ctx_error(ctx));
  if (!g) exit(1);
  const char *names[] = {"layer.0.fc.weight", "layer.0.fc.bias", "layer.1.fc.weight",
                         "layer.1.fc.bias",   "layer.2.fc.weight", "layer.2.fc.bias",
                         "head.weight",       "head.bias"};
  struct {
    const char *spec;
    int64_t want[8];
  } cases[] = {
      {V "[{\"blocks\":{\"prefix\":\"auto\",\"last\":2}}]}", {0, 0, 4, 1, 4, 1, 0, 0}},
      {V "[{\"blocks\":{\"last\":1},\"channels\":0.5},{\"params\":\"head.*\"}]}",
       {0, 0, 0, 0, 2, 1, 4, 1}},
      {V "[{\"blocks\":{\"prefix\":\"layer\",\"last\":3}}]}", {4, 1, 4, 1, 4, 1, 0, 0}},
      {V "[{\"last_layers\":1,\"channel_count\":3}]}", {0, 0, 0, 0, 0, 0, 3, 1}},
      {V "[{\"params\":\"layer.0.fc.weight\",\"channels\":0.25}]}", {1, 0, 0, 0, 0, 0, 0, 0}},
      {V "[{\"all\":true,\"channels\":0.5}]}", {2, 1, 2, 1, 2, 1, 2, 1}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    TG_OK(ctx, tg_apply_text(g, cases[c].spec));
    for (int i = 0; i < 8; i++)
      TG_CHECK(mark(g, names[i]) == cases[c].want[i], "%s: %s marked %lld, want %lld",
               cases[c].spec, names[i], (long long)mark(g, names[i]),
               (long long)cases[c].want[i]);
  }
  /* A rank-3 partial layer builds: its input slice is along the last axis. */
  pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_SGD, .lr = 0.1};
  TG_OK(ctx, tg_apply_text(g, cases[1].spec));
  pk_graph *t;
  TG_OK(ctx, pk_train_build(g, &sp, &t));
  int sl = pk_graph_find(t, "layer.1.act[..., :2]");
  TG_CHECK(sl >= 0 && t->tensors[sl]->ndim == 3 && t->tensors[sl]->shape[2] == 2 &&
               t->tensors[sl]->shape[1] == 3,
           "rank-3 slice of layer.1.act");
  const err_case errs[] = {
      {V "[{\"blocks\":{\"last\":4}}]}", "blocks.last 4 but 'layer' has 3 blocks"},
      {V "[{\"blocks\":{\"prefix\":\"encoder\",\"last\":1}}]}",
       "no param is named 'encoder.<index>.*'"},
      {V "[{\"norms\":true}]}", "\"norms\" but the model has no normalization"},
  };
  run_errors(ctx, g, errs, (int)(sizeof errs / sizeof errs[0]));
  /* blocks.<i> naming, the last of four */
  pk_graph *b = tg_blocks(ctx, N, "blocks", 4, 2, 4, 3);
  TG_CHECK(b != NULL, "tg_blocks: %s", pk_ctx_error(ctx));
  if (!b) exit(1);
  TG_OK(ctx, tg_apply_text(b, V "[{\"blocks\":{\"last\":1}}]}"));
  TG_CHECK(mark(b, "blocks.3.fc.weight") == 4 && mark(b, "blocks.3.fc.bias") == 1 &&
               mark(b, "blocks.2.fc.weight") == 0 && mark(b, "head.weight") == 0,
           "blocks.3 only");
  /* no indexed names; two prefixes that tie */
  pk_graph *cnn = tg_cnn(ctx, N);
  const err_case none[] = {{V "[{\"blocks\":{\"last\":1}}]}", "no param is named PREFIX.<index>.*"}};
  run_errors(ctx, cnn, none, 1);
  pk_graph_add_param(cnn, "enc.0.w", PKRT_DTYPE_F32, 1, (int64_t[]){2}, NULL);
  pk_graph_add_param(cnn, "dec.0.w", PKRT_DTYPE_F32, 1, (int64_t[]){2}, NULL);
  const err_case tie[] = {{V "[{\"blocks\":{\"last\":1}}]}", "\"auto\" is ambiguous: 'enc' and 'dec'"}};
  run_errors(ctx, cnn, tie, 1);
  TG_OK(ctx, tg_apply_text(cnn, V "[{\"blocks\":{\"prefix\":\"dec\",\"last\":1}}]}"));
  TG_CHECK(mark(cnn, "dec.0.w") == 1 && mark(cnn, "enc.0.w") == 0, "explicit prefix dec");
  /* an explicit prefix may hold an index itself; blocks 2 and 10 are the last two of 0, 2, 10 */
  pk_graph_add_param(cnn, "m.0.layer.2.w", PKRT_DTYPE_F32, 1, (int64_t[]){2}, NULL);
  pk_graph_add_param(cnn, "m.0.layer.10.w", PKRT_DTYPE_F32, 1, (int64_t[]){2}, NULL);
  pk_graph_add_param(cnn, "m.0.layer.0.w", PKRT_DTYPE_F32, 1, (int64_t[]){2}, NULL);
  TG_OK(ctx, tg_apply_text(cnn, V "[{\"blocks\":{\"prefix\":\"m.0.layer\",\"last\":2}}]}"));
  TG_CHECK(mark(cnn, "m.0.layer.10.w") == 1 && mark(cnn, "m.0.layer.2.w") == 1 &&
               mark(cnn, "m.0.layer.0.w") == 0 && mark(cnn, "dec.0.w") == 0,
           "prefix m.0.layer, numeric order");
  pk_ctx_free(ctx);
}

/* "norms": true selects the params of ops flagged PK_OPF_NORM: layer_norm's gamma and beta
 * and rms_norm's gamma on a rank-3 stack, none of the linear layers; combined with blocks,
 * the last block's norm and its linear weight's half; the training graph builds. */
static void test_norms(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = pk_graph_new(ctx, N);
  int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 3, (int64_t[]){N, 3, 6});
  int h = x;
  for (int i = 0; i < 2; i++) {
    char nm[64], on[64];
    snprintf(nm, sizeof nm, "layer.%d.ln.weight", i);
    int gam = pk_graph_add_param(g, nm, PKRT_DTYPE_F32, 1, (int64_t[]){6}, NULL);
    snprintf(nm, sizeof nm, "layer.%d.ln.bias", i);
    int bet = pk_graph_add_param(g, nm, PKRT_DTYPE_F32, 1, (int64_t[]){6}, NULL);
    snprintf(nm, sizeof nm, "layer.%d.fc.weight", i);
    int w = pk_graph_add_param(g, nm, PKRT_DTYPE_F32, 2, (int64_t[]){6, 6}, NULL);
    snprintf(nm, sizeof nm, "layer.%d.ln", i);
    TG_OK(ctx, pk_graph_add_op(g, nm, PK_OP_LAYER_NORM, NULL, 3, (int[]){h, gam, bet}, nm, &h));
    snprintf(nm, sizeof nm, "layer.%d.fc", i);
    snprintf(on, sizeof on, "layer.%d.fc.out", i);
    TG_OK(ctx, pk_graph_add_op(g, nm, PK_OP_BATCH_MATMUL, &(pk_op_attrs){.trans_b = true}, 2,
                               (int[]){h, w}, on, &h));
  }
  int rg = pk_graph_add_param(g, "final.weight", PKRT_DTYPE_F32, 1, (int64_t[]){6}, NULL);
  TG_OK(ctx, pk_graph_add_op(g, "final", PK_OP_RMS_NORM, NULL, 2, (int[]){h, rg}, "final", &h));
  h = tg_unary(g, "pool", PK_OP_MEAN, &(pk_op_attrs){.naxes = 1, .axes = {1}}, h);
  g->output = tg_linear(g, "head", h, 6, 3);
  TG_OK(ctx, pk_graph_validate(g));
  const char *names[] = {"layer.0.ln.weight", "layer.0.ln.bias", "layer.0.fc.weight",
                         "layer.1.ln.weight", "layer.1.ln.bias", "layer.1.fc.weight",
                         "final.weight",      "head.weight",     "head.bias"};
  struct {
    const char *spec;
    int64_t want[9];
  } cases[] = {
      {V "[{\"norms\":true}]}", {1, 1, 0, 1, 1, 0, 1, 0, 0}},
      {V "[{\"norms\":true},{\"biases\":true}]}", {1, 1, 0, 1, 1, 0, 1, 0, 1}},
      {V "[{\"blocks\":{\"last\":1},\"channels\":0.5},{\"params\":\"head.*\"}]}",
       {0, 0, 0, 1, 1, 3, 0, 6, 1}},
  };
  pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_SGD, .lr = 0.1};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    TG_OK(ctx, tg_apply_text(g, cases[c].spec));
    for (int i = 0; i < 9; i++)
      TG_CHECK(mark(g, names[i]) == cases[c].want[i], "%s: %s marked %lld, want %lld",
               cases[c].spec, names[i], (long long)mark(g, names[i]),
               (long long)cases[c].want[i]);
    pk_graph *t;
    TG_OK(ctx, pk_train_build(g, &sp, &t));
  }
  pk_ctx_free(ctx);
}

/* Mutations of valid specs: each is parsed and applied; it must never crash, and an
 * accepted spec must leave sane marks. */
static void test_fuzz(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = tg_cnn(ctx, N);
  uint64_t seed = 0x9e3779b97f4a7c15u;
  const char alphabet[] = "{}[]\":,.*?0123456789 -+eEtruefalsnchapmbiyo_\\\x01\xff";
  int accepted = 0, rejected = 0;
  char buf[512];
  for (int it = 0; it < 3000; it++) {
    const char *base = tg_scheme_text[it % TG_NSCHEMES];
    size_t len = strlen(base);
    memcpy(buf, base, len + 1);
    int nmut = 1 + (int)((seed >> 60) & 3);
    for (int m = 0; m < nmut; m++) {
      seed = seed * 6364136223846793005u + 1442695040888963407u;
      size_t pos = (size_t)(seed >> 33) % (len + 1);
      char c = alphabet[(seed >> 20) % (sizeof alphabet - 1)];
      switch ((seed >> 12) % 4) {
      case 0: /* replace */
        if (pos < len) buf[pos] = c;
        break;
      case 1: /* insert */
        if (len + 1 < sizeof buf) {
          memmove(buf + pos + 1, buf + pos, len - pos + 1);
          buf[pos] = c;
          len++;
        }
        break;
      case 2: /* delete */
        if (pos < len) {
          memmove(buf + pos, buf + pos + 1, len - pos);
          len--;
        }
        break;
      case 3: /* truncate */
        len = pos;
        buf[len] = 0;
        break;
      }
    }
    pk_sparse_spec *sp;
    pk_status s = pk_sparse_parse(ctx, buf, len, "spec.json", &sp);
    if (s == PK_OK) s = pk_sparse_apply(g, sp);
    if (s != PK_OK) {
      TG_CHECK(*pk_ctx_error(ctx), "rejected without a message: %s", buf);
      pk_ctx_clear_error(ctx);
      rejected++;
      continue;
    }
    accepted++;
    for (int t = 0; t < g->ntensors; t++) {
      const pk_gtensor *p = g->tensors[t];
      if (p->role != PK_ROLE_PARAM || p->ndim < 2) continue;
      TG_CHECK(p->train_channels >= 1 && p->train_channels <= p->shape[1], "marks after %s", buf);
    }
  }
  printf("fuzz: %d accepted, %d rejected\n", accepted, rejected);
  TG_CHECK(accepted > 50 && rejected > 500, "fuzz mix");
  pk_ctx_free(ctx);
}

/* Structured fuzz: rules assembled from pieces, valid and not, so that many are accepted;
 * an accepted spec must always give a valid training graph. */
/* Random unions of rules over a graph: each accepted spec must build a training graph and
 * a memory plan; each refusal has a message. */
static void fuzz_rules(pk_graph *g, const char *const *sel, int nsel, const char *const *mod,
                       int nmod, const char *what, int min_accepted, int min_built) {
  pk_ctx *ctx = g->ctx;
  uint64_t seed = 12345;
  int accepted = 0, built = 0;
  pk_train_spec ts = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_SGD, .lr = 0.1};
  for (int it = 0; it < 400; it++) {
    pk_strbuf b;
    pk_strbuf_init(&b);
    pk_strbuf_append(&b, "{\"version\": 1, \"train\": [");
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    int nr = (int)(seed >> 61) % 4;
    for (int r = 0; r < nr; r++) {
      seed = seed * 6364136223846793005u + 1442695040888963407u;
      pk_strbuf_printf(&b, "%s{%s%s}", r ? ", " : "", sel[(seed >> 33) % (uint64_t)nsel],
                       mod[(seed >> 45) % (uint64_t)nmod]);
    }
    pk_strbuf_append(&b, "]}");
    char *text = pk_strbuf_finish(ctx, &b);
    if (tg_apply_text(g, text) != PK_OK) {
      TG_CHECK(*pk_ctx_error(ctx), "rejected without a message: %s", text);
      pk_ctx_clear_error(ctx);
      continue;
    }
    accepted++;
    if (it % 3) continue;
    pk_graph *t;
    pk_status s = pk_train_build(g, &ts, &t);
    TG_CHECK(s == PK_OK, "accepted spec %s does not build: %s", text, pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    if (s != PK_OK) continue;
    pk_memplan *mp;
    TG_CHECK(pk_memplan_build(t, NULL, &mp) == PK_OK, "memplan of %s", text);
    built++;
  }
  printf("structured fuzz (%s): %d accepted, %d built\n", what, accepted, built);
  TG_CHECK(accepted > min_accepted && built > min_built, "structured fuzz mix (%s)", what);
}

static void test_fuzz_structured(void) {
  pk_ctx *ctx = pk_ctx_new();
  static const char *const sel[] = {
      "\"params\": \"fc.*\"", "\"params\": \"conv3.weight\"", "\"params\": \"conv2.weight\"",
      "\"params\": [\"conv?.bias\", \"fc.weight\"]", "\"params\": \"*\"", "\"params\": \"zz*\"",
      "\"params\": \"conv1.weight\"", "\"biases\": true", "\"all\": true", "\"last_layers\": 1",
      "\"last_layers\": 3", "\"last_layers\": 9", "\"params\": \"fc.bias\""};
  static const char *const mod[] = {"", "", "", ", \"channels\": 0.25", ", \"channels\": 0.5",
                                    ", \"channels\": 1", ", \"channels\": 8",
                                    ", \"channel_count\": 3", ", \"channels\": 0.01",
                                    ", \"channels\": 64", ", \"channel_count\": 1"};
  fuzz_rules(tg_cnn(ctx, N), sel, 13, mod, 11, "cnn", 100, 30);
  /* graph I/O and transformer specs: blocks, norms, channels on rank-3 linear layers */
  static const char *const tsel[] = {
      "\"blocks\": {\"last\": 1}", "\"blocks\": {\"prefix\": \"layer\", \"last\": 2}",
      "\"blocks\": {\"last\": 4}", "\"blocks\": {\"prefix\": \"head\", \"last\": 1}",
      "\"params\": \"head.*\"", "\"params\": \"layer.1.fc.weight\"", "\"norms\": true",
      "\"biases\": true", "\"all\": true", "\"last_layers\": 2", "\"params\": \"layer.*.bias\""};
  static const char *const tmod[] = {"", "", ", \"channels\": 0.5", ", \"channels\": 0.25",
                                     ", \"channel_count\": 1", ", \"channels\": 5"};
  fuzz_rules(tg_blocks(ctx, N, "layer", 3, 2, 4, 3), tsel, 11, tmod, 6, "blocks", 100, 30);
  pk_ctx_free(ctx);
}

/* The demo's spec files (examples/digits/specs) parse and apply to the models built here. */
static void test_example_specs(void) {
  static const char *const files[] = {"cnn_head", "cnn_bias_head", "cnn_last2",
                                      "cnn_partial25_bias_head", "cnn_partial25_head_localbias",
                                      "cnn_full", "mlp_head", "mlp_bias_head", "mlp_last2",
                                      "mlp_partial25_bias_head", "mlp_partial25_head_localbias",
                                      "mlp_full"};
  pk_ctx *ctx = pk_ctx_new();
  int found = 0;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char *path = pk_sprintf(ctx, "%s/examples/digits/specs/%s.json", PK_SOURCE_DIR, files[i]);
    char *text;
    size_t len;
    if (pk_read_file(ctx, path, &text, &len) != PK_OK) {
      pk_ctx_clear_error(ctx);
      continue;
    }
    found++;
    pk_graph *g = files[i][0] == 'c' ? tg_cnn(ctx, N) : tg_mlp(ctx, N);
    pk_sparse_spec *sp;
    pk_status s = pk_sparse_parse(ctx, text, len, path, &sp);
    if (s == PK_OK) s = pk_sparse_apply(g, sp);
    TG_CHECK(s == PK_OK, "%s: %s", files[i], pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
  }
  printf("example specs: %d found\n", found);
  pk_ctx_free(ctx);
}

int main(void) {
  test_schemes();
  test_transformer_specs();
  test_norms();
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = tg_cnn(ctx, N);
  run_errors(ctx, g, parse_errors, (int)(sizeof parse_errors / sizeof parse_errors[0]));
  run_errors(ctx, g, apply_errors, (int)(sizeof apply_errors / sizeof apply_errors[0]));
  pk_ctx_free(ctx);
  test_layer_kind_errors();
  test_fuzz();
  test_fuzz_structured();
  test_example_specs();
  return tg_report("test_graph_sparse");
}
