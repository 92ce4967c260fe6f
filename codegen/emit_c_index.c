/* emit_c_index.c — index arithmetic: flat indices as affine forms c0 + sum(coef * term),
 * and loop-invariant code motion on them. The part of an index that does not change inside
 * the innermost scope becomes a `const int64_t t<N>` at the top of the outermost scope where
 * all its variables exist, built from the temporary of the scope above: the inner loop then
 * only adds its own terms (no multiplication by an outer counter left in it). */
#include "emit_c_impl.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define LEVEL_HERE INT_MAX /* a term that must be computed where it is used */

static bool add_term(cg_affine *a, int64_t coef, const pk_lvar *v, const pk_lexpr *atom) {
  if (coef == 0) return true;
  for (int i = 0; i < a->n; i++) {
    cg_term *t = &a->t[i];
    bool same = v ? t->var == v : t->atom && cg_lexpr_equal(t->atom, atom);
    if (!same) continue;
    if (pk_i64_add(t->coef, coef, &t->coef)) return false;
    if (t->coef == 0) a->t[i] = a->t[--a->n];
    return true;
  }
  if (a->n == CG_AFF_MAX) return false;
  a->t[a->n++] = (cg_term){coef, v, v ? NULL : atom};
  return true;
}

static bool decompose(cg *E, const pk_lexpr *e, int64_t scale, cg_affine *a) {
  int64_t x;
  if (e->dtype != PKRT_DTYPE_I64) return add_term(a, scale, NULL, e);
  switch (e->kind) {
  case PK_LX_INT:
    return !pk_i64_mul(scale, e->ival, &x) && !pk_i64_add(a->c0, x, &a->c0);
  case PK_LX_VAR:
    if (E->fr->var_known[e->var->id])
      return !pk_i64_mul(scale, E->fr->var_value[e->var->id], &x) && !pk_i64_add(a->c0, x, &a->c0);
    return add_term(a, scale, e->var, NULL);
  case PK_LX_BINARY:
    if (!e->index_math) break;
    if (e->op == PK_EOP_ADD)
      return decompose(E, e->args[0], scale, a) && decompose(E, e->args[1], scale, a);
    if (e->op == PK_EOP_SUB)
      return scale != INT64_MIN && decompose(E, e->args[0], scale, a) &&
             decompose(E, e->args[1], -scale, a);
    if (e->op == PK_EOP_MUL && e->args[1]->kind == PK_LX_INT)
      return !pk_i64_mul(scale, e->args[1]->ival, &x) && decompose(E, e->args[0], x, a);
    if (e->op == PK_EOP_MUL && e->args[0]->kind == PK_LX_INT)
      return !pk_i64_mul(scale, e->args[0]->ival, &x) && decompose(E, e->args[1], x, a);
    break;
  case PK_LX_UNARY:
    if (e->index_math && e->op == PK_EOP_NEG)
      return scale != INT64_MIN && decompose(E, e->args[0], -scale, a);
    break;
  default: break;
  }
  return add_term(a, scale, NULL, e);
}

bool cg_affine_of(cg *E, const pk_lexpr *e, cg_affine *a) {
  memset(a, 0, sizeof *a);
  if (e->dtype != PKRT_DTYPE_I64) return false;
  return decompose(E, e, 1, a);
}

int64_t cg_affine_coef_of(const cg_affine *a, const pk_lvar *v) {
  for (int i = 0; i < a->n; i++)
    if (a->t[i].var == v) return a->t[i].coef;
  return 0;
}

bool cg_affine_equal(const cg_affine *a, const cg_affine *b) {
  if (a->c0 != b->c0 || a->n != b->n) return false;
  for (int i = 0; i < a->n; i++) {
    bool found = false;
    for (int j = 0; j < b->n && !found; j++)
      found = a->t[i].coef == b->t[j].coef &&
              (a->t[i].var ? a->t[i].var == b->t[j].var
                           : b->t[j].atom && cg_lexpr_equal(a->t[i].atom, b->t[j].atom));
    if (!found) return false;
  }
  return true;
}

/* ---- levels: the scope whose top can compute a term ---- */

static int var_level(cg *E, const pk_lvar *v) {
  /* per lane, the counter and lane-varying lets are not scalars of any scope */
  if (E->lane && E->vl && (v == E->vl->loop->var || E->vl->var_vec[v->id])) return LEVEL_HERE;
  int l = E->fr->var_level[v->id];
  return l > 0 ? l : LEVEL_HERE;
}

static int expr_level(cg *E, const pk_lexpr *e) {
  if (e->kind == PK_LX_LOAD) return LEVEL_HERE; /* memory may change inside the scope */
  if (e->kind == PK_LX_VAR) return var_level(E, e->var); /* by name, even when known */
  int l = 0;
  for (int i = 0; i < e->nargs; i++) {
    int li = expr_level(E, e->args[i]);
    if (li > l) l = li;
  }
  return l;
}

/* Scope 0 is the function's prologue, which takes no temporaries: scope 1 is the top. */
static int term_level(cg *E, const cg_term *t) {
  int l = t->var ? var_level(E, t->var) : expr_level(E, t->atom);
  return l < 1 ? 1 : l;
}

/* ---- text ---- */

typedef struct ranked {
  cg_term t;
  int level;
  const char *text; /* the term's variable or atom */
} ranked;

static int ranked_cmp(const void *pa, const void *pb) {
  const ranked *a = pa, *b = pb;
  if (a->level != b->level) return a->level < b->level ? -1 : 1;
  if (!a->t.var != !b->t.var) return a->t.var ? -1 : 1;
  if (a->t.var) return a->t.var->id - b->t.var->id;
  return strcmp(a->text, b->text);
}

static void append_term(cg *E, pk_strbuf *sb, const ranked *r, bool first) {
  int64_t c = r->t.coef;
  bool neg = c < 0 && c != INT64_MIN;
  if (!first) pk_strbuf_append(sb, neg ? " - " : " + ");
  else if (neg) pk_strbuf_append(sb, "-");
  int64_t mag = neg ? -c : c;
  pk_strbuf_append(sb, r->text);
  if (mag != 1) pk_strbuf_printf(sb, " * %s", cg_int_text(E, mag, PKRT_DTYPE_I64));
}

static const char *sum_text(cg *E, const char *head, const ranked *r, int n) {
  pk_strbuf sb;
  pk_strbuf_init(&sb);
  if (head) pk_strbuf_append(&sb, head);
  for (int i = 0; i < n; i++) append_term(E, &sb, &r[i], !head && i == 0);
  if (!sb.len) pk_strbuf_append(&sb, "0");
  return pk_strbuf_finish(E->ctx, &sb);
}

static bool trivial(const ranked *r, int n) {
  return n == 0 || (n == 1 && r[0].t.var && r[0].t.coef == 1);
}

/* The name of a temporary holding sum(r[0..n)), all of whose levels are <= level. */
static const char *hoist(cg *E, const ranked *r, int n, int level) {
  if (trivial(r, n)) return sum_text(E, NULL, r, n);
  const char *key = sum_text(E, NULL, r, n);
  cg_frame *fr = E->fr;
  for (int i = 0; i < fr->ntemps; i++)
    if (!strcmp(fr->temps[i].key, key)) return fr->temps[i].name;
  int below = 0; /* r is sorted by level: r[0..below) come from outer scopes */
  while (below < n && r[below].level < level) below++;
  const char *rhs = key;
  if (below > 0 && !trivial(r, below)) {
    int sub_level = r[below - 1].level;
    rhs = sum_text(E, hoist(E, r, below, sub_level), r + below, n - below);
  }
  if (fr->ntemps == fr->cap_temps) {
    int cap = fr->cap_temps ? 2 * fr->cap_temps : 16;
    cg_temp *t = pk_alloc(E->ctx, sizeof *t * (size_t)cap);
    if (fr->ntemps) memcpy(t, fr->temps, sizeof *t * (size_t)fr->ntemps);
    fr->temps = t;
    fr->cap_temps = cap;
  }
  const char *name = cg_fresh(E, "t");
  fr->temps[fr->ntemps++] = (cg_temp){key, name, level};
  cg_scope *sc = &fr->scopes[level];
  for (int i = 0; i < sc->indent; i++) pk_strbuf_append(&sc->temps, "  ");
  pk_strbuf_printf(&sc->temps, "const int64_t %s = %s;\n", name, rhs);
  return name;
}

const char *cg_affine_text(cg *E, const cg_affine *a) {
  ranked r[CG_AFF_MAX];
  int n = a->n;
  for (int i = 0; i < n; i++) {
    r[i].t = a->t[i];
    r[i].level = term_level(E, &a->t[i]);
    r[i].text = a->t[i].var ? cg_var(E, a->t[i].var) : cg_x(E, a->t[i].atom);
  }
  qsort(r, (size_t)n, sizeof r[0], ranked_cmp);
  int depth = E->fr->depth, outer = 0;
  while (outer < n && r[outer].level < depth) outer++;
  const char *head = NULL;
  if (outer > 0) head = hoist(E, r, outer, r[outer - 1].level);
  const char *text = sum_text(E, head, r + outer, n - outer);
  if (a->c0 == 0) return text;
  if (!strcmp(text, "0")) return cg_int_text(E, a->c0, PKRT_DTYPE_I64);
  if (a->c0 < 0 && a->c0 != INT64_MIN) return pk_sprintf(E->ctx, "%s - %" PRId64, text, -a->c0);
  return pk_sprintf(E->ctx, "%s + %s", text, cg_int_text(E, a->c0, PKRT_DTYPE_I64));
}

const char *cg_index(cg *E, const pk_lexpr *e) {
  cg_affine a;
  if (!cg_affine_of(E, e, &a)) return cg_x(E, e);
  return cg_affine_text(E, &a);
}

void cg_temps_drop_level(cg *E, int level) {
  cg_frame *fr = E->fr;
  int k = 0;
  for (int i = 0; i < fr->ntemps; i++)
    if (fr->temps[i].level != level) fr->temps[k++] = fr->temps[i];
  fr->ntemps = k;
}
