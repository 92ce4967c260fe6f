/* arena.c — bump allocation in a list of blocks, all freed at once. Used for everything
 * whose lifetime is a compilation or a loaded model, so nothing is freed piecemeal. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkrt.h"

#define ARENA_DEFAULT_BLOCK (64u * 1024u)
#define ARENA_MIN_ALIGN 16u

/* Under AddressSanitizer (POCK_SANITIZE=ON) a block is poisoned when made and each
 * allocation unpoisoned alone, with ARENA_REDZONE poisoned bytes after it: an overrun of
 * one arena object into the next is then reported like a heap overrun, which plain bump
 * allocation would hide. Elsewhere the macros are no-ops and the redzone is 0. */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif
#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define ARENA_REDZONE 32u
#define ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define ARENA_REDZONE 0u
#define ARENA_POISON(p, n) ((void)(p), (void)(n))
#define ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

typedef struct arena_block {
  struct arena_block *next;
  size_t size; /* usable bytes in data[] */
  size_t used;
  _Alignas(max_align_t) unsigned char data[];
} arena_block;

struct pkrt_arena {
  arena_block *head;  /* current block: allocations bump here */
  size_t block_bytes; /* size of an ordinary block */
  size_t used;        /* bytes handed out, padding included */
};

pkrt_arena *pkrt_arena_new(size_t block_bytes) {
  pkrt_arena *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->block_bytes = block_bytes ? block_bytes : ARENA_DEFAULT_BLOCK;
  return a;
}

void pkrt_arena_free(pkrt_arena *a) {
  if (!a) return;
  for (arena_block *b = a->head, *next; b; b = next) {
    next = b->next;
    ARENA_UNPOISON(b->data, b->size);
    free(b);
  }
  free(a);
}

/* Offset of the first `align`-aligned address at or after data+used, by address rather
 * than by offset so alignments above max_align_t work too. */
static size_t aligned_offset(const arena_block *b, size_t align) {
  uintptr_t p = (uintptr_t)(b->data + b->used);
  return b->used + (size_t)((align - (p & (align - 1))) & (align - 1));
}

static arena_block *block_new(size_t size) {
  if (size > SIZE_MAX - sizeof(arena_block)) return NULL;
  /* calloc: the arena promises zero-filled memory. */
  arena_block *b = calloc(1, sizeof *b + size);
  if (!b) return NULL;
  b->size = size;
  ARENA_POISON(b->data, size);
  return b;
}

/* Hands out [off, off + bytes) of b; the redzone behind it stays poisoned. */
static void *block_take(arena_block *b, size_t off, size_t bytes) {
  b->used = off + bytes + ARENA_REDZONE;
  ARENA_UNPOISON(b->data + off, bytes);
  return b->data + off;
}

void *pkrt_arena_alloc(pkrt_arena *a, size_t bytes, size_t align) {
  if (!a) return NULL;
  if (align == 0) align = ARENA_MIN_ALIGN;
  if (align & (align - 1)) return NULL; /* not a power of two */
  if (bytes == 0) bytes = 1;            /* distinct, non-NULL pointers for empty requests */

  arena_block *b = a->head;
  if (b) {
    size_t off = aligned_offset(b, align);
    size_t room = off < b->size ? b->size - off : 0;
    if (room > ARENA_REDZONE && bytes <= room - ARENA_REDZONE) {
      a->used += off + bytes + ARENA_REDZONE - b->used;
      return block_take(b, off, bytes);
    }
  }
  /* Worst-case padding is align-1 past data[]'s own alignment. */
  if (bytes > SIZE_MAX - align - ARENA_REDZONE) return NULL;
  size_t need = bytes + align - 1 + ARENA_REDZONE;
  if (need > a->block_bytes / 2) {
    /* A big request gets a block of its own, linked behind the current one, so the
     * space left in the current block is not thrown away. */
    arena_block *big = block_new(need);
    if (!big) return NULL;
    void *p = block_take(big, aligned_offset(big, align), bytes);
    a->used += big->used;
    if (b) {
      big->next = b->next;
      b->next = big;
    } else {
      a->head = big;
    }
    return p;
  }
  arena_block *nb = block_new(a->block_bytes);
  if (!nb) return NULL;
  nb->next = b;
  a->head = nb;
  void *p = block_take(nb, aligned_offset(nb, align), bytes);
  a->used += nb->used;
  return p;
}

char *pkrt_arena_strdup(pkrt_arena *a, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *p = pkrt_arena_alloc(a, n, 1);
  if (p) memcpy(p, s, n);
  return p;
}

size_t pkrt_arena_used(const pkrt_arena *a) { return a ? a->used : 0; }
