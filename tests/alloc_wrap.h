/* alloc_wrap.h — counting the allocations libpockrt's own code makes: a test linked with
 * pk_count_allocs(TARGET) (tests/CMakeLists.txt: -Wl,--wrap=malloc,calloc,realloc) includes
 * this once; every call made while `counting` is non-zero adds one to `allocs`. Calls from
 * shared libraries (an OpenCL driver's, libffi's) are not wrapped and not counted. */
#ifndef PK_ALLOC_WRAP_H
#define PK_ALLOC_WRAP_H

#include <stddef.h>

static int counting;
static long allocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n) { allocs += counting; return __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { allocs += counting; return __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { allocs += counting; return __real_realloc(p, n); }

#endif
