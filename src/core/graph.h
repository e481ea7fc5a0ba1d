/*
 * graph.h — volfiles and translator graphs.
 *
 * Volfile syntax (GlusterFS's):
 *
 *   volume NAME
 *       type CLASS/NAME
 *       option KEY VALUE          # VALUE is the rest of the line
 *       subvolumes A B ...
 *   end-volume
 *
 * '#' starts a comment. Volumes must be defined before they are used as
 * subvolumes; the last volume defined is the top of the graph. Errors name
 * the file, line, translator and option; no partial graph is returned.
 */
#ifndef BFS_CORE_GRAPH_H
#define BFS_CORE_GRAPH_H

#include <stddef.h>

#include "core/xlator.h"

/* Parsed volfile, before any module is loaded. */
struct bfs_vf_option {
    char *key;
    char *value;
    int line;
};

struct bfs_vf_volume {
    char *name;
    char *type;
    int line;          /* of "volume NAME" */
    int type_line;
    struct bfs_vf_option *opts;
    int nopts;
    char **subvols;
    int nsubvols;
    int subvols_line;
};

struct bfs_volfile {
    char *source;      /* file name or "<inline>" for messages */
    struct bfs_vf_volume *vols;
    int nvols;
};

/* Parses text (len bytes, need not be NUL-terminated). On error returns
 * -EINVAL and writes "FILE:LINE: message" into err[errlen]. */
int bfs_volfile_parse(const char *text, size_t len, const char *source,
                      struct bfs_volfile **out, char *err, size_t errlen);
void bfs_volfile_free(struct bfs_volfile *vf);

struct bfs_graph {
    struct bfs_xl **xls;   /* in definition order */
    int nxls;
    struct bfs_xl *top;
    struct bfs_proc *proc;
    struct bfs_itable *itable;  /* created by bfs_graph_build */
    char *volfile_text;         /* as given, for re-serving */
    void *owner;                /* the program's handle (fuse bridge, api...) */
    /* Events that reach the top translator's parents (there are none): the
     * program above the graph hears CHILD_UP/DOWN and upcalls here. */
    void (*on_event)(struct bfs_graph *g, enum bfs_event ev, void *data);
    bool active;                /* between activate and deactivate */
    int inflight;               /* frames wound into this graph, not yet done */
};

/*
 * Loads modules, validates options against descriptors (unknown key,
 * bad value, wrong number of subvolumes, missing or cyclic subvolume are all
 * errors naming file, line, translator and option), fills defaults and
 * resolves fops. Does not call init. Modules are searched in
 * bfs_xlator_dir().
 */
int bfs_graph_build(const struct bfs_volfile *vf, struct bfs_proc *proc,
                    struct bfs_graph **out, char *err, size_t errlen);
/* Convenience: parse + build. */
int bfs_graph_from_text(const char *text, size_t len, const char *source,
                        struct bfs_proc *proc, struct bfs_graph **out, char *err,
                        size_t errlen);
int bfs_graph_from_file(const char *path, struct bfs_proc *proc, struct bfs_graph **out,
                        char *err, size_t errlen);
/* Calls init bottom-up; on failure finis what was initialised. */
int bfs_graph_init(struct bfs_graph *g);
/* Sends PARENT_UP down from the top (clients connect). */
void bfs_graph_activate(struct bfs_graph *g);
/* Sends PARENT_DOWN from the top (servers close connections and release
 * fds, clients disconnect). Idempotent; bfs_graph_free calls it. */
void bfs_graph_deactivate(struct bfs_graph *g);
/* Deactivates, forgets inodes, fini top-down, unloads modules, frees. */
void bfs_graph_free(struct bfs_graph *g);
struct bfs_xl *bfs_graph_find(struct bfs_graph *g, const char *name);

/* Where translators are loaded from: $BRICKFS_XLATOR_DIR, else
 * <dir of executable>/../lib/brickfs/xlators. */
const char *bfs_xlator_dir(void);

/* Registers a module linked into the program itself (tests, in-memory
 * translators) under its type name; found before any .so is searched. */
int bfs_module_register(const struct bfs_xl_module *mod);

/* Process resources: an event loop on its own thread and a worker pool.
 * nworkers 0 = no pool. NULL on failure (logged). */
struct bfs_proc *bfs_proc_new(const char *program, int nworkers);
void bfs_proc_free(struct bfs_proc *p);
/* Waits until every task queued so far on the loop and the worker pool has
 * finished (so translator code can be unloaded). Not from those threads. */
void bfs_proc_quiesce(struct bfs_proc *p);
/* Keeps big freed buffers (up to 8 MiB each, 64 MiB per arena) in the
 * process's heap instead of giving them back to the kernel at once: no page
 * faults on the next write's buffers (process.c). For programs that move
 * bulk data (the mount), from main before any thread. 0 or -EINVAL. */
int bfs_proc_keep_heap(void);

#endif
