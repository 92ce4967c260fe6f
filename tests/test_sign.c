/* test_sign.c — artifact signing end to end on a small real artifact (the fixture kernel
 * object, a hand-written manifest): key files, sign/verify round trips, the trust policy of
 * pkrt_model_open (unsigned, signed, wrong key, re-signed, tampered, truncated), malformed
 * keys, and that a refused artifact never reaches the loader (dlopen and memfd_create are
 * counted through --wrap, tests/sign.cmake). Prints PASS/FAIL per test. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pkrt.h"
#include "pock/pockrt.h"
#include "sign_impl.h"
#include "pk_test.h"

/* ---------------------------------------------------------------- loader counters
 * libpockrt is linked statically, so --wrap reroutes its own calls through these. */
static long n_dlopen, n_memfd;
void *__real_dlopen(const char *file, int mode);
int __real_memfd_create(const char *name, unsigned int flags);
void *__wrap_dlopen(const char *file, int mode) {
  n_dlopen++;
  return __real_dlopen(file, mode);
}
int __wrap_memfd_create(const char *name, unsigned int flags) {
  n_memfd++;
  return __real_memfd_create(name, flags);
}

/* ---------------------------------------------------------------- files */
static void write_text(const char *path, const char *s) { pk_test_write_file(path, s, strlen(s)); }

static int same_file(const char *a, const char *b) {
  size_t na, nb;
  unsigned char *x = pk_test_read_file(a, &na), *y = pk_test_read_file(b, &nb);
  int same = x && y && na == nb && memcmp(x, y, na) == 0;
  free(x);
  free(y);
  return same;
}

/* ---------------------------------------------------------------- the artifact
 * y = x + w over (2, 3) f32 through the fixture's "add" kernel: small, but a real model
 * that opens, loads its kernel object and runs. */
static const char manifest[] =
    "{\"format\": 1, \"target\": \"c\", \"mode\": \"inference\", \"dtype\": \"f32\",\n"
    " \"batch\": 2, \"classes\": 0,\n"
    " \"regions\": {\"arena\": 64, \"params\": 24, \"state\": 0, \"io\": 64, \"workspace\": 0},\n"
    " \"tensors\": [\n"
    "  {\"name\": \"x\", \"role\": \"input\", \"dtype\": \"f32\", \"shape\": [2, 3],\n"
    "   \"region\": \"io\", \"offset\": 0},\n"
    "  {\"name\": \"w\", \"role\": \"param\", \"dtype\": \"f32\", \"shape\": [2, 3],\n"
    "   \"region\": \"params\", \"offset\": 0},\n"
    "  {\"name\": \"y\", \"role\": \"activation\", \"dtype\": \"f32\", \"shape\": [2, 3],\n"
    "   \"region\": \"arena\", \"offset\": 0}],\n"
    " \"io\": {\"input\": 0, \"output\": 2},\n"
    " \"kernels\": [{\"name\": \"add\", \"nbufs\": 3, \"workspace\": 0}],\n"
    " \"plans\": {\"infer\": [{\"kernel\": 0, \"buffers\": [0, 1, 2], \"node\": \"add\"}]}}\n";
static const float w0[6] = {1, 2, 3, 4, 5, 6};
static unsigned char *g_so;
static size_t g_so_len;

/* Writes an unsigned artifact; kernels NULL means the fixture kernel object. */
static int write_artifact(const char *path, const char *man, const void *kernels, size_t klen) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_section s[3] = {{"manifest", man, strlen(man)},
                       {"kernels", kernels ? kernels : g_so, kernels ? klen : g_so_len},
                       {"weights", w0, sizeof w0}};
  pkrt_status st = pkrt_artifact_write(rt, path, s, 3);
  if (st != PKRT_OK) printf("write_artifact: %s\n", pkrt_ctx_error(rt));
  pkrt_ctx_free(rt);
  return st == PKRT_OK;
}

/* Opens with the given trusted key option (NULL: none); returns "" when it opened and ran
 * correctly, else the error. */
static const char *try_open(const char *path, const char *trusted) {
  static char err[1024];
  pkrt_open_options o = {.nthreads = 1, .trusted_key = trusted};
  pkrt_model *m;
  err[0] = 0;
  if (pkrt_model_open(path, &o, &m, err, sizeof err) != PKRT_OK) return err[0] ? err : "?";
  float *x = pkrt_model_input(m, NULL);
  for (int i = 0; i < 6; i++) x[i] = (float)(10 * i);
  if (pkrt_model_infer(m) != PKRT_OK) {
    snprintf(err, sizeof err, "infer: %s", pkrt_model_error(m));
  } else {
    const float *y = pkrt_model_output(m);
    for (int i = 0; i < 6; i++)
      if (y[i] != (float)(10 * i) + w0[i]) snprintf(err, sizeof err, "wrong output y[%d]", i);
  }
  pkrt_model_close(m);
  return err;
}

static int opens(const char *path, const char *trusted) { return !*try_open(path, trusted); }

static int sign(const char *path, const char *key, const char *out, pkrt_public_key *pub) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_status st = pkrt_artifact_sign(rt, path, key, out, pub);
  if (st != PKRT_OK) printf("sign: %s\n", pkrt_ctx_error(rt));
  pkrt_ctx_free(rt);
  return st == PKRT_OK;
}

static int keygen(const char *name, pkrt_public_key *pub) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_status st = pkrt_key_generate(rt, pk_test_path(name), pub);
  if (st != PKRT_OK) printf("keygen: %s\n", pkrt_ctx_error(rt));
  pkrt_ctx_free(rt);
  return st == PKRT_OK;
}

/* ---------------------------------------------------------------- container surgery */
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* The table entry of a section, or NULL. */
static unsigned char *entry_of(unsigned char *b, const char *name) {
  uint32_t n = b[12] | b[13] << 8;
  for (uint32_t i = 0; i < n; i++) {
    unsigned char *e = b + 16 + 64 * i;
    if (!strcmp((const char *)e, name)) return e;
  }
  return NULL;
}

/* What a careful attacker does after editing a payload: fix its table checksum. */
static void fix_checksum(unsigned char *b, const char *name) {
  unsigned char *e = entry_of(b, name);
  pkrt_sha256(b + get_u64(e + 16), get_u64(e + 24), e + 32);
}

/* ---------------------------------------------------------------- tests */
static pkrt_public_key ka, kb; /* key pairs "a" and "b" in dir */
static char ka_text[128];

static void test_keygen(void) {
  CHECK(keygen("a", &ka) && keygen("b", &kb), "keygen");
  struct stat st;
  CHECK(stat(pk_test_path("a.key"), &st) == 0 && (st.st_mode & 0777) == 0600, "a.key mode %o",
        st.st_mode & 0777);
  CHECK(strcmp(ka.id, kb.id) != 0 && strlen(ka.id) == 16, "ids %s %s", ka.id, kb.id);
  size_t n;
  unsigned char *pub = pk_test_read_file(pk_test_path("a.pub"), &n);
  CHECK(pub && !strncmp((char *)pub, "pock-ed25519-public ", 20) && pub[n - 1] == '\n',
        "a.pub: %s", pub);
  snprintf(ka_text, sizeof ka_text, "%s", (char *)pub);
  free(pub);
  unsigned char *sec = pk_test_read_file(pk_test_path("a.key"), &n);
  CHECK(sec && !strncmp((char *)sec, "pock-ed25519-secret ", 20), "a.key");
  free(sec);
  /* The key id is the first 8 bytes of SHA-256(public key), as hex; file and text agree. */
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_public_key f, t;
  CHECK(pkrt_public_key_load(rt, pk_test_path("a.pub"), &f) == PKRT_OK, "%s", pkrt_ctx_error(rt));
  CHECK(pkrt_public_key_load(rt, ka_text, &t) == PKRT_OK, "%s", pkrt_ctx_error(rt));
  char hex[65];
  pkrt_sha256_hex(f.key, sizeof f.key, hex);
  CHECK(!memcmp(f.key, ka.key, 32) && !memcmp(t.key, ka.key, 32) && !strncmp(hex, ka.id, 16) &&
        !strcmp(f.id, ka.id), "key id %s vs sha %s", ka.id, hex);
  /* Never replaces a key. */
  unsigned char *before = pk_test_read_file(pk_test_path("a.key"), &n);
  CHECK(pkrt_key_generate(rt, pk_test_path("a"), NULL) != PKRT_OK &&
        strstr(pkrt_ctx_error(rt), "not replacing"), "regenerate: %s", pkrt_ctx_error(rt));
  size_t n2;
  unsigned char *after = pk_test_read_file(pk_test_path("a.key"), &n2);
  CHECK(n == n2 && !memcmp(before, after, n), "a.key changed");
  free(before);
  free(after);
  write_text(pk_test_path("c.pub"), "x");
  CHECK(pkrt_key_generate(rt, pk_test_path("c"), NULL) != PKRT_OK &&
            access(pk_test_path("c.key"), F_OK) != 0,
        "existing .pub: refused without leaving a .key");
  CHECK(pkrt_key_generate(rt, "", NULL) != PKRT_OK, "empty name");
  pkrt_ctx_free(rt);
  PASS();
}

static void test_unsigned_default(void) {
  const char *p = pk_test_path("u.pock");
  CHECK(write_artifact(p, manifest, NULL, 0), "write");
  CHECK(opens(p, NULL), "unsigned, no key: %s", try_open(p, NULL));
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_artifact *a;
  CHECK(pkrt_artifact_read(rt, p, &a) == PKRT_OK, "%s", pkrt_ctx_error(rt));
  CHECK(pkrt_artifact_signer(a, NULL) == 0, "unsigned has a signer");
  pkrt_trusted_key none = {0};
  CHECK(pkrt_trust_check(rt, p, a, &none) == PKRT_OK, "no key: any artifact");
  pkrt_artifact_free(a);
  pkrt_ctx_free(rt);
  PASS();
}

static void test_sign_roundtrip(void) {
  const char *u = pk_test_path("u.pock"), *s = pk_test_path("s.pock");
  CHECK(write_artifact(u, manifest, NULL, 0), "write");
  pkrt_public_key who;
  CHECK(sign(u, pk_test_path("a.key"), s, &who) && !strcmp(who.id, ka.id), "sign -o");
  size_t nu, ns;
  unsigned char *bu = pk_test_read_file(u, &nu), *bs = pk_test_read_file(s, &ns);
  /* The sections do not move: the signed file is the unsigned one plus the trailer. */
  CHECK(ns == nu + RT_SIG_TRAILER_BYTES && !memcmp(bu, bs, nu), "layout: %zu -> %zu", nu, ns);
  CHECK(!memcmp(bs + nu, "POCKSIG\0\1\0\0\0\1\0\0\0", 16), "trailer head");
  CHECK(!memcmp(bs + nu + 24, ka.key, 32), "trailer key");
  free(bu);
  free(bs);
  /* Every way of naming the trusted key; and none. */
  CHECK(opens(s, NULL), "signed, no key: %s", try_open(s, NULL));
  CHECK(opens(s, pk_test_path("a.pub")), "option path: %s", try_open(s, pk_test_path("a.pub")));
  CHECK(opens(s, ka_text), "option text: %s", try_open(s, ka_text));
  setenv(PKRT_TRUSTED_KEY_ENV, pk_test_path("a.pub"), 1);
  const char *e = try_open(s, NULL);
  unsetenv(PKRT_TRUSTED_KEY_ENV);
  CHECK(!*e, "env path: %s", e);
  setenv(PKRT_TRUSTED_KEY_ENV, ka_text, 1);
  e = try_open(s, NULL);
  unsetenv(PKRT_TRUSTED_KEY_ENV);
  CHECK(!*e, "env text: %s", e);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_artifact *a;
  pkrt_public_key who2;
  CHECK(pkrt_artifact_read(rt, s, &a) == PKRT_OK, "%s", pkrt_ctx_error(rt));
  CHECK(pkrt_artifact_signer(a, &who2) == 1 && !strcmp(who2.id, ka.id), "signer");
  CHECK(pkrt_artifact_count(a) == 3 && pkrt_artifact_find(a, "kernels")->size == g_so_len,
        "sections of a signed file");
  pkrt_artifact_free(a);
  pkrt_ctx_free(rt);
  /* In place. */
  CHECK(sign(u, pk_test_path("a.key"), NULL, NULL) && same_file(u, s), "in place = -o");
  PASS();
}

static void test_refusals(void) {
  const char *u = pk_test_path("u.pock"), *s = pk_test_path("s.pock"), *r = pk_test_path("r.pock");
  CHECK(write_artifact(u, manifest, NULL, 0) && sign(u, pk_test_path("a.key"), s, NULL), "setup");
  const char *e = try_open(u, pk_test_path("a.pub"));
  CHECK(strstr(e, "u.pock: not signed; a trusted key is configured") && strstr(e, ka.id),
        "unsigned: %s", e);
  setenv(PKRT_TRUSTED_KEY_ENV, pk_test_path("a.pub"), 1);
  e = try_open(u, NULL);
  unsetenv(PKRT_TRUSTED_KEY_ENV);
  CHECK(strstr(e, "not signed") && strstr(e, "POCK_TRUSTED_KEY="), "unsigned, env: %s", e);
  e = try_open(s, pk_test_path("b.pub"));
  CHECK(strstr(e, "signed by key") && strstr(e, ka.id) && strstr(e, kb.id), "wrong key: %s", e);
  /* Re-signing with another key replaces the signature; the file keeps its size. */
  pkrt_public_key who;
  CHECK(sign(s, pk_test_path("b.key"), r, &who) && !strcmp(who.id, kb.id), "re-sign");
  size_t ns, nr;
  unsigned char *bs = pk_test_read_file(s, &ns), *br = pk_test_read_file(r, &nr);
  CHECK(ns == nr && !memcmp(bs, br, ns - RT_SIG_TRAILER_BYTES), "re-signed layout");
  free(bs);
  free(br);
  CHECK(opens(r, pk_test_path("b.pub")), "re-signed, b: %s", try_open(r, pk_test_path("b.pub")));
  e = try_open(r, pk_test_path("a.pub"));
  CHECK(strstr(e, kb.id) && strstr(e, "but the trusted key is"), "re-signed, a: %s", e);
  /* With no key configured, any signature that verifies is accepted. */
  CHECK(opens(r, NULL), "re-signed, no key: %s", try_open(r, NULL));
  PASS();
}

/* Each corruption of a signed file must be refused, with and without a trusted key. */
static void expect_refused(const char *what, const unsigned char *b, size_t n, const char *want) {
  const char *p = pk_test_path("t.pock");
  pk_test_write_file(p, b, n);
  const char *keys[2] = {NULL, NULL};
  keys[1] = pk_test_path("a.pub");
  for (int k = 0; k < 2; k++) {
    const char *e = try_open(p, keys[k]);
    if (!*e || !strstr(e, want)) {
      printf("FAIL test_tamper: %s (%s): '%s' (want '%s')\n", what, k ? "key" : "no key", e,
             want);
      failures++;
    }
  }
}

static void test_tamper(void) {
  const char *u = pk_test_path("u.pock"), *s = pk_test_path("s.pock");
  CHECK(write_artifact(u, manifest, NULL, 0) && sign(u, pk_test_path("a.key"), s, NULL), "setup");
  size_t n;
  unsigned char *orig = pk_test_read_file(s, &n), *b = malloc(n + 8);
  CHECK(orig && b, "read");
  int before = failures;
  size_t body = n - RT_SIG_TRAILER_BYTES;
  /* A flipped byte in each section: its checksum; with the checksum fixed: the signature. */
  static const char *const secs[] = {"manifest", "kernels", "weights"};
  for (int i = 0; i < 3; i++) {
    memcpy(b, orig, n);
    unsigned char *e = entry_of(b, secs[i]);
    uint64_t off = get_u64(e + 16), size = get_u64(e + 24);
    b[off + size / 2] ^= 0x01;
    char want[64];
    snprintf(want, sizeof want, "section '%s' checksum mismatch", secs[i]);
    expect_refused(secs[i], b, n, want);
    fix_checksum(b, secs[i]);
    expect_refused(secs[i], b, n, "signature invalid");
  }
  /* The header and the table (a name, an offset, a checksum), padding. */
  struct { size_t at; const char *want; } hdr[] = {
      {8, "format version 17"},     {12, "section count 19"},
      {16, "malformed name"},       {16 + 16, "aligned"},
      {16 + 64 + 40, "checksum mismatch"}, {16 + 3 * 64 + 4, "non-zero padding"}};
  for (size_t i = 0; i < sizeof hdr / sizeof *hdr; i++) {
    memcpy(b, orig, n);
    b[hdr[i].at] ^= 0x10;
    expect_refused("header/table", b, n, hdr[i].want);
  }
  /* Every field of the trailer. */
  struct { size_t at; const char *want; } tr[] = {
      {0, "unexpected bytes after the last section"}, {8, "trailer version"},
      {12, "signature algorithm"}, {16, "key id does not match"}, {24 + 5, "key id does not match"},
      {56, "signature invalid"}, {119, "signature invalid"}, {120, "reserved bytes"}};
  for (size_t i = 0; i < sizeof tr / sizeof *tr; i++) {
    memcpy(b, orig, n);
    b[body + tr[i].at] ^= 0x01;
    expect_refused("trailer", b, n, tr[i].want);
  }
  /* A public key swapped in whole, with its matching key id: the signature fails. */
  memcpy(b, orig, n);
  memcpy(b + body + 24, kb.key, 32);
  unsigned char h[32];
  pkrt_sha256(kb.key, 32, h);
  memcpy(b + body + 16, h, 8);
  expect_refused("swapped key", b, n, "signature invalid");
  /* Truncated: inside the trailer, inside the last section; extended. */
  expect_refused("cut 1", orig, n - 1, "truncated (signature trailer");
  expect_refused("cut 100", orig, n - 100, "truncated (signature trailer");
  expect_refused("cut 129", orig, n - 129, "truncated");
  memcpy(b, orig, n);
  memset(b + n, 0, 8);
  expect_refused("extended", b, n + 8, "8 unexpected bytes after the signature trailer");
  /* Cut exactly at the trailer: an unsigned file again — fine without a key, refused with. */
  pk_test_write_file(pk_test_path("t.pock"), orig, body);
  CHECK(opens(pk_test_path("t.pock"), NULL), "stripped, no key: %s",
        try_open(pk_test_path("t.pock"), NULL));
  CHECK(strstr(try_open(pk_test_path("t.pock"), pk_test_path("a.pub")), "not signed"),
        "stripped, key");
  free(orig);
  free(b);
  CHECK(failures == before, "see above");
  PASS();
}

/* A refused artifact never reaches dlopen or memfd_create, and its manifest is never
 * parsed: the garbage below would fail there with a different message. */
static void test_refused_before_load(void) {
  static const char junk[] = "\177ELF but not really an object";
  const char *ev = pk_test_path("evil.pock"), *es = pk_test_path("evil-signed.pock"),
             *em = pk_test_path("evil-man.pock");
  CHECK(write_artifact(ev, manifest, junk, sizeof junk), "write");
  /* The counters work: without a key a real kernel object reaches the loader (the junk one
   * is refused by the loader's ELF check before memfd_create). */
  const char *real = pk_test_path("real.pock");
  CHECK(write_artifact(real, manifest, g_so, g_so_len), "write");
  long d0 = n_dlopen, m0 = n_memfd;
  const char *e = try_open(real, NULL);
  CHECK(n_memfd > m0 && n_dlopen > d0, "no key: loader not reached (%s)", e);
  e = try_open(ev, NULL);
  CHECK(strstr(e, "not an ELF object") || strstr(e, "truncated"), "no key, junk object: %s", e);
  /* With a key: refused before loading, for every reason. */
  d0 = n_dlopen, m0 = n_memfd;
  e = try_open(ev, pk_test_path("a.pub"));
  CHECK(strstr(e, "not signed"), "unsigned: %s", e);
  CHECK(sign(ev, pk_test_path("b.key"), es, NULL), "sign with b");
  e = try_open(es, pk_test_path("a.pub"));
  CHECK(strstr(e, "signed by key"), "wrong key: %s", e);
  size_t n;
  unsigned char *b = pk_test_read_file(es, &n);
  unsigned char *k = b + get_u64(entry_of(b, "kernels") + 16);
  k[1] ^= 0x20; /* "ELF" -> "eLF", checksum fixed */
  fix_checksum(b, "kernels");
  pk_test_write_file(es, b, n);
  free(b);
  e = try_open(es, pk_test_path("b.pub"));
  CHECK(strstr(e, "signature invalid"), "tampered: %s", e);
  CHECK(n_dlopen == d0 && n_memfd == m0, "loader reached: %ld dlopen, %ld memfd",
        n_dlopen - d0, n_memfd - m0);
  /* A manifest that would not parse: with a key, the trust error comes first. */
  CHECK(write_artifact(em, "{not json", NULL, 0), "write");
  CHECK(strstr(try_open(em, NULL), "manifest"), "no key: %s", try_open(em, NULL));
  e = try_open(em, pk_test_path("a.pub"));
  CHECK(strstr(e, "not signed") && !strstr(e, "manifest"), "manifest parsed first: %s", e);
  /* A correctly signed model loads through the same counters. */
  const char *ok = pk_test_path("ok.pock");
  CHECK(write_artifact(ok, manifest, NULL, 0) && sign(ok, pk_test_path("a.key"), NULL, NULL), "ok");
  d0 = n_dlopen;
  CHECK(opens(ok, pk_test_path("a.pub")) && n_dlopen == d0 + 1, "signed model loads");
  PASS();
}

static void test_malformed_keys(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_public_key k;
  const char *b64 = strchr(ka_text, ' ') + 1;
  char good_comment[160], crlf[160], short_key[160], long_key[160], two[320];
  snprintf(good_comment, sizeof good_comment, "\n  pock-ed25519-public\t%.44s build box\n\n",
           b64);
  snprintf(crlf, sizeof crlf, "pock-ed25519-public %.44s\r\n", b64);
  CHECK(pkrt_public_key_load(rt, good_comment, &k) == PKRT_OK && !strcmp(k.id, ka.id),
        "comment: %s", pkrt_ctx_error(rt));
  CHECK(pkrt_public_key_load(rt, crlf, &k) == PKRT_OK && !strcmp(k.id, ka.id), "crlf: %s",
        pkrt_ctx_error(rt));
  snprintf(short_key, sizeof short_key, "pock-ed25519-public AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==");
  snprintf(long_key, sizeof long_key, "pock-ed25519-public %.43sAAAA=", b64);
  snprintf(two, sizeof two, "pock-ed25519-public %.44s\npock-ed25519-public %.44s\n", b64, b64);
  struct { const char *text, *want; } bad[] = {
      {"", "not a Pock public key"},
      {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG", "no key tag"},
      {"pock-ed25519-public", "no key tag"},
      {"pock-ed25519-public ", "bad base64"},
      {"pock-ed25519-public !!!!", "bad base64"},
      {short_key, "bad base64"},
      {long_key, "bad base64"},
      {two, "more than one line"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    write_text(pk_test_path("bad.pub"), bad[i].text);
    CHECK(pkrt_public_key_load(rt, pk_test_path("bad.pub"), &k) != PKRT_OK &&
          strstr(pkrt_ctx_error(rt), bad[i].want) && strstr(pkrt_ctx_error(rt), "bad.pub"),
          "case %zu: %s", i, pkrt_ctx_error(rt));
    /* A configured but broken key fails closed: open refuses every artifact. */
    const char *e = try_open(pk_test_path("u.pock"), pk_test_path("bad.pub"));
    CHECK(strstr(e, "trusted key") && strstr(e, bad[i].want), "open, case %zu: %s", i, e);
  }
  /* Secret for public and public for secret; neither echoes the secret. */
  size_t n;
  char *sec = (char *)pk_test_read_file(pk_test_path("a.key"), &n), secret[21];
  snprintf(secret, sizeof secret, "%s", sec + 20); /* 20 characters of its base64 */
  CHECK(pkrt_public_key_load(rt, pk_test_path("a.key"), &k) != PKRT_OK &&
        strstr(pkrt_ctx_error(rt), "is a secret key") &&
        !strstr(pkrt_ctx_error(rt), secret), "secret as public: %s", pkrt_ctx_error(rt));
  CHECK(pkrt_public_key_load(rt, sec, &k) != PKRT_OK && !strstr(pkrt_ctx_error(rt), secret),
        "secret text as public: %s", pkrt_ctx_error(rt));
  CHECK(pkrt_artifact_sign(rt, pk_test_path("u.pock"), pk_test_path("a.pub"),
                           pk_test_path("x.pock"), NULL) != PKRT_OK &&
        strstr(pkrt_ctx_error(rt), "is a public key"), "public as secret: %s",
        pkrt_ctx_error(rt));
  char badsec[160];
  snprintf(badsec, sizeof badsec, "pock-ed25519-secret %s\n", secret);
  write_text(pk_test_path("bad.key"), badsec);
  CHECK(pkrt_artifact_sign(rt, pk_test_path("u.pock"), pk_test_path("bad.key"),
                           pk_test_path("x.pock"), NULL) != PKRT_OK &&
        strstr(pkrt_ctx_error(rt), "not a Pock secret key") &&
        !strstr(pkrt_ctx_error(rt), secret), "bad secret: %s", pkrt_ctx_error(rt));
  free(sec);
  CHECK(pkrt_artifact_sign(rt, pk_test_path("u.pock"), pk_test_path("none.key"), NULL, NULL) !=
            PKRT_OK &&
        strstr(pkrt_ctx_error(rt), "none.key"), "missing key: %s", pkrt_ctx_error(rt));
  CHECK(access(pk_test_path("x.pock"), F_OK) != 0, "a failed sign wrote its output");
  const char *e = try_open(pk_test_path("u.pock"), pk_test_path("none.pub"));
  CHECK(strstr(e, "trusted key") && strstr(e, "none.pub"), "missing trusted key: %s", e);
  pkrt_ctx_free(rt);
  PASS();
}

/* Sources in order: option, environment, system file; a missing system file is "none". */
static void test_trust_sources(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_trusted_key t;
  const char *sys = pk_test_path("trusted.pub");
  CHECK(rt_trust_resolve(rt, NULL, NULL, sys, &t) == PKRT_OK && !t.configured, "none");
  CHECK(rt_trust_resolve(rt, "", "", sys, &t) == PKRT_OK && !t.configured, "empty = unset");
  write_text(sys, ka_text);
  CHECK(rt_trust_resolve(rt, NULL, NULL, sys, &t) == PKRT_OK && t.configured &&
        !strcmp(t.key.id, ka.id) && !strcmp(t.source, sys), "system file: %s", t.source);
  CHECK(rt_trust_resolve(rt, NULL, pk_test_path("b.pub"), sys, &t) == PKRT_OK &&
        !strcmp(t.key.id, kb.id) && strstr(t.source, "POCK_TRUSTED_KEY="), "env wins");
  CHECK(rt_trust_resolve(rt, ka_text, pk_test_path("b.pub"), sys, &t) == PKRT_OK &&
        !strcmp(t.key.id, ka.id), "option wins");
  write_text(sys, "garbage\n");
  CHECK(rt_trust_resolve(rt, NULL, NULL, sys, &t) != PKRT_OK &&
        strstr(pkrt_ctx_error(rt), "system file"), "broken system file: %s", pkrt_ctx_error(rt));
  unlink(sys);
  /* Configured but unreadable is never "no key" (issue 14, finding 8): a dangling link
   * (lstat sees it), a directory, and an environment path that does not exist. */
  CHECK(symlink(pk_test_path("gone.pub"), sys) == 0, "symlink");
  CHECK(rt_trust_resolve(rt, NULL, NULL, sys, &t) != PKRT_OK && !t.configured &&
        strstr(pkrt_ctx_error(rt), "system file"), "dangling system link: %s",
        pkrt_ctx_error(rt));
  unlink(sys);
  CHECK(mkdir(sys, 0700) == 0, "mkdir");
  CHECK(rt_trust_resolve(rt, NULL, NULL, sys, &t) != PKRT_OK &&
        strstr(pkrt_ctx_error(rt), "directory"), "system path a directory: %s",
        pkrt_ctx_error(rt));
  rmdir(sys);
  CHECK(rt_trust_resolve(rt, NULL, pk_test_path("gone.pub"), sys, &t) != PKRT_OK &&
        strstr(pkrt_ctx_error(rt), "POCK_TRUSTED_KEY"), "unreadable env key: %s",
        pkrt_ctx_error(rt));
  /* The real resolver reads POCK_TRUSTED_KEY. */
  setenv(PKRT_TRUSTED_KEY_ENV, pk_test_path("b.pub"), 1);
  pkrt_status st = pkrt_trust_resolve(rt, NULL, &t);
  unsetenv(PKRT_TRUSTED_KEY_ENV);
  CHECK(st == PKRT_OK && t.configured && !strcmp(t.key.id, kb.id), "getenv");
  pkrt_ctx_free(rt);
  PASS();
}

/* Signing refuses what does not verify and leaves it alone. */
static void test_sign_refuses(void) {
  const char *s = pk_test_path("s.pock"), *x = pk_test_path("x2.pock");
  CHECK(write_artifact(s, manifest, NULL, 0) && sign(s, pk_test_path("a.key"), NULL, NULL),
        "setup");
  size_t n;
  unsigned char *b = pk_test_read_file(s, &n);
  b[n - 9] ^= 1; /* the signature's last byte (8 reserved bytes follow it) */
  pk_test_write_file(x, b, n);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  CHECK(pkrt_artifact_sign(rt, x, pk_test_path("b.key"), NULL, NULL) != PKRT_OK &&
        strstr(pkrt_ctx_error(rt), "signature invalid"), "tampered: %s", pkrt_ctx_error(rt));
  size_t n2;
  unsigned char *b2 = pk_test_read_file(x, &n2);
  CHECK(n2 == n && !memcmp(b, b2, n), "tampered file changed");
  free(b2);
  b[n - 9] ^= 1;
  b[100] ^= 1; /* the table */
  pk_test_write_file(x, b, n);
  CHECK(pkrt_artifact_sign(rt, x, pk_test_path("b.key"), NULL, NULL) != PKRT_OK, "corrupt");
  write_text(x, "not an artifact");
  CHECK(pkrt_artifact_sign(rt, x, pk_test_path("b.key"), NULL, NULL) != PKRT_OK &&
        strstr(pkrt_ctx_error(rt), "bad magic"), "%s", pkrt_ctx_error(rt));
  free(b);
  pkrt_ctx_free(rt);
  PASS();
}

int main(void) {
  unsetenv(PKRT_TRUSTED_KEY_ENV);
  if (access(PKRT_TRUSTED_KEY_FILE, F_OK) == 0) {
    /* The machine trusts a key of its own: every "no key" case would be refused. */
    printf("SKIP test_sign: %s exists on this machine\n", PKRT_TRUSTED_KEY_FILE);
    return 77; /* ctest's SKIP_RETURN_CODE */
  }
  if (pk_test_tmpdir_make("pock-test-sign-") != 0) return 1;
  g_so = pk_test_read_file(PK_FIXTURE_SO, &g_so_len);
  if (!g_so || g_so_len == 0) {
    printf("FAIL: cannot read %s\n", PK_FIXTURE_SO);
    return 1;
  }
  test_keygen();
  test_unsigned_default();
  test_sign_roundtrip();
  test_refusals();
  test_tamper();
  test_refused_before_load();
  test_malformed_keys();
  test_trust_sources();
  test_sign_refuses();
  free(g_so);
  if (failures == 0) pk_test_tmpdir_remove();
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
