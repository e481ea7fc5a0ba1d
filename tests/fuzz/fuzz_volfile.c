/*
 * fuzz_volfile.c — libFuzzer target for the volfile parser
 * (bfs_volfile_parse). Any input must either parse into a volfile that can
 * be walked and freed, or fail with -EINVAL/-ENOMEM and a "SOURCE:LINE:"
 * message; never crash, leak or read out of bounds (ASan/UBSan).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bfs_volfile *vf = NULL;
    char err[256];

    int rc = bfs_volfile_parse((const char *)data, size, "fuzz.vol", &vf, err, sizeof(err));
    if (rc == 0) {
        if (!vf || vf->nvols < 1)
            abort();
        /* Touch everything the graph builder will read. */
        size_t total = 0;
        for (int i = 0; i < vf->nvols; i++) {
            const struct bfs_vf_volume *v = &vf->vols[i];
            if (!v->name || !v->type || v->line < 1)
                abort();
            total += strlen(v->name) + strlen(v->type);
            for (int k = 0; k < v->nopts; k++)
                total += strlen(v->opts[k].key) + strlen(v->opts[k].value);
            for (int k = 0; k < v->nsubvols; k++)
                total += strlen(v->subvols[k]);
        }
        if (total > size)
            abort(); /* the parser cannot invent text */
    } else {
        if (vf || (rc != -EINVAL && rc != -ENOMEM) || strncmp(err, "fuzz.vol:", 9) != 0)
            abort();
    }
    bfs_volfile_free(vf);
    return 0;
}
