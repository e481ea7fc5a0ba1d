/*
 * server-dump.c — protocol/server's statedump: where it listens and who is
 * connected, as JSON (client-supplied strings are escaped by json-c).
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

#include "core/event.h"

static json_object *conn_json(struct srv_conn *sc, uint64_t now)
{
    json_object *o = json_object_new_object();
    pthread_mutex_lock(&sc->lock);
    json_object_object_add(o, "peer", json_object_new_string(sc->peer));
    json_object_object_add(o, "handshaken", json_object_new_boolean(sc->handshaken));
    json_object_object_add(o, "uuid", json_object_new_string(sc->uuid ? sc->uuid : ""));
    json_object_object_add(o, "name",
                           json_object_new_string(sc->client_name ? sc->client_name : ""));
    json_object_object_add(o, "open_fds", json_object_new_int64((int64_t)sc->fds.count));
    json_object_object_add(o, "in_flight", json_object_new_int64((int64_t)sc->inflight));
    json_object_object_add(o, "requests", json_object_new_int64((int64_t)sc->requests));
    json_object_object_add(o, "reads",
                           json_object_new_int64(sc->conn ? (int64_t)bfs_conn_reads(sc->conn) : 0));
    json_object_object_add(o, "closed", json_object_new_boolean(sc->closed));
    pthread_mutex_unlock(&sc->lock);
    json_object_object_add(o, "connected_s",
                           json_object_new_int64((int64_t)((now - sc->connected_ms) / 1000)));
    return o;
}

char *srv_dump(struct bfs_xl *xl)
{
    struct srv_priv *priv = xl->private;
    if (!priv)
        return NULL;
    json_object *root = json_object_new_object();
    json_object *clients = json_object_new_array();
    uint64_t now = bfs_now_ms();

    json_object_object_add(root, "brick", json_object_new_string(FIRST_CHILD(xl)->name));
    json_object_object_add(root, "listen_address", json_object_new_string(priv->listen_addr));
    json_object_object_add(root, "port", json_object_new_int(priv->port));
    pthread_mutex_lock(&priv->lock);
    json_object_object_add(root, "auth_allow",
                           json_object_new_string(priv->auth_allow ? priv->auth_allow : ""));
    json_object_object_add(root, "auth_reject",
                           json_object_new_string(priv->auth_reject ? priv->auth_reject : ""));
    json_object_object_add(root, "accepted", json_object_new_int64((int64_t)priv->accepted));
    json_object_object_add(root, "refused", json_object_new_int64((int64_t)priv->refused));
    json_object_object_add(root, "stopped", json_object_new_boolean(priv->stopped));
    for (struct srv_conn *sc = priv->conns; sc; sc = sc->next)
        json_object_array_add(clients, conn_json(sc, now));
    pthread_mutex_unlock(&priv->lock);
    json_object_object_add(root, "clients", clients);

    char *out = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
    json_object_put(root);
    return out;
}
