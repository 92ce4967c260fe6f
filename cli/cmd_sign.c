/* cmd_sign.c — `pock keygen`, `pock sign` and `pock verify`: Ed25519 signing keys and
 * artifact signatures, thin wrappers over libpockrt's signing functions (docs/signing.md). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pkrt.h"

static const char keygen_help[] =
    "usage: pock keygen -o NAME\n"
    "\n"
    "Makes an Ed25519 signing key pair: NAME.key (the secret key, mode 0600; keep it off the\n"
    "fleet) and NAME.pub (the public key devices trust). Existing files are never replaced.\n"
    "Prints the key id (the first 8 bytes of the public key's SHA-256, in hex).\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage.\n";

static const char sign_help[] =
    "usage: pock sign MODEL.pock --key NAME.key [-o OUT.pock]\n"
    "\n"
    "Signs an artifact (in place, atomically, or into OUT.pock): appends a signature over\n"
    "every byte of the file, replacing an earlier signature. The sections do not move.\n"
    "The artifact must verify first (a file changed after an earlier signing is refused).\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage.\n";

static const char verify_help[] =
    "usage: pock verify MODEL.pock [--trusted-key NAME.pub]\n"
    "\n"
    "Checks an artifact as a device would before loading it: the container, every checksum,\n"
    "the signature, and that the signer is the trusted key: --trusted-key (or --key; a .pub\n"
    "file or the key text), else $POCK_TRUSTED_KEY, else /etc/pock/trusted.pub. Without\n"
    "any, it checks the signature against the key the file names and says so. Unsigned\n"
    "artifacts fail.\n"
    "\n"
    "Exit status: 0 signed and verified, 1 unsigned or refused, 2 usage.\n";

/* Parses `[FILE] [--flag VALUE]...` for the flags named in `flags` (NULL-terminated);
 * vals[i] receives flag i's value. Returns -1 after --help, 0 when parsed, else the usage
 * exit code. */
static int parse(const char *cmd, const char *help, int argc, char **argv, const char **file,
                 const char *const *flags, const char **vals) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(help, stdout);
      return -1;
    }
    if (a[0] != '-' || !a[1]) {
      if (!file) return pk_cli_usage("%s: unexpected argument '%s'", cmd, a);
      if (*file) return pk_cli_usage("%s: one file expected, got '%s' and '%s'", cmd, *file, a);
      *file = a;
      continue;
    }
    int f = 0;
    while (flags[f] && strcmp(flags[f], a) != 0) f++;
    if (!flags[f]) return pk_cli_usage("%s: unknown option '%s'", cmd, a);
    if (i + 1 >= argc || !argv[i + 1][0]) return pk_cli_usage("%s: %s needs a value", cmd, a);
    vals[f] = argv[++i];
  }
  return 0;
}

static int rt_fail(pkrt_ctx *rt) {
  fprintf(stderr, "pock: error: %s\n", pkrt_ctx_error(rt));
  pkrt_ctx_free(rt);
  return PK_EXIT_ERROR;
}

int pk_cmd_keygen(int argc, char **argv) {
  static const char *const flags[] = {"-o", NULL};
  const char *vals[1] = {NULL};
  int rc = parse("keygen", keygen_help, argc, argv, NULL, flags, vals);
  if (rc) return rc < 0 ? PK_EXIT_OK : rc;
  if (!vals[0]) return pk_cli_usage("keygen: -o NAME is required (writes NAME.key, NAME.pub)");
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return PK_EXIT_ERROR;
  pkrt_public_key pub;
  if (pkrt_key_generate(rt, vals[0], &pub) != PKRT_OK) return rt_fail(rt);
  printf("wrote %s.key (secret) and %s.pub; key id %s\n", vals[0], vals[0], pub.id);
  pkrt_ctx_free(rt);
  return PK_EXIT_OK;
}

int pk_cmd_sign(int argc, char **argv) {
  static const char *const flags[] = {"--key", "-o", NULL};
  const char *vals[2] = {NULL, NULL}, *model = NULL;
  int rc = parse("sign", sign_help, argc, argv, &model, flags, vals);
  if (rc) return rc < 0 ? PK_EXIT_OK : rc;
  if (!model) return pk_cli_usage("sign: which artifact? (pock sign MODEL.pock --key NAME.key)");
  if (!vals[0]) return pk_cli_usage("sign: --key NAME.key is required");
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return PK_EXIT_ERROR;
  pkrt_public_key pub;
  if (pkrt_artifact_sign(rt, model, vals[0], vals[1], &pub) != PKRT_OK) return rt_fail(rt);
  printf("signed %s with key %s\n", vals[1] ? vals[1] : model, pub.id);
  pkrt_ctx_free(rt);
  return PK_EXIT_OK;
}

int pk_cmd_verify(int argc, char **argv) {
  static const char *const flags[] = {"--trusted-key", "--key", NULL};
  const char *vals[2] = {NULL, NULL}, *model = NULL;
  int rc = parse("verify", verify_help, argc, argv, &model, flags, vals);
  if (rc) return rc < 0 ? PK_EXIT_OK : rc;
  if (!vals[0]) vals[0] = vals[1];
  if (!model) return pk_cli_usage("verify: which artifact? (pock verify MODEL.pock)");
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return PK_EXIT_ERROR;
  pkrt_trusted_key tk;
  pkrt_artifact *a;
  if (pkrt_trust_resolve(rt, vals[0], &tk) != PKRT_OK) return rt_fail(rt);
  if (pkrt_artifact_read(rt, model, &a) != PKRT_OK) return rt_fail(rt);
  pkrt_status st = pkrt_trust_check(rt, model, a, &tk);
  pkrt_public_key signer;
  int is_signed = pkrt_artifact_signer(a, &signer);
  pkrt_artifact_free(a);
  if (st != PKRT_OK) return rt_fail(rt);
  if (!is_signed) {
    pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: not signed", model);
    return rt_fail(rt);
  }
  if (tk.configured)
    printf("%s: signed by key %s; trusted (%s)\n", model, signer.id, tk.source);
  else
    printf("%s: signed by key %s; signature verifies (no trusted key configured, so who "
           "signed it is not checked)\n", model, signer.id);
  pkrt_ctx_free(rt);
  return PK_EXIT_OK;
}
