/*
 * client-dump.c — protocol/client's statedump as JSON: which brick, the
 * connection's state and history, requests in flight, open and lost fds.
 */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

char *cli_dump(struct bfs_xl *xl)
{
    struct cli_priv *priv = xl->private;
    if (!priv)
        return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "remote_host", json_object_new_string(priv->host));
    json_object_object_add(o, "remote_subvolume", json_object_new_string(priv->subvol));
    json_object_object_add(o, "uuid", json_object_new_string(priv->uuid));
    pthread_mutex_lock(&priv->lock);
    json_object_object_add(o, "remote_port", json_object_new_int(priv->port));
    if (priv->mgmt_host[0]) {
        char ms[300];
        snprintf(ms, sizeof(ms), "%s:%u", priv->mgmt_host, priv->mgmt_port);
        json_object_object_add(o, "mgmt_server", json_object_new_string(ms));
        json_object_object_add(o, "portmap_answers",
                               json_object_new_int64((int64_t)priv->pm_answers));
        json_object_object_add(o, "portmap_failures",
                               json_object_new_int64((int64_t)priv->pm_failures));
    }
    int64_t fds = 0, lost = 0, locks = 0;
    for (struct cli_fd *cf = priv->fds; cf; cf = cf->next) {
        fds++;
        lost += cf->lost;
        for (struct cli_lock *l = cf->locks; l; l = l->next)
            locks++;
    }
    json_object_object_add(o, "state", json_object_new_string(cli_state_name(priv->state)));
    json_object_object_add(o, "in_flight", json_object_new_int64((int64_t)priv->pending.count));
    json_object_object_add(o, "open_fds", json_object_new_int64(fds));
    json_object_object_add(o, "lost_fds", json_object_new_int64(lost));
    json_object_object_add(o, "held_locks", json_object_new_int64(locks));
    json_object_object_add(o, "connects", json_object_new_int64((int64_t)priv->connects));
    json_object_object_add(o, "disconnects", json_object_new_int64((int64_t)priv->disconnects));
    json_object_object_add(o, "connect_failures", json_object_new_int64((int64_t)priv->failures));
    json_object_object_add(o, "last_error",
                           json_object_new_string(priv->last_error ? strerror(-priv->last_error)
                                                                   : ""));
    json_object_object_add(o, "ping_timeout_s",
                           json_object_new_int64((int64_t)(priv->ping_timeout_ms / 1000)));
    json_object_object_add(o, "next_backoff_ms", json_object_new_int64((int64_t)priv->backoff_ms));
    pthread_mutex_unlock(&priv->lock);
    char *out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return out;
}
