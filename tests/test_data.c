/* test_data.c — libpockrt's dataset loaders: CSV (header, blank lines, CRLF, label column,
 * scale, f32/f64 storage) and X.npy:Y.npy (versions 1 and 2, f4/f8 features, u1/i4/i8
 * labels), every error they report (naming file and line), and fuzz loops over mutated
 * CSV and .npy files (no crash, every refusal has a message). Prints PASS/FAIL. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pock/pockrt.h"
#include "pk_test.h"

static const char *write_text(const char *name, const char *text) {
  const char *p = pk_test_path(name);
  pk_test_write_file(p, text, strlen(text));
  return p;
}

/* Loads; returns the dataset or NULL with the error in err. */
static pkrt_dataset *load(const char *path, const pkrt_data_options *o, char *err) {
  pkrt_dataset *d = NULL;
  if (pkrt_dataset_load(path, o, &d, err, 512) != 0) return NULL;
  return d;
}

static void test_csv_basic(void) {
  char err[512];
  const char *p = write_text("a.csv", "f1,f2,f3,label\r\n1,2,3,0\r\n\r\n  4 , 5,6 ,2\r\n7,8,9e-1,1");
  pkrt_data_options o = {.scale = 0.5, .label_column = -1};
  pkrt_dataset *d = load(p, &o, err);
  CHECK(d, "load: %s", err);
  CHECK(pkrt_dataset_rows(d) == 3 && pkrt_dataset_features(d) == 3 &&
            pkrt_dataset_dtype(d) == 1,
        "rows %lld features %lld", (long long)pkrt_dataset_rows(d),
        (long long)pkrt_dataset_features(d));
  const float *x = pkrt_dataset_x(d);
  const int32_t *l = pkrt_dataset_labels(d);
  CHECK(x[0] == 0.5f && x[3] == 2.0f && x[5] == 3.0f && x[8] == 0.45f, "scaled features %g %g",
        x[0], x[8]);
  CHECK(l[0] == 0 && l[1] == 2 && l[2] == 1, "labels %d %d %d", l[0], l[1], l[2]);
  pkrt_dataset_free(d);
  /* Label first, no header, f64 storage, label written "3.0". */
  p = write_text("b.csv", "3.0,0.25,0.5\n1,1,1\n");
  pkrt_data_options o2 = {.label_column = 0, .dtype = 2, .classes = 4, .features = 2};
  d = load(p, &o2, err);
  CHECK(d, "load: %s", err);
  const double *x2 = pkrt_dataset_x(d);
  CHECK(pkrt_dataset_rows(d) == 2 && pkrt_dataset_labels(d)[0] == 3 && x2[0] == 0.25 &&
            x2[1] == 0.5 && pkrt_dataset_dtype(d) == 2,
        "label-first layout");
  pkrt_dataset_free(d);
  /* Label in the middle via a negative index. */
  p = write_text("c.csv", "1,7,2\n");
  pkrt_data_options o3 = {.label_column = -2};
  d = load(p, &o3, err);
  CHECK(d && pkrt_dataset_labels(d)[0] == 7 && ((const float *)pkrt_dataset_x(d))[1] == 2,
        "middle label: %s", err);
  pkrt_dataset_free(d);
  printf("PASS %s\n", __func__);
}

static void expect_error(const char *label, const char *path, const pkrt_data_options *o,
                         const char *want) {
  char err[512] = "";
  pkrt_dataset *d = load(path, o, err);
  if (d || !strstr(err, want)) {
    printf("FAIL test_errors %s: got '%s', want '%s'\n", label, d ? "(loaded)" : err, want);
    failures++;
  }
  pkrt_dataset_free(d);
}

static void test_csv_errors(void) {
  int f0 = failures;
  pkrt_data_options o = {.label_column = -1, .classes = 3, .features = 2};
  expect_error("columns", write_text("e1.csv", "1,2,0\n1,2\n"), &o,
               "e1.csv:2: wrong column count (2, the first line has 3)");
  expect_error("columns after header", write_text("e2.csv", "a,b,c\n1,2,0\n\n1,2,0,4\n"), &o,
               "e2.csv:4: wrong column count");
  expect_error("label not integer", write_text("e3.csv", "1,2,0\n1,2,1.5\n"), &o,
               "e3.csv:2: label 1.5 is not an integer");
  expect_error("label range", write_text("e4.csv", "1,2,0\n1,2,3\n"), &o,
               "e4.csv:2: label 3 is out of range for a model with 3 classes");
  expect_error("negative label", write_text("e5.csv", "1,2,-1\n"), &o, "label -1 is out of range");
  expect_error("features", write_text("e6.csv", "1,2,3,0\n"), &o,
               "3 features per row, but the model's input takes 2");
  expect_error("not a number", write_text("e7.csv", "1,2,0\n1,x,0\n"), &o,
               "e7.csv:2: column 2 is not a finite number");
  expect_error("nan", write_text("e8.csv", "1,2,0\n1,nan,0\n"), &o, "column 2 is not a finite number");
  expect_error("empty field", write_text("e9.csv", "1,2,0\n1,,0\n"), &o, "column 2 is not a finite");
  expect_error("empty", write_text("e10.csv", ""), &o, "no data rows");
  expect_error("header only", write_text("e11.csv", "a,b,label\n"), &o, "no data rows");
  expect_error("one column", write_text("e12.csv", "1\n2\n"), &o, "a label and at least one feature");
  pkrt_data_options bad_col = {.label_column = 5};
  expect_error("label column", write_text("e13.csv", "1,2,0\n"), &bad_col,
               "label column 5 is out of range (the file has 3 columns)");
  expect_error("binary", pk_test_path("e14.csv"), &o, "e14.csv");
  pk_test_write_file(pk_test_path("e15.csv"), "1,2\0,0\n", 7);
  expect_error("nul", pk_test_path("e15.csv"), &o, "not a text file");
  /* Finding 9: values an f32 model cannot hold were stored as inf and trained to NaN. */
  pkrt_data_options o32 = {.label_column = -1};
  expect_error("f32 overflow", write_text("e16.csv", "1,2,0\n3,1e39,1\n"), &o32,
               "e16.csv:2: column 2: 1e+39 does not fit the model's f32");
  pkrt_data_options big_scale = {.label_column = -1, .scale = 1e39};
  expect_error("scale overflow", write_text("e17.csv", "0,1,0\n"), &big_scale,
               "e17.csv:1: column 2: 1 (scaled) does not fit the model's f32");
  pkrt_data_options o64 = {.label_column = -1, .dtype = 2};
  pkrt_dataset *d64 = load(write_text("e18.csv", "1,1e39,0\n"), &o64, (char[512]){0});
  CHECK(d64 && ((const double *)pkrt_dataset_x(d64))[1] == 1e39, "f64 holds 1e39");
  pkrt_dataset_free(d64);
  expect_error("npy without labels", write_text("x.npy", "junk"), &o, "give the features and the labels as X.npy:Y.npy");
  if (failures == f0) printf("PASS %s\n", __func__);
}

/* An .npy file: version 1 or 2 header padded to 64 bytes, then data. */
static size_t make_npy(unsigned char *buf, int version, const char *descr, const char *shape,
                       const void *data, size_t nbytes, int fortran) {
  char hdr[256];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
                   descr, fortran ? "True" : "False", shape);
  size_t pre = version == 1 ? 10 : 12;
  size_t total = (pre + (size_t)n + 1 + 63) / 64 * 64;
  memset(hdr + n, ' ', total - pre - (size_t)n - 1);
  hdr[total - pre - 1] = '\n';
  size_t hl = total - pre;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)version;
  buf[7] = 0;
  if (version == 1) {
    buf[8] = (unsigned char)hl;
    buf[9] = (unsigned char)(hl >> 8);
  } else {
    for (int i = 0; i < 4; i++) buf[8 + i] = (unsigned char)(hl >> (8 * i));
  }
  memcpy(buf + pre, hdr, hl);
  memcpy(buf + total, data, nbytes);
  return total + nbytes;
}

static const char *npy_file(const char *name, int version, const char *descr, const char *shape,
                            const void *data, size_t nbytes, int fortran) {
  unsigned char buf[4096];
  size_t n = make_npy(buf, version, descr, shape, data, nbytes, fortran);
  const char *p = pk_test_path(name);
  pk_test_write_file(p, buf, n);
  return p;
}

static char *pair(const char *x, const char *y) {
  static char buf[1024];
  snprintf(buf, sizeof buf, "%s:%s", x, y);
  return buf;
}

static void test_npy(void) {
  char err[512];
  float xf[12];
  double xd[12];
  for (int i = 0; i < 12; i++) xf[i] = (float)(xd[i] = i * 0.5);
  uint8_t yu[3] = {0, 2, 1};
  int32_t yi[3] = {1, 1, 0};
  int64_t yl[3] = {2, 0, 1};
  /* (3, 2, 2) features: 4 per row; labels u1 (3,) */
  const char *x = npy_file("x1.npy", 1, "<f4", "(3, 2, 2)", xf, sizeof xf, 0);
  const char *y = npy_file("y1.npy", 1, "|u1", "(3,)", yu, sizeof yu, 0);
  pkrt_data_options o = {.scale = 2, .classes = 3, .features = 4};
  pkrt_dataset *d = load(pair(x, y), &o, err);
  CHECK(d, "f4/u1: %s", err);
  CHECK(pkrt_dataset_rows(d) == 3 && pkrt_dataset_features(d) == 4 &&
            ((const float *)pkrt_dataset_x(d))[5] == 5.0f && pkrt_dataset_labels(d)[1] == 2,
        "f4/u1 values");
  pkrt_dataset_free(d);
  /* v2 headers, f8 features stored as f64, i8 labels (3, 1). */
  x = npy_file("x2.npy", 2, "<f8", "(3, 4)", xd, sizeof xd, 0);
  y = npy_file("y2.npy", 2, "<i8", "(3, 1)", yl, sizeof yl, 0);
  pkrt_data_options o2 = {.dtype = 2};
  d = load(pair(x, y), &o2, err);
  CHECK(d, "f8/i8: %s", err);
  CHECK(((const double *)pkrt_dataset_x(d))[11] == 5.5 && pkrt_dataset_labels(d)[0] == 2,
        "f8/i8 values");
  pkrt_dataset_free(d);
  y = npy_file("y3.npy", 1, "<i4", "(3,)", yi, sizeof yi, 0);
  d = load(pair(x, y), &o2, err);
  CHECK(d && pkrt_dataset_labels(d)[0] == 1, "i4 labels: %s", err);
  pkrt_dataset_free(d);
  /* Errors. */
  int f0 = failures;
  pkrt_data_options oc = {.classes = 2};
  expect_error("label range", pair(x, npy_file("y4.npy", 1, "<i8", "(3,)", yl, sizeof yl, 0)),
               &oc, "y4.npy: row 1: label 2 is out of range for a model with 2 classes");
  int32_t neg[3] = {0, -4, 0};
  expect_error("negative", pair(x, npy_file("y5.npy", 1, "<i4", "(3,)", neg, sizeof neg, 0)),
               &o2, "row 2: label -4 is not a class id");
  expect_error("rows", pair(x, npy_file("y6.npy", 1, "<i4", "(2,)", yi, 8, 0)), &o2,
               "has 3 rows but");
  expect_error("fortran", pair(npy_file("x7.npy", 1, "<f8", "(3, 4)", xd, sizeof xd, 1), y),
               &o2, "Fortran-order arrays are not supported");
  expect_error("f2", pair(npy_file("x8.npy", 1, "<f2", "(3, 4)", xd, 24, 0), y), &o2,
               "unsupported dtype '<f2'");
  expect_error("big endian", pair(npy_file("x9.npy", 1, ">f4", "(3, 4)", xf, sizeof xf, 0), y),
               &o2, "big-endian arrays ('>f4') are not supported");
  expect_error("int features", pair(npy_file("x10.npy", 1, "<i4", "(3,)", yi, sizeof yi, 0), y),
               &o2, "features must be float32 or float64");
  expect_error("float labels", pair(x, npy_file("y11.npy", 1, "<f8", "(3,)", xd, 24, 0)), &o2,
               "labels must be integers");
  expect_error("truncated", pair(npy_file("x12.npy", 1, "<f8", "(3, 4)", xd, 90, 0), y), &o2,
               "truncated (the data needs 96 bytes, 90 are there)");
  expect_error("extra", pair(npy_file("x13.npy", 1, "<f8", "(3, 3)", xd, sizeof xd, 0), y), &o2,
               "24 unexpected bytes after the data");
  expect_error("label shape", pair(x, npy_file("y14.npy", 1, "<i4", "(1, 3)", yi, sizeof yi, 0)),
               &o2, "labels need shape (rows,) or (rows, 1)");
  pkrt_data_options of = {.features = 5};
  expect_error("features", pair(x, y), &of, "4 features per row, but the model's input takes 5");
  expect_error("magic", pair(write_text("x15.npy", "NUMPY not really"), y), &o2,
               "x15.npy: not a .npy file (bad magic)");
  expect_error("missing", pair(pk_test_path("nope.npy"), y), &o2, "nope.npy");
  double inf[12] = {0, INFINITY};
  expect_error("inf", pair(npy_file("x16.npy", 1, "<f8", "(3, 4)", inf, sizeof inf, 0), y), &o2,
               "row 1, feature 2 is not finite");
  double huge[12] = {0, 0, 0, 0, 0, 1e300};
  pkrt_data_options of32 = {.dtype = 1};
  expect_error("f8 into f32", pair(npy_file("x19.npy", 1, "<f8", "(3, 4)", huge, sizeof huge, 0), y),
               &of32, "x19.npy: row 2, feature 2: 1e+300 does not fit the model's f32");
  unsigned char v9[64] = "\x93NUMPY\x09\x00\x10\x00";
  pk_test_write_file(pk_test_path("x17.npy"), v9, 64);
  expect_error("version", pair(pk_test_path("x17.npy"), y), &o2,
               ".npy format version 9 is not supported");
  unsigned char hb[256];
  size_t n = make_npy(hb, 1, "<f8", "(3, 4)", xd, 0, 0);
  hb[20] = '#'; /* inside "'descr'" */
  pk_test_write_file(pk_test_path("x18.npy"), hb, n);
  expect_error("header", pair(pk_test_path("x18.npy"), y), &o2, "bad .npy header");
  if (failures == f0) printf("PASS %s\n", __func__);
}

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void mutate(unsigned char *b, size_t *len, size_t cap, uint64_t *s, const char *alphabet) {
  int k = 1 + (int)(rng(s) % 4);
  for (int j = 0; j < k && *len > 0; j++) {
    size_t at = rng(s) % *len;
    switch (rng(s) % 5) {
    case 0: b[at] ^= (unsigned char)(1u << (rng(s) % 8)); break;
    case 1: b[at] = (unsigned char)alphabet[rng(s) % strlen(alphabet)]; break;
    case 2: *len = at; break;
    case 3:
      if (*len < cap) {
        memmove(b + at + 1, b + at, *len - at);
        b[at] = (unsigned char)alphabet[rng(s) % strlen(alphabet)];
        (*len)++;
      }
      break;
    default: memmove(b + at, b + at + 1, *len - at - 1), (*len)--; break;
    }
  }
}

static void test_fuzz(void) {
  uint64_t s = 0x853c49e6748fea9bull;
  const char *csv = "a,b,c,label\n0.5,1,2,0\n3,4,5,1\n\n6,7,8e1,2\r\n-1,-2,-3,0\n";
  unsigned char b[8192];
  int ok = 0, bad = 0;
  pkrt_data_options o = {.label_column = -1, .classes = 3};
  for (int it = 0; it < 1500; it++) {
    size_t len = strlen(csv);
    memcpy(b, csv, len);
    mutate(b, &len, sizeof b, &s, "0123456789,.-+eE \n\r\tnax");
    pk_test_write_file(pk_test_path("fz.csv"), b, len);
    char err[512] = "";
    pkrt_dataset *d = load(pk_test_path("fz.csv"), &o, err);
    if (d) {
      ok++;
      for (int64_t r = 0; r < pkrt_dataset_rows(d); r++)
        if (pkrt_dataset_labels(d)[r] < 0 || pkrt_dataset_labels(d)[r] >= 3) {
          printf("FAIL test_fuzz: csv label %d accepted\n", pkrt_dataset_labels(d)[r]);
          failures++;
          pkrt_dataset_free(d);
          return;
        }
      pkrt_dataset_free(d);
    } else if (!*err) {
      printf("FAIL test_fuzz: csv refused without a message\n");
      failures++;
      return;
    } else {
      bad++;
    }
  }
  /* .npy pairs: mutate either file. */
  double xd[12];
  for (int i = 0; i < 12; i++) xd[i] = i;
  int64_t yl[3] = {2, 0, 1};
  unsigned char xb[4096], yb[4096];
  size_t xn = make_npy(xb, 1, "<f8", "(3, 4)", xd, sizeof xd, 0);
  size_t yn = make_npy(yb, 2, "<i8", "(3,)", yl, sizeof yl, 0);
  for (int it = 0; it < 1500; it++) {
    unsigned char mx[4200], my[4200];
    size_t lx = xn, ly = yn;
    memcpy(mx, xb, xn);
    memcpy(my, yb, yn);
    if (it % 2) mutate(mx, &lx, sizeof mx, &s, "0123456789(),:' {}TFalseTruedescr<|fi48\x93");
    else mutate(my, &ly, sizeof my, &s, "0123456789(),:' {}TFalseTruedescr<|fi48\x93");
    pk_test_write_file(pk_test_path("fx.npy"), mx, lx);
    pk_test_write_file(pk_test_path("fy.npy"), my, ly);
    char err[512] = "";
    pkrt_dataset *d = load(pair(pk_test_path("fx.npy"), pk_test_path("fy.npy")), &o, err);
    if (d) ok++;
    else if (!*err) {
      printf("FAIL test_fuzz: npy refused without a message\n");
      failures++;
      return;
    } else {
      bad++;
    }
    pkrt_dataset_free(d);
  }
  printf("PASS %s (%d accepted, %d refused)\n", __func__, ok, bad);
}

/* Labels per token, (rows, T), and the model's ignore_index allowed besides class ids. */
static void test_label_width_ignore(void) {
  char err[512];
  double xd[6] = {0, 1, 2, 3, 4, 5};
  int32_t yt[12] = {0, 1, 2, -100, 2, 2, 1, 0, -100, -100, 1, 2};
  const char *x = npy_file("xt.npy", 1, "<f8", "(3, 2)", xd, sizeof xd, 0);
  const char *y = npy_file("yt.npy", 1, "<i4", "(3, 4)", yt, sizeof yt, 0);
  pkrt_data_options o = {.dtype = 2, .classes = 3, .label_width = 4, .has_ignore_index = 1,
                         .ignore_index = -100};
  pkrt_dataset *d = load(pair(x, y), &o, err);
  CHECK(d && pkrt_dataset_rows(d) == 3 && pkrt_dataset_label_width(d) == 4 &&
            pkrt_dataset_labels(d)[3] == -100 && pkrt_dataset_labels(d)[11] == 2,
        "(rows, T) labels with ignore_index: %s", err);
  pkrt_dataset_free(d);
  int f0 = failures;
  pkrt_data_options no_ignore = o;
  no_ignore.has_ignore_index = 0;
  expect_error("ignored label without ignore_index", pair(x, y), &no_ignore,
               "yt.npy: row 1: label -100 is out of range for a model with 3 classes");
  pkrt_data_options width3 = o;
  width3.label_width = 3;
  expect_error("label width", pair(x, y), &width3,
               "yt.npy: labels need shape (rows, 3): the model takes a label per token");
  expect_error("csv per token", write_text("tok.csv", "1,0.5\n0,0.25\n"), &o,
               "give X.npy:Y.npy with Y of shape (rows, 4)");
  /* one label per row: ignore_index allowed in CSV too */
  pkrt_data_options one = {.dtype = 2, .classes = 3, .has_ignore_index = 1, .ignore_index = -1};
  d = load(write_text("ign.csv", "-1,0.5\n2,0.25\n"), &one, err);
  CHECK(d && pkrt_dataset_labels(d)[0] == -1 && pkrt_dataset_labels(d)[1] == 2,
        "csv ignore_index: %s", err);
  pkrt_dataset_free(d);
  if (failures == f0) printf("PASS %s\n", __func__);
}

int main(void) {
  if (pk_test_tmpdir_make("pk_test_data.") != 0) return 1;
  test_csv_basic();
  test_csv_errors();
  test_npy();
  test_label_width_ignore();
  test_fuzz();
  pk_test_tmpdir_remove();
  printf(failures ? "FAIL test_data (%d)\n" : "PASS test_data\n", failures);
  return failures != 0;
}
