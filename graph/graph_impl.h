/* graph_impl.h — helpers shared by the graph/ sources (not part of the public contract):
 * raw node insertion, unique names, cloning and reordering, dense strides. */
#ifndef PK_GRAPH_IMPL_H
#define PK_GRAPH_IMPL_H

#include "pk_graph.h"

/* Adds a tensor without the user-facing checks on the name (the name must already be
 * unique: made-up names go through pk_graph_unique_name). Shape must be valid. */
int pk_graph_push_tensor(pk_graph *g, const char *name, pk_tensor_role role, pkrt_dtype dtype,
                         int ndim, const int64_t *shape);
/* Adds a node whose output tensors already exist; sets their producer. Returns the id. */
int pk_graph_push_node(pk_graph *g, const char *name, pk_gnode_kind kind, pk_op_kind op,
                       const pk_op_params *prm, int grad_input, pk_phase phase,
                       pk_te_program *prog, int ninputs, const int *inputs, int noutputs,
                       const int *outputs);
/* Adds a node for a built program: makes one output tensor per compute (the last named
 * out_name with role out_role, earlier stages "<out_name>.s<i>" with role TEMP). Returns
 * the node id; *out_tensor gets the result tensor. */
int pk_graph_push_prog(pk_graph *g, const char *name, pk_gnode_kind kind, pk_op_kind op,
                       const pk_op_params *prm, int grad_input, pk_phase phase,
                       pk_te_program *prog, int ninputs, const int *inputs,
                       const char *out_name, pk_tensor_role out_role, int *out_tensor);
/* base if no tensor has that name, else "base#2", "base#3", ... (arena string). */
const char *pk_graph_unique_name(const pk_graph *g, const char *base);
int pk_graph_find_node(const pk_graph *g, const char *name);
/* Deep copy of tensors and nodes (programs are shared: they are immutable). */
pk_graph *pk_graph_clone(const pk_graph *g);
/* Reorders nodes: order[k] = old id of the node that becomes node k. Renumbers node ids
 * and tensor producers. */
void pk_graph_reorder(pk_graph *g, const int *order);
/* Removes the nodes with drop[id] set (their outputs must be read by no remaining node, or
 * have been turned into views); renumbers the rest in order and the tensors' producers
 * (an output of a removed node gets producer -1). */
void pk_graph_remove_nodes(pk_graph *g, const bool *drop);
/* Row-major dense strides (in elements) of a shape. */
void pk_graph_dense_strides(int ndim, const int64_t *shape, int64_t *strides);
int64_t pk_gtensor_numel(const pk_gtensor *t);
/* The op params of a node over the given tensors' shapes and dtypes. */
void pk_graph_params_of(const pk_graph *g, int ninputs, const int *inputs,
                        const pk_op_attrs *attrs, pk_op_params *prm);
/* Replaces the failure in ctx with "graph: <prefix>: <old message>". */
pk_status pk_graph_refail(pk_ctx *ctx, pk_status s, const char *prefix);

#endif
