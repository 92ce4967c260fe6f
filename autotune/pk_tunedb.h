/* pk_tunedb.h — the tuning database: every measured candidate (good or failed) as a
 * record in SQLite, keyed by workload + target fingerprint; lookups of the best record,
 * tuning history and statistics; merge of databases from several devices; JSON-lines
 * export/import. The schema is documented for sqlite3-shell users in docs/tuning-db.md.
 *
 * Usage (what `pock tune` does):
 *   pk_tunedb *db;
 *   if (pk_db_open(ctx, "tune.db", PK_DB_OPEN_CREATE, &db) != PK_OK) ... pk_ctx_error(ctx)
 *   pk_db_target_add(db, &fp);  pk_db_workload_add(db, &task);   // before their records
 *   int64_t run;  pk_db_run_begin(db, "evo", "{\"trials\":200}", &run);
 *   for each candidate:
 *     r.run_id = run; r.trial = i; ...; pk_record_make_id(ctx, &r);
 *     bool have; pk_db_record_has(db, r.id, &have);           // --resume: never re-measure
 *     if (!have) { measure; pk_db_record_commit(db, &r, NULL); }  // one transaction each
 *   pk_db_run_finish(db, run, PK_DB_RUN_FINISHED);
 *   pk_record best; pk_db_match m;
 *   pk_db_best(db, task.workload, fp.key, fp.target, &best, &m); // exact, else same target
 *   pk_db_close(db);
 *
 * Every failure is PK_ERR_IO (or PK_ERR_CHECK for a malformed record or import line) with a
 * message in the context that names the file; strings handed out live in that context's
 * arena. A handle is for one thread; several processes may share one file (WAL; a writer
 * waits up to 10 s for another's transaction). */
#ifndef PK_TUNEDB_H
#define PK_TUNEDB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pk_autotune.h"

#define PK_DB_SCHEMA_VERSION 2      /* PRAGMA user_version this Pock writes */
#define PK_DB_JSONL_VERSION 1       /* "jsonl_version" of exported lines */
#define PK_DB_NSTATUS (PK_MEAS_RUNTIME_ERROR + 1) /* number of pk_meas_status values */
#define PK_DB_ANY_STATUS (-1)

typedef struct pk_tunedb pk_tunedb;

/* ---- opening ---- */
typedef enum pk_db_open_mode {
  PK_DB_OPEN_EXISTING, /* the file must exist (read-side commands) */
  PK_DB_OPEN_CREATE    /* create it when missing */
} pk_db_open_mode;

/* Opens (creating or migrating the schema to PK_DB_SCHEMA_VERSION as needed). Refuses a
 * file that is not SQLite, an SQLite file that is not a Pock database, and a schema newer
 * than this Pock. The handle reports errors into ctx until pk_db_close. */
pk_status pk_db_open(pk_ctx *ctx, const char *path, pk_db_open_mode mode, pk_tunedb **out);
void pk_db_close(pk_tunedb *db);
const char *pk_db_path(const pk_tunedb *db);

/* PRAGMA integrity_check and foreign_key_check; PK_ERR_IO naming the first problem. */
pk_status pk_db_check(pk_tunedb *db);

/* ---- targets and workloads: added (idempotently, first one wins) before records ---- */
pk_status pk_db_target_add(pk_tunedb *db, const pk_target_fp *fp);
pk_status pk_db_workload_add(pk_tunedb *db, const pk_task *task);
/* The full workload key for a unique hex prefix of one (PK_ERR_CHECK: none or several). */
pk_status pk_db_workload_resolve(pk_tunedb *db, const char *hex_prefix, const char **key);
/* The canonical TE text of workload key (PK_ERR_CHECK when it is not in the database). */
pk_status pk_db_workload_text(pk_tunedb *db, const char *key, const char **canonical);

/* ---- tuning runs ---- */
typedef enum pk_db_run_status {
  PK_DB_RUN_RUNNING,     /* "running": still going — or its tuner was killed */
  PK_DB_RUN_FINISHED,    /* "finished" */
  PK_DB_RUN_INTERRUPTED  /* "interrupted": stopped early (signal, error) */
} pk_db_run_status;
const char *pk_db_run_status_name(pk_db_run_status s);

/* settings: a JSON object (the tuner's options); host and Pock version are filled in. */
pk_status pk_db_run_begin(pk_tunedb *db, const char *tuner, const char *settings_json,
                          int64_t *run_id);
pk_status pk_db_run_finish(pk_tunedb *db, int64_t run_id, pk_db_run_status status);

/* ---- records ---- */
/* Commits r in its own transaction (BEGIN IMMEDIATE ... COMMIT): once this returns PK_OK
 * the record survives a crash of the process. r->id must be pk_record_make_id's (checked);
 * its workload and target must have been added. A record whose id is already stored is
 * left as it is (*inserted false; pass NULL if you do not care). */
pk_status pk_db_record_commit(pk_tunedb *db, const pk_record *r, bool *inserted);
pk_status pk_db_record_has(pk_tunedb *db, const char *id, bool *has);
/* Stores a confirmation (re-timing) of the stored record id, replacing an older one, in a
 * transaction of its own; PK_ERR_CHECK when no such record exists or c is not a timing. */
pk_status pk_db_record_confirm(pk_tunedb *db, const char *id, const pk_confirmation *c);
/* Counts records; workload, target_key NULL and status PK_DB_ANY_STATUS match all. */
pk_status pk_db_record_count(pk_tunedb *db, const char *workload, const char *target_key,
                             int status, int64_t *n);

/* ---- lookups ---- */
typedef enum pk_db_match {
  PK_DB_MATCH_NONE,    /* no usable record */
  PK_DB_MATCH_EXACT,   /* measured on a device with this target key */
  PK_DB_MATCH_GENERIC  /* fallback: same target string, another fingerprint */
} pk_db_match;

/* The fastest OK record of workload on target_key: confirmed records first, by confirmed
 * time (a lucky single timing cannot win over a re-timed leader), then the others by
 * median_ns; ties: least id. When
 * there is none and fallback_target is non-NULL, the fastest OK record of workload on
 * any fingerprint whose target string equals fallback_target (PK_DB_MATCH_GENERIC): a
 * schedule trace is rebuilt for this device, so it is correct anywhere, only perhaps not
 * the best here. *out is zeroed when *match is PK_DB_MATCH_NONE. */
pk_status pk_db_best(pk_tunedb *db, const char *workload, const char *target_key,
                     const char *fallback_target, pk_record *out, pk_db_match *match);

/* From now on pk_db_best ranks the records measured with this build (compiler version
 * string, flags, codegen version) and extern records before the others: a schedule timed
 * under other flags may run very differently now (the GCC 12 if-conversion flag made one
 * conv record 16x slower), and re-tuning adds current records beside the stale ones
 * rather than replacing them. compiler NULL: no preference (the default). */
void pk_db_prefer_build(pk_tunedb *db, const char *compiler, const char *flags, int codegen_version);
/* The same for what cc builds now: its version and flags, this codegen's version. */
void pk_db_prefer_cc(pk_tunedb *db, const pk_cc *cc);
/* Whether r was measured with the preferred build (always true without a preference). */
bool pk_db_record_is_preferred(const pk_tunedb *db, const pk_record *r);

/* Transfer: OK schedule records with features of the other workloads of class cls (a
 * pk_task_class_name) on target_key, not workload except, at most limit, the most recent
 * first; (*names)[i] is record i's workload name ("matmul_256x784x32_f32"),
 * (*canonicals)[i] its canonical TE text. */
pk_status pk_db_class_records(pk_tunedb *db, const char *cls, const char *target_key,
                              const char *except, int limit, pk_record **records,
                              const char ***names, const char ***canonicals, int64_t *n);

/* Transfer across targets: OK schedule records with features of workload on targets other
 * than target_key, at most limit, the most recent first; (*must_match)[i] is record i's
 * target's must-match JSON (what the caller compares: the same arch, a CPU target). */
pk_status pk_db_workload_elsewhere(pk_tunedb *db, const char *workload, const char *target_key,
                                   int limit, pk_record **records, const char ***must_match,
                                   int64_t *n);

/* Every record of workload (on target_key; NULL: all targets) ordered by trial, then run,
 * then id: the tuning curve. *records is an arena array of *n. */
pk_status pk_db_history(pk_tunedb *db, const char *workload, const char *target_key,
                        pk_record **records, int64_t *n);

/* One row per (workload, target key) that has records. */
typedef struct pk_db_stats_row {
  const char *workload, *name;     /* key and readable name */
  const char *target_key, *target; /* fingerprint key and target string */
  int64_t records;                 /* all statuses */
  int64_t by_status[PK_DB_NSTATUS];
  double best_gflops;              /* best OK record of either kind; 0: none */
  double best_generated_gflops;    /* best OK schedule record; 0: none */
  double best_extern_gflops;       /* best OK extern record; 0: none */
} pk_db_stats_row;
/* Rows ordered by workload name, workload key, target, target key. */
pk_status pk_db_stats(pk_tunedb *db, pk_db_stats_row **rows, int64_t *n);

/* ---- moving records between databases ---- */
typedef struct pk_db_counts {
  int64_t records, runs, targets, workloads; /* rows new to this database */
  int64_t records_seen;                      /* records read from the source */
} pk_db_counts;

/* Adds other_path's targets and workloads (by key), runs (by uid, renumbered) and records
 * (by id, run_id remapped) that this database lacks, in one transaction. Idempotent;
 * other_path is only read. */
pk_status pk_db_merge(pk_tunedb *db, const char *other_path, pk_db_counts *added);

/* Writes every record as one JSON object per line (docs/tuning-db.md): keys sorted, the
 * record's workload and target fingerprint inlined, ordered by workload, target, trial,
 * id — equal databases give equal bytes. */
pk_status pk_db_export_jsonl(pk_tunedb *db, FILE *out, int64_t *nrecords);
/* The same, only the `top` fastest OK records of each kind (schedule, extern) per workload
 * and target (top <= 0: every record): a shareable digest of a long tuning, such as
 * tuning-logs/ holds. */
pk_status pk_db_export_jsonl_top(pk_tunedb *db, FILE *out, int64_t top, int64_t *nrecords);

/* Imports lines written by pk_db_export_jsonl, all in one transaction: a malformed line
 * (PK_ERR_CHECK naming "name:LINE") imports nothing. Idempotent: records already present
 * are skipped. name is for messages. */
pk_status pk_db_import_jsonl(pk_tunedb *db, FILE *in, const char *name, pk_db_counts *added);

#endif
