/* module_loader.c — loads kernel objects (from a file, or from bytes through a sealed
 * memfd) and checks their descriptor table against the ABI in pock/pkrt_kernel.h. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pkrt.h"

struct pkrt_module {
  void *handle;
  const pkrt_module_desc *desc;
  /* A memfd stays open while its module is loaded: glibc matches dlopen names against
   * loaded objects, so a reused descriptor number would hand back the old module. */
  int memfd;
};

/* Checks the descriptor table so that nothing past this point needs to distrust it. */
static pkrt_status check_desc(pkrt_ctx *rt, const char *what, const pkrt_module_desc *d) {
  if (d->abi_version != PKRT_ABI_VERSION)
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD,
                         "%s: kernel ABI version %u, this runtime speaks version %u "
                         "(rebuild the kernels with this Pock)",
                         what, d->abi_version, PKRT_ABI_VERSION);
  if (d->nkernels < 0 || (d->nkernels > 0 && !d->kernels))
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "%s: malformed descriptor table (%d kernels)",
                         what, (int)d->nkernels);
  for (int32_t i = 0; i < d->nkernels; i++) {
    const pkrt_kernel_desc *k = &d->kernels[i];
    if (!k->name || !k->fn || k->nbufs < 0 || k->nscalars < 0 || k->workspace_bytes < 0)
      return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "%s: kernel %d has a malformed descriptor",
                           what, (int)i);
  }
  return PKRT_OK;
}

/* dlopens `path` and takes ownership of memfd (-1 for none) whether or not it succeeds.
 * `what` names the object in messages. */
static pkrt_status open_object(pkrt_ctx *rt, const char *path, const char *what, int memfd,
                               pkrt_module **out) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    if (memfd >= 0) close(memfd);
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "cannot load kernel object %s: %s", what,
                         why ? why : "unknown dlopen error");
  }
  dlerror(); /* clear, so a stale message cannot be reported below */
  const pkrt_module_desc *d = dlsym(h, PKRT_MODULE_SYMBOL);
  pkrt_status st = PKRT_OK;
  if (!d) {
    const char *why = dlerror();
    st = pkrt_ctx_fail(rt, PKRT_ERR_LOAD,
                       "%s is not a Pock kernel object: no '%s' symbol (%s)", what,
                       PKRT_MODULE_SYMBOL, why ? why : "symbol is NULL");
  } else {
    st = check_desc(rt, what, d);
  }
  pkrt_module *m = st == PKRT_OK ? calloc(1, sizeof *m) : NULL;
  if (st == PKRT_OK && !m)
    st = pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "out of memory loading %s", what);
  if (st != PKRT_OK) {
    dlclose(h);
    if (memfd >= 0) close(memfd);
    return st;
  }
  m->handle = h;
  m->desc = d;
  m->memfd = memfd;
  *out = m;
  return PKRT_OK;
}

pkrt_status pkrt_module_load_file(pkrt_ctx *rt, const char *path, pkrt_module **out) {
  if (!out) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_module_load_file: out is NULL");
  *out = NULL;
  if (!path || !*path)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_module_load_file: empty path");
  /* dlopen searches the library path for a bare name; a kernel object is always a file. */
  char buf[4096];
  if (!strchr(path, '/')) {
    if (snprintf(buf, sizeof buf, "./%s", path) >= (int)sizeof buf)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "kernel object path too long: %s", path);
    return open_object(rt, buf, path, -1, out);
  }
  return open_object(rt, path, path, -1, out);
}

/* The loader maps what the program headers name; a part past the end of the bytes would
 * fault (SIGBUS) when touched inside dlopen. So a kernel object from an artifact is
 * checked first: a native ELF shared object whose header tables and segments all lie
 * within `len`. (Whether its code is trustworthy is the signature's business.) */
static pkrt_status check_elf(pkrt_ctx *rt, const unsigned char *b, size_t len, const char *what) {
  ElfW(Ehdr) eh; /* copied: the bytes need not be aligned */
  if (len < sizeof eh || memcmp(b, ELFMAG, SELFMAG) != 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "%s is not an ELF object", what);
  memcpy(&eh, b, sizeof eh);
  if (b[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) || eh.e_type != ET_DYN)
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "%s is not a shared object of this word size",
                         what);
  if (eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phoff > len ||
      eh.e_phnum > (len - eh.e_phoff) / sizeof(ElfW(Phdr)))
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD,
                         "%s is truncated: its program headers end past its %zu bytes", what,
                         len);
  if (eh.e_shoff != 0 && (eh.e_shentsize == 0 || eh.e_shoff > len ||
                          eh.e_shnum > (len - eh.e_shoff) / eh.e_shentsize))
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD,
                         "%s is truncated: its section headers end past its %zu bytes", what,
                         len);
  for (int i = 0; i < eh.e_phnum; i++) {
    ElfW(Phdr) ph;
    memcpy(&ph, b + eh.e_phoff + (size_t)i * sizeof ph, sizeof ph);
    if (ph.p_type != PT_NULL && (ph.p_offset > len || ph.p_filesz > len - ph.p_offset))
      return pkrt_ctx_fail(rt, PKRT_ERR_LOAD,
                           "%s is truncated: segment %d ends at byte %llu, past its %zu bytes",
                           what, i, (unsigned long long)ph.p_offset +
                           (unsigned long long)ph.p_filesz, len);
  }
  return PKRT_OK;
}

static int write_all(int fd, const unsigned char *p, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

pkrt_status pkrt_module_load_memory(pkrt_ctx *rt, const void *bytes, size_t len,
                                    pkrt_module **out) {
  if (!out) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_module_load_memory: out is NULL");
  *out = NULL;
  if (!bytes || len == 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_module_load_memory: no bytes given");
  char what[64];
  snprintf(what, sizeof what, "<memory, %zu bytes>", len);
  pkrt_status cst = check_elf(rt, bytes, len, what);
  if (cst != PKRT_OK) return cst;
#ifdef MFD_ALLOW_SEALING
  int fd = memfd_create("pock-kernels", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD,
                         "cannot load kernel object from memory: memfd_create: %s "
                         "(kernel too old? load it from a file instead)",
                         strerror(errno));
  if (write_all(fd, bytes, len) != 0) {
    int e = errno;
    close(fd);
    return pkrt_ctx_fail(rt, PKRT_ERR_IO, "cannot load kernel object from memory: write: %s",
                         strerror(e));
  }
  /* Sealed before dlopen: the bytes the caller verified are exactly the bytes mapped. */
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    int e = errno;
    close(fd);
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "cannot load kernel object from memory: seal: %s",
                         strerror(e));
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  return open_object(rt, path, what, fd, out);
#else
  (void)bytes;
  (void)len;
  return pkrt_ctx_fail(rt, PKRT_ERR_LOAD,
                       "cannot load kernel object from memory: this build has no "
                       "memfd_create (load it from a file instead)");
#endif
}

const pkrt_module_desc *pkrt_module_desc_of(const pkrt_module *m) {
  return m ? m->desc : NULL;
}

const pkrt_kernel_desc *pkrt_module_find(const pkrt_module *m, const char *name) {
  if (!m || !name) return NULL;
  for (int32_t i = 0; i < m->desc->nkernels; i++)
    if (strcmp(m->desc->kernels[i].name, name) == 0) return &m->desc->kernels[i];
  return NULL;
}

void pkrt_module_free(pkrt_module *m) {
  if (!m) return;
  dlclose(m->handle);
  if (m->memfd >= 0) close(m->memfd);
  free(m);
}
